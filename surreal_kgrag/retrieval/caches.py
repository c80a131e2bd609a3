"""What a retriever keeps between searches: a small thread-safe cache, the keys of what it caches
per filter, and the counts it reads now and then (chunks inside a scope or filter, the schema
version, the documents in the store)."""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, NamedTuple

#: How long counts (:class:`ChunkTotals`, the documents in the store) are used before they are counted again.
RECOUNT_SECONDS = 60.0


class LRU:
    """A small least-recently-used cache, safe to share between threads (LangChain's ``batch``
    runs a retriever's invocations in a thread pool)."""

    def __init__(self, size: int = 1024) -> None:
        self.size = size
        self._items: OrderedDict[str, Any] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._items)

    def lookup(self, key: str) -> Any:
        with self._lock:
            value = self._items.get(key)
            if value is not None:
                self._items.move_to_end(key)
            return value

    def forget(self, key: str) -> None:
        with self._lock:
            self._items.pop(key, None)

    def remember(self, key: str, value: Any) -> Any:
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)
        return value


def cache_key(*parts: Any) -> str:
    """A key for what a retriever caches per filter: values that print alike but differ in type (a
    datetime and its string, a record id and its text) match different rows, so they stay apart."""
    return json.dumps(parts, sort_keys=True, default=lambda value: [type(value).__name__, str(value)])


class ChunkTotals(NamedTuple):
    """Chunks inside a condition (a scope, or a scope and a call's filter) and in the whole store,
    and the documents holding the chunks inside (``count_chunks.surql``). At most
    ``passing_documents`` documents are read: past them ``whole`` is False, and ``scope`` and
    ``documents`` are lower bounds."""

    scope: int
    store: int
    documents: int
    whole: bool = True

    @property
    def weighed(self) -> int:
        """The N a concept's chunk count is weighed against: the chunks inside, or the store's
        (an upper bound) when they were not all read."""
        return self.scope if self.whole else self.store


@dataclass
class Loaded:
    """What a retriever reads once or now and then, in one object its narrowed copies share."""

    schema: int = 0  # the store's schema version as last read (it only goes up; 0: no schema yet)
    documents: tuple[int, float] | None = None  # documents in the store, and when they were counted
