"""The corpus of ``scale_benchmark.py``: the real chunks with every model output computed once and
cached.

**Real chunks.** The corpora (``corpus.jsonl`` passages, and with ``--filings`` a folder of PDFs) are
read with the product's loaders and cut with its chunker, exactly as ``surreal-kgrag ingest`` would.
Once per corpus (cached under ``--cache``, keyed by the files and settings): every chunk's MiniLM
vector (the product's embedder, its text under the document title as the ingest embeds it), every
chunk's concept mentions (the product's spaCy extractor), the vectors of the real concept names that
a store embeds (those in 2+ chunks, and titles), and the vectors of up to ``--questions`` questions
from the corpora's ``queries.jsonl``. Later runs read the cache and load no model.

The generated chunks that grow a store past them: ``scale_generator.py``.
"""

from __future__ import annotations

import hashlib
import json
import statistics
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from pydantic import TypeAdapter

from surreal_kgrag.extract import MetadataConceptExtractor
from surreal_kgrag.ingest.concepts import embed_many
from surreal_kgrag.ingest.config import IngestConfig
from surreal_kgrag.ingest.records import in_context
from surreal_kgrag.loaders import iter_sources
from surreal_kgrag.models import ConceptMention, SourceDocument, TextChunk
from surreal_kgrag.sections import split_document

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT.parent / "shared" / "bench"
DEFAULT_CORPORA = [BENCH / "hotpotqa", BENCH / "musique"]
CACHE_VERSION = 1
DOCS = TypeAdapter(list[SourceDocument])
CHUNKS = TypeAdapter(list[list[TextChunk]])


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
