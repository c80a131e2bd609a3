"""Graph retrieval: hybrid, then one hop along shared rare concepts."""

from __future__ import annotations

from typing import ClassVar

from surrealdb import RecordID

from .base import Request
from .config import GraphConfig, RetrieverConfig
from .fusion import Hit, graph_hits
from .hybrid import HybridRetriever
from .plan import Plan, Query
from .results import RetrievedDocument


class GraphRetriever(HybridRetriever):
    """Hybrid retrieval, then one hop along the graph: from the chunks of the best documents to the
    concepts they mention (only rare ones, ``max_df``), to other documents' chunks that mention them,
    scored by similarity to the query. Bridge documents join the fusion as a fourth channel."""

    mode = "graph"
    config_class: ClassVar[type[RetrieverConfig]] = GraphConfig
    config: GraphConfig

    def _plan(self, request: Request) -> Plan[list[RetrievedDocument]]:
        channels = yield from self.channels(request)
        ranking = self.fuse(channels)
        seeds = [doc for doc, _ in ranking[: self.config.seeds]]
        if seeds:
            params = {
                "seeds": [RecordID("document", doc) for doc in seeds],
                "embedding": request.vector,
                "max_df": self.config.max_df,
                "filtered": bool(request.filter.condition),
                **request.filter.params,
            }
            out = (yield Query("expand_graph", params, {"filter": request.filter}))[-1]
            graph = graph_hits(out["paths"], out["chunks"], self.config.max_paths)
            # The seeds lead the graph channel, so the hop adds to them instead of outranking them.
            lead = [Hit(doc=doc, chunk="", score=2.0, channel="graph") for doc in seeds]
            ranking = self.fuse({**channels, "graph": lead + graph})
            channels = {**channels, "graph": graph}
        return (yield from self._hydrate(request, ranking, channels))
