"""Which of the documents a run loads go on to be chunked: a document that cannot be stored fails
before any model work (:func:`check_document`), one whose key another source of the run already
gave with another text fails too, and one whose stored content hash is unchanged is skipped
(:class:`ChangeDetector`). A document this run already sent to be written with the same text (the
same file given twice) is an echo of it: it is not chunked again, and it counts as skipped once
that write went through, or as failed with it."""

from __future__ import annotations

import hashlib
from typing import Any, NamedTuple

from ..db import SurrealStore
from ..ids import document_id
from ..loaders import find_unstorable
from ..loaders.metadata import MAX_TITLE_CHARS
from ..models import LoadFailure, SourceDocument
from ..retrieval.scope import Scope


class Changes(NamedTuple):
    """What :meth:`ChangeDetector.changed` found in a batch of loaded documents."""

    changed: list[SourceDocument]  # to be chunked and written
    unchanged: int  # stored with the same text
    echoes: list[SourceDocument]  # sent to be written earlier in this run with the same text
    counts: dict[str, int]  # the chunk counts of the keys stored, or queued earlier in this run


class ChangeDetector:
    """What one run knows of the keys it has met: where each was first read, and what it queued to write."""

    def __init__(self, store: SurrealStore, scope: Scope) -> None:
        self.store = store
        self.scope = scope
        # The content hash and chunk count of each document this run has sent to be written, by key: a
        # key met again in a later batch is compared with it (the store does not hold it yet then).
        self.queued: dict[str, tuple[str, int]] = {}
        # Where each key was first read, and a digest of its text: another text under the key from a
        # second source (two files giving the same id) would silently replace the first in this run.
        self.origins: dict[str, tuple[str, bytes]] = {}

    def claim(self, doc: SourceDocument) -> LoadFailure | None:
        """A failure for a document whose key an earlier document of this run, from another source,
        already has with another text. The same source again (a file given twice) is that document
        again, and so is the same text (a key derived from the text, as when no id is given)."""
        digest = hashlib.blake2b(doc.text.encode("utf-8", "surrogatepass"), digest_size=16).digest()
        first, first_digest = self.origins.setdefault(doc.key, (doc.source, digest))
        if first == doc.source or first_digest == digest:
            return None
        return LoadFailure(
            source=doc.source,
            reason=f"duplicate id {doc.key!r}: {first} gave a document with another text this id earlier in this ingest, "
            "and it stays; ids must be unique across the inputs of one ingest (give this one another id)",
        )

    def changed(self, docs: list[SourceDocument]) -> Changes:
        """Which of ``docs`` differ from what is stored, or from what this run queued under their key."""
        if not docs:
            return Changes([], 0, [], {})
        scope = self.scope.compile()
        params = {"ids": [document_id(d.key) for d in docs], **scope.params}
        rows = self.store.query("document_hashes", params, filter=scope)[-1]
        stored = {row["id"].id: row["content_hash"] for row in rows}
        counts = {row["id"].id: row.get("chunk_count") or 0 for row in rows}
        changed: list[SourceDocument] = []
        echoes: list[SourceDocument] = []
        for doc in docs:
            queued = self.queued.get(doc.key)  # what this run wrote under the key replaces what is stored
            if queued is None:
                if stored.get(doc.key) != doc.content_hash:
                    changed.append(doc)
                continue
            counts[doc.key] = queued[1]
            (echoes if queued[0] == doc.content_hash else changed).append(doc)
        return Changes(changed, len(docs) - len(changed) - len(echoes), echoes, counts)

    def queue(self, doc: SourceDocument, chunks: int) -> None:
        """Note a document sent to be written, for a later batch that has its key again."""
        self.queued[doc.key] = (doc.content_hash, chunks)


def check_document(doc: SourceDocument | Any, max_chars: int) -> LoadFailure | None:
    """A failure for a document that cannot be written, found before any model work."""
    if not isinstance(doc, SourceDocument):
        return LoadFailure(source=repr(doc)[:80], reason=f"not a document: {type(doc).__name__}")
    if len(doc.text) > max_chars:
        return LoadFailure(
            source=doc.source,
            reason=f"document has {len(doc.text):,} characters, more than max_document_chars={max_chars:,} "
            "(IngestConfig); split it, or raise the limit (a document is held in memory until it is written)",
        )
    if doc.title is not None and len(doc.title) > MAX_TITLE_CHARS:
        return LoadFailure(
            source=doc.source,
            reason=f"title has {len(doc.title):,} characters, more than {MAX_TITLE_CHARS:,}: a title names the document and "
            "is written above each of its chunks; shorten it, or put the long text in the document's text",
        )
    problem = find_unstorable(
        {"key": doc.key, "source": doc.source, "title": doc.title, "text": doc.text, "metadata": doc.metadata, "access": doc.access}
    )
    return None if problem is None else LoadFailure(source=doc.source, reason=problem)


def last_per_key(docs: list[SourceDocument]) -> list[SourceDocument]:
    """A key given twice in one batch is one document: the later version wins."""
    return list({doc.key: doc for doc in docs}.values())
