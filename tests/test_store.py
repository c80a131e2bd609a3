"""The SDK adapter: URLs, identifiers, bound parameters, sharing embedded files, errors, async."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap

import pytest
from surrealdb import RecordID

from surreal_kgrag import surql
from surreal_kgrag.errors import ConfigurationError, QueryExecutionError, StoreConnectionError, StoreLockedError
from surreal_kgrag.schema import ensure_schema
from surreal_kgrag.store import StoreConfig, SurrealStore, checked_int
from surreal_kgrag.surql import NO_FILTER


def test_config_rejects_unknown_scheme_and_bad_identifiers():
    with pytest.raises(ValueError, match="unsupported database URL"):
        StoreConfig(url="postgres://localhost/db")
    for bad in ("x; REMOVE TABLE chunk", "ns`", "", "a b", "1abc"):
        with pytest.raises(ValueError, match="invalid name"):
            StoreConfig(url="mem://", namespace=bad)


def test_config_reads_environment_and_arguments_win(monkeypatch):
    monkeypatch.setenv("SURREAL_KGRAG_URL", "ws://db.example:8000")
    monkeypatch.setenv("SURREAL_KGRAG_NS", "envns")
    monkeypatch.setenv("SURREAL_KGRAG_DB", "envdb")
    monkeypatch.setenv("SURREAL_KGRAG_USER", "root")
    monkeypatch.setenv("SURREAL_KGRAG_PASS", "secret")
    config = StoreConfig.from_env(database="mine")
    assert (config.url, config.namespace, config.database, config.username) == ("ws://db.example:8000", "envns", "mine", "root")
    assert config.password.get_secret_value() == "secret"
    assert "secret" not in repr(config)
    assert not config.embedded


def test_integers_rendered_into_surrealql_are_checked():
    assert checked_int("k", 5) == 5
    for bad in ("5", "5; REMOVE TABLE chunk", 5.0, True, 0, -1, 10**9):
        with pytest.raises(ConfigurationError):
            checked_int("k", bad)
    with pytest.raises(ConfigurationError):
        surql.render("SELECT * FROM chunk WHERE embedding <|{{k}},40|> $v", k="3|> $v; REMOVE TABLE chunk; --")
    with pytest.raises(ConfigurationError, match="no value"):
        surql.render("{{missing}}")
    with pytest.raises(ConfigurationError):
        surql.load("../etc/passwd")


def test_query_binds_values_and_returns_one_result_per_statement():
    hostile = "'; REMOVE TABLE document; -- $ids ⟨x⟩ \u0000 \"quoted\""
    with SurrealStore("mem://") as store:
        assert store.major_version >= 2
        ensure_schema(store, dimension=3, embedder="test")
        meta = store.query("store_meta")
        assert len(meta) == 1 and meta[0]["dimension"] == 3  # one statement, one result
        # The document table survives a hostile key and comes back verbatim.
        rows = store.query("document_hashes", {"ids": [RecordID("document", hostile)]}, filter=NO_FILTER)
        assert rows == [[]]
        assert store.query("stats")[0]["documents"] == 0


def test_query_errors_name_the_file():
    with SurrealStore("mem://") as store:
        ensure_schema(store, dimension=3, embedder="test")
        with pytest.raises(QueryExecutionError, match="store_meta_write"):
            store.query("store_meta_write", {"meta": "not an object"})


def test_stores_on_one_embedded_file_share_the_engine(tmp_path):
    url = f"surrealkv://{tmp_path / 'kg'}"
    first = SurrealStore(url)
    second = SurrealStore(url)
    ensure_schema(first, dimension=3, embedder="test")
    assert second.query("store_meta")[-1]["dimension"] == 3
    first.close()
    assert second.query("stats")[0]["documents"] == 0  # still open for the other store
    second.close()
    with SurrealStore(url) as reopened:  # data persisted on disk
        assert reopened.query("store_meta")[-1]["embedder"] == "test"


def test_same_file_other_namespace_in_one_process_is_refused(tmp_path):
    url = f"surrealkv://{tmp_path / 'kg'}"
    with SurrealStore(url, namespace="a") as a:
        a.query("store_meta")
        with pytest.raises(ConfigurationError, match="already open in this process"):
            SurrealStore(url, namespace="b").query("store_meta")


def test_mem_stores_are_separate_databases():
    with SurrealStore("mem://") as a, SurrealStore("mem://") as b:
        ensure_schema(a, dimension=3, embedder="test")
        assert b.query("store_meta")[-1] is None


def test_second_process_gets_a_clear_lock_error(tmp_path):
    url = f"surrealkv://{tmp_path / 'kg'}"
    with SurrealStore(url) as store:
        store.query("store_meta")
        script = textwrap.dedent(
            f"""
            from surreal_kgrag.store import SurrealStore
            from surreal_kgrag.errors import StoreLockedError
            try:
                SurrealStore({url!r}).query("store_meta")
            except StoreLockedError as error:
                print("LOCKED:", error)
            """
        )
        result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert "LOCKED:" in result.stdout, result.stderr
    assert "another process" in result.stdout and "ws://" in result.stdout
    assert issubclass(StoreLockedError, StoreConnectionError)  # callers catching connection errors get it too


async def test_async_queries_match_sync_and_share_the_handle(tmp_path):
    url = f"surrealkv://{tmp_path / 'kg'}"
    store = SurrealStore(url)
    ensure_schema(store, dimension=3, embedder="test")
    sync_result = store.query("stats")
    async_result = await store.aquery("stats")
    assert async_result == sync_result
    # Concurrent async queries on one handle all complete.
    results = await asyncio.gather(*(store.aquery("store_meta") for _ in range(8)))
    assert all(r[-1]["dimension"] == 3 for r in results)
    await store.aclose()


async def test_sync_api_works_inside_a_running_event_loop():
    store = SurrealStore("mem://")
    ensure_schema(store, dimension=3, embedder="test")  # sync call while this loop runs
    assert (await store.aquery("store_meta"))[-1]["dimension"] == 3
    store.close()


def test_query_many_returns_each_querys_results_in_order_sync_and_async():
    with SurrealStore("mem://") as store:
        ensure_schema(store, dimension=2, embedder="e")
        store.query("store_meta_write", {"meta": {"dimension": 2, "embedder": "e", "schema_version": 2, "mark": "x"}})
        steps = [("store_meta", {}, {}), ("stats", {}, {}), ("store_meta", None, {})]
        meta, stats, again = store.query_many(steps)
        assert meta[-1]["mark"] == "x" and again == meta
        assert stats[0]["documents"] == 0
        assert asyncio.run(store.aquery_many(steps)) == [meta, stats, again]
        with pytest.raises(QueryExecutionError, match="store_meta_write"):
            store.query_many([("store_meta", {}, {}), ("store_meta_write", {"meta": "not an object"}, {})])
