"""Any size: the write path builds no value the engine caps. SurrealDB 3.x rejects an
``array::concat`` whose output passes 1 MiB (about 18,700 entries); the ingest's per-concept chunk
counts were built with it from every edge of a document, old and new, so a long document failed to
write. They are built with ``array::flatten``, which has no cap: checked here on the real engine,
on the statement's shape, and through the real writer on a document past the cap (generated
chunks, vectors and mentions: no models, the write path alone)."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

from surreal_kgrag import surql
from surreal_kgrag.errors import QueryExecutionError
from surreal_kgrag.extract import NOUN_PHRASE
from surreal_kgrag.ids import concept_id
from surreal_kgrag.ingest.records import DocumentWork, prepare
from surreal_kgrag.ingest.writer import Writer
from surreal_kgrag.models import ConceptMention, IngestSummary, SourceDocument, TextChunk
from surreal_kgrag.schema import ensure_schema
from surreal_kgrag.stats import get_stats
from surreal_kgrag.store import SurrealStore

ENTRIES = 40_000  # over twice the cap
DELTA_CONCAT = "RETURN array::len(array::concat($edges.map(|$e| { concept: $e.out, n: 1 }), $old.map(|$c| { concept: $c, n: -1 })));"
DELTA_FLATTEN = (
    "RETURN array::len((SELECT concept, math::sum(n) AS n FROM array::flatten(["
    "$edges.map(|$e| { concept: $e.out, n: 1 }), $old.map(|$c| { concept: $c, n: -1 })]) GROUP BY concept));"
)


def test_the_old_statement_hits_the_cap_and_the_new_one_does_not() -> None:
    edges = [{"out": concept_id(f"concept {i}")} for i in range(ENTRIES // 2)]
    old = [concept_id(f"concept {i}") for i in range(ENTRIES // 4, ENTRIES // 4 + ENTRIES // 2)]
    with SurrealStore("mem://") as store:
        with pytest.raises(QueryExecutionError, match="1048576 bytes"):
            store.query_text("concat_probe", DELTA_CONCAT, {"edges": edges, "old": old})
        (distinct,) = store.query_text("flatten_probe", DELTA_FLATTEN, {"edges": edges, "old": old})
    assert distinct == ENTRIES // 2 + ENTRIES // 4  # every concept once, old and new merged


def test_the_write_and_delete_statements_never_call_array_concat() -> None:
    for name in ("write_documents", "delete_documents"):
        code = "\n".join(line.split("--")[0] for line in surql.load(name).splitlines())  # fragments expanded
        assert "array::concat" not in code, name
        assert "array::flatten" in code or name == "delete_documents"


def test_one_document_with_an_edge_list_past_the_cap_writes_whole(tmp_path: Path) -> None:
    """250 chunks mentioning 80 concepts each: 20,000 edges in one transaction; the old statement
    failed on exactly this with the 1 MiB error. (Old and new edges together, as when a document is
    written over itself, are the 40,000 entries of the test above.)"""
    with SurrealStore(f"surrealkv://{tmp_path / 'kg'}") as store:
        ensure_schema(store, dimension=8, embedder="generated")
        summary = write(store, long_document(1))
        assert summary.failures == [] and (summary.added, summary.chunks, summary.edges) == (1, CHUNKS, CHUNKS * MENTIONS)
        stats = get_stats(store)
        assert (stats.documents, stats.chunks, stats.mentions, stats.concepts) == (1, CHUNKS, CHUNKS * MENTIONS, CHUNKS * MENTIONS)


CHUNKS, MENTIONS = 250, 80
WORDS = "revenue margin segment growth quarter operating income cash assets liabilities equity shares".split()


def long_document(seed: int) -> DocumentWork:
    """Generated chunks (a small vocabulary), vectors and concept mentions: the write path alone."""
    rng = random.Random(seed)
    chunks, parts, position = [], [], 0
    for index in range(CHUNKS):
        content = " ".join(rng.choice(WORDS) for _ in range(120)) + "."
        chunks.append(TextChunk(index=index, content=content, start=position, end=position + len(content)))
        parts.append(content)
        position += len(content) + 1
    doc = SourceDocument(key="long.txt", text="\n".join(parts), title="Long", source="long.txt")
    work = DocumentWork(doc, chunks, exists=False)
    work.mentions = [
        [ConceptMention(name=f"k{i * MENTIONS + j}", display="c", kind=NOUN_PHRASE) for j in range(MENTIONS)] for i in range(CHUNKS)
    ]
    work.vectors = [np.asarray(np.random.default_rng(i).random(8), dtype=np.float32) for i in range(CHUNKS)]
    work.contexts = [c.content for c in chunks]
    return work


def write(store: SurrealStore, work: DocumentWork) -> IngestSummary:
    summary = IngestSummary()
    Writer(store, summary, group_size=16, group_chunks=256, vector_min_chunks=2).write([prepare(work, [])], lambda: False)
    return summary
