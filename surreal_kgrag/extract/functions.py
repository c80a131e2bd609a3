"""Your own function as a concept extractor."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ..checks import check_texts
from ..errors import ConfigurationError
from ..models import ConceptMention
from .base import Collector, ConceptItem
from .normalise import normalise_concept


class CallableConceptExtractor:
    """Wraps ``fn(text) -> Iterable[str | (name, kind) | ConceptMention]``.

    Strings get kind ``default_kind`` ("custom"); strings and tuple names are normalised with
    :func:`normalise_concept` (numbers kept) and dropped if nothing is left; ``ConceptMention``
    objects are used as given. Repeated names in one text are merged and counted.
    """

    def __init__(self, fn: Callable[[str], Iterable[ConceptItem]], *, default_kind: str = "custom") -> None:
        if not callable(fn):
            raise ConfigurationError(f"CallableConceptExtractor needs a callable, got {type(fn).__name__}")
        if not isinstance(default_kind, str) or not default_kind:
            raise ConfigurationError("default_kind must be a non-empty string")
        self.fn = fn
        self.default_kind = default_kind

    def extract(self, texts: Sequence[str]) -> list[list[ConceptMention]]:
        """Concepts of each text, one list per text, in input order."""
        return [self._extract_one(text) for text in check_texts(texts, call="extract()", single="wrap a single text in a list")]

    def _extract_one(self, text: str) -> list[ConceptMention]:
        result = self.fn(text)
        if isinstance(result, (str, bytes)) or not isinstance(result, Iterable):
            raise ConfigurationError(
                f"concept function {_fn_name(self.fn)} returned {type(result).__name__}; "
                "it must return an iterable of str, (name, kind) tuples or ConceptMention"
            )
        collected = Collector()
        for item in result:
            if isinstance(item, ConceptMention):
                collected.add(item.name, item.display, item.kind, item.count)
                continue
            if isinstance(item, str):
                surface, kind = item, self.default_kind
            elif (
                isinstance(item, tuple)
                and len(item) == 2
                and isinstance(item[0], str)
                and isinstance(item[1], str)
                and item[1]
            ):
                surface, kind = item
            else:
                raise ConfigurationError(
                    f"concept function {_fn_name(self.fn)} yielded {item!r}; expected str, "
                    "(name, kind) with non-empty strings, or ConceptMention"
                )
            name = normalise_concept(surface, keep_numeric=True)
            if name is not None:
                collected.add(name, " ".join(surface.split()), kind)
        return collected.mentions()

    def __repr__(self) -> str:
        return f"CallableConceptExtractor({_fn_name(self.fn)})"


def _fn_name(fn: Callable[..., Any]) -> str:
    return getattr(fn, "__qualname__", None) or repr(fn)
