"""Bridge edges: a chunk of document A names document B (its title or an alias of it).

Multi-hop questions travel along such edges ("the film was directed by Jane Campion" -> the Jane
Campion document). spaCy links many of them already (an entity whose name is B's title is B's
title concept: concept ids are names); phrase matching finds the rest, in both ingest orders:

- *forward*: the capitalised n-grams of the group's chunks that are stored (or in-group) titles or
  aliases become edges from those chunks (for a scoped writer, titles of documents inside its scope);
- *reverse*: a title or alias that was no document's name before this group is searched in the
  stored chunk texts (full-text, every word), and the chunks that contain it as a capitalised
  phrase get an edge to it.

The writer calls :func:`link` just before it writes a group, after every earlier group of the run is
committed; the reverse edges go into the same transaction (``write_documents.surql``), which skips
those whose chunk has gone or already has the edge. Two processes writing at the same moment can
miss a bridge between their groups (each looks before the other commits); ingesting either
document again restores it.
"""

from __future__ import annotations

from typing import Any

from .. import phrases
from ..db import SurrealStore
from ..db.sdk import RecordID
from ..ids import concept_id, document_id
from ..models import ConceptMention
from ..surql import NO_FILTER, CompiledFilter
from .records import PreparedDocument

#: Chunks a reverse search reads per name: a name in more chunks than this links little.
REVERSE_LIMIT = 50
BRIDGE_KIND = "phrase"


def link(store: SurrealStore, group: list[PreparedDocument], scope: CompiledFilter = NO_FILTER) -> list[dict[str, Any]]:
    """Add forward bridges to the group's chunks (their edges and concepts) and return the reverse
    bridge edges from stored chunks inside ``scope`` to the group's new titles and aliases."""
    own = {name for item in group for name in item.own_names}
    # Computed here, at the write, not kept from the models' stages: a chunk's spans take more memory
    # than the rest of its records (about 40 KB a chunk of prose), for every chunk in flight.
    spans = {id(item): [phrases.spans(chunk["content"], capitalised_only=True) for chunk in item.chunks] for item in group}
    candidates = {span.name for item in group for chunk in spans[id(item)] for span in chunk}
    if not candidates and not own:
        return []
    params = {"ids": [RecordID("concept_title", n) for n in sorted(candidates | own)], "scoped": bool(scope.condition), **scope.params}
    rows = store.query("title_concepts", params, scope=scope)[-1]
    stored_titles = {str(rid.id) for rid in rows}
    titles = stored_titles | own
    for item in group:
        _forward(item, spans[id(item)], titles)
    fresh = sorted(own - stored_titles)
    if not fresh:
        return []
    return _reverse(store, group, fresh, scope)


def _forward(item: PreparedDocument, chunk_spans: list[list[phrases.Span]], titles: set[str]) -> None:
    mine = item.own_names
    edges_by_chunk: dict[str, set[str]] = {}
    for edge in item.edges:
        edges_by_chunk.setdefault(str(edge["in"].id), set()).add(str(edge["out"].id))
    for chunk, spans in zip(item.chunks, chunk_spans, strict=True):
        linked = edges_by_chunk.setdefault(str(chunk["id"].id), set())
        for span in phrases.longest_matches(spans, lambda name: 0 if name in titles else None):
            if span.name in mine or span.name in linked:
                continue
            linked.add(span.name)
            item.concepts.setdefault(span.name, ConceptMention(name=span.name, display=span.text, kind=BRIDGE_KIND))
            item.edges.append({"in": chunk["id"], "out": concept_id(span.name), "doc": chunk["doc"], "count": 1, "own": False})


def _reverse(store: SurrealStore, group: list[PreparedDocument], fresh: list[str], scope: CompiledFilter) -> list[dict[str, Any]]:
    display = {name: item.concepts[name].display for item in group for name in item.own_names}
    shared = {"doc_ids": [document_id(item.doc.key) for item in group], "limit": REVERSE_LIMIT, **scope.params}
    edges = []
    for name in fresh:
        # One request a name: the search is then not inside a closure, where it cost a time that
        # grows with the store (title_mentions.surql).
        hits = store.query("title_mentions", {**shared, "words": display[name].split()}, scope=scope)[-1]
        title = concept_id(name)
        for hit in hits:
            text = _without_title(hit["text"], hit.get("title"))
            matches = phrases.longest_matches(phrases.spans(text, capitalised_only=True, only=name), {name: 0})
            if matches:
                chunk: RecordID = hit["chunk"]
                edges.append({"in": chunk, "out": title, "doc": hit["doc"], "count": len(matches), "own": False})
    return edges


def _without_title(text: str, title: str | None) -> str:
    """A chunk's full-text row is its text under its document's title; the title is not a mention."""
    if title:
        prefix = f"{title.strip()}\n"
        if text.startswith(prefix):
            return text[len(prefix) :]
    return text
