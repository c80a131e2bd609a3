"""A retrieval result as a self-contained HTML page: the question, the concepts it matched, the
chunks and documents it reached, and the paths between them, with their scores.

Built from the result's provenance (:class:`~surreal_kgrag.retrieval.ProvenancePath`) and chunk
concepts only, so it needs no query of its own. The page has no external resources (no CDN, inline
CSS and a small script that lays the graph out as SVG in four columns: question, concepts, chunks,
documents), opens offline, and writes every text from the store with ``textContent``, never as HTML.

>>> write_graph(retriever.search("Who discovered polonium?"), "graph.html")
"""

from __future__ import annotations

import html
import json
import os
import re
from typing import Literal

from pydantic import BaseModel, Field

from .graph_page import PAGE
from .retrieval.results import RetrievalResult, where

__all__ = ["GraphData", "GraphEdge", "GraphNode", "graph_data", "render_graph", "write_graph"]

Kind = Literal["query", "concept", "chunk", "document"]


class GraphNode(BaseModel):
    id: str
    kind: Kind
    label: str
    score: float | None = None
    detail: str = Field("", description="shown on hover: a chunk's text, a document's source")


class GraphEdge(BaseModel):
    source: str
    target: str
    channel: str = Field(description="vector, text, concept, graph, or 'part' (chunk of a document)")
    score: float | None = None


class GraphData(BaseModel):
    query: str
    mode: str
    nodes: list[GraphNode]
    edges: list[GraphEdge]


def graph_data(result: RetrievalResult) -> GraphData:
    """The nodes and edges of ``result``: query -> concept -> chunk -> document paths, query ->
    chunk for vector and text hits, seed chunk -> concept for graph hops."""
    nodes: dict[str, GraphNode] = {"q": GraphNode(id="q", kind="query", label=result.query)}
    edges: dict[tuple[str, str, str], GraphEdge] = {}

    def node(key: str, kind: Kind, label: str, score: float | None = None, detail: str = "") -> str:
        current = nodes.get(key)
        if current is None or (score is not None and (current.score is None or score > current.score)):
            nodes[key] = GraphNode(id=key, kind=kind, label=label, score=score, detail=detail or (current.detail if current else ""))
        return key

    def edge(source: str, target: str, channel: str, score: float | None) -> None:
        key = (source, target, channel)
        if key not in edges or (score is not None and (edges[key].score or 0.0) < score):
            edges[key] = GraphEdge(source=source, target=target, channel=channel, score=score)

    for doc in result.documents:
        doc_key = node(f"d:{doc.id}", "document", doc.title or doc.id, doc.score, doc.source)
        for chunk in doc.chunks:
            located = where(chunk)
            label = f"{doc.title or doc.id} #{chunk.index}" + (f" ({located})" if located else "")
            chunk_key = node(f"c:{chunk.id}", "chunk", label, chunk.score, chunk.content)
            edge(chunk_key, doc_key, "part", None)
            for concept in chunk.concepts:
                concept_key = node(f"k:{concept.id}", "concept", concept.name, concept.score)
                edge("q", concept_key, "concept", concept.score)
                edge(concept_key, chunk_key, "concept", None)
        for path in doc.provenance:
            chunk_key = node(f"c:{path.chunk_id}", "chunk", f"{doc.title or doc.id} (chunk)", None)
            edge(chunk_key, doc_key, "part", None)
            start = "q"
            if path.via_chunk_id:
                start = node(f"c:{path.via_chunk_id}", "chunk", "seed chunk", None)
            if path.concept is not None:
                concept_key = node(f"k:{path.concept.id}", "concept", path.concept.name, path.concept.score)
                if start == "q":
                    edge("q", concept_key, path.channel, path.concept.score)
                else:
                    edge(start, concept_key, path.channel, path.score)
                edge(concept_key, chunk_key, path.channel, path.score)
            else:
                edge(start, chunk_key, path.channel, path.score)
    return GraphData(query=result.query, mode=result.mode, nodes=list(nodes.values()), edges=list(edges.values()))


def render_graph(result: RetrievalResult | GraphData, *, title: str | None = None) -> str:
    """The page as a string (UTF-8 HTML, nothing loaded from elsewhere)."""
    data = result if isinstance(result, GraphData) else graph_data(result)
    # Inside <script type="application/json">, "</script" ends the element and "<!--" starts the
    # script-data escape state (a later "<script" then keeps the element open to the end of the page):
    # no "<", ">" or "&" reaches the page as itself; JSON reads the escapes back as the characters.
    payload = json.dumps(data.model_dump(mode="json"), ensure_ascii=False)
    payload = payload.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    heading = html.escape(title or f"surreal-kgrag: {data.query}")
    values = {"title": heading, "data": payload}
    return re.sub(r"\{\{(title|data)\}\}", lambda m: values[m.group(1)], PAGE)  # one pass: no value is read as a marker


def write_graph(result: RetrievalResult | GraphData, path: str | os.PathLike[str], *, title: str | None = None) -> str:
    """Write the page to ``path``; returns the path written."""
    text = render_graph(result, title=title)
    with open(path, "w", encoding="utf-8") as out:
        out.write(text)
    return os.fspath(path)
