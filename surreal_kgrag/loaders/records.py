"""JSON and JSON Lines records, and the values SurrealDB cannot hold."""

from __future__ import annotations

import datetime
import json
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any, BinaryIO, NamedTuple
from uuid import UUID

from ..errors import LoaderError
from ..models import LoadFailure, SourceDocument
from .options import LoaderOptions, Result, access_list, grew_past

#: How deep a value may nest (lists and objects inside each other): the engine refuses a request
#: nested about 100 levels deep, and the pipeline walks values recursively.
MAX_NESTING = 64

#: What the SDK encodes and the engine stores, besides str, int, float, bool, None, list, tuple,
#: set and dict (``datetime.date`` is not among them: the engine rejects its CBOR tag).
_STORABLE_SCALARS = (str, int, float, bool, type(None), datetime.datetime, Decimal, UUID, bytes, bytearray)


def find_unstorable(value: Any, where: str = "record") -> str | None:
    """Why ``value`` cannot be stored as it is (a lone surrogate in a string, an integer outside
    SurrealDB's signed 64 bits, a key that is not a string, a type the SDK cannot encode, nesting
    deeper than ``MAX_NESTING``), naming where it sits; None when it can."""
    return _unstorable(value, where, 0)


def _unstorable(value: Any, where: str, depth: int) -> str | None:
    if isinstance(value, (dict, list, tuple, set, frozenset)) and depth >= MAX_NESTING:
        return f"{where} is nested more than {MAX_NESTING} levels deep, which SurrealDB cannot store; flatten it"
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            return (
                f"{where} holds a lone surrogate {value[exc.start]!r} at character {exc.start}, which is not "
                "valid Unicode and cannot be stored; fix the source text"
            )
    elif isinstance(value, int) and not isinstance(value, bool):
        if not -(1 << 63) <= value < 1 << 63:
            return f"{where} holds the integer {value}, outside the signed 64-bit range SurrealDB stores; write it as a string"
    elif isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                return f"{where} has the key {key!r} ({type(key).__name__}); SurrealDB object keys must be strings"
            problem = _unstorable(key, f"a key of {where}", depth + 1) or _unstorable(item, f"{where}[{key!r}]", depth + 1)
            if problem is not None:
                return problem
    elif isinstance(value, (list, tuple, set, frozenset)):
        for index, item in enumerate(value):
            problem = _unstorable(item, f"{where}[{index}]", depth + 1)
            if problem is not None:
                return problem
    elif isinstance(value, datetime.date) and not isinstance(value, datetime.datetime):
        return f"{where} is a date ({value!r}), which SurrealDB cannot store; write it as a string ({value.isoformat()!r}) or a datetime"
    elif not isinstance(value, _STORABLE_SCALARS):
        kind = f"{type(value).__module__}.{type(value).__qualname__}".removeprefix("builtins.")
        return (
            f"{where} holds a value of type {kind}, which SurrealDB cannot store; use a string, number, boolean, None, list, "
            "dict with string keys, datetime, Decimal, UUID or bytes (convert a path or other object with str())"
        )
    return None


#: Why JSON nested deeper than Python's parser goes (``[[[[...`` thousands deep) is not read.
_TOO_DEEP = "JSON nested too deeply to read (Python's parser stops near 1,000 levels of arrays or objects); flatten it"


def jsonl_documents(file: Path, path: str, options: LoaderOptions) -> Result:
    """One record per line, read a line at a time: memory is bounded by ``max_line_bytes``, not the
    file; a longer line is reported and skipped unheld, and a file that grows past ``max_file_bytes``
    while it is read stops there."""
    seen: dict[str, str] = {}
    empty = True
    limit = options.max_line_bytes
    with file.open("rb") as stream:
        try:
            for number, raw, size in _lines(stream, limit, options.max_file_bytes):
                if number == 1 and raw.startswith(b"\xef\xbb\xbf"):
                    raw = raw[3:]
                if size <= limit and not raw.strip():
                    continue
                empty = False
                if size > limit:
                    reason = f"line has {size:,} bytes, more than max_line_bytes={limit:,}; skipped (raise max_line_bytes to load it)"
                    yield LoadFailure(source=path, line=number, reason=reason)
                else:
                    yield _jsonl_line(raw, number, path, seen, options)
        except LoaderError as exc:  # raised by _lines alone: the file grew while it was read
            yield LoadFailure(source=path, reason=str(exc))
            return
    if empty:
        yield LoadFailure(source=path, reason="empty file; nothing to index")


def _jsonl_line(raw: bytes, number: int, path: str, seen: dict[str, str], options: LoaderOptions) -> SourceDocument | LoadFailure:
    if b"\x00" in raw:
        return LoadFailure(source=path, line=number, reason="binary data (NUL bytes), not a JSON record")
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return LoadFailure(source=path, line=number, reason=f"not valid UTF-8 (bad byte at column {exc.start + 1})")
    return _jsonl_record(line, number, path, seen, options)


def _lines(stream: BinaryIO, max_line: int, max_total: int) -> Iterator[tuple[int, bytes, int]]:
    """``(number, line, size)`` for each line of ``stream``, ``size`` its length in bytes without the
    line end; a line longer than ``max_line`` comes as ``b""``, its bytes read a block at a time and
    dropped. Lines end at b"\n" only: JSON strings may hold U+2028 and friends verbatim. Raises
    LoaderError once more than ``max_total`` bytes were read (the file grew while it was read)."""
    total = 0
    number = 0
    while raw := stream.readline(max_line + 1):  # room for the line and its "\n"
        number += 1
        total += len(raw)
        size = len(raw) - raw.endswith(b"\n")
        if size > max_line:  # longer than the cap: skip the rest of it
            while not raw.endswith(b"\n") and total <= max_total and (raw := stream.readline(_SKIP_BLOCK)):
                total += len(raw)
                size += len(raw) - raw.endswith(b"\n")
            raw = b""
        if total > max_total:
            raise LoaderError(grew_past(max_total))
        yield number, raw, size


#: Bytes read at a time while skipping the rest of a line longer than ``max_line_bytes``.
_SKIP_BLOCK = 1 << 20


def _jsonl_record(line: str, number: int, path: str, seen: dict[str, str], options: LoaderOptions) -> SourceDocument | LoadFailure:
    try:
        record = json.loads(line)
    except json.JSONDecodeError as exc:
        return LoadFailure(source=path, line=number, reason=f"malformed JSON: {exc.msg} (column {exc.colno})")
    except RecursionError:
        return LoadFailure(source=path, line=number, reason=_TOO_DEEP)
    except ValueError as exc:  # valid JSON Python will not read, such as an integer of over 4,300 digits
        return LoadFailure(source=path, line=number, reason=f"unreadable JSON: {exc}")
    spot = _Spot(path, f"{path}#L{number}", f"{path}:{number}", f"line {number}", number)
    return _record(record, spot, seen, options)


def json_documents(text: str, path: str, options: LoaderOptions) -> Result:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        yield LoadFailure(source=path, line=exc.lineno, reason=f"malformed JSON: {exc.msg} (column {exc.colno})")
        return
    except RecursionError:
        yield LoadFailure(source=path, reason=_TOO_DEEP)
        return
    except ValueError as exc:
        yield LoadFailure(source=path, reason=f"unreadable JSON: {exc}")
        return
    if isinstance(data, dict):
        yield _record(data, _Spot(path, path, path, "", None), {}, options)
    elif isinstance(data, list):
        seen: dict[str, str] = {}
        for i, record in enumerate(data):
            yield _record(record, _Spot(path, f"{path}#{i}", f"{path}#{i}", f"record {i}", None), seen, options)
    else:
        yield LoadFailure(source=path, reason=f"JSON must be an object or an array of objects, not {_json_type(data)}")


class _Spot(NamedTuple):
    """Where a record sits: its file, fallback key, source label, and how failures name it."""

    path: str
    fallback_key: str
    source: str
    label: str
    line: int | None


def _record(record: Any, spot: _Spot, seen: dict[str, str], options: LoaderOptions) -> SourceDocument | LoadFailure:
    """One JSON object -> a document; ``seen`` maps the ids already used in this file to their spot."""

    def fail(reason: str) -> LoadFailure:
        # JSON Lines failures carry the line number; JSON array ones name the record index.
        prefix = f"{spot.label}: " if spot.line is None and spot.label else ""
        return LoadFailure(source=spot.path, line=spot.line, reason=prefix + reason)

    if not isinstance(record, dict):
        return fail(f"expected a JSON object, got {_json_type(record)}")
    text_field, title_field, id_field, access_field = (
        options.text_field,
        options.title_field,
        options.id_field,
        options.access_field,
    )
    text = record.get(text_field)
    if text is None:
        return fail(f"no {text_field!r} field; every record needs its text")
    if not isinstance(text, str):
        return fail(f"{text_field!r} must be a string, got {_json_type(text)}")
    if not text.strip():
        return fail(f"{text_field!r} is empty; there is nothing to index")
    key, title = record.get(id_field), record.get(title_field)
    for name, value in ((id_field, key), (title_field, title)):
        if isinstance(value, (dict, list)):
            return fail(f"{name!r} must be a string or number, got {_json_type(value)}")
    key = spot.fallback_key if key is None or key == "" else str(key)
    if key in seen:
        return fail(f"duplicate {id_field!r} {key!r} (already used at {seen[key]}); ids must be unique")
    seen[key] = spot.label or "the top level"
    try:
        access = access_list(record.get(access_field), repr(access_field))
    except LoaderError as exc:
        return fail(str(exc))
    known = {text_field, title_field, id_field, access_field}
    problem = find_unstorable(record)
    if problem is not None:
        return fail(problem)
    return SourceDocument(
        key=key,
        text=text,
        title=None if title is None or title == "" else str(title),
        source=spot.source,
        metadata={k: v for k, v in record.items() if k not in known},
        access=access,
    )


def _json_type(value: Any) -> str:
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null"}
    return names.get(type(value), "a number")
