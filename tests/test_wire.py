"""The bulk request encoder for the embedded engine: byte-for-byte what the SDK sends, only faster."""

from __future__ import annotations

import datetime as dt
from io import BytesIO

import numpy as np
from surrealdb import RecordID
from surrealdb.data.cbor import _SurrealEncoder, decode, default_encoder

from surreal_kgrag import wire
from surreal_kgrag.store import SurrealStore

PARAMS = {
    "rows": [
        {"in": RecordID("chunk", "d::h::00000"), "out": RecordID("concept", "marie curie"), "doc": RecordID("document", 7)},
        {"id": RecordID("concept", ["a", 1]), "when": dt.datetime(2024, 5, 1, tzinfo=dt.timezone.utc), "n": np.int64(3)},
    ],
    "text": "x; REMOVE TABLE chunk",
}


def _sdk_bytes(value):
    with BytesIO() as fp:
        _SurrealEncoder(fp, default=default_encoder, timezone=dt.timezone.utc).encode(value)
        return fp.getvalue()


def test_record_ids_and_values_encode_exactly_as_the_sdk_encodes_them():
    request = decode(wire.encode_query("RETURN $rows", PARAMS))
    assert request["method"] == "query" and request["params"][0] == "RETURN $rows"
    sent = request["params"][1]
    assert _sdk_bytes(sent["rows"][0]) == _sdk_bytes(PARAMS["rows"][0])
    assert sent["rows"][0]["in"] == RecordID("chunk", "d::h::00000")
    assert sent["rows"][1]["id"] == RecordID("concept", ["a", 1]) and sent["rows"][1]["n"] == 3
    assert sent["text"] == PARAMS["text"]


def test_float_arrays_are_packed_and_read_back_by_the_engine():
    vector32 = np.array([0.5, -1.25, 3.0], dtype=np.float32)
    vector64 = np.array([0.1, 0.2], dtype=np.float64)
    sent = decode(wire.encode_query("RETURN $v", {"v": [vector32, vector64]}))["params"][1]["v"]
    assert sent == [[0.5, -1.25, 3.0], [0.1, 0.2]]
    with SurrealStore("mem://") as store:  # the store sends every query through wire.encode_query
        store.query("store_meta_write", {"meta": {"v": vector32, "rid": RecordID("chunk", "a::b::00001")}})
        meta = store.query("store_meta")[-1]
    assert meta["v"] == [0.5, -1.25, 3.0] and meta["rid"] == RecordID("chunk", "a::b::00001")
