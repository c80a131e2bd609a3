"""One scoping rule on every read path, on the real embedded SurrealDB with spaCy and MiniLM.

The store holds multi-chunk documents under three labels (``public``, ``staff``, ``secret``) and one
without labels; concepts such as "Marie Curie" are mentioned under every label, others ("Project
Zephyr") only in secret documents. A caller restricted to ``public`` must not see another label's
text, concept names or counts through any entry point. What the caller may see comes from an oracle
computed in Python: the same extractor run over every stored chunk, grouped by the chunk's labels.
"""

from __future__ import annotations

import json
import math
import threading
from collections import defaultdict

import pytest
from surrealdb import RecordID

from surreal_kgrag import (
    ChunkHit,
    ConceptOverlapReranker,
    IngestConfig,
    Ingestor,
    MMRReranker,
    RetrievedDocument,
    Scope,
    SourceDocument,
    SurrealStore,
    make_retriever,
)
from surreal_kgrag.chunking import SentenceChunker
from surreal_kgrag.cli import main as cli_main
from surreal_kgrag.errors import KGRagError
from surreal_kgrag.extract import CallableConceptExtractor
from surreal_kgrag.tools import ToolDispatcher

MODES = ["chunk", "concept", "hybrid", "graph"]
DOCS = [
    ("curie_pub", ["public"], "x", "Marie Curie was born in Warsaw. Marie Curie studied physics in Paris. "
     "She discovered polonium with Pierre Curie. Polonium is named after Poland."),
    ("pierre_pub", ["public"], "x", "Pierre Curie was a French physicist. Pierre Curie married Marie Curie in Paris. "
     "He studied magnetism and crystals with his brother Jacques Curie."),
    ("warsaw_pub", ["public"], "y", "Warsaw is the capital of Poland. The Vistula river flows through Warsaw. "
     "Marie Curie was born in Warsaw in 1867."),
    ("nobel_pub", ["public"], "x", "Alfred Nobel invented dynamite in Sweden. The Nobel Prize is awarded in Stockholm. "
     "Marie Curie won the Nobel Prize twice."),
    ("radium_pub", ["public", "staff"], "y", "Radium was isolated by Marie Curie and Pierre Curie. "
     "Radium glows in the dark. Radium was sold by the Radium Institute."),
    ("lab_staff", ["staff"], "x", "The Radium Institute in Paris kept laboratory notebooks. Staff of the Radium "
     "Institute met Marie Curie every Monday. The notebooks of Irene Joliot-Curie are still radioactive."),
    ("budget_staff", ["staff"], "y", "The laboratory budget for Warsaw was approved by Pierre Curie. "
     "The budget paid for pitchblende from Bohemia and for a Geiger counter."),
    ("zephyr_secret", ["secret"], "x", "Project Zephyr is a classified programme run by Colonel Aurelian Stark. "
     "Colonel Aurelian Stark met Marie Curie in Warsaw. Project Zephyr stores polonium in Krakow. "
     "The codeword for Project Zephyr is Bluefinch."),
    ("stark_secret", ["secret"], "y", "Colonel Aurelian Stark commands the Krakow facility. The Krakow facility "
     "hides polonium and radium for Project Zephyr. Colonel Aurelian Stark reports to the ministry in Warsaw."),
    ("vault_secret", ["secret"], "x", "The Wawel vault under Krakow holds the Zephyr archive. Only Colonel Aurelian "
     "Stark opens the Wawel vault. Marie Curie never visited the Wawel vault."),
    ("orphan", [], "y", "The Baltic Sea borders Poland. Gdansk lies on the Baltic Sea. Marie Curie sailed on the Baltic Sea."),
]
SECRET_QUESTION = "Who runs Project Zephyr with Colonel Aurelian Stark in the Krakow facility and the Wawel vault?"
PUBLIC = Scope(access=["public"])


@pytest.fixture(scope="module")
def url(tmp_path_factory):
    return f"surrealkv://{tmp_path_factory.mktemp('scope')}/kg"


@pytest.fixture(scope="module")
def store(url, minilm, spacy_extractor):
    with SurrealStore(url) as s:
        # Every concept gets a vector: the scoped concept search must fill k from the visible ones.
        config = IngestConfig(
            chunker=SentenceChunker(max_tokens=20, overlap_tokens=0), metadata_concepts=(), concept_vector_min_chunks=1
        )
        documents = [
            SourceDocument(key=key, title=key.replace("_", " "), text=text, source=f"{key}.txt",
                           metadata={"tenant": tenant}, access=access)
            for key, access, tenant, text in DOCS
        ]
        summary = Ingestor(s, embedder=minilm, extractor=spacy_extractor, config=config).ingest(documents)
        assert summary.added == len(DOCS) and summary.chunks >= 2 * len(DOCS)
        yield s


class Oracle:
    """Every stored chunk with its document, labels and concept names (from the extractor)."""

    def __init__(self, store, extractor):
        rows = store.query("get_document", {"ids": [RecordID("document", key) for key, *_ in DOCS]})[-1]
        chunks = [(row["id"].id, list(row["access"]), c) for row in rows for c in row["chunks"]]
        mentions = extractor.extract([c["content"] for _, _, c in chunks])
        self.chunks = {
            c["id"].id: {"doc": doc, "labels": labels, "content": c["content"], "concepts": {m.name for m in found}}
            for (doc, labels, c), found in zip(chunks, mentions)
        }

    def visible(self, labels):
        return {cid: c for cid, c in self.chunks.items() if set(c["labels"]) & set(labels)}

    def concepts(self, labels):
        return set().union(*(c["concepts"] for c in self.visible(labels).values()))

    def documents(self, labels):
        return {c["doc"] for c in self.visible(labels).values()}

    def mentioning(self, name, labels):
        return {cid for cid, c in self.visible(labels).items() if name in c["concepts"]}


@pytest.fixture(scope="module")
def oracle(store, spacy_extractor):
    oracle = Oracle(store, spacy_extractor)
    secret_only = oracle.concepts(["secret"]) - oracle.concepts(["public", "staff"])
    assert {"project zephyr", "krakow"} <= secret_only, secret_only  # the corpus does what the tests need
    assert "marie curie" in oracle.concepts(["public"]) & oracle.concepts(["secret"])
    return oracle


@pytest.fixture(scope="module")
def build(store, minilm, spacy_extractor):
    def make(mode="hybrid", **options):
        extra = {"extractor": spacy_extractor} if mode == "hybrid" else {}
        return make_retriever(mode, store, embedder=minilm, **extra, **options)

    return make


def _assert_public_only(result, oracle):
    public = oracle.visible(["public"])
    names = oracle.concepts(["public"])
    for doc in result.documents:
        assert doc.id in oracle.documents(["public"]), doc.id
        for chunk in doc.chunks:
            assert chunk.id in public and chunk.content == public[chunk.id]["content"]
            assert {c.id for c in chunk.concepts} <= names
        for path in doc.provenance:
            assert path.chunk_id in public, path
            assert path.via_chunk_id is None or path.via_chunk_id in public
            assert path.concept is None or path.concept.id in names, path


# -- retrievers ------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("group_by", ["document", "chunk"])
def test_every_mode_reads_only_the_callers_labels(build, oracle, mode, group_by):
    retriever = build(mode, access=["public"], group_by=group_by, candidates=60)
    for question in (SECRET_QUESTION, "Marie Curie in Warsaw and Krakow", "Where is polonium stored?"):
        result = retriever.search(question, k=20)
        assert result.documents
        _assert_public_only(result, oracle)
    everything = build(mode, group_by=group_by, candidates=60).search(SECRET_QUESTION, k=20)
    assert {d.id for d in everything.documents} - oracle.documents(["public"]), "the unrestricted search must see more"


def test_concept_weights_count_only_chunks_in_scope(build, oracle):
    """ln(1 + N / n), N the chunks in the scope (labels and filter) and n those of them naming the
    concept, in floats."""
    public = oracle.visible(["public"])
    public_x = {cid: c for cid, c in public.items() if dict((key, tenant) for key, _, tenant, _ in DOCS)[c["doc"]] == "x"}
    cases = ((PUBLIC, public), (Scope(access=["public"], filters={"tenant": "x"}), public_x), (None, oracle.chunks))
    for scope, chunks in cases:
        result = build("hybrid", scope=scope).search("Marie Curie and Pierre Curie in Warsaw", k=10)
        paths = [p for d in result.documents for p in d.provenance if p.channel == "concept"]
        assert {p.concept.id for p in paths} >= {"marie curie", "warsaw"}
        for path in paths:
            n = sum(path.concept.id in c["concepts"] for c in chunks.values())
            assert path.concept.score == pytest.approx(math.log(1 + len(chunks) / n), rel=1e-9), path


def test_a_call_filter_narrows_the_configured_one_never_replaces_it(build, oracle):
    retriever = build("chunk", filters={"tenant": "x"}, candidates=60)
    tenant_x = {key for key, _, tenant, _ in DOCS if tenant == "x"}
    for widening in ({"tenant": {"$exists": True}}, {"$or": [{"tenant": "y"}, {"tenant": "x"}]}, {"$not": {"tenant": "z"}}):
        ids = {d.id for d in retriever.search("Marie Curie", k=20, filters=widening).documents}
        assert ids and ids <= tenant_x, (widening, ids)
    assert retriever.search("Marie Curie", k=20, filters={"tenant": "y"}).documents == []
    narrowed = build("chunk", access=["public"], candidates=60).search("Marie Curie", k=20, scope=Scope(access=["secret"]))
    assert narrowed.documents == []


def test_empty_labels_see_nothing_and_unlabelled_documents_need_no_restriction(build):
    for mode in MODES:
        assert build(mode, access=[]).search("Baltic Sea and Gdansk", k=5).documents == []
    every_label = build("chunk", access=["public", "staff", "secret"], candidates=60)
    assert "orphan" not in {d.id for d in every_label.search("Baltic Sea and Gdansk", k=20).documents}
    assert build("chunk").search("Baltic Sea and Gdansk", k=1).documents[0].id == "orphan"


def test_scope_narrowing_intersects_labels_and_ands_filters():
    base = Scope(access=["public", "staff"], filters={"tenant": "x"})
    narrowed = base.narrow(access=["staff", "secret"], filters={"year": 1})
    assert narrowed.access == ("staff",) and narrowed.filters == ({"tenant": "x"}, {"year": 1})
    assert base.narrow(Scope(access=["secret"])).access == ()
    assert Scope().narrow(access=["a"]).access == ("a",) and base.narrow().access == base.access
    assert base.narrow(base) == base
    with pytest.raises(ValueError, match="list of strings"):
        Scope(access="public")


# -- agent tools -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def public_tools(store, build):
    return ToolDispatcher(store, retriever=build("hybrid", access=["public"]))


def _answer(tools, name, arguments):
    return json.loads(tools.call(name, arguments))


def test_tools_inherit_the_retrievers_scope(public_tools, oracle):
    names = oracle.concepts(["public"])
    found = _answer(public_tools, "search_chunks", {"query": SECRET_QUESTION, "k": 20, "chunks_per_document": 10})
    assert {d["id"] for d in found["documents"]} <= oracle.documents(["public"])
    assert all(p["id"] in oracle.visible(["public"]) for d in found["documents"] for p in d["chunks"])
    widened = _answer(public_tools, "search_chunks", {"query": SECRET_QUESTION, "k": 20, "filters": {"$or": [
        {"tenant": "x"}, {"tenant": {"$exists": False}}]}})
    assert {d["id"] for d in widened["documents"]} <= oracle.documents(["public"])

    concepts = _answer(public_tools, "search_concepts", {"query": "Project Zephyr Colonel Aurelian Stark Krakow", "k": 10})
    assert len(concepts["concepts"]) == 10
    for concept in concepts["concepts"]:
        assert concept["id"] in names
        assert concept["chunks"] == len(oracle.mentioning(concept["id"], ["public"]))
        assert concept["documents"] == len({oracle.chunks[c]["doc"] for c in oracle.mentioning(concept["id"], ["public"])})


def test_concept_tools_count_and_list_only_chunks_in_scope(public_tools, oracle):
    mentioning = oracle.mentioning("marie curie", ["public"])
    chunks = _answer(public_tools, "chunks_for_concept", {"concept": "Marie Curie", "limit": 50})
    assert {c["id"] for c in chunks["chunks"]} == mentioning
    assert chunks["concept"]["chunks"] == len(mentioning)
    assert chunks["concept"]["documents"] == len({oracle.chunks[c]["doc"] for c in mentioning})
    documents = _answer(public_tools, "documents_for_concept", {"concept": "Marie Curie", "limit": 50})
    assert {d["id"] for d in documents["documents"]} == {oracle.chunks[c]["doc"] for c in mentioning}

    related = _answer(public_tools, "related_concepts", {"concept": "Marie Curie", "limit": 50})
    expected: dict[str, set[str]] = defaultdict(set)
    for cid in mentioning:
        for name in oracle.chunks[cid]["concepts"] - {"marie curie"}:
            expected[name].add(cid)
    assert {r["id"] for r in related["related"]} == set(expected)
    for row in related["related"]:
        assert row["shared_chunks"] == len(expected[row["id"]])
        assert row["documents"] == len({oracle.chunks[c]["doc"] for c in oracle.mentioning(row["id"], ["public"])})


def test_a_concept_outside_the_scope_is_not_found_like_a_missing_one(public_tools, oracle):
    names = oracle.concepts(["public"])
    for tool in ("chunks_for_concept", "documents_for_concept", "related_concepts"):
        hidden = _answer(public_tools, tool, {"concept": "Project Zephyr"})["error"]
        missing = _answer(public_tools, tool, {"concept": "Qwertyuiop Zzyzx"})["error"]
        assert hidden["type"] == missing["type"] == "not_found"
        assert hidden["message"].startswith("no concept named 'project zephyr'; the closest stored concepts are")
        assert len(hidden["details"]["suggestions"]) == 5 and set(hidden["details"]["suggestions"]) <= names


def test_get_document_answers_only_inside_the_scope(public_tools, oracle):
    assert _answer(public_tools, "get_document", {"document_id": "zephyr_secret"})["error"]["type"] == "not_found"
    assert _answer(public_tools, "get_document", {"document_id": "orphan"})["error"]["type"] == "not_found"
    view = _answer(public_tools, "get_document", {"document_id": "curie_pub"})
    assert view["chunk_count"] == len(view["chunks"]) == len([c for c in oracle.chunks.values() if c["doc"] == "curie_pub"])
    assert _answer(public_tools, "get_document", {"document_id": " curie_pub"})["error"]["type"] == "not_found"


def test_a_concept_named_exactly_is_found_only_inside_the_scope(public_tools, oracle):
    """search_concepts puts the concept a query names first, vector or not; never one outside the scope."""
    visible = oracle.concepts(["public"])
    secret_only = sorted(oracle.concepts(["secret"]) - visible)
    assert "project zephyr" in secret_only
    for name in secret_only[:5]:
        found = _answer(public_tools, "search_concepts", {"query": name, "k": 5})["concepts"]
        assert found and {c["id"] for c in found} <= visible, (name, found)
    shared = _answer(public_tools, "search_concepts", {"query": "Marie Curie", "k": 5})["concepts"]
    assert shared[0]["id"] == "marie curie" and shared[0]["score"] == 1.0
    assert shared[0]["chunks"] == len(oracle.mentioning("marie curie", ["public"]))


def test_a_dispatcher_can_narrow_its_retriever_never_widen_it(store, build, oracle):
    secret_over_public = ToolDispatcher(store, retriever=build("chunk", access=["public"]), scope=Scope(access=["secret"]))
    assert _answer(secret_over_public, "search_chunks", {"query": "Marie Curie", "k": 10})["documents"] == []
    for key in ("curie_pub", "zephyr_secret"):
        assert _answer(secret_over_public, "get_document", {"document_id": key})["error"]["type"] == "not_found"
    public_over_all = ToolDispatcher(store, retriever=build("chunk"), scope=PUBLIC)
    found = _answer(public_over_all, "search_chunks", {"query": SECRET_QUESTION, "k": 20})["documents"]
    assert found and {d["id"] for d in found} <= oracle.documents(["public"])
    assert public_over_all.scope == PUBLIC


async def test_async_tools_apply_the_same_scope(public_tools):
    for name, arguments in (
        ("search_concepts", {"query": "Project Zephyr", "k": 5}),
        ("related_concepts", {"concept": "Warsaw"}),
        ("get_document", {"document_id": "stark_secret"}),
    ):
        assert await public_tools.acall(name, arguments) == public_tools.call(name, arguments)


async def test_mcp_server_serves_within_its_scope(public_tools, oracle):
    mcp = pytest.importorskip("mcp", reason="the MCP server is the optional extra `mcp`")
    from surreal_kgrag.mcp_server import build_parser, build_server

    args = build_parser().parse_args(["--access", "public, staff", "--filter", '{"tenant": "x"}'])
    assert args.access == ["public", "staff"] and args.filter == {"tenant": "x"}
    assert build_parser().parse_args(["--access", ""]).access == []
    async with mcp.Client(build_server(public_tools)) as client:
        hidden = await client.call_tool("get_document", {"document_id": "vault_secret"})
        assert hidden.is_error and hidden.structured_content["error"]["type"] == "not_found"
        concepts = await client.call_tool("search_concepts", {"query": "Colonel Aurelian Stark", "k": 8})
        assert {c["id"] for c in concepts.structured_content["concepts"]} <= oracle.concepts(["public"])


# -- integrations, CLI, rerankers ------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["chunk", "hybrid"])
def test_langchain_retriever_takes_access(url, store, build, minilm, oracle, mode):
    pytest.importorskip("langchain_surreal_kgrag", reason="install integrations/langchain (scripts/setup.sh does)")
    from langchain_surreal_kgrag import SurrealKGRetriever

    built = SurrealKGRetriever(db_url=url, mode=mode, k=20, embedder=minilm, access=["public"])
    wrapped = SurrealKGRetriever.from_retriever(build(mode), k=20, access=["public"])
    try:
        for retriever in (built, wrapped):
            docs = retriever.invoke(SECRET_QUESTION)
            assert docs and {d.id for d in docs} <= oracle.documents(["public"])
            assert set(docs[0].metadata["concepts"]) <= oracle.concepts(["public"])
    finally:
        built.close()


@pytest.mark.parametrize("mode", ["concept", "graph"])
async def test_llama_index_retriever_takes_access(url, store, build, minilm, oracle, mode):
    pytest.importorskip("llama_index.retrievers.surreal_kgrag", reason="install integrations/llama_index (scripts/setup.sh does)")
    from llama_index.retrievers.surreal_kgrag import SurrealKGRetriever

    built = SurrealKGRetriever(url, mode=mode, similarity_top_k=20, embedder=minilm, access=["public"])
    wrapped = SurrealKGRetriever.from_retriever(build(mode), similarity_top_k=20, access=["public"])
    try:
        for retriever in (built, wrapped):
            for nodes in (retriever.retrieve(SECRET_QUESTION), await retriever.aretrieve(SECRET_QUESTION)):
                assert nodes and {n.node.ref_doc_id for n in nodes} <= oracle.documents(["public"])
                assert {n.node.node_id for n in nodes} <= set(oracle.visible(["public"]))
    finally:
        built.close()


def test_cli_query_takes_access(url, store, capsys, oracle):
    base = ["query", SECRET_QUESTION, "--db", url, "--mode", "hybrid", "-k", "20", "--json"]
    assert cli_main([*base, "--access", "public"]) == 0
    ids = {d["id"] for d in json.loads(capsys.readouterr().out)["documents"]}
    assert ids and ids <= oracle.documents(["public"])
    assert cli_main([*base, "--access", ""]) == 0
    assert json.loads(capsys.readouterr().out)["documents"] == []


def test_store_reading_rerankers_read_within_their_scope(store, build, minilm, spacy_extractor, oracle):
    secret = build("chunk", access=["secret"]).search("Project Zephyr in Krakow", k=1).documents
    assert secret and secret[0].id.endswith("_secret")
    with pytest.raises(KGRagError, match="not in the store"):
        MMRReranker(store, embedder=minilm, scope=PUBLIC).rerank("Project Zephyr", secret)
    assert MMRReranker(store, embedder=minilm).rerank("Project Zephyr", secret)[0].id == secret[0].id

    overlap = ConceptOverlapReranker(store, extractor=spacy_extractor, weight=0.5)
    assert overlap.rerank("Project Zephyr in Krakow", secret)[0].score > 0.5  # it reads the secret chunk's concepts
    assert overlap.scoped(PUBLIC).rerank("Project Zephyr in Krakow", secret)[0].score == 0.5  # it cannot
    assert overlap.scoped(PUBLIC).scoped(Scope(access=["secret"])).scope.access == ()
    chained = (MMRReranker(store, embedder=minilm) | overlap).scoped(PUBLIC)
    assert all(stage.scope == PUBLIC for stage in chained.rerankers)


def test_a_hand_made_document_cannot_pull_text_through_a_scoped_reranker(store, minilm, oracle):
    hidden = next(cid for cid, c in oracle.chunks.items() if c["doc"] == "zephyr_secret")
    fake = RetrievedDocument(
        id="zephyr_secret", title=None, source="", metadata={}, score=1.0,
        chunks=[ChunkHit(id=hidden, index=0, content="", score=1.0)],
    )
    with pytest.raises(KGRagError, match="not in the store"):
        MMRReranker(store, embedder=minilm, scope=PUBLIC).rerank("anything", [fake])


def test_scoped_search_is_thread_safe(build, oracle):
    retriever = build("hybrid", access=["public"])
    questions = [SECRET_QUESTION, "Marie Curie in Warsaw", "polonium and radium", "Nobel Prize in Stockholm"] * 4
    expected = {q: [d.id for d in build("hybrid", access=["public"]).search(q, k=5).documents] for q in set(questions)}
    results: dict[int, list[str]] = {}
    errors: list[BaseException] = []

    def run(i: int, question: str) -> None:
        try:
            results[i] = [d.id for d in retriever.search(question, k=5).documents]
        except BaseException as error:  # reported below
            errors.append(error)

    threads = [threading.Thread(target=run, args=(i, q)) for i, q in enumerate(questions)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert all(results[i] == expected[q] for i, q in enumerate(questions))


@pytest.mark.parametrize("mode", ["hybrid", "graph"])
async def test_a_scoped_framework_retriever_reads_the_store_figures_once(monkeypatch, sent_steps, store, build, mode):
    """The integrations narrow their core retriever on every call; the copies share what it read
    (the schema version, the documents in the store, the chunk totals), so only the first search
    asks for them."""
    pytest.importorskip("langchain_surreal_kgrag", reason="install integrations/langchain (scripts/setup.sh does)")
    pytest.importorskip("llama_index.retrievers.surreal_kgrag", reason="install integrations/llama_index (scripts/setup.sh does)")
    from llama_index.retrievers.surreal_kgrag import SurrealKGRetriever as LlamaIndexRetriever

    from langchain_surreal_kgrag import SurrealKGRetriever as LangChainRetriever

    langchain = LangChainRetriever.from_retriever(build(mode), k=3, access=["public"], filters={"tenant": "x"})
    llama_index = LlamaIndexRetriever.from_retriever(build(mode), similarity_top_k=3, access=["public"])
    figures = {"store_meta", "count_documents", "count_chunks"}
    for search, asearch in ((langchain.invoke, langchain.ainvoke), (llama_index.retrieve, llama_index.aretrieve)):
        sent = sent_steps(store)
        assert search("Marie Curie in Warsaw")
        names = {name for name, _, _ in sent}
        assert figures <= names, names
        sent.clear()
        assert search("Where is polonium stored?") and await asearch("Pierre Curie in Paris")
        names = {name for name, _, _ in sent}
        assert names and not figures & names, names
        monkeypatch.undo()


def test_bm25_limits_a_small_tenants_words_by_the_store_wide_counts(minilm):
    """A word's chunk count (``term.df``) is store-wide, so its limit is a share of the store's
    chunks. Counted in the scope, a tenant holding 2 of 100 chunks got a limit of 1 chunk, and a
    word another tenant also uses was dropped: "glacier" (2 chunks) here, after "moraine" (1)."""
    no_concepts = CallableConceptExtractor(lambda text: [])
    documents = [
        SourceDocument(key="hut", text="The glacier retreated past the old hut.", source="hut.txt", access=["small"]),
        SourceDocument(key="valley", text="The valley road is closed in winter.", source="valley.txt", access=["small"]),
        SourceDocument(key="moraine", text="A glacier left this moraine.", source="moraine.txt", access=["big"]),
    ] + [
        SourceDocument(key=f"crane{i}", text=f"Harbour crane {i} lifted containers.", source=f"c{i}.txt", access=["big"])
        for i in range(97)
    ]
    with SurrealStore("mem://") as s:
        Ingestor(s, embedder=minilm, extractor=no_concepts, config=IngestConfig(metadata_concepts=())).ingest(documents)

        def text_hits(**options):
            retriever = make_retriever("hybrid", s, embedder=minilm, extractor=no_concepts, **options)
            result = retriever.search("glacier moraine", k=10)
            return {p.document_id for d in result.documents for p in d.provenance if p.channel == "text"}

        assert text_hits() == {"hut", "moraine"}  # unscoped: 100 chunks, a limit of 2
        assert text_hits(access=["small"]) == {"hut"}
        assert text_hits(access=["big"]) == {"moraine"}
        assert text_hits(access=["small"], text_max_df=0.01) == set()  # a limit of 1: "glacier" is left out


def test_a_scope_compiles_once_and_a_copy_with_other_labels_compiles_its_own():
    scope = Scope(access=["public"], filters={"$or": [{"metadata.n": {"$eq": i}} for i in range(200)]})
    assert scope.compile() is scope.compile()  # a search reads it several times
    assert scope.narrow(None) is scope and scope.narrow(Scope()) is scope  # nothing to narrow by
    copied = scope.model_copy(update={"access": ("staff",)})
    assert copied.compile().params["scope_access"] == ["staff"] and scope.compile().params["scope_access"] == ["public"]
    assert copied != scope and Scope(access=["public"], filters=scope.filters) == scope
