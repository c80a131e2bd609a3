"""Search index maintenance on the real embedded engine: pending counts, rebuilds as new
generations, the rule that decides them, and queries that never see an index come or go."""

from __future__ import annotations

import asyncio
import threading

import numpy as np
import pytest
from store_rows import one_chunk_document

from surreal_kgrag import surql
from surreal_kgrag.indexes import IndexSettings, IndexState
from surreal_kgrag.schema import ensure_schema, read_meta
from surreal_kgrag.store import SurrealStore
from surreal_kgrag.surql import NO_FILTER

DIM = 16


def _vectors(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32)


def _write(store: SurrealStore, vectors: np.ndarray, start: int = 0) -> None:
    """One single-chunk document per vector, through the real write transaction."""
    for i, vector in enumerate(vectors, start):
        store.query("write_documents", one_chunk_document(i, vector), scope=NO_FILTER)


def _nearest(store: SurrealStore, vector: np.ndarray, k: int = 5) -> list[str]:
    """The documents (one chunk each) of the k nearest chunks, through the HNSW search."""
    found = store.query("search_chunks", {"embedding": vector, "threshold": -1.0, "limit": k, "exact": False, "filtered": False, "count_inside": False,
                                          "keep": k},
                        candidates=k, ef=64, filter=_no_filter(), document_filter=_no_filter())[-1]
    return [str(row["id"].id) for row in found["documents"]]


def _no_filter():
    from surreal_kgrag.retrieval.filters import compile_filter

    return compile_filter(None)


def _index_names(store: SurrealStore) -> dict[str, list[str]]:
    tables = dict(zip(("chunk", "concept", "chunk_text"), store.query("index_list")))
    return {t: sorted(info["indexes"]) for t, info in tables.items()}


def test_the_rule_rebuilds_a_first_load_and_not_a_small_addition_to_a_large_index():
    settings = IndexSettings(rebuild_min_pending=1000, rebuild_ratio=0.2)
    assert settings.due(IndexState(name="x", indexed=0, pending=1000))
    assert not settings.due(IndexState(name="x", indexed=0, pending=999))
    assert not settings.due(IndexState(name="x", indexed=23_000, pending=1_100))  # 100 documents into HotpotQA
    assert settings.due(IndexState(name="x", indexed=23_000, pending=4_600))
    assert not IndexSettings(auto_rebuild=False).due(IndexState(name="x", pending=10**6))


def test_writes_are_counted_and_a_due_index_is_rebuilt_as_a_new_generation(tmp_path):
    vectors = _vectors(60, 1)
    with SurrealStore(f"surrealkv://{tmp_path / 'kg'}") as store:
        ensure_schema(store, dimension=DIM, embedder="e")
        assert {k: s.name for k, s in store.index_states().items()} == {
            "chunk": "chunk_embedding", "concept": "concept_embedding", "text": "chunk_text_search"}
        _write(store, vectors[:40])
        report = store.after_bulk_write(chunks=40, settings=IndexSettings(rebuild_min_pending=50))
        assert report.rebuilt == [] and report.indexes["chunk"].pending == 40 and report.indexes["text"].pending == 0
        _write(store, vectors[40:], start=40)
        report = store.after_bulk_write(chunks=20, replaced=55, settings=IndexSettings(rebuild_min_pending=50))
        assert sorted(report.rebuilt) == ["chunk", "text"]  # 60 vectors, 55 chunks removed; concept had nothing
        chunk = report.indexes["chunk"]
        assert (chunk.name, chunk.generation, chunk.indexed, chunk.pending) == ("chunk_embedding_1", 1, 60, 0)
        assert report.indexes["concept"].name == "concept_embedding"
        # The old generations are gone; each table has exactly its live search index.
        names = _index_names(store)
        assert "chunk_embedding_1" in names["chunk"] and "chunk_embedding" not in names["chunk"]
        assert "chunk_text_search_1" in names["chunk_text"] and "chunk_text_search" not in names["chunk_text"]
        after = [_nearest(store, v) for v in vectors[:10]]
        assert [a[0] for a in after] == [f"d{i}" for i in range(10)]  # each finds its own document first
        unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
        exact = [{f"d{j}" for j in np.argsort(-(unit @ u))[:5]} for u in unit[:10]]
        assert sum(len(set(a) & e) for a, e in zip(after, exact)) >= 45  # the new graph finds the true neighbours
        assert "WITH INDEX chunk_embedding_1" in store.text("search_chunks", candidates=5, ef=64, filter=_no_filter(), document_filter=_no_filter())
    with SurrealStore(f"surrealkv://{tmp_path / 'kg'}") as reopened:  # the generation is recorded in the store
        assert reopened.index_states()["chunk"].name == "chunk_embedding_1"
        assert _nearest(reopened, vectors[59])[0] == "d59"
        ensure_schema(reopened, dimension=DIM, embedder="e")  # does not define generation 0 again
        assert "chunk_embedding" not in _index_names(reopened)["chunk"]


def test_optimize_rebuilds_what_is_pending_and_removes_leftover_generations(tmp_path):
    with SurrealStore(f"surrealkv://{tmp_path / 'kg'}") as store:
        ensure_schema(store, dimension=DIM, embedder="e")
        assert store.optimize().rebuilt == []  # nothing pending
        _write(store, _vectors(30, 2))
        store.after_bulk_write(chunks=30, replaced=4)  # below the default rule: stays pending
        assert store.index_states()["chunk"].pending == 30 and store.index_states()["text"].pending == 4
        # A generation left behind by an interrupted rebuild (defined, never switched to).
        store.query("index_vector", None, index=surql.Identifier("chunk_embedding_7"), table=surql.Identifier("chunk"),
                    dimension=DIM, hnsw_efc=150, hnsw_m=12)
        report = store.optimize()
        assert sorted(report.rebuilt) == ["chunk", "text"] and report.seconds > 0
        assert _index_names(store)["chunk"] == ["chunk_doc", "chunk_embedding_1"]
        report = store.optimize(force=True)
        assert sorted(report.rebuilt) == ["chunk", "concept", "text"]
        assert report.indexes["concept"].name == "concept_embedding_1" and report.indexes["chunk"].generation == 2


@pytest.mark.parametrize("limit", ["BUILD_TIMEOUT", "BUILD_STALL"])
def test_a_build_that_does_not_finish_in_time_is_dropped_and_the_live_generation_kept(tmp_path, monkeypatch, limit):
    """A new generation is built concurrently and polled; one not ready in time (or without progress
    for too long) is removed while it builds, the live one stays and keeps answering, and a later
    optimize rebuilds."""
    from surreal_kgrag.db import maintenance

    with SurrealStore(f"surrealkv://{tmp_path / 'kg'}") as store:
        ensure_schema(store, dimension=DIM, embedder="e")
        vectors = _vectors(400, 5)
        _write(store, vectors)
        monkeypatch.setattr(maintenance, limit, 0.0)
        report = store.optimize(force=True)
        assert report.rebuilt == [] and sorted(report.failed) == ["chunk", "concept", "text"]
        # With no time for any call, the first one is abandoned and no further index is tried.
        assert ("did not answer" in (report.note or "")) == (limit == "BUILD_STALL")
        assert store.index_states()["chunk"].generation == 0 and store.index_states()["chunk"].pending == 0
        assert _index_names(store)["chunk"] == ["chunk_doc", "chunk_embedding"]
        assert _nearest(store, vectors[7])[0] == "d7"
        monkeypatch.undo()
        _write(store, vectors[:2], start=400)
        store.after_bulk_write(chunks=2)
        report = store.optimize()
        assert report.rebuilt == ["chunk"] and report.failed == []
        assert report.indexes["chunk"].indexed == 402 and _index_names(store)["chunk"] == ["chunk_doc", "chunk_embedding_1"]
        assert _nearest(store, vectors[7])[0] == "d7"


def _probe(store: SurrealStore, name: str, vector: np.ndarray, timeout_ms: int = 50) -> list:
    """The nearest chunk through the HNSW generation ``name``, in at most ``timeout_ms`` of engine time."""
    return store.query("index_vector_probe", {"probe": vector.tolist()}, index=surql.Identifier(name),
                       table=surql.Identifier("chunk"), timeout_ms=timeout_ms)[-1]


def test_queries_switch_to_a_new_vector_generation_once_its_vectors_are_in_its_graph(tmp_path):
    """A concurrently built HNSW generation reports ready while the engine still folds its queued
    vectors into its graph, and a KNN on it waits meanwhile (seconds at 30k chunks): a KNN that may
    take 50 ms of engine time fails then. The rebuild switches only after the fold, so the first
    query on the new generation answers at once, and from the graph."""
    vectors = _vectors(1500, 8)
    with SurrealStore(f"surrealkv://{tmp_path / 'kg'}") as store:
        ensure_schema(store, dimension=DIM, embedder="e")
        _write(store, vectors)
        report = store.after_bulk_write(chunks=len(vectors))
        assert report.rebuilt == ["chunk"] and report.failed == [] and report.note is None
        live = report.indexes["chunk"].name
        assert live == "chunk_embedding_1"
        assert [str(row.id) for row in _probe(store, live, vectors[9])] == ["d9::h::00000"]
        assert [a[0] for a in (_nearest(store, v) for v in vectors[:20])] == [f"d{i}" for i in range(20)]


def test_a_vector_generation_still_folding_when_its_time_is_up_is_dropped(tmp_path, monkeypatch):
    """A new HNSW generation whose vectors are not in its graph within the allowed time is removed
    like a build that did not finish, and the live generation keeps answering."""
    from surreal_kgrag.db import maintenance

    vectors = np.random.default_rng(9).standard_normal((1500, 256)).astype(np.float32)  # a fold of seconds
    with SurrealStore(f"surrealkv://{tmp_path / 'kg'}") as store:
        ensure_schema(store, dimension=256, embedder="e")
        _write(store, vectors)
        monkeypatch.setattr(maintenance, "_settle_limit", lambda rows: 0.0)
        report = store.after_bulk_write(chunks=len(vectors))
        assert report.rebuilt == [] and report.failed == ["chunk"]
        assert report.note == "chunk_embedding_1 was built but its vectors were not in its graph after 0 s"
        assert store.index_states()["chunk"].name == "chunk_embedding" and store.index_states()["chunk"].pending == len(vectors)
        assert _index_names(store)["chunk"] == ["chunk_doc", "chunk_embedding"]
        assert _nearest(store, vectors[11])[0] == "d11"
        monkeypatch.undo()
        assert store.optimize().rebuilt == ["chunk"]


def test_a_rebuild_called_first_on_a_reopened_store_reads_the_recorded_generations(tmp_path):
    from surreal_kgrag.db.loops import run_sync
    from surreal_kgrag.indexes import rebuild

    url = f"surrealkv://{tmp_path / 'kg'}"
    with SurrealStore(url) as store:
        ensure_schema(store, dimension=DIM, embedder="e")
        _write(store, _vectors(30, 4))
        assert store.optimize(force=True).indexes["chunk"].generation == 1
    with SurrealStore(url) as store:
        report = run_sync(rebuild(store._conn(), ["chunk"]))
        assert report.rebuilt == ["chunk"] and report.indexes["chunk"].name == "chunk_embedding_2"
        assert _nearest(store, _vectors(30, 4)[3])[0] == "d3"


def test_a_rebuild_waits_for_queries_on_the_old_generation_and_writes_wait_for_it(tmp_path):
    with SurrealStore(f"surrealkv://{tmp_path / 'kg'}") as store:
        ensure_schema(store, dimension=DIM, embedder="e")
        _write(store, _vectors(20, 3))
        catalog = store._conn().catalog  # the connection's bookkeeping, shared by its stores
        lease = catalog.enter(write=False)  # a query that rendered the generation 0 names
        assert lease is not None and lease.names["chunk_index"].value == "chunk_embedding"
        done = threading.Event()
        worker = threading.Thread(target=lambda: (store.optimize(force=True), done.set()))
        worker.start()
        # The new generation gets built and switched to, but the old one stays while the lease is held.
        for _ in range(600):
            if store.index_states()["chunk"].generation == 1:
                break
            done.wait(0.05)
        assert store.index_states()["chunk"].generation == 1
        assert "chunk_embedding" in _index_names(store)["chunk"] and not done.is_set()
        assert catalog.enter(write=True) is None  # writes wait until the rebuild is over
        assert _nearest(store, _vectors(20, 3)[4])[0] == "d4"  # reads go on, on the new name
        catalog.leave(lease)
        worker.join(120)
        assert done.is_set() and "chunk_embedding" not in _index_names(store)["chunk"]
        writer = catalog.enter(write=True)
        assert writer is not None
        catalog.leave(writer)


def _interrupt() -> None:
    raise KeyboardInterrupt  # as Ctrl-C does, from inside the running loop


def test_ctrl_c_during_a_rebuild_leaves_the_store_writable(tmp_path, monkeypatch):
    """Ctrl-C while ``optimize`` waits for a build stops the loop with the rebuild still waiting; it
    is cancelled and finishes there, so its gate on writes opens, and the live generation stays."""
    from surreal_kgrag.db import maintenance

    async def stalled(*args, **kwargs):
        asyncio.get_running_loop().call_later(0.05, _interrupt)
        await asyncio.sleep(60)

    with SurrealStore(f"surrealkv://{tmp_path / 'kg'}") as store:
        ensure_schema(store, dimension=DIM, embedder="e")
        vectors = _vectors(20, 6)
        _write(store, vectors)
        monkeypatch.setattr(maintenance, "_built", stalled)
        with pytest.raises(KeyboardInterrupt):
            store.optimize(force=True)
        monkeypatch.undo()
        lease = store._conn().catalog.enter(write=True)
        assert lease is not None  # a write would have waited for ever
        store._conn().catalog.leave(lease)
        _write(store, vectors[:1], start=20)
        assert store.index_states()["chunk"].generation == 0
        assert _nearest(store, vectors[5])[0] == "d5"


def test_an_in_memory_store_is_maintained_like_a_file():
    with SurrealStore("mem://") as store:
        ensure_schema(store, dimension=DIM, embedder="e")
        assert store.optimize().note is not None  # nothing pending
        _write(store, _vectors(5, 4))
        assert store.optimize(force=True).rebuilt == ["chunk", "concept", "text"]


@pytest.mark.parametrize("text", ["INSERT INTO x $y", "-- a comment\nDELETE chunk", "LET $a = (UPDATE x SET y = 1)",
                                  "DEFINE INDEX i ON t FIELDS f", "upsert kg_meta:indexes CONTENT $s"])
def test_write_statements_are_recognised(text):
    assert surql.writes(text)


@pytest.mark.parametrize("text", ["SELECT updated_at FROM document", "-- DELETE nothing here\nRETURN 1",
                                  "SELECT * FROM chunk WITH INDEX {{chunk_index}} WHERE embedding <|5,40|> $v"])
def test_reads_are_not_taken_for_writes(text):
    assert not surql.writes(text)


def test_the_store_settings_are_read_without_waiting_for_a_rebuild():
    """store_meta.surql is a read (it once defined its table, and every reader of the settings
    waited behind an index rebuild's write gate); it answers None on a new database."""
    assert not surql.writes(surql.load("store_meta"))
    with SurrealStore("mem://") as store:
        assert read_meta(store) is None
        ensure_schema(store, dimension=DIM, embedder="e")
        assert read_meta(store)["dimension"] == DIM
        catalog = store._conn().catalog
        assert catalog.begin_rebuild()  # the gate a rebuild closes to writers
        try:
            assert read_meta(store)["embedder"] == "e"  # a write would wait here until end_rebuild
        finally:
            catalog.end_rebuild()


def test_identifiers_rendered_into_surrealql_are_checked():
    assert surql.render("REMOVE INDEX {{i}} ON chunk", i=surql.Identifier("chunk_embedding_3")) == "REMOVE INDEX chunk_embedding_3 ON chunk"
    for bad in ("x; REMOVE TABLE chunk", "a b", "", "⟨x⟩", "1abc"):
        with pytest.raises(ValueError):
            surql.Identifier(bad)
