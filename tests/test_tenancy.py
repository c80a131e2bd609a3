"""Database-enforced tenancy: two record users on the embedded engine, each reading only its labels,
through the retrievers, the agent tools and raw SurrealQL alike."""

from __future__ import annotations

import asyncio

import pytest
import surrealdb
from surrealdb import RecordID

from surreal_kgrag import IngestConfig, Ingestor, SourceDocument, SurrealStore, make_retriever
from surreal_kgrag.chunking import SentenceChunker
from surreal_kgrag.errors import ConfigurationError, SchemaMismatchError, StoreConnectionError
from surreal_kgrag.retrieval.config import GraphConfig
from surreal_kgrag.retrieval.graph import listed
from surreal_kgrag.retrieval.walk import assemble
from surreal_kgrag.tenancy import READER_ACCESS, add_reader, enable_tenancy, remove_reader
from surreal_kgrag.tools import ToolDispatcher

DOCS = [
    ("curie", ["red"], "Marie Curie was born in Warsaw. She discovered polonium with Pierre Curie in Paris. Polonium is named after Poland."),
    ("zephyr", ["red"], "Project Zephyr stores polonium in Krakow. Colonel Aurelian Stark runs Project Zephyr. Marie Curie never heard of it."),
    ("nobel", ["blue"], "Alfred Nobel invented dynamite in Sweden. Marie Curie won the Nobel Prize twice. The prize is awarded in Stockholm."),
    ("baltic", ["blue"], "The Baltic Sea borders Sweden and Poland. Gdansk lies on the Baltic Sea. Stockholm is on the Baltic coast."),
    ("shared", ["red", "blue"], "Warsaw is the capital of Poland. The Vistula river flows through Warsaw and Krakow."),
    ("nobody", [], "Atlantis sank beneath the waves. Nobody has read the Atlantis papers."),
]
READERS = {"alice": ("s3cret-a", ["red"]), "bob": ("s3cret-b", ["blue"])}


def _documents(label: str) -> set[str]:
    return {key for key, labels, _ in DOCS if label in labels}


@pytest.fixture(scope="module")
def url(tmp_path_factory, minilm, spacy_extractor):
    url = f"surrealkv://{tmp_path_factory.mktemp('tenancy')}/kg"
    with SurrealStore(url) as admin:
        with pytest.raises(SchemaMismatchError, match="no surreal-kgrag schema yet"):
            enable_tenancy(admin)
        # Every concept gets a vector: the readers' concept searches look for names one chunk mentions.
        config = IngestConfig(chunker=SentenceChunker(max_tokens=16, overlap_tokens=0), concept_vector_min_chunks=1)
        documents = [SourceDocument(key=k, title=k, text=t, source=f"{k}.txt", access=a) for k, a, t in DOCS]
        Ingestor(admin, embedder=minilm, extractor=spacy_extractor, config=config).ingest(documents)
        enable_tenancy(admin)
        enable_tenancy(admin)  # idempotent
        for name, (secret, labels) in READERS.items():
            add_reader(admin, name, secret, labels)
        add_reader(admin, "carol", "gone", ["red", "blue"])
        remove_reader(admin, "carol")
    return url


def reader_store(url: str, name: str, secret: str | None = None) -> SurrealStore:
    return SurrealStore(url, access=READER_ACCESS, access_variables={"name": name, "secret": secret or READERS[name][0]})


@pytest.mark.parametrize("name", sorted(READERS))
def test_retrievers_and_tools_of_a_reader_see_only_its_labels(url, minilm, spacy_extractor, name):
    label = READERS[name][1][0]
    visible = _documents(label)
    with reader_store(url, name) as store:
        for mode in ("chunk", "concept", "hybrid", "graph"):
            extra = {"extractor": spacy_extractor} if mode == "hybrid" else {}
            retriever = make_retriever(mode, store, embedder=minilm, **extra)
            found = retriever.search("Marie Curie, polonium and the Baltic Sea near Stockholm and Krakow", k=10)
            assert found.documents and {d.id for d in found.documents} <= visible, (mode, found.documents)
        # No explicit scope: a store signed in as a reader restricts the dispatcher to $auth.access.
        tools = ToolDispatcher(store, embedder=minilm)
        for key, labels, _ in DOCS:
            view = tools.invoke("get_document", {"document_id": key}) if label in labels else None
            if view is None:
                assert '"not_found"' in tools.call("get_document", {"document_id": key})
            else:
                assert view.id == key
        concepts = tools.invoke("search_concepts", {"query": "Project Zephyr Colonel Stark Gdansk Nobel", "k": 10}).concepts
        names = {c.id for c in concepts}
        assert names and ("project zephyr" in names) == (label == "red") and ("gdansk" in names) == (label == "blue")
        shared = tools.invoke("documents_for_concept", {"concept": "Marie Curie", "limit": 10})
        assert {d.id for d in shared.documents} == {k for k, labels, text in DOCS if label in labels and "Marie Curie" in text}
        assert shared.concept.documents == len(shared.documents)
        hidden = "gdansk" if label == "red" else "project zephyr"
        assert '"not_found"' in tools.call("chunks_for_concept", {"concept": hidden})


def test_a_readers_walk_reads_the_edges_it_may_see(url, minilm, monkeypatch):
    """A reader cannot read the adjacency lists (their permissions hide every tenant's chunks), so its
    walk reads the edges it may see: every seed chunk of its subgraph comes with its concepts (from
    the lists it would have none), and it walks to the documents an administrator's search scoped to
    the reader's labels finds. (The order may differ: a reader counts a concept's chunks from the
    edges it sees, not store-wide.)"""
    question = "Marie Curie, polonium and the Baltic Sea near Stockholm and Krakow"
    for name, (_, labels) in READERS.items():
        with SurrealStore(url) as admin:
            expected = make_retriever("graph", admin, embedder=minilm, access=labels).search(question, k=10).documents
        with reader_store(url, name) as store:
            answers: list[dict] = []
            query_many = store.query_many

            def recorded(steps, query_many=query_many, answers=answers):
                results = query_many(steps)
                answers.extend(result[-1] for (step, _, _), result in zip(steps, results) if step.startswith("graph_subgraph"))
                return results

            monkeypatch.setattr(store, "query_many", recorded)
            found = make_retriever("graph", store, embedder=minilm).search(question, k=10).documents
            visible = {(str(row["in"].id), str(row["out"].id)) for row in store.query("mention_edges")[-1]}
        assert answers and visible, name
        for answer in answers:
            sub = assemble(listed(answer, GraphConfig()))
            walked = {(sub.chunks[c], sub.concepts[k]) for c, k in zip(sub.edge_chunk.tolist(), sub.edge_concept.tolist())}
            seeds = {chunk for chunk, _, _ in answer["knn"]}
            assert {edge for edge in visible if edge[0] in seeds} <= walked, name
        assert {d.id for d in found} == {d.id for d in expected} != set(), name


async def _raw(url: str, name: str, statements: str) -> list:
    db = surrealdb.AsyncSurreal(url)
    await db.connect()
    try:
        await db.signin({"namespace": "kgrag", "database": "kgrag", "access": READER_ACCESS,
                         "variables": {"name": name, "secret": READERS[name][0]}})
        await db.use("kgrag", "kgrag")
        response = await db.query_raw(statements, {})
        return [s.get("result") if s.get("status") == "OK" else ("ERR", s.get("result")) for s in response["result"]]
    finally:
        await db.close()


@pytest.mark.parametrize("name", sorted(READERS))
def test_a_reader_running_raw_surrealql_sees_only_its_labels(url, name):
    label = READERS[name][1][0]
    visible = _documents(label)
    with SurrealStore(url) as admin:  # what there is, as root
        everything = admin.query("stats")[0]
        everything_vectors = set(admin.query_text("stats", "SELECT VALUE record::id(id) FROM concept_vector;")[0])
        name_counts = admin.query_text("stats", "SELECT VALUE n FROM document_name_count;")[0]
    results = asyncio.run(_raw(url, name, """
        SELECT VALUE record::id(id) FROM document;
        SELECT VALUE record::id(doc) FROM chunk;
        SELECT VALUE record::id(doc) FROM chunk_text;
        SELECT VALUE record::id(doc) FROM MENTIONS_CONCEPT;
        SELECT VALUE record::id(id) FROM concept;
        SELECT VALUE df FROM concept;
        SELECT VALUE record::id(id) FROM concept_vector;
        UPDATE concept_vector SET embedding = [] RETURN AFTER;
        SELECT * FROM term LIMIT 5;
        SELECT * FROM document_name LIMIT 5;
        SELECT * FROM document_name_count LIMIT 5;
        SELECT * FROM kg_reader;
        SELECT VALUE id FROM concept:⟨project zephyr⟩<-MENTIONS_CONCEPT;
        DELETE chunk RETURN BEFORE;
        UPDATE document SET title = 'owned' RETURN AFTER;
        CREATE document:evil SET source = 'x', content_type = 'x', content_hash = 'x', access = ['red', 'blue'];
        INFO FOR DB;
    """))
    documents, chunk_docs, text_docs, edge_docs, concepts, dfs, vectors, vector_writes, terms, names, name_counts_read, readers, *rest = results
    zephyr, deleted, updated, created, info = rest
    assert set(documents) == visible
    assert set(chunk_docs) == visible and set(text_docs) == visible and set(edge_docs) <= visible and edge_docs
    assert "project zephyr" in concepts if label == "red" else "project zephyr" not in concepts
    assert ("gdansk" in concepts) == (label == "blue") and "atlantis" not in concepts
    assert all(df is None for df in dfs)  # document counts over every tenant stay hidden
    # Every concept here has a vector: a reader sees exactly the vectors of the concepts it sees.
    assert set(vectors) == set(concepts) and "gdansk" in everything_vectors and "project zephyr" in everything_vectors
    assert vector_writes == []
    # Names and their counts over every tenant's documents: hidden.
    assert name_counts and names == [] and name_counts_read == []
    assert terms == [] and len(readers) == 1 and readers[0]["name"] == name and "secret" not in readers[0]
    assert (len(zephyr) > 0) == (label == "red")
    assert deleted == [] and updated == [] and created == []  # a reader writes nothing
    assert isinstance(info, tuple) and "permission" in str(info[1]).lower()
    with SurrealStore(url) as admin:
        assert admin.query("stats")[0] == everything  # nothing written


def test_wrong_secret_and_removed_reader_cannot_sign_in(url):
    for name, secret in (("alice", "wrong"), ("carol", "gone")):
        with reader_store(url, name, secret) as store, pytest.raises(StoreConnectionError):
            store.query("stats")


def test_an_embedded_file_serves_one_user_per_process(url):
    with SurrealStore(url) as admin:
        admin.query("stats")
        with reader_store(url, "alice") as store, pytest.raises(ConfigurationError, match="another user"):
            store.query("stats")


def test_a_reader_sees_index_names_but_no_store_wide_counts(url, minilm):
    with SurrealStore(url) as admin:
        admin.optimize(force=True)  # records kg_meta:indexes with its row counts
        stored = admin.query("index_state")[-1]
    assert stored["chunk"]["indexed"] > 0
    (indexes,) = asyncio.run(_raw(url, "alice", "SELECT * FROM kg_meta:indexes;"))
    for key in ("chunk", "concept", "text"):
        assert indexes[0][key] == {"generation": stored[key]["generation"]}  # the live index, no volume
    with reader_store(url, "alice") as store:  # the reader's searches still find the live indexes
        assert make_retriever("chunk", store, embedder=minilm, k=2).search("Warsaw").documents


# Concepts whose edges (by edge id, the order the permission's walk reads them) are read from a red
# document only where said, from a blue one otherwise.
HUB_EDGES = {"hub": (2_000, "first"), "small": (500, "first"), "late": (1_000, "last"), "hidden": (1_000, None)}


@pytest.fixture(scope="module")
def hub_url(tmp_path_factory):
    url = f"surrealkv://{tmp_path_factory.mktemp('tenancy_hub')}/kg"
    red, blue = RecordID("document", "red"), RecordID("document", "blue")
    chunks = max(n for n, _ in HUB_EDGES.values())
    with SurrealStore(url) as admin:
        admin.query("schema")
        admin.query_text("rows", """
            FOR $d IN $docs { CREATE $d.id CONTENT {source: 's', title: 't', content_type: 'text/plain', content_hash: 'h',
                                                    metadata: {}, access: $d.access, chunk_count: 1} };
            FOR $c IN $concepts { CREATE type::record('concept', $c) CONTENT {name: $c, display: $c, kind: 'x'};
                                  CREATE type::record('concept_vector', $c) CONTENT {embedding: [1.0, 0.0]} };
        """, {"docs": [{"id": red, "access": ["red"]}, {"id": blue, "access": ["blue"]}], "concepts": list(HUB_EDGES)})
        for start in range(0, chunks, 500):
            ids = range(start, min(chunks, start + 500))
            rows = [{"id": RecordID("chunk", f"blue::h::{i:05d}"), "doc": blue, "index": i, "content": "c", "char_start": 0,
                     "char_end": 1, "access": ["blue"], "embedding": []} for i in ids]
            edges = [
                {"id": RecordID("MENTIONS_CONCEPT", f"{name}_{i:05d}"), "in": RecordID("chunk", f"blue::h::{i:05d}"),
                 "out": RecordID("concept", name), "doc": red if (red_at, i) in (("first", 0), ("last", n - 1)) else blue}
                for name, (n, red_at) in HUB_EDGES.items() for i in ids if i < n
            ]
            admin.query_text("rows", "INSERT INTO chunk $chunks RETURN NONE; INSERT RELATION INTO MENTIONS_CONCEPT $edges RETURN NONE;",
                             {"chunks": rows, "edges": edges})
        enable_tenancy(admin)
        add_reader(admin, "alice", READERS["alice"][0], ["red"])
    return url


def test_a_concept_check_stops_at_the_first_visible_edge(hub_url):
    """A reader sees a concept and its vector through any edge it may read, the last one included,
    and not through edges it may not read (the check stops at the first it may read: for a concept
    in 100,000 chunks, 11 ms against 2.2 s when it counted them all)."""
    (concepts, vectors) = asyncio.run(_raw(hub_url, "alice", """
        SELECT VALUE record::id(id) FROM concept;
        SELECT VALUE record::id(id) FROM concept_vector;
    """))
    assert set(concepts) == set(vectors) == {"hub", "small", "late"}
