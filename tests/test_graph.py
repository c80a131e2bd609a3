"""The concept graph the graph and concept modes walk: titles, aliases, bridges in either ingest order,
delete consistency, phrase matching of stored names, Personalized PageRank, scope and RELATES_TO."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from surrealdb import RecordID

from surreal_kgrag import Ingestor, SurrealStore, surql
from surreal_kgrag.chunking import SentenceChunker
from surreal_kgrag.extract import CallableConceptExtractor, title_aliases
from surreal_kgrag.ingest.config import IngestConfig
from surreal_kgrag.models import ChunkGraph, ConceptMention, LLMIngestStats, Relation, SourceDocument
from surreal_kgrag.phrases import longest_matches, spans
from surreal_kgrag.retrieval import Scope, make_retriever
from surreal_kgrag.retrieval.graph import NAME_EDGES, RELATION_EDGES, GraphRetriever, QuestionConcept
from surreal_kgrag.retrieval.walk import assemble
from surreal_kgrag.schema import CHUNK_LIST_MAX, SCHEMA_VERSION, ensure_schema
from surreal_kgrag.surql import NO_FILTER

CHUNKER = SentenceChunker(max_tokens=24, overlap_tokens=0)

# Two-hop corpus: the question names the opera; its composer's document never mentions operas.
OPERA = [
    ("silverlake", "Silverlake (opera)", "Silverlake is an opera in three acts about a drowned village. "
     "The music of Silverlake was written by Tomas Brandvold for the royal theatre. It premiered in the winter of 1911 "
     "and was revived in 1950 with new scenery."),
    ("brandvold", "Tomas Brandvold", "Tomas Brandvold grew up in a fishing village near Tromso in Norway. "
     "He studied the organ in Leipzig and later taught harmony. Tomas Brandvold wrote psalms, songs and a violin sonata."),
    ("verdi", "Aida", "Aida is an opera by an Italian composer who was born in the village of Le Roncole. "
     "The opera composer was born in Italy and wrote many operas for La Scala."),
    ("carmen", "Carmen", "Carmen is an opera whose composer was born in Paris, France. "
     "Its composer was born in France and the opera premiered at the Opera-Comique."),
    ("tosca", "Tosca", "Tosca is an opera whose composer was born in Lucca. The composer of this opera was born in "
     "the Duchy of Lucca and studied in Milan."),
    ("ring", "The Ring Cycle", "The Ring Cycle is a set of operas by a German composer born in Leipzig. "
     "The composer of these operas was born in Saxony."),
]
QUESTION = "In which country was the composer of the opera Silverlake born?"


def _docs(rows, access=("public",)):
    return [SourceDocument(key=key, title=title, text=text, source=f"{key}.txt", access=list(access)) for key, title, text in rows]


def _ingest(store, minilm, extractor, docs):
    config = IngestConfig(chunker=CHUNKER)
    summary = Ingestor(store, embedder=minilm, extractor=extractor, config=config).ingest(docs)
    assert not summary.failures, summary.failures
    return summary


def _edges(store):
    """(document key, concept, own) of every mention edge, after checking the store is sound."""
    problems = store.query("check_integrity")[-1]
    assert not any(problems.values()), problems
    return {(str(r["in"].id).split("::")[0], str(r["out"].id), r["own"]) for r in store.query("mention_edges")[-1]}


def _chunk_count(store, key):
    return store.query("get_document", {"ids": [RecordID("document", key)]})[-1][0]["chunk_count"]


# -- titles, aliases, bridges ----------------------------------------------------------------------


def test_title_aliases_follow_generic_conventions():
    assert title_aliases("Toto (band)") == ["Toto"]
    assert title_aliases("Paris, Texas") == ["Paris"]
    assert title_aliases("Jackson, Mississippi (film)") == ["Jackson, Mississippi", "Jackson"]
    assert title_aliases("Jane Campion") == []
    # A comma that lists topics is not a place qualifier: no alias of the first part.
    assert title_aliases("Installation, configuration and usage") == []
    assert title_aliases("Setup, Configuration and Usage") == []


NOVEL = [
    ("harbour", "The Quiet Harbour (novel)", "The novel follows a lighthouse keeper through one winter. "
     "Critics praised its spare prose and its ending. It was reprinted four times."),
    ("ames", "Edith Ames", "Edith Ames was a writer from Cornwall. In 1931 she published The Quiet Harbour, "
     "her best known book. She later moved to London and wrote plays."),
]


def _no_concepts(text):
    return []


@pytest.mark.parametrize("order", [(0, 1), (1, 0)])
def test_bridges_are_found_in_either_ingest_order_by_phrase_matching(minilm, order):
    """No extractor concepts at all: the bridge from Edith Ames's chunk to the novel's alias comes
    from phrase matching of the stored alias alone, whichever document is ingested first (two runs)."""
    extractor = CallableConceptExtractor(_no_concepts)
    with SurrealStore("mem://") as store:
        for i in order:
            _ingest(store, minilm, extractor, _docs([NOVEL[i]]))
        edges = _edges(store)
        assert ("ames", "quiet harbour", False) in edges
        assert ("harbour", "quiet harbour", True) in edges
        assert ("harbour", "quiet harbour (novel", True) in edges
        # every chunk of the novel carries its own title and alias; none of Edith Ames's does
        chunks = _chunk_count(store, "harbour")
        assert chunks >= 2
        concept = store.query("graph_names", {"ids": [RecordID("concept", "quiet harbour")]})[-1][0]
        assert concept["titled"] is True and concept["n"] == chunks + 1  # its own chunks and the bridge


CITY = [
    (f"town{i}", f"Town {i}", f"Town {i} is a city on the river. The city has a market and a harbour.") for i in range(6)
] + [
    ("guide", "Travel Guide", "Visitors to Old Mill Quarter admire its cobbled lanes. Mill quarter maps are sold here."),
    ("walks", "City Walks", "The walk passes the Old Mill Quarter City gate and ends at the river."),
]


def test_reverse_bridge_search_names_the_three_rarest_words_of_a_title(minilm):
    """A new title's stored mentions are searched by its three rarest words (a common word's postings
    grow with the store), the phrase checked after: a chunk with those words but not the common
    "city" is a candidate, and so is one without a word in more chunks than the search's limit
    when the rarest word is in fewer; a title with a word no chunk has searches nothing; and the bridge from
    the chunk that names the whole title is still found."""
    extractor = CallableConceptExtractor(_no_concepts)
    with SurrealStore("mem://") as store:
        _ingest(store, minilm, extractor, _docs(CITY))

        def candidates(title: str, limit: int = 50) -> set[str]:
            found = store.query("title_mentions", {"words": title.split(), "doc_ids": [], "limit": limit}, scope=NO_FILTER)[-1]
            return {str(hit["doc"].id) for hit in found}

        assert candidates("Old Mill Quarter City") == {"guide", "walks"}  # "guide" lacks "city"
        assert candidates("Old Mill Quarter Zeppelin") == set()  # no chunk has "zeppelin"
        # "city" (8 chunks) is searched while the limit exceeds its count; past it, it is left out:
        # the rarest word's 2 chunks hold every chunk with the title, and the limit cuts none of them.
        assert candidates("Mill Quarter City") == {"walks"}
        assert candidates("Mill Quarter City", limit=5) == {"guide", "walks"}
        assert candidates("Mill Quarter City", limit=1) == {"walks"}  # rarest past the limit: every word
        _ingest(store, minilm, extractor, _docs([("omqc", "Old Mill Quarter City", "A district of old mills by the river.")]))
        bridged = {doc for doc, concept, own in _edges(store) if concept == "old mill quarter city" and not own}
        assert bridged == {"walks"}


def test_both_orders_and_one_run_give_the_same_graph(minilm, spacy_extractor):
    graphs = []
    for runs in ([NOVEL[:1], NOVEL[1:]], [NOVEL[1:], NOVEL[:1]], [NOVEL]):
        with SurrealStore("mem://") as store:
            for rows in runs:
                _ingest(store, minilm, spacy_extractor, _docs(rows))
            graphs.append((_edges(store), store.query("concept_frequencies")[-1]))
    assert graphs[0] == graphs[1] == graphs[2]
    assert ("ames", "quiet harbour", False) in graphs[0][0]


def test_delete_keeps_bridges_and_counts_consistent(minilm):
    extractor = CallableConceptExtractor(_no_concepts)
    with SurrealStore("mem://") as store:
        ingestor = Ingestor(store, embedder=minilm, extractor=extractor, config=IngestConfig(chunker=CHUNKER))
        ingestor.ingest(_docs(NOVEL))
        assert ingestor.delete(["harbour"]) == 1
        edges = _edges(store)
        assert edges == {("ames", "edith ames", True), ("ames", "quiet harbour", False)}
        row = store.query("graph_names", {"ids": [RecordID("concept", "quiet harbour")]})[-1][0]
        assert row["titled"] is False and row["n"] == 1  # still mentioned, no longer a title
        # the novel comes back: its alias is a title again and the old bridge is not duplicated
        ingestor.ingest(_docs(NOVEL[:1]))
        assert ("ames", "quiet harbour", False) in _edges(store)
        assert store.query("graph_names", {"ids": [RecordID("concept", "quiet harbour")]})[-1][0]["titled"] is True
        ingestor.delete(["ames", "harbour"])
        assert _edges(store) == set()
        assert store.query("graph_names", {"ids": [RecordID("concept", "quiet harbour")]})[-1] == []


def _chunk_list(store, name):
    """A concept's count and chunk list as stored (concept_chunks), the list as a set of chunk keys."""
    row = store.query_text("test: a concept's chunk list", "SELECT n, chunks FROM ONLY type::record('concept_chunks', $name);", {"name": name})[-1]
    return row["n"], None if row.get("chunks") is None else {key for key, _, _ in row["chunks"]}


def _kestrel(text):
    return [ConceptMention(name="kestrel project", display="Kestrel Project", kind="ORG")] if "Kestrel" in text else []


def test_adjacency_lists_follow_the_edges_past_the_list_limit(minilm):
    """A concept keeps a chunk list only while at most CHUNK_LIST_MAX chunks mention it: a longer
    document drops the list, a shorter version of it brings the list back, a delete empties it.
    _edges checks both list tables against the edges each time (check_integrity.surql)."""
    sentence = "The Kestrel Project tested glider number {i} on the moor in the spring of 1903."
    extractor = CallableConceptExtractor(_kestrel)
    with SurrealStore("mem://") as store:
        ingestor = Ingestor(store, embedder=minilm, extractor=extractor, config=IngestConfig(chunker=CHUNKER))
        short = ("flights", "Glider Flights", " ".join(sentence.format(i=i) for i in range(10)))
        other = ("kestrel", "Kestrel Project", "The Kestrel Project was a group of glider builders in Yorkshire.")
        ingestor.ingest(_docs([short, other]))
        _edges(store)
        n, chunks = _chunk_list(store, "kestrel project")
        assert n == _chunk_count(store, "flights") + 1 and chunks is not None and len(chunks) == n
        long = ("flights", "Glider Flights", " ".join(sentence.format(i=i) for i in range(CHUNK_LIST_MAX + 8)))
        ingestor.ingest(_docs([long]))
        _edges(store)
        n, chunks = _chunk_list(store, "kestrel project")
        assert n > CHUNK_LIST_MAX and chunks is None
        ingestor.ingest(_docs([short]))
        _edges(store)
        n, chunks = _chunk_list(store, "kestrel project")
        assert n == _chunk_count(store, "flights") + 1 and chunks is not None and len(chunks) == n
        assert ingestor.delete(["flights"]) == 1
        _edges(store)
        assert _chunk_list(store, "kestrel project") == (1, {key for key in chunks if key.startswith("kestrel::")})


def test_lists_grow_by_appends_across_writes_past_the_limit_and_back(minilm):
    """New documents only add chunks to a concept: its list takes their entries (no edge is read
    again) until it passes CHUNK_LIST_MAX, then stays NONE while more come; deletes bring it back.
    Two documents a write group, five mentioning chunks each: 10, 20, 30, then past the limit."""
    sentence = "The Kestrel Project tested glider number {i} on the moor in the spring of 1903."
    extractor = CallableConceptExtractor(_kestrel)
    with SurrealStore("mem://") as store:
        ingestor = Ingestor(store, embedder=minilm, extractor=extractor, config=IngestConfig(chunker=CHUNKER, group_size=2))
        flights = [(f"flights{d}", f"Glider Flights {d}", " ".join(sentence.format(i=100 * d + i) for i in range(5))) for d in range(10)]
        seen = []
        for batch in (flights[:2], flights[2:4], flights[4:6], flights[6:8], flights[8:]):
            ingestor.ingest(_docs(batch))
            _edges(store)
            seen += [key for key, _, _ in batch]
            n, chunks = _chunk_list(store, "kestrel project")
            assert n == sum(_chunk_count(store, key) for key in seen)
            assert chunks is None if n > CHUNK_LIST_MAX else chunks is not None and len(chunks) == n
        assert n > CHUNK_LIST_MAX and chunks is None
        assert ingestor.delete(seen[1:]) == 9
        _edges(store)
        n, chunks = _chunk_list(store, "kestrel project")
        assert n == _chunk_count(store, seen[0]) and chunks is not None and len(chunks) == n


def _single(store):
    """Each chunk's `single` list as stored (chunk_concepts), by chunk key."""
    rows = store.query_text("test: single lists", "SELECT record::id(id) AS chunk, single FROM chunk_concepts;")[-1]
    return {row["chunk"]: set(row.get("single") or ()) for row in rows}


def test_a_chunk_lists_the_concepts_no_other_chunk_mentions(minilm):
    """chunk_concepts.single, whose counts the walk does not read: a concept joins the list of its one
    chunk, leaves it when other chunks mention it (here 40 at once, past the chunk list's limit, so
    that chunk is known only from before the write), comes back when they go, and follows its chunk
    when its document is replaced. _edges checks every list against the counts each time."""
    extractor = CallableConceptExtractor(_kestrel)
    sentence = "The Kestrel Project tested glider number {i} on the moor in the spring of 1903."
    with SurrealStore("mem://") as store:
        ingestor = Ingestor(store, embedder=minilm, extractor=extractor, config=IngestConfig(chunker=CHUNKER))
        club = ("club", "Moor Club", "The Kestrel Project met at the club on Sundays.")
        ingestor.ingest(_docs([club]))
        _edges(store)
        ((club_chunk, names),) = _single(store).items()
        assert names == {"kestrel project", "moor club"}
        flights = ("flights", "Glider Flights", " ".join(sentence.format(i=i) for i in range(CHUNK_LIST_MAX + 8)))
        ingestor.ingest(_docs([flights]))
        _edges(store)
        assert _chunk_list(store, "kestrel project")[1] is None
        lists = _single(store)
        assert lists[club_chunk] == {"moor club"} and not any("kestrel project" in names for names in lists.values())
        assert ingestor.delete(["flights"]) == 1
        _edges(store)
        assert _single(store) == {club_chunk: {"kestrel project", "moor club"}}
        ingestor.ingest(_docs([("club", "Moor Club", "The club met on Sundays. " * 12 + "The Kestrel Project met there too.")]))
        _edges(store)
        lists = _single(store)
        holders = [chunk for chunk, names in lists.items() if "kestrel project" in names]
        assert len(lists) > 1 and len(holders) == 1 and holders[0].startswith("club::") and club_chunk not in lists


def test_walk_depth_cannot_exceed_the_lists(minilm):
    with SurrealStore("mem://") as store, pytest.raises(ValueError, match="max_df"):
        make_retriever("graph", store, embedder=minilm, max_df=CHUNK_LIST_MAX + 1)


# -- phrase matching -------------------------------------------------------------------------------


def test_longest_match_wins_and_matches_do_not_overlap():
    found = spans("Who founded the New York City Ballet in New York?", plurals=True)
    stored = {"new york city ballet": 1, "new york": 1, "york": 1, "city": 2, "ballet": 2}
    matched = longest_matches(found, stored)
    assert [m.name for m in matched] == ["new york city ballet", "new york"]


def test_better_tiers_are_matched_first_then_the_rest_of_the_text():
    found = spans("Did Jane Campion Award winners attend?")
    # "campion award" is a title (tier 0) and wins over the longer entity span it overlaps
    matched = longest_matches(found, {"jane campion award winners": 2, "campion award": 0, "jane": 1})
    assert [m.name for m in matched] == ["jane", "campion award"]


def test_names_written_lower_case_are_marked():
    found = {s.name: s for s in spans("Who wrote the piano concerto for The Piano?")}
    assert not found["piano concerto"].capitalised
    assert found["piano"].capitalised  # the last "Piano" (a later span with the same name is kept separately)


@pytest.mark.parametrize(
    "hostile",
    ["Robert'); DROP TABLE chunk;--", "a ⟨b⟩ `c` \"d\"", "x; REMOVE TABLE chunk; -- /* */", "\u202eevil\u202c name", "nul\x00byte"],
)
def test_hostile_titles_and_questions_are_data(minilm, hostile):
    with SurrealStore("mem://") as store:
        docs = [SourceDocument(key="h", title=hostile, text=f"This page is about {hostile} and nothing else.", source="h.txt"),
                SourceDocument(key="o", title="Other", text=f"Another page names {hostile} too.", source="o.txt")]
        _ingest(store, minilm, CallableConceptExtractor(_no_concepts), docs)
        for mode in ("graph", "concept"):
            result = make_retriever(mode, store, embedder=minilm).search(f"What is {hostile}?", k=2)
            assert {d.id for d in result.documents} == {"h", "o"}
        assert store.query("count_chunks", {"filtered": False}, filter=NO_FILTER)[-1]["store"] >= 2
        titles = {row["title"] for row in store.query("get_document", {"ids": [RecordID("document", "h")]})[-1]}
        assert titles == {hostile}


# -- the walk --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def opera_store(minilm, spacy_extractor):
    with SurrealStore("mem://") as store:
        summary = _ingest(store, minilm, spacy_extractor, _docs(OPERA))
        assert summary.chunks >= 2 * len(OPERA)
        yield store


def test_ppr_finds_the_second_hop_dense_search_misses(opera_store, minilm):
    dense = make_retriever("chunk", opera_store, embedder=minilm).search(QUESTION, k=2)
    assert dense.documents[0].id == "silverlake"
    assert "brandvold" not in {d.id for d in dense.documents}, "the corpus must defeat dense search"
    for mode in ("graph", "concept"):
        result = make_retriever(mode, opera_store, embedder=minilm).search(QUESTION, k=2)
        assert {d.id for d in result.documents} == {"silverlake", "brandvold"}, mode
        paths = [p for d in result.documents for p in d.provenance if p.channel == "graph"]
        assert any(p.concept and p.concept.name == "silverlake" for p in paths)


def test_graph_mode_returns_k_documents_and_works_async(opera_store, minilm):
    import asyncio

    retriever = make_retriever("graph", opera_store, embedder=minilm)
    assert len(retriever.search("opera", k=6).documents) == 6
    result = asyncio.run(retriever.asearch(QUESTION, k=3))
    assert [d.id for d in result.documents][:2] == [d.id for d in retriever.search(QUESTION, k=3).documents][:2]


def test_the_walk_never_leaves_the_scope(minilm, spacy_extractor):
    """The composer's document is secret: a public caller's walk cannot reach it through the bridge,
    an unrestricted one does."""
    with SurrealStore("mem://") as store:
        docs = _docs([r for r in OPERA if r[0] != "brandvold"]) + _docs([OPERA[1]], access=("secret",))
        _ingest(store, minilm, spacy_extractor, docs)
        for mode in ("graph", "concept"):
            public = make_retriever(mode, store, embedder=minilm, access=["public"]).search(QUESTION, k=5)
            assert "brandvold" not in {d.id for d in public.documents}
            assert all(p.document_id != "brandvold" for d in public.documents for p in d.provenance)
            everyone = make_retriever(mode, store, embedder=minilm).search(QUESTION, k=2)
            assert "brandvold" in {d.id for d in everyone.documents}


def _ranked(store, minilm, mode, **options):
    result = make_retriever(mode, store, embedder=minilm, **options).search(QUESTION, k=6)
    return [d.id for d in result.documents], [d.score for d in result.documents]


def _same(ranked, expected):
    return ranked[0] == expected[0] and ranked[1] == pytest.approx(expected[1], rel=1e-4)


@pytest.mark.parametrize("mode", ["graph", "concept"])
def test_a_scoped_walk_from_the_lists_is_the_walk_over_the_scoped_edges(minilm, spacy_extractor, mode, monkeypatch):
    """A scoped caller's walk reads the adjacency lists, which carry every tenant's chunks, and keeps
    those of documents inside its scope: the same subgraph, hence the same ranking, as the walk over
    the edges each checked against the scope (graph_subgraph_scoped.surql, a store without lists).
    Half the documents are hidden from the caller, among them chunks the hops reach. The documents
    inside come from the KNN's count when it counted them, else from scope_documents.surql (with
    the count's limit at 0): both ways."""
    hidden = {"brandvold", "carmen", "ring"}
    docs = [d.model_copy(update={"access": ["staff"] if d.key in hidden else ["public"]}) for d in _docs(OPERA)]
    scopes = [{"access": ["public"]}, {"filters": {"source": {"$ne": "tosca.txt"}}}, {"access": ["public", "staff"], "filters": {"source": {"$ne": "brandvold.txt"}}}]
    with SurrealStore("mem://") as store:
        _ingest(store, minilm, spacy_extractor, docs)
        sent: list[str] = []
        query, query_many = store.query, store.query_many
        monkeypatch.setattr(store, "query", lambda name, *a, **kw: sent.append(name) or query(name, *a, **kw))
        monkeypatch.setattr(store, "query_many", lambda steps: sent.extend(s[0] for s in steps) or query_many(steps))
        from_lists = [_ranked(store, minilm, mode, **scope) for scope in scopes]
        assert "graph_subgraph" in sent and "scope_documents" not in sent and "graph_subgraph_scoped" not in sent
        with monkeypatch.context() as limit:
            limit.setitem(surql.CONSTANTS, "exact_scan_chunks", 0)  # documents not counted: asked for
            surql.load.cache_clear()
            asked = [_ranked(store, minilm, mode, **scope) for scope in scopes]
        surql.load.cache_clear()
        assert "scope_documents" in sent
        assert all(_same(ranked, expected) for ranked, expected in zip(asked, from_lists)), (asked, from_lists)
        assert set(from_lists[0][0]) <= {key for key, *_ in OPERA} - hidden
        assert from_lists[0] != _ranked(store, minilm, mode)  # the scope changes the walk
        meta = store.query("store_meta")[-1]
        store.query("store_meta_write", {"meta": {**meta, "schema_version": 6}})
        sent.clear()
        for scope, expected in zip(scopes, from_lists):
            assert _same(_ranked(store, minilm, mode, **scope), expected), scope
        assert "graph_subgraph_scoped" in sent and "graph_subgraph" not in sent


def test_the_lists_and_the_scoped_edges_give_the_same_walk(minilm, spacy_extractor):
    """Every document is public: the public caller's walk and the unrestricted one see the same
    subgraph and rank alike; so does the
    unrestricted walk over the edges of a store not yet migrated to the lists, and after migrating."""
    with SurrealStore("mem://") as store:
        _ingest(store, minilm, spacy_extractor, _docs(OPERA))
        ranked = {mode: _ranked(store, minilm, mode) for mode in ("graph", "concept")}
        for mode, expected in ranked.items():
            assert _same(_ranked(store, minilm, mode, access=["public"]), expected), mode
        # As a schema-6 store: no lists at all.
        meta = store.query("store_meta")[-1]
        store.query("store_meta_write", {"meta": {**meta, "schema_version": 6}})
        store.query_text("test: as schema 6", "REMOVE TABLE chunk_concepts; UPDATE concept_chunks UNSET chunks;")
        for mode, expected in ranked.items():
            assert _same(_ranked(store, minilm, mode), expected), mode
        ensure_schema(store, dimension=minilm.dimension, embedder=minilm.name)
        assert store.query("store_meta")[-1]["schema_version"] == SCHEMA_VERSION
        _edges(store)  # the lists rebuilt say what the edges say
        for mode, expected in ranked.items():
            assert _same(_ranked(store, minilm, mode), expected), mode
        # As a schema-9 store: no `single` lists, so every count is read; the same walk, before and after.
        store.query("store_meta_write", {"meta": {**meta, "schema_version": 9}})
        store.query_text("test: as schema 9", "UPDATE chunk_concepts UNSET single;")
        assert not any(_single(store).values())
        assert _same(_ranked(store, minilm, "graph"), ranked["graph"])
        ensure_schema(store, dimension=minilm.dimension, embedder=minilm.name)
        _edges(store)
        assert any(_single(store).values())
        assert _same(_ranked(store, minilm, "graph"), ranked["graph"])


# "New York Times" is a longer name over "New York": only documents a public caller cannot read mention it.
CITY_PUBLIC = [
    ("park", "Central Park", "Central Park is the largest green space in New York. Joggers and skaters crowd its lawns every weekend."),
    ("bridge", "Brooklyn Bridge", "The Brooklyn Bridge joins two boroughs of New York across the East River. It opened in 1883."),
    ("common", "Boston Common", "Boston Common is the oldest public park in the country. Its lawns host concerts in summer."),
    ("tahoe", "Lake Tahoe", "Lake Tahoe is a freshwater lake in the Sierra Nevada. Skiers visit its slopes in winter."),
]
CITY_HIDDEN = [
    ("paper", "The New York Times", "The New York Times reported on the park in a long feature. It later won a prize for it."),
    ("review", "Press Review", "Readers of the New York Times wrote letters about the skaters on the frozen pond."),
]
CITY_QUESTION = "Which park did the New York Times describe as crowded with skaters?"


def _seen(store, minilm, mode, **options):
    result = make_retriever(mode, store, embedder=minilm, **options).search(CITY_QUESTION, k=6)
    return [(d.id, round(d.score, 9), sorted({p.concept.name for p in d.provenance if p.concept})) for d in result.documents]


def test_a_name_only_hidden_documents_mention_does_not_choose_the_callers_names(minilm, spacy_extractor):
    """The question's longest stored name ("new york times", a title too) is mentioned only by
    secret documents: a public caller's search uses the "new york" its own documents mention and
    ranks them exactly as a store that never held the secret ones, in every mode that matches names."""
    with SurrealStore("mem://") as both, SurrealStore("mem://") as alone:
        _ingest(both, minilm, spacy_extractor, _docs(CITY_PUBLIC) + _docs(CITY_HIDDEN, access=("secret",)))
        _ingest(alone, minilm, spacy_extractor, _docs(CITY_PUBLIC))
        everyone = _seen(both, minilm, "graph")
        assert any("new york times" in names for _, _, names in everyone)  # the hidden name would win
        public = Scope(access=["public"]).compile()
        ids = [RecordID("concept", name) for name in ("new york", "new york times", "central park")]
        for max_df, chunks in ((2, {"new york": 2, "central park": 1}), (1, {"new york": 0, "central park": 1})):
            rows = both.query("graph_names_scoped", {"ids": ids, "max_df": max_df, **public.params}, edges=NAME_EDGES, filter=public)[-1]
            assert {str(r["id"].id): r["titled"] for r in rows} == {"new york": False, "central park": True}
            # the edges inside the scope come only with a name the walk may start from
            assert {str(r["id"].id): len(r.get("chunks") or []) for r in rows} == chunks
        for mode in ("graph", "concept", "hybrid"):
            seen = _seen(both, minilm, mode, access=["public"])
            assert seen == _seen(alone, minilm, mode, access=["public"]), mode
            assert {doc for doc, _, _ in seen} <= {key for key, _, _ in CITY_PUBLIC}
            assert all("new york times" not in names for _, _, names in seen), mode
            if mode != "hybrid":  # hybrid takes the question's names from spaCy, not from the store
                assert any("new york" in names for _, _, names in seen), mode


class _RelationExtractor:
    """A graph extractor (the LLM extractor's protocol, no model): fixed names per chunk, and one
    relation between two names of the Kestrel chunk when ``relate``."""

    def __init__(self, relate: bool) -> None:
        self.relate = relate

    def _names(self, text: str) -> list[str]:
        return ["kestrel project", "hollins farm"] if "Kestrel" in text else []

    def extract(self, texts):
        return [[ConceptMention(name=n, display=n, kind="ORG") for n in self._names(t)] for t in texts]

    def extract_graph(self, texts):
        relation = Relation(subject="kestrel project", type="built_at", object="hollins farm")
        chunks = [
            ChunkGraph(mentions=mentions, relations=[relation] if self.relate and mentions else [])
            for mentions in self.extract(texts)
        ]
        return SimpleNamespace(chunks=chunks, ingest_stats=LLMIngestStats)


def test_relates_to_edges_join_the_walk(minilm):
    """The same store with and without one LLM relation (kestrel project -> hollins farm): the
    relation is written with its chunk, and the walk runs over it."""
    rows = [
        ("kestrel", "Kestrel Project", "The Kestrel Project built a glider in a barn. The glider flew twice in 1903."),
        ("barn", "Hollins Farm", "Hollins Farm keeps sheep on the moor. Its barn has a long wooden roof."),
        ("other", "Early Aircraft", "Early aircraft such as gliders were built by inventors in workshops and sheds."),
    ]
    question = "Where did the Kestrel Project build its aircraft?"
    ranked = {}
    for relate in (False, True):
        with SurrealStore("mem://") as store:
            summary = _ingest(store, minilm, _RelationExtractor(relate), _docs(rows))
            assert summary.failed == 0, summary.failures
            relations = store.query(
                "tool_concept_relations", {"concept": RecordID("concept", "kestrel project"), "limit": 10, "max_edges": 10, "scoped": False},
                scope=NO_FILTER,
            )[-1]["relations"]
            assert [(r["subject"], r["type"], r["object"]) for r in relations] == (
                [("kestrel project", "built_at", "hollins farm")] if relate else []
            )
            found = make_retriever("concept", store, embedder=minilm).search(question, k=3).documents
            ranked[relate] = [d.id for d in found]
    assert ranked[True][0] == ranked[False][0] == "kestrel"
    assert ranked[True][1] == "barn"  # the walk reaches the farm through the relation as well


def test_a_relation_between_two_concepts_only_one_seed_names_joins_the_walk(minilm):
    """The glider's chunk alone names the Kestrel Project and Hollins Farm, and relates them: both are
    `single` concepts of that seed, whose counts the walk from the lists does not read. Their relation
    is still read, so the walk over the lists is the walk over the edges (a store without lists)."""
    rows = [
        ("kestrel", "Glider history", "The Kestrel Project built a glider in a barn at Hollins Farm. The glider flew twice in 1903."),
        ("other", "Early aircraft", "Early aircraft such as gliders were built by inventors in workshops and sheds."),
    ]
    with SurrealStore("mem://") as store:
        assert _ingest(store, minilm, _RelationExtractor(True), _docs(rows)).failed == 0
        single = {name for names in _single(store).values() for name in names}
        assert {"kestrel project", "hollins farm"} <= single
        walks = []
        for version in (SCHEMA_VERSION, 6):
            meta = store.query("store_meta")[-1]
            store.query("store_meta_write", {"meta": {**meta, "schema_version": version}})
            found = make_retriever("graph", store, embedder=minilm).search("When did the glider fly?", k=2).documents
            walks.append([[(p.chunk_id, p.score) for p in d.provenance if p.channel == "graph"] for d in found])
        assert walks[0] and walks[0][0]
        assert walks[0] == [[(chunk, pytest.approx(score)) for chunk, score in paths] for paths in walks[1]]


class _HubExtractor(_RelationExtractor):
    """The glider's chunk names the glider and the Kestrel Project; another chunk names the project
    and 100 sites, and relates the project to each of them."""

    SITES = [f"site {i:03d}" for i in range(100)]

    def _names(self, text: str) -> list[str]:
        if "Glider" in text:
            return ["hollins glider", "kestrel project"]
        return ["kestrel project", *self.SITES] if "sites" in text else []

    def extract_graph(self, texts):
        chunks = [
            ChunkGraph(
                mentions=mentions,
                relations=[Relation(subject="kestrel project", type="built_at", object=s) for s in self.SITES],
            )
            for mentions in self.extract(texts)
        ]
        return SimpleNamespace(chunks=chunks, ingest_stats=LLMIngestStats)


@pytest.mark.parametrize("access", [None, ["public"]])
def test_a_concepts_relations_are_read_up_to_a_bound(minilm, monkeypatch, access):
    """A concept related to many others (a hub of the LLM layer) has only its first RELATION_EDGES
    relations each way read into the subgraph (graph_subgraph.surql, scoped or not): the walk
    from the glider meets the Kestrel Project, related to 100 sites."""
    rows = [
        ("glider", "Hollins Glider", "The Hollins Glider was built by the Kestrel Project and flew twice."),
        ("sites", "Sites", "The Kestrel Project tested at a hundred sites across the moor."),
    ]
    with SurrealStore("mem://") as store:
        assert _ingest(store, minilm, _HubExtractor(relate=True), _docs(rows)).failed == 0
        answers: list[dict] = []
        query_many = store.query_many

        def recorded(steps):
            results = query_many(steps)
            answers.extend(result[-1] for (name, _, _), result in zip(steps, results) if name.startswith("graph_subgraph"))
            return results

        monkeypatch.setattr(store, "query_many", recorded)
        found = make_retriever("concept", store, embedder=minilm, access=access).search("How often did the Hollins Glider fly?", k=2)
        assert found.documents[0].id == "glider"
        relations = {tuple(relation[:2]) for answer in answers for relation in answer["relations"]}
        assert len(relations) == RELATION_EDGES < len(_HubExtractor.SITES)
        assert all(subject == "kestrel project" and site in _HubExtractor.SITES for subject, site in relations)


class _MemoExtractor(_RelationExtractor):
    """Fixed names per chunk; a chunk naming both the Kestrel Project and Marsh Airfield relates them."""

    def _names(self, text: str) -> list[str]:
        return [name for name, marker in (("kestrel project", "Kestrel"), ("marsh airfield", "Marsh Airfield")) if marker in text]

    def extract_graph(self, texts):
        relation = Relation(subject="kestrel project", type="flew_from", object="marsh airfield")
        chunks = [ChunkGraph(mentions=m, relations=[relation] if len(m) == 2 else []) for m in self.extract(texts)]
        return SimpleNamespace(chunks=chunks, ingest_stats=LLMIngestStats)


MEMO_PUBLIC = [
    ("kestrel", "Kestrel Project", "The Kestrel Project built a glider in a barn. The glider flew twice in 1903."),
    ("airfield", "Marsh Airfield", "Marsh Airfield lies on the edge of the fen. Its grass runway is short and wet."),
    ("other", "Early Aircraft", "Early aircraft such as gliders were built by inventors in workshops and sheds."),
]
MEMO_HIDDEN = [("memo", "Flight Memo", "In secret the Kestrel Project flew its glider from Marsh Airfield.")]


@pytest.mark.parametrize("mode", ["graph", "concept"])
def test_a_relation_read_from_a_hidden_document_does_not_lead_a_scoped_walk(minilm, mode, monkeypatch):
    """Only a secret memo relates the Kestrel Project to Marsh Airfield (and mentions both). An
    unrestricted walk reads that relation; a public caller's walk from the lists leaves it out, and
    the related concept with it: the same walk, chunk by chunk, as in a store that never held the
    memo, and as the walk over the edges each checked against the scope (a store without lists)."""
    question = "Where did the Kestrel Project fly its glider?"
    extractor = _MemoExtractor(relate=True)

    def walked(store, **options):
        found = make_retriever(mode, store, embedder=minilm, **options).search(question, k=3).documents
        return [(d.id, [(p.chunk_id, round(p.score, 9)) for p in d.provenance if p.channel == "graph"]) for d in found]

    with SurrealStore("mem://") as both, SurrealStore("mem://") as alone:
        _ingest(both, minilm, extractor, _docs(MEMO_PUBLIC) + _docs(MEMO_HIDDEN, access=("secret",)))
        _ingest(alone, minilm, extractor, _docs(MEMO_PUBLIC))
        answers: list[dict] = []
        query_many = both.query_many

        def recorded(steps):
            results = query_many(steps)
            answers.extend(result[-1] for (name, _, _), result in zip(steps, results) if name == "graph_subgraph")
            return results

        monkeypatch.setattr(both, "query_many", recorded)
        assert "memo" in {doc for doc, _ in walked(both)}
        assert {(a, b) for answer in answers for a, b, _ in answer["relations"]} == {("kestrel project", "marsh airfield")}
        answers.clear()
        public = walked(both, access=["public"])
        assert answers and all(answer["relations"] for answer in answers)  # read from the lists, then left out
        assert public == walked(alone, access=["public"])
        assert any(paths for _, paths in public)
        meta = both.query("store_meta")[-1]
        both.query("store_meta_write", {"meta": {**meta, "schema_version": 6}})
        assert walked(both, access=["public"]) == public


def _walk_order(quality, minilm):
    """The documents the graph mode's walk ranks over a fixed subgraph: the two chunks of document
    "answer" nearest to the question, which share "rmtree" with two chunks of other documents, and
    four chunks of document "page" that mention "directory", the one name the question contains
    (``quality``: how it matched)."""
    out = {
        "knn": [["answer::h::0", "answer", 0.82], ["answer::h::1", "answer", 0.61]],
        "seeds": [["answer::h::0", ["rmtree"], [], []], ["answer::h::1", ["rmtree"], [], []]],
        "counts": [
            ["rmtree", 4, [["answer::h::0", False, False], ["answer::h::1", False, False], ["other::h::0", False, False], ["more::h::0", False, False]]],
            ["directory", 4, [[f"page::h::{i}", False, False] for i in range(4)]],
        ],
        "named": [["directory", [[f"page::h::{i}", False, False] for i in range(4)]]],
        "related_counts": [],
    }
    with SurrealStore("mem://") as store:
        retriever = GraphRetriever(store, embedder=minilm)
        request = SimpleNamespace(filter=NO_FILTER)
        concepts = {"directory": QuestionConcept(weight=quality, n=4, quality=quality)}
        hits = retriever._walk(request, assemble(out), out, concepts, 1000)
    return list(dict.fromkeys(hit.doc for hit in hits))


def test_a_question_naming_only_common_words_walks_from_its_nearest_chunks(minilm):
    """The question's concepts seed the walk with their best match quality as their mass: "directory"
    written in lower case (a tenth of a name) leaves the walk to the nearest chunks' document. Before,
    the concepts' seeds were normalised to the dense seeds' mass whatever their quality, and four
    chunks mentioning a common word outweighed the two nearest to the question."""
    assert _walk_order(0.1, minilm)[0] == "answer"
    assert _walk_order(1.0, minilm)[0] == "page"  # written as a name, it leads the walk to its page
