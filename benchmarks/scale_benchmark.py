"""Stores of 10k, 100k and 1M chunks on one machine: write rate, disk, memory and query latency per size.

    .venv/bin/python benchmarks/scale_benchmark.py --sizes 10000,100000,1000000 \\
        [--cache .cache/scale] [--store-dir /var/tmp/kg-scale] [--corpus ../shared/bench/hotpotqa \\
        --corpus ../shared/bench/musique] [--filings ../shared/bench/sec10q/docs] [--questions 100] \\
        [--modes chunk,concept,hybrid,graph] [--optimize force|pending|none] [--threads 1] \\
        [--chart scale.png] [--json scale.json]

The point is the database, not the models: no model runs while a store is written.

**Real chunks.** The corpora (``corpus.jsonl`` passages, and with ``--filings`` a folder of PDFs) are
read with the product's loaders and cut with its chunker, exactly as ``surreal-kgrag ingest`` would.
Once per corpus (cached under ``--cache``, keyed by the files and settings): every chunk's MiniLM
vector (the product's embedder, its text under the document title as the ingest embeds it), every
chunk's concept mentions (the product's spaCy extractor), the vectors of the real concept names that
a store embeds (those in 2+ chunks, and titles), and the vectors of up to ``--questions`` questions
from the corpora's ``queries.jsonl``. Later runs read the cache and load no model.

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

**Write path.** Chunks, mentions and vectors become ``DocumentWork`` and go through the product's
``records.prepare`` and ``Writer`` (the settings of ``IngestConfig``), then the concept-vector stage
(``embed_queued_concepts`` with the cached vectors; a generated concept's vector is its template's
plus noise) and the index maintenance the ingest runs after its writes (``after_bulk_write``).
Each size is built by appending to the previous one (``--store-dir`` keeps the store between runs,
and a later run with larger sizes continues it; the document sequence is deterministic).

**Printed per size**: database write rate (the ``Writer`` alone: chunks/s, edges/s and rows/s over every
table; and the whole load with prepare, concept vectors and index maintenance), bytes on disk per chunk
and per byte of chunk text (``du`` of the surrealkv directory after the store is closed), peak RSS of
this process, time to open the store (connect + first query), ``optimize`` time (``--optimize force``
rebuilds all three search indexes, as after a bulk load), and per mode (chunk, concept, hybrid, graph)
the wall-clock p50/p95 of ``retriever.search()`` over the real questions with their cached embeddings:
the figures EXCLUDE embedding the question (its MiniLM time on this machine, measured once when the
cache is built, is printed beside them) and include everything else (the question's spaCy analysis,
database, client-side walk, fusion, hydration); the database part (``search_ms``) is printed too. Then
the rows each table holds per chunk. ``--chart`` draws each figure against size (matplotlib), ``--json``
writes every figure.

**What grows faster than the store**: the write rate. The first runs fell from 33 chunks/s (0 -> 2k)
to 12 (2k -> 10k): ``write_documents.surql`` recounted every touched concept's document frequency
from all its edges, and ``title_concepts.surql`` read a concept record (its vector with it) for every
capitalised phrase of a group. Both are now independent of the store's size (document frequencies by
delta; ``concept_title`` rows): 64.6 chunks/s (0 -> 2k) and 33.6 (2k -> 10k) on a quiet machine.
What still grows is the index work inside ``write_documents`` and the reverse bridge search
(``title_mentions.surql``, a full-text AND whose postings grow with the store); docs/benchmarks.md has
the figures.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import random
import re
import resource
import shutil
import statistics
import subprocess
import sys
import time
from array import array
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
from pydantic import TypeAdapter

from surreal_kgrag.db import SurrealStore
from surreal_kgrag.extract import MetadataConceptExtractor
from surreal_kgrag.ingest.concepts import embed_many, embed_queued_concepts
from surreal_kgrag.ingest.config import IngestConfig
from surreal_kgrag.ingest.records import DocumentWork, PreparedDocument, in_context, prepare
from surreal_kgrag.ingest.writer import Writer
from surreal_kgrag.loaders import iter_sources
from surreal_kgrag.models import ConceptMention, IngestSummary, SourceDocument, TextChunk
from surreal_kgrag.retrieval import make_retriever
from surreal_kgrag.schema import ensure_schema
from surreal_kgrag.sections import split_document

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT.parent / "shared" / "bench"
DEFAULT_CORPORA = [BENCH / "hotpotqa", BENCH / "musique"]
MODES = ("chunk", "concept", "hybrid", "graph")
CACHE_VERSION = 1
GENERATOR_VERSION = 2  # stores built by another version of the generator are not appended to
SEED = 20261125
SWAP = 0.5  # share of a generated chunk's sentences taken from other real chunks
SENTENCE = re.compile(r"(?<=[.!?])\s+")
DOCS = TypeAdapter(list[SourceDocument])
CHUNKS = TypeAdapter(list[list[TextChunk]])
WRITE_BATCH_DOCS = 64  # documents prepared and handed to the Writer at a time (its groups are IngestConfig's)


# -- the real corpus, computed once ------------------------------------------------------------


@dataclass
class RealCorpus:
    """Real documents, their chunks and what the models found in them (from the cache)."""

    docs: list[SourceDocument]
    chunks: list[list[TextChunk]]  # per document
    first: list[int]  # per document: index of its first chunk in the flat arrays
    vectors: np.ndarray  # (chunks, d), L2-normalised
    mentions: list[list[ConceptMention]]  # per chunk
    questions: list[str]
    question_vectors: np.ndarray
    concept_vectors: dict[str, np.ndarray]  # display name -> vector, for the concepts a store embeds
    embedder_name: str
    question_embed_ms: float  # MiniLM p50 for one question, on this machine, when the cache was built

    @property
    def dimension(self) -> int:
        return int(self.vectors.shape[1])

    @property
    def chunk_count(self) -> int:
        return int(self.vectors.shape[0])


def read_documents(corpora: Sequence[Path], filings: Path | None, max_docs: int | None) -> list[SourceDocument]:
    """The corpora's records (and the filings' PDFs) as the product's loaders read them."""
    docs: list[SourceDocument] = []
    for folder in corpora:
        found = [d for d in iter_sources([folder / "corpus.jsonl"]) if isinstance(d, SourceDocument)]
        docs += found[:max_docs] if max_docs else found
    if filings is not None:
        docs += [d for d in iter_sources([filings]) if isinstance(d, SourceDocument)]
    return docs


def read_questions(corpora: Sequence[Path], count: int) -> list[str]:
    """Up to ``count`` questions, taken in turn from each corpus's queries.jsonl."""
    per = [
        [json.loads(line)["question"] for line in (folder / "queries.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()]
        for folder in corpora
        if (folder / "queries.jsonl").is_file()
    ]
    out: list[str] = []
    for i in range(max((len(p) for p in per), default=0)):
        for p in per:
            if i < len(p) and len(out) < count:
                out.append(p[i])
    return out


def cache_key(corpora: Sequence[Path], filings: Path | None, max_docs: int | None, questions: int) -> str:
    digest = hashlib.sha256(f"v{CACHE_VERSION} {max_docs} {questions} {IngestConfig().chunker!r}".encode())
    files = [f for folder in corpora for f in (folder / "corpus.jsonl", folder / "queries.jsonl") if f.is_file()]
    if filings is not None:
        files += sorted(p for p in filings.rglob("*") if p.is_file())
        files += [q for q in (filings.parent / "queries.jsonl",) if q.is_file()]
    for f in files:
        stat = f.stat()
        digest.update(f"{f.resolve()} {stat.st_size} {int(stat.st_mtime)}".encode())
    return digest.hexdigest()[:16]


def load_real(
    corpora: Sequence[Path],
    cache: Path,
    *,
    filings: Path | None = None,
    max_docs: int | None = None,
    questions: int = 100,
    log: Callable[[str], None] = print,
) -> RealCorpus:
    """The real corpus with its vectors and mentions, computed with the real models on the first call
    and read from ``cache`` afterwards."""
    folder = cache / f"real-{cache_key(corpora, filings, max_docs, questions)}"
    if not (folder / "meta.json").is_file():
        config = IngestConfig()
        docs = read_documents(corpora, filings, max_docs)
        chunks = [split_document(config.chunker, doc) for doc in docs]
        docs, chunks = [d for d, c in zip(docs, chunks) if c], [c for c in chunks if c]
        asked = [*corpora, filings.parent] if filings is not None else list(corpora)  # sec10q/queries.jsonl beside docs/
        compute_real(docs, chunks, read_questions(asked, questions), folder, log)
    docs = DOCS.validate_json((folder / "documents.json").read_bytes())
    chunks = CHUNKS.validate_json((folder / "chunks.json").read_bytes())
    first = list(np.cumsum([0] + [len(c) for c in chunks])[:-1])
    meta = json.loads((folder / "meta.json").read_text())
    raw = json.loads((folder / "mentions.json").read_text())
    mentions = [[ConceptMention(name=m[0], display=m[1], kind=m[2], count=m[3]) for m in chunk] for chunk in raw]
    names = json.loads((folder / "concept_names.json").read_text())
    concept_vectors = np.load(folder / "concept_vectors.npy")
    vectors = np.load(folder / "vectors.npy")
    if len(mentions) != sum(len(c) for c in chunks) or vectors.shape[0] != len(mentions):
        raise SystemExit(f"{folder}: cache does not match the corpus (delete it)")
    return RealCorpus(
        docs=docs,
        chunks=chunks,
        first=[int(i) for i in first],
        vectors=vectors,
        mentions=mentions,
        questions=json.loads((folder / "questions.json").read_text()),
        question_vectors=np.load(folder / "question_vectors.npy"),
        concept_vectors=dict(zip(names, concept_vectors)),
        embedder_name=meta["embedder"],
        question_embed_ms=meta["question_embed_ms"],
    )


def compute_real(
    docs: list[SourceDocument], chunks: list[list[TextChunk]], questions: list[str], folder: Path, log: Callable[[str], None]
) -> None:
    """Run the real models once over the real chunks, the concept names a store embeds and the questions."""
    from surreal_kgrag.embed import resolve_embedder
    from surreal_kgrag.extract import resolve_extractor

    config = IngestConfig()
    embedder = resolve_embedder(None)
    extractor = resolve_extractor(None)
    texts = [c.text for cs in chunks for c in cs]
    contexts = [in_context(doc, c.text, config.title_in_context) for doc, cs in zip(docs, chunks) for c in cs]
    log(f"cache: extracting concepts from {len(texts):,} real chunks (spaCy) ...")
    t = time.perf_counter()
    mentions: list[list[ConceptMention]] = []
    for start in range(0, len(texts), 256):
        mentions += extractor.extract(texts[start : start + 256])
    log(f"cache: extracted in {time.perf_counter() - t:.0f} s; embedding the chunks (MiniLM) ...")
    t = time.perf_counter()
    vectors = np.stack(embed_many(embedder, contexts, 64))
    log(f"cache: embedded in {time.perf_counter() - t:.0f} s")
    # The concept names a store embeds: in 2+ chunks (IngestConfig.concept_vector_min_chunks), or a title.
    df = Counter(m.name for chunk in mentions for m in chunk)
    displays = {m.display for chunk in mentions for m in chunk if df[m.name] >= config.concept_vector_min_chunks}
    metadata = MetadataConceptExtractor(config.metadata_concepts)
    displays |= {m.display for doc in docs for m in metadata.extract_document(doc)}
    names = sorted(displays)
    concept_vectors = np.stack(embed_many(embedder, names, 256)) if names else np.zeros((0, vectors.shape[1]), np.float32)
    question_vectors = np.stack([embedder.embed_query(q) for q in questions]) if questions else np.zeros((0, vectors.shape[1]))
    timings = []
    for q in questions[:30]:
        t = time.perf_counter()
        embedder.embed_query(q + " ")  # a new text: the embedder caches nothing, but be sure
        timings.append((time.perf_counter() - t) * 1000)
    folder.mkdir(parents=True, exist_ok=True)
    np.save(folder / "vectors.npy", vectors.astype(np.float32))
    np.save(folder / "concept_vectors.npy", concept_vectors.astype(np.float32))
    np.save(folder / "question_vectors.npy", np.asarray(question_vectors, dtype=np.float32))
    (folder / "mentions.json").write_text(json.dumps([[[m.name, m.display, m.kind, m.count] for m in c] for c in mentions]))
    (folder / "concept_names.json").write_text(json.dumps(names))
    (folder / "questions.json").write_text(json.dumps(questions))
    (folder / "documents.json").write_bytes(DOCS.dump_json(docs))
    (folder / "chunks.json").write_bytes(CHUNKS.dump_json(chunks))
    meta = {"embedder": embedder.name, "question_embed_ms": round(statistics.median(timings), 2) if timings else 0.0}
    (folder / "meta.json").write_text(json.dumps(meta))  # last: its presence means the cache is whole


class CachedEmbedder:
    """The embedder a benchmark store is written and queried with: cached MiniLM vectors for the real
    concept names and questions; a generated concept name (``<real name> #n``) or title (``<real
    title> r``) gets its real name's vector plus noise, any other text a random unit vector seeded by
    its hash. Never loads a model."""

    def __init__(self, real: RealCorpus, noise: float) -> None:
        self.real = real
        self.noise = noise
        self.queries = dict(zip(real.questions, real.question_vectors))

    @property
    def name(self) -> str:
        return self.real.embedder_name

    @property
    def dimension(self) -> int:
        return self.real.dimension

    def _vector(self, text: str) -> np.ndarray:
        known = self.real.concept_vectors.get(text)
        if known is not None:
            return known
        seed = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")
        rng = np.random.default_rng(seed)
        stem, _, suffix = text.rpartition(" ")  # "<real name> #n", a generated title "<real title> r"
        base = self.real.concept_vectors.get(stem) if suffix.lstrip("#").isdigit() else None
        vector = rng.standard_normal(self.dimension) if base is None else base + self.noise * rng.standard_normal(self.dimension)
        return (vector / np.linalg.norm(vector)).astype(np.float32)

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return np.stack([self._vector(t) for t in texts]) if texts else np.zeros((0, self.dimension), np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        vector = self.queries.get(text)
        return vector if vector is not None else self._vector(text)

    async def aembed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return self.embed_documents(texts)

    async def aembed_query(self, text: str) -> np.ndarray:
        return self.embed_query(text)


# -- the generator -----------------------------------------------------------------------------


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


# -- building and measuring --------------------------------------------------------------------


@dataclass
class SizeFigures:
    size: int
    chunks: int = 0
    documents: int = 0
    text_bytes: int = 0
    written_chunks: int = 0
    written_edges: int = 0
    written_rows: int = 0
    prepare_s: float = 0.0
    write_s: float = 0.0
    concept_vectors_s: float = 0.0
    index_s: float = 0.0
    write_chunks_per_s: float = 0.0
    write_edges_per_s: float = 0.0
    write_rows_per_s: float = 0.0
    load_chunks_per_s: float = 0.0
    disk_bytes: int = 0
    disk_bytes_per_chunk: float = 0.0
    disk_bytes_per_text_byte: float = 0.0
    disk_bytes_after_optimize: int = 0
    peak_rss_mb: float = 0.0
    open_s: float = 0.0
    optimize_s: float = 0.0
    latency: dict[str, dict[str, float]] = field(default_factory=dict)
    rows: dict[str, int] = field(default_factory=dict)
    rows_per_chunk: dict[str, float] = field(default_factory=dict)
    table_bytes_per_chunk: dict[str, float] = field(default_factory=dict)  # --table-bytes only


def store_url(path: Path) -> str:
    return f"surrealkv://{path}"


def du_bytes(path: Path) -> int:
    """Bytes the directory takes on disk (``du -sk``: allocated blocks), or the sum of file sizes."""
    try:
        out = subprocess.run(["du", "-sk", str(path)], capture_output=True, text=True, check=True).stdout
        return int(out.split()[0]) * 1024
    except (OSError, subprocess.CalledProcessError, ValueError):
        return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: kilobytes


def table_rows(store: SurrealStore) -> dict[str, int]:
    return {k: int(v) for k, v in store.query("scale_table_counts")[-1].items()}


def build(store: SurrealStore, gen: Generator, start: int, stop: int, embedder: CachedEmbedder, figures: SizeFigures) -> None:
    """Write documents [start, stop) of the sequence through the product's write path, then the
    concept-vector stage and the index maintenance the ingest runs after its writes."""
    config = IngestConfig()
    summary = IngestSummary()
    writer = Writer(
        store, summary, group_size=config.group_size, group_chunks=config.group_chunks, vector_min_chunks=config.concept_vector_min_chunks
    )
    before = table_rows(store)
    batch: list[DocumentWork] = []

    def flush() -> None:
        t = time.perf_counter()
        prepared: list[PreparedDocument] = [prepare(w, gen.metadata.extract_document(w.doc)) for w in batch]
        figures.prepare_s += time.perf_counter() - t
        figures.text_bytes += sum(len(c.content.encode()) for w in batch for c in w.chunks)
        t = time.perf_counter()
        writer.write(prepared, lambda: False)
        figures.write_s += time.perf_counter() - t
        batch.clear()

    for work in gen.works(start, stop):
        batch.append(work)
        if len(batch) >= WRITE_BATCH_DOCS:
            flush()
    if batch:
        flush()
    if summary.failures:
        raise SystemExit(f"{len(summary.failures)} documents failed to write, e.g. {summary.failures[0]}")
    t = time.perf_counter()
    concept_vectors = embed_queued_concepts(store, embedder)
    figures.concept_vectors_s = time.perf_counter() - t
    t = time.perf_counter()
    report = store.after_bulk_write(chunks=summary.chunks, concepts=concept_vectors, settings=config.index)
    figures.index_s = time.perf_counter() - t
    if report.failed:
        print(f"index rebuild after the writes did not finish for {', '.join(report.failed)} (live generations kept)", file=sys.stderr)
    after = table_rows(store)
    figures.written_chunks = summary.chunks
    figures.written_edges = after["MENTIONS_CONCEPT"] - before["MENTIONS_CONCEPT"]
    figures.written_rows = sum(after.values()) - sum(before.values()) - (after["concept_with_vector"] - before["concept_with_vector"])
    figures.write_chunks_per_s = summary.chunks / figures.write_s if figures.write_s else 0.0
    figures.write_edges_per_s = figures.written_edges / figures.write_s if figures.write_s else 0.0
    figures.write_rows_per_s = figures.written_rows / figures.write_s if figures.write_s else 0.0
    total = figures.prepare_s + figures.write_s + figures.concept_vectors_s + figures.index_s
    figures.load_chunks_per_s = summary.chunks / total if total else 0.0


def measure_queries(
    store: SurrealStore, real: RealCorpus, embedder: CachedEmbedder, modes: Sequence[str], k: int = 5
) -> dict[str, dict[str, float]]:
    """Per mode: wall-clock p50/p95 of ``search()`` with the cached question embedding (embedding
    excluded), and the database part of it (``search_ms``)."""
    out: dict[str, dict[str, float]] = {}
    for mode in modes:
        retriever = make_retriever(mode, store, embedder=embedder)
        for question, vector in list(zip(real.questions, real.question_vectors))[:3]:  # warm-up
            retriever.search(question, k=k, embedding=vector.tolist())
        wall, db = [], []
        for question, vector in zip(real.questions, real.question_vectors):
            t = time.perf_counter()
            result = retriever.search(question, k=k, embedding=vector.tolist())
            wall.append((time.perf_counter() - t) * 1000)
            db.append(result.search_ms)
        out[mode] = {
            "wall_p50_ms": round(percentile(wall, 50), 2),
            "wall_p95_ms": round(percentile(wall, 95), 2),
            "db_p50_ms": round(percentile(db, 50), 2),
            "db_p95_ms": round(percentile(db, 95), 2),
        }
    return out


#: What ``table_bytes`` copies: (label, table, is a relation, search index left out). The variants
#: without their search index say what the index itself takes (the difference).
COPIED_TABLES = (
    ("document", "document", False, None),
    ("document_name", "document_name", False, None),
    ("chunk", "chunk", False, None),
    ("chunk without HNSW", "chunk", False, "chunk"),
    ("chunk_text", "chunk_text", False, None),
    ("chunk_text without BM25", "chunk_text", False, "text"),
    ("term", "term", False, None),
    ("concept", "concept", False, None),
    ("concept without HNSW", "concept", False, "concept"),
    ("concept_chunks", "concept_chunks", False, None),
    ("chunk_concepts", "chunk_concepts", False, None),
    ("MENTIONS_CONCEPT", "MENTIONS_CONCEPT", True, None),
)
COPY_PAGE = 2000


def table_bytes(path: Path, work_dir: Path, dimension: int, embedder: str, log: Callable[[str], None] = print) -> dict[str, int]:
    """Bytes on disk each table takes with its indexes: its rows copied alone into an empty store (the
    product's schema, the search indexes rebuilt), ``du`` of that store minus ``du`` of an empty one;
    for chunk, chunk_text and concept also without their search index. The sum need not equal the
    whole store's size (compaction differs), but the shares say where the bytes go. Minutes at 10k
    chunks: meant for the smaller sizes."""
    from surreal_kgrag.db.catalog import SEARCH_INDEXES
    from surreal_kgrag.surql import Identifier

    def fresh(name: str) -> SurrealStore:
        target = SurrealStore(store_url(work_dir / name))
        ensure_schema(target, dimension=dimension, embedder=embedder, settings=IngestConfig().index)
        return target

    shutil.rmtree(work_dir, ignore_errors=True)
    with fresh("empty"):
        pass
    empty = du_bytes(work_dir / "empty")
    out: dict[str, int] = {}
    with SurrealStore(store_url(path)) as source:
        for label, table, relation, left_out in COPIED_TABLES:
            t = time.perf_counter()
            folder = label.replace(" ", "_")
            with fresh(folder) as target:
                if left_out is not None:
                    live = target.index_states()[left_out].name
                    target.query("index_remove", index=Identifier(live), table=Identifier(SEARCH_INDEXES[left_out].table))
                start = 0
                while True:
                    rows = source.query("scale_copy_rows", table=Identifier(table), start=start, limit=COPY_PAGE)[-1]
                    if not rows:
                        break
                    insert = "scale_copy_insert_relation" if relation else "scale_copy_insert"
                    target.query(insert, {"rows": rows}, table=Identifier(table))
                    start += len(rows)
                if left_out is None:
                    target.optimize(force=True)
            out[label] = du_bytes(work_dir / folder) - empty
            log(f"  table bytes: {label} {start:,} rows, {out[label] / 1e6:,.1f} MB ({time.perf_counter() - t:.0f} s)")
            shutil.rmtree(work_dir / folder, ignore_errors=True)
    shutil.rmtree(work_dir, ignore_errors=True)
    return out


def percentile(values: Sequence[float], q: float) -> float:
    return float(np.percentile(np.asarray(values, dtype=np.float64), q)) if values else 0.0


@dataclass
class Progress:
    """What a kept store holds: how many documents of the sequence, built from which corpus."""

    key: str
    documents: int = 0
    chunks: int = 0
    text_bytes: int = 0


def run_sizes(
    real: RealCorpus,
    sizes: Sequence[int],
    store_dir: Path,
    *,
    modes: Sequence[str] = MODES,
    optimize: str = "force",
    table_bytes_up_to: int = 0,
    log: Callable[[str], None] = print,
) -> list[SizeFigures]:
    """Build each size by appending to the store in ``store_dir`` and measure it."""
    gen = Generator(real)
    embedder = CachedEmbedder(real, gen.noise)
    log(
        f"generator: {len(real.docs):,} real documents, {real.chunk_count:,} real chunks; Pitman-Yor d={gen.d:.3f} "
        f"theta={gen.theta:.1f}; vector noise {gen.noise:.4f} per component"
    )
    path = store_dir / "kg"
    marker = store_dir / "progress.json"
    key = f"{real.embedder_name} {real.chunk_count} {len(real.docs)} {gen.seed} v{CACHE_VERSION} g{GENERATOR_VERSION}"
    progress = Progress(key)
    if marker.is_file():
        progress = Progress(**json.loads(marker.read_text()))
        if progress.key != key:
            raise SystemExit(f"{store_dir} holds a store built from another corpus or generator: remove it or pick another --store-dir")
    elif path.exists():
        raise SystemExit(f"{path} exists without {marker.name}: remove it or pick another --store-dir")
    results = []
    for size in sorted(sizes):
        figures = SizeFigures(size=size)
        target = gen.documents_for(size)
        if target < progress.documents:
            log(f"size {size:,}: the kept store already holds more ({progress.chunks:,} chunks); skipped")
            continue
        with SurrealStore(store_url(path)) as store:
            ensure_schema(store, dimension=real.dimension, embedder=real.embedder_name, settings=IngestConfig().index)
            log(f"size {size:,}: writing documents {progress.documents:,}..{target:,} ...")
            build(store, gen, progress.documents, target, embedder, figures)
        progress.documents = target
        progress.chunks += figures.written_chunks
        progress.text_bytes += figures.text_bytes
        marker.write_text(json.dumps(asdict(progress)))
        figures.documents, figures.chunks = target, progress.chunks
        figures.text_bytes = progress.text_bytes
        figures.disk_bytes = du_bytes(path)
        figures.disk_bytes_per_chunk = figures.disk_bytes / max(1, figures.chunks)
        figures.disk_bytes_per_text_byte = figures.disk_bytes / max(1, figures.text_bytes)
        t = time.perf_counter()
        with SurrealStore(store_url(path)) as store:
            store.query("store_meta")  # the first query: the engine opens the files here
            figures.open_s = time.perf_counter() - t
            if optimize != "none":
                t = time.perf_counter()
                store.optimize(force=optimize == "force")
                figures.optimize_s = time.perf_counter() - t
            log(f"size {size:,}: {figures.chunks:,} chunks written; timing {len(real.questions)} questions per mode ...")
            figures.latency = measure_queries(store, real, embedder, modes)
            figures.rows = table_rows(store)
        figures.rows_per_chunk = {t: round(n / max(1, figures.chunks), 3) for t, n in figures.rows.items()}
        figures.disk_bytes_after_optimize = du_bytes(path)
        figures.peak_rss_mb = round(peak_rss_mb(), 1)  # before the table copies, which hold stores of their own
        if figures.chunks <= table_bytes_up_to:
            log(f"size {size:,}: copying each table alone into an empty store ...")
            measured = table_bytes(path, store_dir / "tables", real.dimension, real.embedder_name, log)
            figures.table_bytes_per_chunk = {t: round(b / max(1, figures.chunks), 1) for t, b in measured.items()}
        results.append(figures)
        log(format_size(figures, real.question_embed_ms))
    return results


def format_size(f: SizeFigures, embed_ms: float) -> str:
    lines = [
        f"== {f.chunks:,} chunks ({f.documents:,} documents, {f.text_bytes / 1e6:.1f} MB of chunk text)",
        f"  write (database, Writer): {f.write_chunks_per_s:,.1f} chunks/s, {f.write_edges_per_s:,.0f} edges/s, "
        f"{f.write_rows_per_s:,.0f} rows/s ({f.written_chunks:,} chunks, {f.written_edges:,} edges, "
        f"{f.written_rows:,} rows in {f.write_s:.1f} s)",
        f"  load (prepare {f.prepare_s:.1f} s + write + concept vectors {f.concept_vectors_s:.1f} s + index {f.index_s:.1f} s): "
        f"{f.load_chunks_per_s:,.1f} chunks/s",
        f"  disk: {f.disk_bytes / 1e6:,.1f} MB = {f.disk_bytes_per_chunk / 1024:,.1f} KB/chunk, "
        f"{f.disk_bytes_per_text_byte:,.1f} bytes per byte of text "
        f"({f.disk_bytes_after_optimize / 1e6:,.1f} MB after optimize and queries)",
        f"  open {f.open_s:.2f} s, optimize {f.optimize_s:.1f} s, peak RSS {f.peak_rss_mb:,.0f} MB",
        f"  latency, ms (wall-clock of search(), question embedding EXCLUDED; MiniLM embeds one question in ~{embed_ms:.0f} ms here):",
    ]
    for mode, v in f.latency.items():
        lines.append(
            f"    {mode:8s} wall p50 {v['wall_p50_ms']:7.1f}  p95 {v['wall_p95_ms']:7.1f}   "
            f"database p50 {v['db_p50_ms']:7.1f}  p95 {v['db_p95_ms']:7.1f}"
        )
    lines.append("  rows per chunk: " + ", ".join(f"{t} {r:g}" for t, r in f.rows_per_chunk.items() if f.rows.get(t)))
    if f.table_bytes_per_chunk:
        total = sum(b for t, b in f.table_bytes_per_chunk.items() if " without " not in t)
        lines.append(
            f"  bytes on disk per chunk by table (each copied alone, indexes included; sum {total:,.0f} vs "
            f"{f.disk_bytes_after_optimize / max(1, f.chunks):,.0f} for the store): "
            + ", ".join(f"{t} {b:,.0f}" for t, b in sorted(f.table_bytes_per_chunk.items(), key=lambda kv: -kv[1]))
        )
    return "\n".join(lines)


CHART_FIGURES = (
    ("write_chunks_per_s", "database writes, chunks/s"),
    ("write_rows_per_s", "database writes, rows/s"),
    ("disk_bytes_per_chunk", "bytes on disk per chunk"),
    ("disk_bytes_per_text_byte", "bytes on disk per byte of text"),
    ("peak_rss_mb", "peak RSS, MB"),
    ("open_s", "open, s"),
    ("optimize_s", "optimize, s"),
)


def chart(results: list[SizeFigures], path: Path, log: Callable[[str], None] = print) -> Path:
    """Each figure against size (log x), latency per mode in one panel; a CSV beside it when
    matplotlib is missing."""
    sizes = [r.chunks for r in results]
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        csv = path.with_suffix(".csv")
        header = ["chunks"] + [k for k, _ in CHART_FIGURES] + [f"{m}_{p}" for m in MODES for p in ("wall_p50_ms", "db_p50_ms")]
        rows = [
            [str(r.chunks)]
            + [f"{getattr(r, k):.3f}" for k, _ in CHART_FIGURES]
            + [str(r.latency.get(m, {}).get(p, "")) for m in MODES for p in ("wall_p50_ms", "db_p50_ms")]
            for r in results
        ]
        csv.write_text("\n".join(",".join(row) for row in [header, *rows]) + "\n")
        log(f"matplotlib is not installed: wrote {csv} instead of a chart")
        return csv
    fig, axes = plt.subplots(3, 3, figsize=(13, 10))
    for ax, (key, label) in zip(axes.flat, CHART_FIGURES):
        ax.plot(sizes, [getattr(r, key) for r in results], marker="o")
        ax.set_xscale("log")
        ax.set_title(label, fontsize=10)
    for ax, part in zip(list(axes.flat)[len(CHART_FIGURES) :], ("wall", "db")):
        for mode in MODES:
            if all(mode in r.latency for r in results):
                ax.plot(sizes, [r.latency[mode][f"{part}_p50_ms"] for r in results], marker="o", label=mode)
        ax.set_xscale("log")
        ax.set_title(f"{'wall-clock' if part == 'wall' else 'database'} p50 per mode, ms (no embedding)", fontsize=10)
        ax.legend(fontsize=8)
    for ax in axes.flat:
        ax.set_xlabel("chunks", fontsize=8)
    fig.suptitle("surreal-kgrag on the embedded engine: figures against store size")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument(
        "--sizes", default="10000,100000,1000000", help="chunk counts, comma-separated (each snaps down to a document boundary)"
    )
    parser.add_argument(
        "--cache", type=Path, default=ROOT / ".cache" / "scale", help="where the real corpus's vectors and mentions are cached"
    )
    parser.add_argument(
        "--store-dir",
        type=Path,
        default=None,
        help="keep the store here (a later run with larger sizes appends to it); default: a temporary folder, removed",
    )
    parser.add_argument(
        "--corpus",
        type=Path,
        action="append",
        default=None,
        help="a folder with corpus.jsonl (and queries.jsonl); repeatable; default hotpotqa and musique",
    )
    parser.add_argument(
        "--filings",
        type=Path,
        default=None,
        help=(
            "a folder of PDFs to add to the real corpus (e.g. ../shared/bench/sec10q/docs; the queries.jsonl beside it joins "
            "the questions; ~6k chunks, minutes of model work once; symlinks are not followed)"
        ),
    )
    parser.add_argument("--max-docs", type=int, default=None, help="read at most this many records of each corpus (smoke runs)")
    parser.add_argument("--questions", type=int, default=100)
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument(
        "--optimize", choices=("force", "pending", "none"), default="force", help="force: rebuild all three search indexes and time it"
    )
    parser.add_argument(
        "--table-bytes",
        type=int,
        default=0,
        metavar="N",
        help="for sizes of at most N chunks, measure each table's bytes on disk by copying it alone into an empty store (slow)",
    )
    parser.add_argument("--threads", type=int, default=1, help="torch threads while the cache is built (the machine is shared)")
    parser.add_argument("--chart", type=Path, default=None)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    corpora = args.corpus or DEFAULT_CORPORA
    modes = [m for m in args.modes.split(",") if m]
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    try:
        import torch

        torch.set_num_threads(args.threads)
    except ImportError:
        pass

    def log(message: str) -> None:
        print(message, flush=True)

    started = time.perf_counter()
    real = load_real(corpora, args.cache, filings=args.filings, max_docs=args.max_docs, questions=args.questions, log=log)
    shares_real = frequency_shares(list(Counter(m.name for c in real.mentions for m in c).values()))
    log("real concept chunk-frequency shares: " + ", ".join(f"{k} {v:.3f}" for k, v in shares_real.items()))
    temporary = args.store_dir is None
    store_dir = args.store_dir or Path(os.environ.get("TMPDIR", "/tmp")) / f"kg-scale-{os.getpid()}"
    store_dir.mkdir(parents=True, exist_ok=True)
    try:
        results = run_sizes(real, sizes, store_dir, modes=modes, optimize=args.optimize, table_bytes_up_to=args.table_bytes, log=log)
    finally:
        if temporary:
            shutil.rmtree(store_dir, ignore_errors=True)
    log(f"total {time.perf_counter() - started:.0f} s")
    if args.chart and results:
        log(f"chart: {chart(results, args.chart, log)}")
    if args.json:
        report = {
            "question_embed_ms": real.question_embed_ms,
            "real_chunks": real.chunk_count,
            "real_documents": len(real.docs),
            "real_frequency_shares": shares_real,
            "sizes": [asdict(r) for r in results],
        }
        args.json.write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
