"""benchmarks/engine_replay.py's recording: every request sent while it is installed is written as a
length-prefixed CBOR item that decodes back to the same query file, text and parameters (record ids
and vectors included), in order, and the SDK's query function is restored after. Where Node and the
replay's packages are installed, the recording replays on Node's embedded engine, which reports a
statement that fails."""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from surrealdb.data import cbor

from surreal_kgrag import SurrealStore
from surreal_kgrag.db import sdk
from surreal_kgrag.db.sdk import RecordID
from surreal_kgrag.errors import QueryExecutionError

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture(scope="module")
def replay_module():
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import engine_replay
    finally:
        sys.path.remove(str(BENCHMARKS))
    return engine_replay


def _items(path: Path) -> list[list]:
    data, out, offset = path.read_bytes(), [], 0
    while offset < len(data):
        (length,) = struct.unpack(">I", data[offset : offset + 4])
        out.append(cbor.decode(data[offset + 4 : offset + 4 + length]))
        offset += 4 + length
    return out


def _record(replay_module, path: Path) -> list:
    vectors = [[0.25 * i, -1.5, 3.0] for i in range(3)]
    query = sdk.query
    with replay_module.Recording(path) as rec, SurrealStore("mem://") as store:
        rec.phase = "write"
        store.query_text(
            "rows",
            "INSERT INTO item $rows RETURN NONE",
            {"rows": [{"id": RecordID("item", f"doc::{i}"), "v": v, "doc": RecordID("doc", "a b")} for i, v in enumerate(vectors)]},
        )
        rec.phase = "read"
        store.query_text("count", "RETURN count(SELECT id FROM item)")
        with pytest.raises(QueryExecutionError, match="no such thing"):
            store.query_text("broken", "THROW 'no such thing'")  # recorded all the same
    assert sdk.query is query
    return vectors


def test_requests_are_recorded_in_order_and_decode_to_what_was_sent(replay_module, tmp_path):
    vectors = _record(replay_module, tmp_path / "requests.cbor")
    items = _items(tmp_path / "requests.cbor")
    assert [(phase, name) for phase, name, _, _ in items] == [("write", "rows"), ("read", "count"), ("read", "broken")]
    _, _, text, params = items[0]
    assert text == "INSERT INTO item $rows RETURN NONE"
    assert [row["v"] for row in params["rows"]] == vectors
    assert [row["id"] for row in params["rows"]] == [RecordID("item", f"doc::{i}") for i in range(3)]
    assert params["rows"][0]["doc"] == RecordID("doc", "a b")


def test_a_recording_replays_on_node(replay_module, tmp_path):
    if shutil.which("node") is None or not (replay_module.REPLAY / "node_modules").is_dir():
        pytest.skip("Node or the replay's packages are not installed (cd benchmarks/engine_replay && npm ci)")
    _record(replay_module, tmp_path / "requests.cbor")
    out = tmp_path / "replayed.json"
    run = subprocess.run(
        ["node", str(replay_module.REPLAY / "replay.mjs"), str(tmp_path / "requests.cbor"), "mem://", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    result = json.loads(out.read_text())
    assert [job[:2] for job in result["jobs"]] == [["write", "rows"], ["read", "count"], ["read", "broken"]]
    assert list(result["first_error"]) == ["broken"] and "no such thing" in result["first_error"]["broken"]
