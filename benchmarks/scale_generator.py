"""The generated chunks of ``scale_benchmark.py``: after the real documents (``scale_corpus.py``), a
store grows by replicas of them whose concept frequencies follow the real ones.

**Generated chunks.** After the real documents, the store grows by *replicas*: replica r of real
document D is a new document (title "D r", a title concept of its own) with as many chunks as D, chunk i built from D's chunk i
(its *donor*):

- text: the donor's sentences, each replaced with probability 0.5 by a random sentence of the real
  corpus, so the full-text index sees real terms in real proportions (its vocabulary does not grow
  past the real one: the ``term`` table is bounded, its postings grow);
- vector: the donor's vector plus Gaussian noise, L2-normalised; the noise is fitted so that the
  median cosine between a generated chunk and its donor equals the median cosine between a real
  chunk and its nearest other real chunk. A generated chunk is then as far from its donor as real
  neighbours are from each other, and the nearest-neighbour structure stays that of the real corpus
  (clusters around real topics, no exact duplicates);
- concepts: as many mentions as the donor has (the real mentions-per-chunk distribution), drawn from a
  Pitman-Yor process fitted to the real mention stream by maximum likelihood (discount ``d``,
  concentration ``theta``; the per-concept chunk-frequency distribution of the real corpus is its
  data) and *continuing* it: a mention names an existing concept with probability proportional to
  ``chunks mentioning it - d`` (so the frequent real concepts keep gaining chunks, as "United States"
  would in a larger corpus), or a new concept with probability ``(theta + d * concepts)``: the power
  law of concept frequencies and the growth of the concept count (Heaps' law, exponent ``d``) are the
  real corpus's. A new concept copies the name (with a ``#n`` suffix), display and kind of a random
  real concept, so kinds (entities, noun phrases) keep their real mix. ``pitman_yor_fit`` and the test
  check the fitted process against the real frequency distribution. What is not modelled: a
  generated chunk's concepts are not related to its text or vector (the graph walk meets realistic
  frequencies, not realistic topics), and bridge edges from generated text point at real titles only.
"""

from __future__ import annotations

import math
import random
import re
from array import array
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
from scale_corpus import RealCorpus

from surreal_kgrag.extract import MetadataConceptExtractor
from surreal_kgrag.ingest.config import IngestConfig
from surreal_kgrag.ingest.records import DocumentWork, in_context
from surreal_kgrag.models import ConceptMention, SourceDocument, TextChunk

GENERATOR_VERSION = 2  # stores built by another version of the generator are not appended to
SEED = 20261125
SWAP = 0.5  # share of a generated chunk's sentences taken from other real chunks
SENTENCE = re.compile(r"(?<=[.!?])\s+")


def pitman_yor_loglik(counts: np.ndarray, d: np.ndarray, theta: np.ndarray) -> np.ndarray:
    """Log-likelihood of an exchangeable mention stream with per-concept ``counts`` under a
    Pitman-Yor process (discount ``d`` in (0, 1), concentration ``theta`` > -d), for arrays of both."""
    from scipy.special import gammaln  # type: ignore[import-untyped]

    n, k = float(counts.sum()), float(len(counts))
    values, times = np.unique(counts, return_counts=True)
    tables = (k - 1) * np.log(d) + gammaln(theta / d + k) - gammaln(theta / d + 1)
    seats = gammaln(theta + n) - gammaln(theta + 1)
    dishes = sum(t * (gammaln(v - d) - gammaln(1 - d)) for v, t in zip(values, times))
    return np.asarray(tables - seats + dishes)


def pitman_yor_fit(counts: Sequence[int]) -> tuple[float, float]:
    """Maximum-likelihood discount and concentration for the per-concept chunk counts (grid, refined)."""
    array = np.asarray(counts, dtype=np.float64)
    best = (0.5, 1.0)
    d_grid, t_grid = np.linspace(0.01, 0.99, 99), np.logspace(-1, 5, 121)
    for _ in range(3):
        d, t = np.meshgrid(d_grid, t_grid, indexing="ij")
        ll = pitman_yor_loglik(array, d, t)
        i, j = np.unravel_index(int(np.nanargmax(ll)), ll.shape)
        best = (float(d_grid[i]), float(t_grid[j]))
        d_step, t_ratio = d_grid[1] - d_grid[0], t_grid[1] / t_grid[0]
        d_grid = np.linspace(max(best[0] - 2 * d_step, 1e-4), min(best[0] + 2 * d_step, 0.9999), 41)
        t_grid = np.geomspace(best[1] / t_ratio**2, best[1] * t_ratio**2, 41)
    return best


class ConceptStream:
    """A Pitman-Yor mention stream seeded with the real corpus's concept counts (see the module
    docstring). ``draw()`` gives a concept index: < len(real names) for a real concept, else a new one."""

    def __init__(self, counts: Sequence[int], d: float, theta: float, rng: random.Random) -> None:
        self.d, self.theta, self.rng = d, theta, rng
        self.tables = len(counts)  # concepts so far; concept i is table i
        # One entry per mention past a concept's first (an int array: 15M entries at 1M chunks).
        self.repeats = array("l", (i for i, c in enumerate(counts) for _ in range(c - 1)))
        self.mentions = int(sum(counts))

    def draw(self) -> int:
        k = self.tables
        u = self.rng.random() * (self.theta + self.mentions)
        if u < self.theta + self.d * k:
            chosen = k
            self.tables += 1
        elif u < self.theta + k:  # weight k * (1 - d): an existing concept, uniformly
            chosen = self.rng.randrange(k)
            self.repeats.append(chosen)
        else:  # weight mentions - k: a concept in proportion to its mentions past the first
            chosen = self.repeats[self.rng.randrange(len(self.repeats))]
            self.repeats.append(chosen)
        self.mentions += 1
        return chosen


@dataclass
class Slot:
    """One document of the sequence a store is built from: replica 0 is the real document."""

    replica: int
    real: int  # index into RealCorpus.docs


class Generator:
    """The deterministic document sequence: the real documents (shuffled), then replicas of them."""

    def __init__(self, real: RealCorpus, seed: int = SEED) -> None:
        self.real = real
        self.seed = seed
        self.order = list(range(len(real.docs)))
        random.Random(seed).shuffle(self.order)
        self.metadata = MetadataConceptExtractor(IngestConfig().metadata_concepts)
        names: dict[str, ConceptMention] = {}
        for chunk in real.mentions:
            for m in chunk:
                names.setdefault(m.name, m)
        self.concepts = list(names.values())
        self.index = {m.name: i for i, m in enumerate(self.concepts)}
        df = Counter(m.name for chunk in real.mentions for m in chunk)
        self.counts = [df[m.name] for m in self.concepts]
        self.d, self.theta = pitman_yor_fit(self.counts)
        self.noise = noise_for(real.vectors)
        self.sentences = [s for chunk in real.chunks for c in chunk for s in SENTENCE.split(c.text) if s.strip()]
        self._stream: ConceptStream | None = None
        self._streamed = 0  # generated documents the stream has produced mentions for
        self._new: dict[int, ConceptMention] = {}

    def slot(self, position: int) -> Slot:
        replica, i = divmod(position, len(self.order))
        return Slot(replica, self.order[i])

    def chunks_of(self, position: int) -> int:
        return len(self.real.chunks[self.slot(position).real])

    def documents_for(self, size: int) -> int:
        """How many documents of the sequence make at most ``size`` chunks (at least one)."""
        total, position = 0, 0
        while True:
            n = self.chunks_of(position)
            if total + n > size and position > 0:
                return position
            total += n
            position += 1

    def works(self, start: int, stop: int) -> Iterator[DocumentWork]:
        """The documents at positions [start, stop) of the sequence, ready for ``prepare``."""
        for position in range(start, stop):
            slot = self.slot(position)
            yield self._real(slot.real) if slot.replica == 0 else self._generated(position, slot)

    def _real(self, i: int) -> DocumentWork:
        real = self.real
        doc, chunks = real.docs[i], real.chunks[i]
        rows = range(real.first[i], real.first[i] + len(chunks))
        work = DocumentWork(doc, chunks, exists=False)
        work.mentions = [real.mentions[r] for r in rows]
        work.vectors = [real.vectors[r] for r in rows]
        work.contexts = [in_context(doc, c.text, IngestConfig().title_in_context) for c in chunks]
        return work

    def _generated(self, position: int, slot: Slot) -> DocumentWork:
        real = self.real
        donor_doc, donor_chunks = real.docs[slot.real], real.chunks[slot.real]
        rng = random.Random(f"{self.seed}/{position}")
        noise = np.random.default_rng([self.seed, position])
        texts = []
        for chunk in donor_chunks:
            parts = [s if rng.random() >= SWAP else rng.choice(self.sentences) for s in SENTENCE.split(chunk.text) if s.strip()]
            texts.append(" ".join(parts) or chunk.text)
        text = "\n".join(texts)
        chunks, position_in_text = [], 0
        for index, content in enumerate(texts):
            chunks.append(TextChunk(index=index, content=content, start=position_in_text, end=position_in_text + len(content)))
            position_in_text += len(content) + 1
        # "Marie Curie 3": a title concept of its own. "Marie Curie (3)" would also give the alias
        # "marie curie", the real document's title: every replica would be an own edge of it.
        title = f"{donor_doc.title or donor_doc.key} {slot.replica}"
        doc = SourceDocument(
            key=f"gen/{slot.replica}/{donor_doc.key}", text=text, title=title, source=f"generated/{slot.replica}/{donor_doc.source}"
        )
        work = DocumentWork(doc, chunks, exists=False)
        work.contexts = [in_context(doc, c.text, IngestConfig().title_in_context) for c in chunks]
        rows = range(real.first[slot.real], real.first[slot.real] + len(donor_chunks))
        work.vectors = []
        for r in rows:
            v = real.vectors[r] + self.noise * noise.standard_normal(real.dimension).astype(np.float32)
            work.vectors.append((v / np.linalg.norm(v)).astype(np.float32))
        work.mentions = self.mentions_for(position, [real.mentions[r] for r in rows])
        return work

    def mentions_for(self, position: int, donors: list[list[ConceptMention]]) -> list[list[ConceptMention]]:
        """Mentions of a generated document's chunks: as many per chunk as its donor, drawn from the
        stream. The stream runs in sequence order; asking for an earlier document replays it."""
        first_generated = len(self.order)
        if self._stream is None or position < first_generated + self._streamed:
            self._stream = ConceptStream(self.counts, self.d, self.theta, random.Random(self.seed))
            self._streamed, self._new = 0, {}
        while first_generated + self._streamed < position:  # documents skipped (already in the store)
            skipped = self.slot(first_generated + self._streamed).real
            rows = range(self.real.first[skipped], self.real.first[skipped] + len(self.real.chunks[skipped]))
            self._draw_chunks([self.real.mentions[r] for r in rows])
            self._streamed += 1
        self._streamed += 1
        return self._draw_chunks(donors)

    def _draw_chunks(self, donors: list[list[ConceptMention]]) -> list[list[ConceptMention]]:
        assert self._stream is not None
        out = []
        for donor in donors:
            picked: dict[str, ConceptMention] = {}
            for m in donor:
                for _ in range(20):  # a chunk names a concept once: draw again on a repeat
                    concept = self._concept(self._stream.draw())
                    if concept.name not in picked:
                        picked[concept.name] = concept.model_copy(update={"count": m.count})
                        break
            out.append(list(picked.values()))
        return out

    def _concept(self, index: int) -> ConceptMention:
        if index < len(self.concepts):
            return self.concepts[index]
        new = self._new.get(index)
        if new is None:
            template = self.concepts[random.Random(f"{self.seed}/concept/{index}").randrange(len(self.concepts))]
            new = ConceptMention(name=f"{template.name} #{index}", display=f"{template.display} #{index}", kind=template.kind)
            self._new[index] = new
        return new


def noise_for(vectors: np.ndarray, sample: int = 2000) -> float:
    """Per-component Gaussian noise that puts a generated vector at the cosine from its donor that a
    real chunk has to its nearest other real chunk (median over a sample): for a unit vector plus
    noise of deviation s in D dimensions, cos = 1 / sqrt(1 + D s^2)."""
    rng = np.random.default_rng(SEED)
    picked = rng.choice(len(vectors), size=min(sample, len(vectors)), replace=False)
    nearest = []
    for start in range(0, len(picked), 500):
        rows = picked[start : start + 500]
        sims = vectors[rows] @ vectors.T
        sims[np.arange(len(rows)), rows] = -1.0
        nearest.append(sims.max(axis=1))
    cos = float(np.clip(np.median(np.concatenate(nearest)), 0.05, 0.999))
    return math.sqrt((1 / cos**2 - 1) / vectors.shape[1])


def frequency_shares(counts: Sequence[int]) -> dict[str, float]:
    """The per-concept chunk-frequency distribution in a few buckets (share of concepts), and the
    share of mentions the top 1% of concepts take."""
    array = np.asarray(sorted(counts, reverse=True))
    buckets = {"1": (1, 1), "2": (2, 2), "3-5": (3, 5), "6-20": (6, 20), ">20": (21, 1 << 62)}
    shares = {k: float(np.mean((array >= lo) & (array <= hi))) for k, (lo, hi) in buckets.items()}
    top = max(1, len(array) // 100)
    shares["top1%_mentions"] = float(array[:top].sum() / array.sum())
    return shares
