"""The one use of the ``surrealdb`` SDK's private internals, isolated here and kept for measured
reasons: requests to the embedded engine, encoded and decoded without the SDK's pure-Python CBOR.

Encoding. The SDK encodes parameters with a pure-Python CBOR encoder, and a record id goes through a
chain of ``isinstance`` checks. Measured by ``benchmarks/sdk_paths.py`` on the same workload (2
shared cores): encoding 500 chunk rows (a 384-dim vector and two record ids each) took 69 ms of CPU
holding the GIL on the public path and 4.6 ms here; 1,000 edges 28 ms and 6.8 ms. Here a request is
encoded by the SDK's own encoder class (so every other value means exactly what it means to the
SDK), except that a float ``numpy.ndarray`` is written as one CBOR array of 32- or 64-bit floats
built by numpy in one step and a ``RecordID`` is looked up by exact type.

Decoding. The answer is decoded by ``cbor2``'s native decoder, each SurrealDB tag (record ids, NONE,
datetimes, ...) handed to the SDK's own tag decoder, so every value comes back as the SDK's type.
The graph mode's subgraph answer (about 34 KB) took 3.4 ms to decode with the SDK's pure-Python
decoder and 0.2 ms here. One difference: a CBOR null (SurrealDB's NULL) is ``None`` here where the
SDK returns its ``Null``; the package reads both as ``None`` (``surreal_kgrag.wire.without_nulls``).

The bytes go straight to the embedded engine's ``execute``, as the SDK's own blocking embedded
connection sends them. Private names used (all of SDK 3.0.0b10): ``surrealdb.data.cbor``'s
``_SurrealEncoder`` and its ``_encoders`` table and ``tag_decoder``,
``surrealdb.connections.utils_mixin.mapped_engine_errors``, and the embedded connection's ``_db``
engine handle. ``available()`` says whether they are all there; when one is not,
``surreal_kgrag.db.sdk`` uses the public path (slower, same results) and
``tests/test_sdk_boundary.py`` fails, naming what moved.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import timezone
from io import BytesIO
from typing import Any

import cbor2
import numpy as np

try:  # private: see the module docstring
    from surrealdb import RecordID
    from surrealdb.connections.utils_mixin import mapped_engine_errors
    from surrealdb.data.cbor import _SurrealEncoder, default_encoder, tag_decoder
    from surrealdb.data.types.constants import TAG_NONE, TAG_RECORD_ID

    _MISSING = ""
except ImportError as error:  # pragma: no cover - only on an SDK that moved them
    _MISSING = str(error)

_ARRAY = 4  # CBOR major type of an array
_PLAIN_KEYS = (str, int)  # record keys that need no thawing
_TAG = 6  # CBOR major type of a tagged value
_PACKED = {
    4: (np.dtype([("head", "u1"), ("value", ">f4")]), 0xFA),  # CBOR single-precision float
    8: (np.dtype([("head", "u1"), ("value", ">f8")]), 0xFB),  # CBOR double-precision float
}


def missing() -> str:
    """What the fast path needs and this SDK lacks ("" when it has everything)."""
    if _MISSING:
        return _MISSING
    with BytesIO() as fp:
        if not isinstance(getattr(_SurrealEncoder(fp), "_encoders", None), dict):
            return "surrealdb.data.cbor._SurrealEncoder has no _encoders table"
    return ""


def available() -> bool:
    return not missing()


def engine(db: Any) -> Any:
    """The embedded engine behind an SDK connection, or None (a remote one, or an SDK without it)."""
    handle = getattr(db, "_db", None)
    return handle if callable(getattr(handle, "execute", None)) else None


def execute(engine: Any, text: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """Run a query on the embedded ``engine`` (the blocking connection's); the response as the
    SDK's ``query_raw`` returns it."""
    with mapped_engine_errors("query"):
        return decode(engine.execute(encode_query(text, params)))


def decode(data: bytes) -> Any:
    """A CBOR answer from the engine, SurrealDB's tags decoded by the SDK."""
    return cbor2.loads(data, tag_hook=_surreal_tag)


def _surreal_tag(*args: Any) -> Any:
    # cbor2 5.x calls the hook with (decoder, tag), 6.x with (tag, immutable) and a tag's content
    # decoded immutable (tuples, frozendicts): the SDK's decoder gets lists and dicts, as from its own.
    tag = args[0] if isinstance(args[0], cbor2.CBORTag) else args[1]
    # The two tags nearly every answer holds, decoded here as the SDK's decoder does: the general
    # path (a CBORTag rebuilt around the thawed content, then the decoder's chain of comparisons)
    # took half the decoding of the graph mode's subgraph answer (about 300 tags).
    if tag.tag == TAG_NONE:
        return None
    value = tag.value
    if tag.tag == TAG_RECORD_ID and type(value[1]) in _PLAIN_KEYS:
        return RecordID(value[0], value[1])
    return tag_decoder(None, cbor2.CBORTag(tag.tag, _thawed(value)))  # type: ignore[arg-type]


def _thawed(value: Any) -> Any:
    if isinstance(value, (tuple, list)):
        return [_thawed(item) for item in value]
    if isinstance(value, Mapping) and not isinstance(value, dict):
        return {key: _thawed(item) for key, item in value.items()}
    return value


def encode_query(text: str, params: Mapping[str, Any]) -> bytes:
    """The CBOR request the SDK would send for ``query_raw(text, params)``."""
    message = {"id": str(uuid.uuid4()), "method": "query", "params": [text, dict(params)]}
    with BytesIO() as fp:
        encoder = _SurrealEncoder(fp, default=_encode_value, timezone=timezone.utc)
        # Looked up by exact type before the SDK's chain of isinstance checks: a bulk write sends
        # three record ids per edge, and this makes encoding them about 3.5 times faster.
        encoder._encoders[RecordID] = _encode_record_id
        encoder._encoders[np.ndarray] = _encode_ndarray
        encoder.encode(message)
        return fp.getvalue()


def _encode_record_id(encoder: Any, value: RecordID) -> None:
    encoder.encode_length(_TAG, TAG_RECORD_ID)
    encoder.encode_length(_ARRAY, 2)
    encoder.encode_string(value.table_name)
    encoder.encode(value.id)


def _encode_value(encoder: Any, value: Any) -> None:
    if isinstance(value, np.ndarray):
        _encode_ndarray(encoder, value)
    elif isinstance(value, np.generic):
        encoder.encode(value.item())
    else:
        default_encoder(encoder, value)


def _encode_ndarray(encoder: Any, array: np.ndarray) -> None:
    if array.ndim != 1 or array.dtype.kind != "f":
        encoder.encode(array.tolist())
        return
    dtype, head = _PACKED[8 if array.dtype.itemsize > 4 else 4]
    packed = np.empty(array.shape[0], dtype=dtype)
    packed["head"] = head
    packed["value"] = array
    encoder.encode_length(_ARRAY, array.shape[0])
    encoder.write(packed.tobytes())
