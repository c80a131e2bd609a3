"""The SDK boundary: only ``surreal_kgrag.db.sdk`` (and its isolated fast path) touch the
``surrealdb`` SDK; the fast path still finds the private names it needs on the installed SDK, and
sends byte-for-byte what the SDK would; the installed SDK and engine are releases the suite was
run with (``sdk.TESTED``)."""

from __future__ import annotations

import ast
import datetime as dt
import importlib.metadata
from pathlib import Path

import numpy as np
import pytest
from packaging.version import Version
from surrealdb import Null, RecordID
from surrealdb.data.cbor import decode, encode

import surreal_kgrag
from surreal_kgrag import wire
from surreal_kgrag.db import SurrealStore, sdk, sdk_fastpath

ROOT = Path(surreal_kgrag.__file__).parent.parent
SOURCES = [*(ROOT / "surreal_kgrag").rglob("*.py"), *(ROOT / "integrations").rglob("*.py")]
ADAPTER = {ROOT / "surreal_kgrag" / "db" / "sdk.py", ROOT / "surreal_kgrag" / "db" / "sdk_fastpath.py"}

PARAMS = {
    "rows": [
        {"in": RecordID("chunk", "d::h::00000"), "out": RecordID("concept", "marie curie"), "doc": RecordID("document", 7)},
        {"id": RecordID("concept", ["a", 1]), "when": dt.datetime(2024, 5, 1, tzinfo=dt.timezone.utc), "n": np.int64(3)},
    ],
    "text": "x; REMOVE TABLE chunk",
}


def _sdk_imports(path: Path) -> list[tuple[str, list[str]]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "surrealdb":
            found.append((node.module or "", [a.name for a in node.names]))
        elif isinstance(node, ast.Import):
            found += [(a.name, []) for a in node.names if a.name.split(".")[0] == "surrealdb"]
    return found


def test_only_the_adapter_imports_the_sdk():
    outside = {str(p.relative_to(ROOT)): _sdk_imports(p) for p in SOURCES if p not in ADAPTER and _sdk_imports(p)}
    assert outside == {}


def test_private_sdk_names_are_used_in_the_fast_path_module_only():
    private = {}
    for path in ADAPTER - {ROOT / "surreal_kgrag" / "db" / "sdk_fastpath.py"}:
        for module, names in _sdk_imports(path):
            bad = [n for n in names if n.startswith("_")] + ([module] if "._" in module else [])
            if bad:
                private[path.name] = bad
    assert private == {}
    assert "self.db._db" not in "".join(p.read_text() for p in SOURCES)


def test_the_fast_path_finds_what_it_needs_in_the_installed_sdk():
    # Fails loudly when a new SDK release renames a private name the fast path uses: the package
    # then falls back to the public path (slower), and this test says what moved.
    assert sdk_fastpath.missing() == ""
    with SurrealStore("mem://") as store:
        store.server_version  # opens the connection
        assert sdk_fastpath.engine(store._conn().db) is not None


def test_the_installed_sdk_and_engine_are_releases_the_suite_was_run_with():
    for distribution in ("surrealdb", "surrealdb-embedded"):
        installed = Version(importlib.metadata.version(distribution))
        assert installed in {Version(v) for v in sdk.TESTED[distribution]}, f"{distribution} {installed} was never tested: run the suite, then add it to sdk.TESTED and pyproject"
    with SurrealStore("mem://") as store:
        assert store.server_version.rsplit("-", 1)[-1] in sdk.TESTED["engine"]


def test_the_fast_path_sends_record_ids_and_values_exactly_as_the_sdk_encodes_them():
    request = decode(wire.encode_query("RETURN $rows", PARAMS))
    assert request["method"] == "query" and request["params"][0] == "RETURN $rows"
    sent = request["params"][1]
    assert encode(sent["rows"][0]) == encode(PARAMS["rows"][0])
    assert sent["rows"][0]["in"] == RecordID("chunk", "d::h::00000")
    assert sent["rows"][1]["id"] == RecordID("concept", ["a", 1]) and sent["rows"][1]["n"] == 3
    assert sent["text"] == PARAMS["text"]


def test_float_arrays_are_packed_and_read_back_by_the_engine():
    vector32 = np.array([0.5, -1.25, 3.0], dtype=np.float32)
    vector64 = np.array([0.1, 0.2], dtype=np.float64)
    sent = decode(wire.encode_query("RETURN $v", {"v": [vector32, vector64]}))["params"][1]["v"]
    assert sent == [[0.5, -1.25, 3.0], [0.1, 0.2]]
    with SurrealStore("mem://") as store:
        store.query("store_meta_write", {"meta": {"v": vector32, "rid": RecordID("chunk", "a::b::00001")}})
        meta = store.query("store_meta")[-1]
    assert meta["v"] == [0.5, -1.25, 3.0] and meta["rid"] == RecordID("chunk", "a::b::00001")


@pytest.mark.parametrize("rows", [1, 40])
def test_both_paths_store_and_return_the_same_rows(rows):
    # The fast path (every request to the embedded engine) and the SDK's public one write the same
    # rows, and read back the same values, SurrealDB's own types included; NULL alone differs
    # (None here, the SDK's Null there), and the package reads both as None.
    vectors = np.random.default_rng(rows).standard_normal((rows, 8)).astype(np.float32)
    batch = [{"id": RecordID("t", i), "v": vectors[i], "doc": RecordID("document", f"d{i}"), "n": None} for i in range(rows)]
    read = """SELECT *, <datetime> '2024-03-01T10:00:00.123456789Z' AS at, 1h30m AS took, 1.25dec AS price,
        <uuid> '0190b4ad-4a1f-7bd0-9d6e-0a8f3b8a5d11' AS uid, <set> [3, 1] AS tags, NULL AS nothing,
        NONE AS absent, type::record('chunk', ['a', 1]) AS composite, { nested: [doc, { x: NULL }] } AS deep
        FROM t ORDER BY id"""
    results = []
    for fast in (True, False):
        db = sdk.blocking_handle("mem://")
        sdk.open_blocking(db, "t", "t", None)
        try:
            if fast:
                response = sdk_fastpath.execute(sdk_fastpath.engine(db), "INSERT INTO t $rows RETURN NONE", {"rows": batch})
                rows_read = sdk.query(db, read, {})["result"][0]["result"]
            else:
                response = db.query_raw("INSERT INTO t $rows RETURN NONE", sdk.plain({"rows": batch}))
                rows_read = db.query_raw(read, {})["result"][0]["result"]
            assert not response.get("error")
            results.append(rows_read)
        finally:
            sdk.close(db)
    fast_rows, public_rows = results
    assert len(fast_rows) == rows
    assert fast_rows[0]["v"] == pytest.approx(vectors[0].tolist())
    assert fast_rows[0]["nothing"] is None and public_rows[0]["nothing"] is Null
    assert fast_rows[0]["deep"]["nested"][1]["x"] is None and public_rows[0]["deep"]["nested"][1]["x"] is Null
    assert wire.without_nulls(fast_rows) == wire.without_nulls(public_rows)
    first = fast_rows[0]
    assert first["composite"] == RecordID("chunk", ["a", 1]) and first["deep"]["nested"][0] == RecordID("document", "d0")
    assert type(first["at"]) is type(public_rows[0]["at"]) and type(first["took"]) is type(public_rows[0]["took"])
    assert type(first["tags"]) is type(public_rows[0]["tags"]) and first["absent"] is None and first["tags"] == [1, 3]
