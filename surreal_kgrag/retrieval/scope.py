"""Who may see what: the one scoping rule every read path applies inside its query.

A :class:`Scope` is a caller's access labels and a default filter. Every query that reads documents,
chunks, chunk texts, concepts or their edges evaluates the scope's condition inside the query, so
nothing outside it is ever returned: search modes, hydration, graph expansion, the agent tools,
not-found suggestions and the store-reading rerankers. (One exception: the adjacency lists the graph
walk's hops read carry every tenant's chunk keys and relations; the walk keeps only those of
documents inside the scope, before it ranks anything: ``GraphRetriever._within_scope``.) Search
counts inside the scope where it counts itself (the chunks of the scope, the N of the concept
weights; the concepts' chunks in hybrid search; the edges the walk reads), but these figures are
store-wide, counted over every tenant:

- how many chunks a word occurs in (``term.df``), and the store's chunk total it is compared with:
  which question words BM25 searches (``text_max_df``, ``text_max_matches``);
- BM25 scores (SurrealDB's full-text index keeps corpus-wide statistics);
- how many chunks mention a concept (``concept_chunks``): a concept's rarity in the graph walk (for
  a hub, whose edges are not all read) and in the weight of a name the question contains, whether the
  walk treats it as a hub, and whether hybrid search skips it (``concept_max_chunks``);
- how many documents carry a name (``document_name_count``), and the documents in the store: a
  document name's rarity and whether it is a hub (``document_per_name``).

They set only which of the caller's own rows rank where; no text, name or count from outside the
scope is returned. A reader signed in with database-enforced tenancy cannot read the word and
concept counts and counts what it may see instead.

Rules:

- ``access=None``: no label restriction (every document, labelled or not).
- ``access=[...]``: only documents that carry at least one of these labels. Documents without labels
  are visible to unrestricted callers only, and ``access=[]`` sees nothing: a scope fails closed.
  To publish documents to everyone, label them (e.g. ``"public"``) and give every caller that label.
- ``filters``: a filter (:mod:`.filters`) every visible document must match.
- :meth:`Scope.narrow` can only make a scope smaller: label lists are intersected and filters ANDed.
  A call-time filter is ANDed with the scope, never substituted for it.
- A store signed in as a record user (``SurrealStore(access=..., access_variables=...)``) is also
  restricted to the labels of that user (``$auth.access``), besides whatever the database's own
  permissions enforce (see ``surreal_kgrag.tenancy``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from functools import cached_property
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ..errors import describe_validation
from ..surql import NO_FILTER, CompiledFilter
from .filters import FilterError, check_text, combine, compile_filter

#: The condition's parameter holding the scope's labels.
ACCESS_PARAM = "scope_access"


class Scope(BaseModel):
    """Access labels and default filters that bound everything a caller can read."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    access: tuple[str, ...] | None = Field(
        None, description="only documents carrying one of these labels; None: no label restriction; (): nothing"
    )
    filters: tuple[dict[str, Any], ...] = Field((), description="filters every visible document matches (ANDed)")
    record_user: bool = Field(False, description="also only the labels of the signed-in record user ($auth.access)")

    def __init__(self, **values: Any) -> None:
        try:
            super().__init__(**values)
        except ValidationError as error:  # a bad label or filter is the caller's error, named as such
            raise FilterError(f"invalid scope: {describe_validation(error)}") from None

    @field_validator("access", mode="before")
    @classmethod
    def _labels(cls, value: Any) -> Any:
        if value is None:
            return None
        if isinstance(value, (str, bytes)) or not isinstance(value, Sequence | set | frozenset):
            raise FilterError(f"access labels are a list of strings, got {value!r}")
        labels = list(value)
        if not all(isinstance(label, str) for label in labels):
            raise FilterError(f"access labels are a list of strings, got {value!r}")
        for label in labels:
            check_text(label, "access label")
        return tuple(dict.fromkeys(labels))

    @field_validator("filters", mode="before")
    @classmethod
    def _filters(cls, value: Any) -> Any:
        if value is None:
            return ()
        specs = [value] if isinstance(value, Mapping) else list(value)
        kept = []
        for spec in specs:
            if not isinstance(spec, Mapping):
                raise FilterError(f"a scope filter is a dict of field conditions, got {spec!r}")
            if spec:
                compile_filter(spec)  # a bad filter fails here, not on the first search
                kept.append(dict(spec))
        return tuple(kept)

    @classmethod
    def of(cls, scope: Scope | None = None, *, access: Sequence[str] | None = None, filters: Any = None) -> Scope:
        """``scope`` narrowed by ``access`` and ``filters`` (an unrestricted scope when all are None)."""
        return (scope or cls()).narrow(access=access, filters=filters)

    def narrow(self, other: Scope | None = None, *, access: Sequence[str] | None = None, filters: Any = None) -> Scope:
        """A scope no wider than this one: label lists intersected, filters ANDed."""
        result = self
        for extra in (other, Scope(access=access, filters=filters)):
            if extra is None or extra.unrestricted:
                continue  # nothing to narrow by: no new scope, whose filters would all be checked again
            labels = result.access
            if extra.access is not None:
                labels = extra.access if labels is None else tuple(label for label in labels if label in extra.access)
            merged = result.filters + tuple(f for f in extra.filters if f not in result.filters)
            result = Scope(access=labels, filters=merged, record_user=result.record_user or extra.record_user)
        return result

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Scope:
        copied = super().model_copy(update=update, deep=deep)
        copied.__dict__.pop("compiled", None)  # compiled from the fields it was copied from
        return copied

    @property
    def unrestricted(self) -> bool:
        return self.access is None and not self.filters and not self.record_user

    def key(self) -> str:
        """A stable text identity, for caches kept per scope."""
        return json.dumps(self.model_dump(mode="json"), sort_keys=True, default=str)

    def compile(self) -> CompiledFilter:
        """The scope as one condition on a row with ``doc`` and ``access`` fields."""
        return self.compiled

    @cached_property
    def compiled(self) -> CompiledFilter:
        """:meth:`compile`'s answer, worked out once: a search reads it several times, and a long
        filter takes milliseconds to compile."""
        parts = [compile_filter(spec, prefix=f"scope{i}_") for i, spec in enumerate(self.filters)]
        if self.access is not None:
            labels = f"access CONTAINSANY ${ACCESS_PARAM}"  # the same field on chunks and documents
            parts.append(CompiledFilter(labels, {ACCESS_PARAM: list(self.access)}, labels))
        if self.record_user:
            parts.append(CompiledFilter("access CONTAINSANY $auth.access", document="access CONTAINSANY $auth.access"))
        return combine(*parts) if parts else NO_FILTER

    def restrict(self, filters: Mapping[str, Any] | None) -> CompiledFilter:
        """The scope ANDed with a call-time filter."""
        return combine(self.compile(), compile_filter(filters, prefix="filter_"))


UNRESTRICTED = Scope()
