"""Rows for tests that write straight through write_documents.surql: one document, one chunk."""

from __future__ import annotations

from typing import Any

import numpy as np
from surrealdb import RecordID


def one_chunk_document(i: int, vector: np.ndarray) -> dict[str, Any]:
    """The write_documents params for document ``d{i}`` with a single chunk embedded as ``vector``."""
    doc = RecordID("document", f"d{i}")
    chunk = RecordID("chunk", f"d{i}::h::00000")
    return {
        "doc_ids": [doc],
        "documents": [{"id": doc, "source": f"s{i}", "title": f"t{i}", "content_type": "text/plain",
                       "content_hash": "h", "metadata": {}, "access": [], "chunk_count": 1}],
        "concepts": [],
        "chunks": [{"id": chunk, "doc": doc, "index": 0, "content": f"text {i}", "char_start": 0, "char_end": 6,
                    "access": [], "embedding": vector}],
        "texts": [{"id": RecordID("chunk_text", chunk.id), "chunk": chunk, "doc": doc, "access": [], "text": f"word{i} text"}],
        "edges": [],
    }
