"""Argument checks shared by the embedders and the concept extractors (the foundation: imports
nothing of the package but its errors)."""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from typing import TypeVar

from .errors import ConfigurationError

__all__ = ["IDS_PER_QUERY", "batches", "check_texts", "is_installed"]

T = TypeVar("T")

#: Ids one query reads, checks or deletes at most: a caller's longer list goes in several queries,
#: so no list a caller sends makes one query (or its answer) grow without bound.
IDS_PER_QUERY = 1000


def check_texts(texts: Sequence[str], *, call: str, single: str) -> list[str]:
    """``texts`` as a list of strings. A single string is refused (``call`` takes a sequence;
    ``single`` says what to do instead), and so is any item that is not a string."""
    if isinstance(texts, str):
        raise ConfigurationError(f"{call} takes a sequence of texts; {single}")
    items = list(texts)
    for i, text in enumerate(items):
        if not isinstance(text, str):
            raise ConfigurationError(f"text {i} is a {type(text).__name__}, expected str")
    return items


def is_installed(package: str) -> bool:
    """Whether ``package`` can be imported, without importing it."""
    try:
        return importlib.util.find_spec(package) is not None
    except (ImportError, ValueError):  # a dotted name whose parent is missing, or an invalid name
        return False


def batches(items: Sequence[T], size: int) -> list[list[T]]:
    """``items`` in consecutive lists of at most ``size``."""
    return [list(items[i : i + size]) for i in range(0, len(items), size)]
