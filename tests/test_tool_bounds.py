"""The concept tools' cost bound on the real embedded SurrealDB with the real spaCy and MiniLM models.

One concept ("Acme Corporation") is mentioned by every chunk of every filing, many times more than
the dispatcher reads (``max_edges``); another ("Marie Curie") by two chunks. The expected answers come
from the extractor run over every stored chunk's text, as in ``test_tools.py``.
"""

from __future__ import annotations

import pytest
from surrealdb import RecordID

from surreal_kgrag import IngestConfig, Ingestor, SourceDocument, SurrealStore
from surreal_kgrag.chunking import SentenceChunker
from surreal_kgrag.errors import ConfigurationError
from surreal_kgrag.retrieval import Scope
from surreal_kgrag.tools import NotFoundError, ToolDispatcher
from surreal_kgrag.tools.models import DEFAULT_MAX_EDGES

CAP = 20
HUB = "acme corporation"
CITIES = ["Boston", "Denver", "Chicago", "Seattle", "Austin", "Phoenix", "Dallas", "Miami", "Atlanta", "Portland",
          "Detroit", "Houston", "Tampa", "Omaha", "Reno", "Tucson", "Fresno", "Memphis", "Nashville", "Louisville"]
PRODUCTS = ["turbines", "batteries", "tractors", "pumps", "valves", "engines", "boilers", "cranes", "drills", "lathes"]
FIRST = ["John", "Mary", "Robert", "Linda", "James", "Susan", "David", "Karen"]
LAST = ["Miller", "Johnson", "Anderson", "Thompson", "Harris"]


def _filing(i: int) -> str:
    city, product, manager = CITIES[i % len(CITIES)], PRODUCTS[i % len(PRODUCTS)], f"{FIRST[i % 8]} {LAST[i // 8]}"
    return (f"Acme Corporation opened a plant in {city} in {1990 + i}. Acme Corporation sold {product} to farmers in {city}. "
            f"Acme Corporation reported higher revenue in quarter {i % 4 + 1}. Acme Corporation hired engineers from {city}. "
            f"Acme Corporation appointed {manager} to run the plant.")


FILINGS = [(f"filing_{i:02d}", ["red"] if i % 2 == 0 else ["blue"], _filing(i)) for i in range(40)]
RARE = [
    ("curie", ["red"], "Marie Curie met Pierre Curie in Warsaw. Marie Curie studied radium with Pierre Curie in Paris."),
    ("nobel", ["blue"], "Alfred Nobel founded the Nobel Prize in Stockholm. Alfred Nobel invented dynamite in Sweden."),
]
RED = Scope(access=["red"])


@pytest.fixture(scope="module")
def store(minilm, spacy_extractor):
    with SurrealStore("mem://") as s:
        config = IngestConfig(
            chunker=SentenceChunker(max_tokens=16, overlap_tokens=0), metadata_concepts=(), concept_vector_min_chunks=1
        )
        documents = [
            SourceDocument(key=key, title=key.replace("_", " "), text=text, source=f"{key}.txt", access=access)
            for key, access, text in FILINGS + RARE
        ]
        summary = Ingestor(s, embedder=minilm, extractor=spacy_extractor, config=config).ingest(documents)
        assert summary.added == len(documents)
        yield s


@pytest.fixture(scope="module")
def oracle(store, spacy_extractor):
    """chunk id -> (document key, labels, concept names), from the stored chunk texts."""
    rows = store.query("get_document", {"ids": [RecordID("document", key) for key, *_ in FILINGS + RARE]})[-1]
    chunks = [(row["id"].id, list(row["access"]), c) for row in rows for c in row["chunks"]]
    found = spacy_extractor.extract([c["content"] for *_, c in chunks])
    return {c["id"].id: (doc, labels, {m.name for m in names}) for (doc, labels, c), names in zip(chunks, found)}


def _mentioning(oracle, name, label=None):
    return {cid for cid, (_, labels, names) in oracle.items() if name in names and (label is None or label in labels)}


def _documents(oracle, chunks):
    return {oracle[cid][0] for cid in chunks}


@pytest.fixture(scope="module")
def tools(store, minilm):
    return ToolDispatcher(store, embedder=minilm, max_edges=CAP)


@pytest.fixture(scope="module")
def red_tools(store, minilm):
    return ToolDispatcher(store, embedder=minilm, max_edges=CAP, scope=RED)


def test_the_hub_is_mentioned_far_more_often_than_the_tools_read(oracle):
    assert len(_mentioning(oracle, HUB)) >= 6 * CAP
    assert len(_mentioning(oracle, HUB, "red")) >= 3 * CAP
    assert len(_mentioning(oracle, "marie curie")) == 2


def test_hub_chunks_are_read_up_to_the_cap_and_marked(tools, oracle):
    answer = tools.invoke("chunks_for_concept", {"concept": "Acme Corporation", "limit": 50})
    assert answer.concept.truncated
    # The totals an unrestricted caller gets are the stored ones, exact.
    assert answer.concept.chunks == len(_mentioning(oracle, HUB))
    assert answer.concept.documents == len(_documents(oracle, _mentioning(oracle, HUB)))
    assert len(answer.chunks) == CAP
    assert {c.id for c in answer.chunks} <= _mentioning(oracle, HUB)


def test_hub_documents_are_counted_from_the_edges_read(tools, oracle):
    answer = tools.invoke("documents_for_concept", {"concept": "Acme Corporation", "limit": 50})
    assert answer.concept.truncated
    assert sum(d.chunks for d in answer.documents) == CAP
    assert {d.id for d in answer.documents} <= _documents(oracle, _mentioning(oracle, HUB))


def test_hub_related_concepts_come_from_the_chunks_read(tools, oracle):
    answer = tools.invoke("related_concepts", {"concept": "Acme Corporation", "limit": 50})
    assert answer.concept.truncated and answer.related
    read = tools.invoke("chunks_for_concept", {"concept": "Acme Corporation", "limit": 50}).chunks
    expected: dict[str, int] = {}
    for chunk in read:
        for name in oracle[chunk.id][2] - {HUB}:
            expected[name] = expected.get(name, 0) + 1
    top = sorted(expected.values(), reverse=True)[: len(answer.related)]
    assert [r.shared_chunks for r in answer.related] == top
    assert all(expected[r.id] == r.shared_chunks <= CAP for r in answer.related)


def test_search_and_relations_mark_the_hub(tools, oracle):
    hit = tools.invoke("search_concepts", {"query": "Acme Corporation", "k": 3}).concepts[0]
    assert hit.id == HUB and hit.truncated and hit.chunks == len(_mentioning(oracle, HUB))
    relations = tools.invoke("concept_relations", {"concept": "Acme Corporation"})
    assert relations.relations == [] and not relations.truncated  # no LLM extractor: no typed relations


def test_a_scoped_caller_counts_and_lists_only_its_scope_within_the_cap(red_tools, oracle):
    red = _mentioning(oracle, HUB, "red")
    chunks = red_tools.invoke("chunks_for_concept", {"concept": "Acme Corporation", "limit": 50})
    assert 0 < chunks.concept.chunks == len(chunks.chunks) < CAP  # both from the edges read, inside the scope
    assert not chunks.concept.truncated  # inside a scope: only the scope's edges filling the cap would say so
    assert {c.id for c in chunks.chunks} <= red
    assert chunks.concept.documents == len(_documents(oracle, {c.id for c in chunks.chunks}))

    documents = red_tools.invoke("documents_for_concept", {"concept": "Acme Corporation", "limit": 50})
    assert {d.id for d in documents.documents} == _documents(oracle, {c.id for c in chunks.chunks})

    related = red_tools.invoke("related_concepts", {"concept": "Acme Corporation", "limit": 50})
    red_names = set().union(*(oracle[cid][2] for cid in red))
    assert related.related and {r.id for r in related.related} <= red_names
    assert all(r.shared_chunks <= chunks.concept.chunks and r.documents <= len(_documents(oracle, red)) for r in related.related)

    hit = red_tools.invoke("search_concepts", {"query": "Acme Corporation", "k": 3}).concepts[0]
    assert hit.id == HUB and not hit.truncated and hit.chunks == chunks.concept.chunks

    with pytest.raises(NotFoundError):
        red_tools.invoke("chunks_for_concept", {"concept": "Alfred Nobel"})


@pytest.mark.parametrize("scope", [None, RED], ids=["unscoped", "red"])
def test_a_rare_concept_answers_exactly_as_without_a_cap(store, minilm, oracle, scope):
    capped = ToolDispatcher(store, embedder=minilm, max_edges=CAP, scope=scope)
    unbounded = ToolDispatcher(store, embedder=minilm, max_edges=10**6, scope=scope)
    calls = [
        ("chunks_for_concept", {"concept": "Marie Curie", "limit": 50}),
        ("documents_for_concept", {"concept": "Marie Curie", "limit": 50}),
        ("related_concepts", {"concept": "Marie Curie", "limit": 50}),
        ("concept_relations", {"concept": "Marie Curie"}),
        ("search_concepts", {"query": "Marie Curie", "k": 5}),
    ]
    for name, arguments in calls:
        assert capped.invoke(name, arguments) == unbounded.invoke(name, arguments), name

    mentioning = _mentioning(oracle, "marie curie")
    chunks = capped.invoke("chunks_for_concept", {"concept": "Marie Curie", "limit": 50})
    assert not chunks.concept.truncated and {c.id for c in chunks.chunks} == mentioning
    related = capped.invoke("related_concepts", {"concept": "Marie Curie", "limit": 50})
    expected = set().union(*(oracle[cid][2] for cid in mentioning)) - {"marie curie"}
    assert {r.id for r in related.related} == expected and not any(r.truncated for r in related.related)


def test_a_related_hub_is_marked(tools):
    """A concept that shares a chunk with a rare one may itself be a hub: its count says so."""
    answer = tools.invoke("related_concepts", {"concept": "Boston", "limit": 50})
    hub = next(r for r in answer.related if r.id == HUB)
    assert hub.truncated and not answer.concept.truncated


def test_truncated_tells_a_scoped_caller_nothing_of_the_mentions_outside_its_scope(minilm, spacy_extractor):
    """Ten public and ten secret passages mention Project Falcon; the tools read 15 of its 20 edges.
    The public caller reads 5 to 10 of its own among them: its answers are not marked truncated,
    which would tell it that more than 15 passages mention the name, most of them hidden."""
    texts = [(f"plan{i}", ["public"], f"Project Falcon was approved in Boston in {1990 + i}.") for i in range(10)]
    texts += [(f"memo{i}", ["secret"], f"Project Falcon moves to Denver in {1990 + i}.") for i in range(10)]
    with SurrealStore("mem://") as s:
        documents = [SourceDocument(key=k, text=t, source=f"{k}.txt", access=a) for k, a, t in texts]
        Ingestor(s, embedder=minilm, extractor=spacy_extractor, config=IngestConfig(concept_vector_min_chunks=1)).ingest(documents)
        everyone = ToolDispatcher(s, embedder=minilm, max_edges=15)
        assert everyone.invoke("chunks_for_concept", {"concept": "Project Falcon"}).concept.truncated
        public = ToolDispatcher(s, embedder=minilm, max_edges=15, scope=Scope(access=["public"]))
        concept = public.invoke("chunks_for_concept", {"concept": "Project Falcon"}).concept
        assert 5 <= concept.chunks <= 10 and not concept.truncated
        hits = public.invoke("search_concepts", {"query": "Project Falcon", "k": 2}).concepts
        assert hits[0].id == concept.id and not hits[0].truncated
        related = public.invoke("related_concepts", {"concept": "Boston"}).related
        assert not next(r for r in related if r.id == concept.id).truncated


def test_a_scoped_search_stops_widening_at_its_edge_budget(store, minilm, sent_steps):
    # A scope that sees nothing makes every round of the concept search come back empty. With one
    # edge read per concept and k=1 the rounds read 4 and 16 edges, then the 30 the budget (MAX_K =
    # 50 edges) has left, not 64: the budget is spent while the pool could still grow.
    assert store.query_text("count", "RETURN count((SELECT id FROM concept_vector))", {})[-1] > 64
    sent = sent_steps(store)
    blind = ToolDispatcher(store, embedder=minilm, max_edges=1, scope=Scope(access=["nobody"]))
    answer = blind.invoke("search_concepts", {"query": "Acme Corporation", "k": 1})
    rounds = [placeholders["candidates"] for name, _, placeholders in sent if name == "tool_search_concepts"]
    assert answer.concepts == [] and answer.truncated and rounds == [4, 16, 30]
    found = ToolDispatcher(store, embedder=minilm, max_edges=1, scope=RED).invoke("search_concepts", {"query": "Boston", "k": 3})
    assert len(found.concepts) == 3 and not found.truncated


@pytest.mark.parametrize("bad", [0, -1, 2.5, "100", True])
def test_max_edges_must_be_a_positive_integer(store, minilm, bad):
    with pytest.raises(ConfigurationError, match="max_edges"):
        ToolDispatcher(store, embedder=minilm, max_edges=bad)


async def test_mcp_server_reads_at_most_its_max_edges(store, minilm, oracle):
    mcp = pytest.importorskip("mcp", reason="the MCP server is the optional extra `mcp`")
    from surreal_kgrag.mcp_server import MAX_EDGES_FLAG, build_dispatcher, build_parser, build_server

    assert build_parser().parse_args([]).max_edges == DEFAULT_MAX_EDGES
    assert build_parser().parse_args(["--max-edges", str(MAX_EDGES_FLAG)]).max_edges == MAX_EDGES_FLAG
    for bad in ("0", "-1", str(MAX_EDGES_FLAG + 1), "2.5", "many"):
        with pytest.raises(SystemExit):
            build_parser().parse_args(["--max-edges", bad])
    dispatcher = build_dispatcher(store, build_parser().parse_args(["--max-edges", str(CAP), "--access", "red"]), minilm)
    assert dispatcher.max_edges == CAP and dispatcher.scope == RED
    async with mcp.Client(build_server(dispatcher)) as client:
        answer = (await client.call_tool("chunks_for_concept", {"concept": "Acme Corporation", "limit": 50})).structured_content
    assert 0 < len(answer["chunks"]) == answer["concept"]["chunks"] <= CAP  # the red ones among the CAP edges read
    assert answer["concept"]["truncated"] == (answer["concept"]["chunks"] == CAP)
    assert {c["id"] for c in answer["chunks"]} <= _mentioning(oracle, HUB, "red")
