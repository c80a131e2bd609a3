"""Graph retrieval: Personalized PageRank over the bounded subgraph around the question.

Per question, two database round trips before hydration (three with a scope):

1. the question's candidate names (every n-gram, :mod:`surreal_kgrag.phrases`) looked up among the
   stored concepts (``graph_names.surql``) and among the documents' names (the document channel,
   :mod:`.documents`), at the same time as the BM25 channel;
2. the subgraph around the seeds: KNN chunks, the chunks of the concepts the question names, the
   BM25 chunks, their concepts and those concepts' other chunks (``graph_subgraph.surql``, from the
   adjacency lists), at the same time as the passages of the documents the question names;
3. for a caller with a scope or filter, which of the documents the hops reached are inside it
   (``scope_documents.surql``): the seeds are inside it already, and of the rest the walk keeps only
   the chunks and relations of those documents. A record user, whom the lists' permissions hide,
   and a store written before the lists read the edges instead, each checked against the scope
   (``graph_subgraph_scoped.surql``).

The walk (:mod:`.walk`) runs client-side on that subgraph and its document ranking is fused with
BM25 (and the KNN order, weight 0, which only fills up to k).
"""

from __future__ import annotations

from collections import defaultdict
from functools import partial
from typing import Any, ClassVar, NamedTuple

import numpy as np

from .. import phrases
from ..db.sdk import RecordID
from ..extract import NOUN_PHRASE
from ..ids import chunk_document_key, concept_id, document_id
from ..schema import ADJACENCY_LISTS_SINCE
from ..surql import CompiledFilter
from . import documents
from .config import GraphConfig, RetrieverConfig
from .fused import FusedRetriever, pool_found
from .fusion import Hit
from .plan import Compute, Plan, Query
from .pool import Pool
from .request import Request
from .results import ANALYZE, RANK, ConceptMatch, RetrievedDocument
from .walk import Subgraph, WalkSettings, assemble, dense_reset, idf, personalized_pagerank

#: How many of a name's edges a caller with a scope reads to find one inside it
#: (``graph_names_scoped.surql``): every edge of a name the walk may start from (``max_df`` is at
#: most ``CHUNK_LIST_MAX``), the first ones of a hub.
NAME_EDGES = 64
#: How many of the LLM layer's relations (``RELATES_TO``) of each concept of the subgraph are read,
#: each way (``graph_subgraph*.surql``, a literal LIMIT): a hub's relations grow with the store.
RELATION_EDGES = 64


class QuestionConcept(NamedTuple):
    """A stored name the question contains: its weight as a seed of the walk (match quality x
    rarity), the chunks that mention it, and the match quality alone (a name 1, a noun phrase
    ``question_np``, either written all in lower case times ``question_lowercase``)."""

    weight: float
    n: int
    quality: float


class GraphRetriever(FusedRetriever):
    """Multi-hop retrieval: the question's named concepts and nearest chunks seed a Personalized
    PageRank over the subgraph around them, whose bridges (a chunk naming another document) carry
    the walk to documents that dense search alone does not reach."""

    mode = "graph"
    config_class: ClassVar[type[RetrieverConfig]] = GraphConfig
    config: GraphConfig
    default_candidates = 20

    def _plan(self, request: Request) -> Plan[list[RetrievedDocument]]:
        config = self.config
        question = yield Compute(partial(self._question, request.query), ANALYZE)
        names_beside = (names_query(request, question.spans, config.max_df),)
        totals, pool, ((name_rows,), text, named_docs) = yield from self._first_round(request, question, lambda _: names_beside)
        chunk_total = totals.weighed
        names = yield Compute(partial(self._names, question.spans, name_rows, chunk_total), ANALYZE)
        yield from self.embedded(request)  # the queries before need no vector: they ran while it was computed
        in_scope = {str(row["id"].id): row["chunks"] for row in name_rows if row.get("chunks") is not None}  # graph_names_scoped's
        while pool.size is not None:
            query = yield from self._subgraph(request, names, in_scope, text, pool)
            out = listed((yield query)[-1], config)
            if not pool.read(out, out["fetched"]):
                continue
            if query.name == "graph_subgraph" and request.filter.condition:
                out = yield from self._within_scope(request, out, pool.inside)
            sub = yield Compute(partial(assemble, out, [(hit.chunk, hit.doc) for hit in text]), RANK)
            found, keys = pool_found(zip(sub.docs, sub.chunks), config.group_by, config.chunks_per_document)
            pool.grow(found, out["fetched"], out["lowest"], keys)
        named = yield Compute(partial(documents.hits, named_docs, pool.passages, config.chunks_per_document), RANK)
        ranking, channels = yield Compute(partial(self._rank, request, sub, out, names, chunk_total, text, named), RANK)
        return (yield from self._hydrate(request, ranking, channels))

    def _rank(
        self,
        request: Request,
        sub: Subgraph,
        out: dict[str, Any],
        names: dict[str, QuestionConcept],
        chunk_total: int,
        text: list[Hit],
        named: list[Hit],
    ) -> tuple[list[tuple[str, float]], dict[str, list[Hit]]]:
        """The walk's hits beside the document, BM25 and KNN channels, and the documents they fuse into."""
        channels = {
            "document": named,
            "graph": self._walk(request, sub, out, names, chunk_total),
            "text": text,
            "vector": sorted(
                (Hit(doc=doc, chunk=chunk, score=score, channel="vector") for chunk, doc, score in out["knn"]), key=lambda h: -h.score
            ),
        }
        ranking = self.fuse(channels)
        return ranking, channels

    def _names(self, spans: list[phrases.Span], rows: list[dict[str, Any]], chunk_total: int) -> dict[str, QuestionConcept]:
        """The question's concepts from the stored names its spans matched (``graph_names.surql``)."""
        return question_concepts(spans, rows, chunk_total, self.config)

    def _subgraph(
        self, request: Request, names: dict[str, QuestionConcept], in_scope: dict[str, list[Any]], text: list[Hit], pool: Pool
    ) -> Plan[Query]:
        """The query of the subgraph around the seeds, from the adjacency lists (from the edges, each
        checked against the scope, on a store written before them or for a record user); with the
        passages of the named documents the pool has not read yet. A scoped caller's named seeds are
        their edges inside the scope (``in_scope``, read with the names)."""
        config = self.config
        # Read from the edges on stores written before the lists, and for a record user, whom the
        # lists' permissions hide (surql/tenancy.surql).
        lists = (yield from self._schema_since(ADJACENCY_LISTS_SINCE)) and not request.scope.record_user
        named = [name for name, concept in names.items() if concept.n <= config.max_df]
        params: dict[str, Any] = {
            "embedding": request.vector,
            "threshold": config.threshold,
            "dense_seeds": config.dense_seeds,
            "max_df": config.max_df,
            "hop2": config.hop2,
        }
        assert pool.size is not None
        passages, size = documents.passages(pool.unread, config, pool.size)
        params |= passages | pool.params()
        placeholders = {**self._knn_placeholders(request, size), "relation_edges": RELATION_EDGES}
        if lists:
            params |= {"named": [RecordID("concept_chunks", name) for name in named], "text_chunks": [hit.chunk for hit in text]}
            if request.filter.condition:
                params |= {"named_lists": [[name, in_scope.get(name, [])] for name in named], **request.filter.params}
            return Query("graph_subgraph", params, placeholders)
        params |= {
            "named": [concept_id(name) for name in named],
            "text_chunks": [RecordID("chunk", hit.chunk) for hit in text],
            **request.filter.params,
        }
        return Query("graph_subgraph_scoped", params, placeholders)

    def _within_scope(self, request: Request, out: dict[str, Any], counted: frozenset[str] | None) -> Plan[dict[str, Any]]:
        """``out`` (``graph_subgraph.surql``, its seeds found inside the scope) with only the chunks
        and relations of documents inside the scope: the adjacency lists the hops read carry every
        chunk. A related concept that only relations outside it lead to is left out with them. The
        named concepts' chunks are checked again too: they were read inside the scope one round trip
        earlier. The documents inside are asked for, unless the KNN counted them all (``counted``)."""
        lists = [row[2] for row in out["counts"] + out["related_counts"] if len(row) > 2 and row[2]]
        lists += [chunks for _, chunks in out.get("named") or () if chunks]
        docs = {chunk_document_key(chunk) for chunks in lists for chunk, *_ in chunks}
        docs |= {doc for _, _, doc in out["relations"]}
        if not docs:
            return out
        if counted is not None:
            inside: set[str] | frozenset[str] = counted
        else:
            query = Query("scope_documents", {"documents": [document_id(doc) for doc in docs], **request.filter.params}, {
                "document_filter": request.filter.on_documents()
            })
            inside = set((yield query)[-1])
        relations = [relation for relation in out["relations"] if relation[2] in inside]
        reached = {concept for a, b, _ in relations for concept in (a, b)}

        def within(chunks: list[list[Any]]) -> list[list[Any]]:
            return [edge for edge in chunks if chunk_document_key(edge[0]) in inside]

        def kept(row: list[Any]) -> list[Any]:
            return row if len(row) < 3 or not row[2] else [row[0], row[1], within(row[2])]

        return out | {
            "named": [[name, within(chunks or [])] for name, chunks in out.get("named") or ()],
            "counts": [kept(row) for row in out["counts"]],
            "related_counts": [kept(row) for row in out["related_counts"] if row[0] in reached],
            "relations": relations,
        }

    def _walk(
        self, request: Request, sub: Subgraph, out: dict[str, Any], names: dict[str, QuestionConcept], chunk_total: int
    ) -> list[Hit]:
        """The walk's chunk hits: documents by summed visit probability, each document's chunks best first."""
        config = self.config
        if not sub.chunks:
            return []
        counts = np.zeros(len(sub.concepts))  # a concept with no count read is in one chunk (chunk_concepts.single)
        for concept, n, *_ in out["counts"] + out["related_counts"]:
            pos = sub.concept_pos.get(concept)
            if pos is not None:
                counts[pos] = n
        for name, concept in names.items():
            if name in sub.concept_pos:
                counts[sub.concept_pos[name]] = concept.n
        if request.filter.condition:  # a concept whose edges were all read counts only those in scope
            scoped = np.bincount(sub.edge_concept, minlength=len(sub.concepts))
            read_all = counts <= config.max_df
            if not config.hop2:  # only the named concepts' edges were read whole, not those the seeds met
                named = np.zeros(len(sub.concepts), dtype=bool)
                named[[sub.concept_pos[name] for name in names if name in sub.concept_pos]] = True
                read_all &= named
            counts = np.where(read_all, np.minimum(counts, scoped), counts)
        rarity = idf(np.maximum(counts, 1), chunk_total)
        seeds = {sub.concept_pos[name]: concept for name, concept in names.items() if name in sub.concept_pos}
        chunk_reset: dict[int, float] = {}
        if config.dense_seeds and config.dense_reset > 0 and out["knn"]:
            weights = dense_reset([score for _, _, score in out["knn"]], config.dense_temperature)
            for (chunk, _, _), weight in zip(out["knn"], weights):
                pos = sub.chunk_pos[chunk]
                chunk_reset[pos] = chunk_reset.get(pos, 0.0) + config.dense_reset * float(weight)
        concept_reset: dict[int, float] = {}
        total = sum(concept.weight for concept in seeds.values())
        if total > 0:
            # The question's concepts carry their best match quality as their total mass (the dense
            # seeds carry dense_reset): a question that names nothing, only common words in lower
            # case, walks mostly from its nearest chunks. Normalised to one, the lower-case factor
            # cancelled out whenever every concept of the question had it.
            mass = max(concept.quality for concept in seeds.values())
            concept_reset = {pos: mass * concept.weight / total for pos, concept in seeds.items()}
        settings = WalkSettings(
            damping=config.damping,
            iterations=config.iterations,
            own_share=config.own_share,
            np_weight=config.np_weight,
            gamma=config.gamma,
            relation_share=config.relation_share,
        )
        scores = personalized_pagerank(sub, rarity, concept_reset, chunk_reset, settings)
        return _ranked_hits(sub, scores, names)


def listed(out: dict[str, Any], config: GraphConfig) -> dict[str, Any]:
    """``graph_subgraph.surql``'s answer with its seeds and counts as the rows the walk reads
    (``[chunk, concepts, own, np]``; ``[concept, n, chunks]``, chunks only for a concept the walk
    goes through): the query reads the lists by key and sends the keys beside them."""
    seeds, counts = out.get("seeds"), out.get("counts")
    if not isinstance(seeds, dict) or not isinstance(counts, dict):
        return out  # graph_subgraph_scoped.surql's rows
    hop = config.hop2
    return out | {
        "seeds": [
            [key, row["concepts"], row.get("own") or [], row.get("np") or []]
            for key, row in zip(seeds["keys"], seeds["lists"])
            if row and row.get("concepts") is not None
        ],
        "counts": [
            [key, row["n"], row.get("chunks") if hop and 2 <= row["n"] <= config.max_df else None]
            for key, row in zip(counts["keys"], counts["lists"])
            if row and row.get("n") is not None
        ],
    }


def names_query(request: Request, spans: list[phrases.Span], max_df: int) -> Query:
    """The lookup of the question's candidate names among the stored concepts: ``graph_names.surql``
    for a caller who may read everything, ``graph_names_scoped.surql`` (a name counts only through
    its chunks inside the scope, which come with a name in at most ``max_df`` chunks) for any other."""
    ids = [concept_id(name) for name in phrases.names(spans)]
    if not request.filter.condition:
        return Query("graph_names", {"ids": ids})
    placeholders: dict[str, int | CompiledFilter] = {"edges": NAME_EDGES, "filter": request.filter}
    params = {"ids": ids, "max_df": max_df, **request.filter.params}
    return Query("graph_names_scoped", params, placeholders)


def question_concepts(
    spans: list[phrases.Span], rows: list[dict[str, Any]], chunk_total: int, config: GraphConfig
) -> dict[str, QuestionConcept]:
    """The stored names the question contains (longest, non-overlapping; titles before entities
    before noun phrases), each with its weight (match quality x rarity), chunk count and match quality."""
    found = {str(row["id"].id): row for row in rows if row.get("n")}

    def tier(name: str) -> int | None:
        row = found.get(name)
        if row is None:
            return None
        return 0 if row.get("titled") else 2 if row.get("kind") == NOUN_PHRASE else 1

    out: dict[str, QuestionConcept] = {}
    for span in phrases.longest_matches(spans, tier):
        row = found[span.name]
        quality = config.question_np if row.get("kind") == NOUN_PHRASE and not row.get("titled") else 1.0
        if not span.capitalised:
            quality *= config.question_lowercase
        n = int(row["n"])
        weight = quality * float(idf(np.array([n]), chunk_total)[0]) ** config.question_rarity
        if span.name not in out or weight > out[span.name].weight:
            out[span.name] = QuestionConcept(weight, n, quality)
    return out


def _ranked_hits(sub: Subgraph, scores: np.ndarray, names: dict[str, QuestionConcept]) -> list[Hit]:
    doc_score: dict[str, float] = defaultdict(float)
    for pos, score in enumerate(scores):
        if score > 0:
            doc_score[sub.docs[pos]] += float(score)
    concepts_of: dict[int, list[int]] = defaultdict(list)
    for c, k in zip(sub.edge_chunk.tolist(), sub.edge_concept.tolist()):
        concepts_of[c].append(k)
    by_doc: dict[str, list[int]] = defaultdict(list)
    for pos in np.argsort(-scores, kind="stable").tolist():
        if scores[pos] > 0:
            by_doc[sub.docs[pos]].append(pos)
    hits = []
    for doc in sorted(doc_score, key=lambda d: -doc_score[d]):
        for pos in by_doc[doc]:
            led = [sub.concepts[k] for k in concepts_of[pos] if sub.concepts[k] in names]
            matches = [ConceptMatch(id=name, name=name, score=names[name].weight) for name in led]
            hits.append(Hit(doc=doc, chunk=sub.chunks[pos], score=float(scores[pos]), channel="graph", concepts=matches))
    return hits
