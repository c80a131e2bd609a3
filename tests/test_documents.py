"""Documents as nodes: what identifies a long document, and the document channel that finds it.

Real embedded SurrealDB, real spaCy and MiniLM. The corpus is a set of long quarterly reports of
three made-up companies: each report repeats its company's business in many chunks, so only its
name, its period and its cover tell reports of one company apart (the shape of a filings corpus).
"""

from __future__ import annotations

import pytest
from surrealdb import RecordID

from surreal_kgrag import Ingestor, SourceDocument, SurrealStore
from surreal_kgrag.errors import QueryExecutionError
from surreal_kgrag.identity import asks_latest, document_date, document_names, periods
from surreal_kgrag.models import ConceptMention
from surreal_kgrag.retrieval import make_retriever
from surreal_kgrag.retrieval.documents import Named, hits, lowercase_factor, question_names, scores
from surreal_kgrag.schema import SCHEMA_VERSION, ensure_schema

COMPANIES = {
    "ZNTH": ("Zenith Robotics, Inc.", "warehouse robots", "Ohio"),
    "BLKW": ("Blackwater Mills Corporation", "paper and pulp", "Maine"),
    "QRTZ": ("Quartzline Ltd.", "optical fibre", "Oregon"),
}
QUARTERS = ["2022 Q4", "2023 Q1", "2023 Q2", "2023 Q3"]
FUSED_MODES = ["concept", "hybrid", "graph"]


def report(ticker: str, quarter: str) -> str:
    name, product, state = COMPANIES[ticker]
    short = name.split(",")[0].replace(" Corporation", "").replace(" Ltd.", "")
    cover = f"{name}\nQuarterly report on Form 10-Q\nIncorporated in {state}. Trading symbol {ticker}.\n"
    body = [
        f"{short} sells {product} to customers in North America and Europe. Demand for {product} stayed "
        f"steady in section {i}, and management reviewed supply contracts, pricing and freight costs."
        for i in range(40)
    ]
    year, q = quarter.split()
    figure = f"Net sales of {product} were {100 + 7 * QUARTERS.index(quarter) + len(ticker)} million dollars in {q} {year}."
    body.insert(9, f"Results of operations. {figure} Inventory of finished goods rose as new plants opened.")
    return cover + "\n\n" + "\n\n".join(body)


@pytest.fixture(scope="module")
def store(minilm, spacy_extractor, tmp_path_factory):
    folder = tmp_path_factory.mktemp("reports")
    docs = []
    for ticker in COMPANIES:
        for quarter in QUARTERS:
            path = folder / f"{quarter} {ticker}.txt"
            path.write_text(report(ticker, quarter))
            access = ["finance"] if ticker != "QRTZ" else ["board"]
            docs.append(SourceDocument(key=str(path), text=path.read_text(), title=path.stem, source=str(path), access=access))
    with SurrealStore("mem://") as s:
        Ingestor(s, embedder=minilm, extractor=spacy_extractor).ingest(docs)
        yield s


def files(result) -> list[str]:
    return [d.source.rsplit("/", 1)[-1] for d in result.documents]


def test_periods_are_read_in_every_common_spelling():
    assert periods("Q3 2023") == ["2023 q3"]
    assert periods("2023 Q1 report") == ["2023 q1"]
    assert periods("the second quarter of fiscal 2024") == ["2024 q2"]
    assert periods("Q4 FY23 and Q1 FY24") == ["2023 q4", "2024 q1"]
    assert periods("in 2023 sales rose") == []
    assert asks_latest("What did the most recent report say?")
    assert not asks_latest("What did the most recent Q2 2023 report say?")  # a named period wins


def test_a_document_is_named_by_its_file_name_parts_and_the_organisations_it_is_about():
    doc = SourceDocument(key="k", text="x", title="2023 Q2 ZNTH", source="/data/2023 Q2 ZNTH.txt")
    org = ConceptMention(name="zenith robotics, inc", display="Zenith Robotics, Inc.", kind="ORG")
    place = ConceptMention(name="ohio", display="Ohio", kind="GPE")
    rare = ConceptMention(name="acme", display="Acme", kind="ORG")
    chunks = [[org, place]] + [[org] for _ in range(9)] + [[rare]]
    names = document_names(doc, [], chunks)
    assert {"znth", "2023 q2", "2023", "zenith robotics"} <= set(names)
    assert "ohio" in names  # on the cover (first chunks) of a long document
    assert "acme" not in names  # one chunk of eleven mentions it
    # A short passage has no cover: its entities do not name it.
    assert "ohio" not in document_names(doc, [], [[org, place]])
    # With pages known, the cover is page 1, however many chunks its headings split it into.
    paged = document_names(doc, [], [[], [], [place], [rare]] + [[org]] * 8, pages=[1, 1, 1, 2] + [3] * 8)
    assert "ohio" in paged and "acme" not in paged
    assert document_date(doc) == "2023-04-01"
    dated = SourceDocument(key="k", text="x", source="notes.txt", metadata={"date": "2021-11-05T10:00:00"})
    assert document_date(dated) == "2021-11-05"


def test_a_name_in_more_documents_than_the_last_count_still_weighs_for_them():
    """The store's document count is read once a minute; documents written since can carry a name
    more often than that count holds. The name still adds to its documents' scores, never less."""
    spans, periods = question_names("What did Zenith Robotics report in 2023 Q2?")
    names = {span.name for span in spans}
    assert {"zenith robotics"} <= names and periods
    rows = [
        {"name": "zenith robotics", "n": 9, "docs": [{"doc": RecordID("document", f"z{i}"), "chunks": 40} for i in range(9)]},
        {"name": periods[0], "n": 1, "docs": [{"doc": RecordID("document", "z3"), "chunks": 40}]},
    ]
    ranked = scores(rows, spans, periods, total=4, per_name=64, latest=False)
    assert ranked[0].doc == "z3"
    assert len(ranked) == 9 and all(named.score > 0 and named.quality == 1.0 for named in ranked)
    # The same name in a question written all in lower case names them a tenth as surely; in one
    # that capitalises anything, a lower-case word is not a name, and it names none of them.
    for question, named in [("what did zenith robotics report?", {0.1}), ("What did zenith robotics report?", set())]:
        spans, periods = question_names(question)
        lowercase = lowercase_factor(question)
        assert {n.quality for n in scores(rows, spans, periods, total=4, per_name=64, latest=False, lowercase=lowercase)} == named


@pytest.mark.parametrize("mode", FUSED_MODES)
def test_a_question_naming_company_and_quarter_finds_that_report_first(store, mode):
    retriever = make_retriever(mode, store)
    result = retriever.search("What were Zenith Robotics' net sales in Q2 2023?", k=4)
    assert files(result)[0] == "2023 Q2 ZNTH.txt"
    result = retriever.search("How did Blackwater Mills discuss inventory in the first quarter of 2023?", k=4)
    assert files(result)[0] == "2023 Q1 BLKW.txt"


@pytest.mark.parametrize("mode", FUSED_MODES)
def test_the_latest_report_of_the_company_comes_first(store, mode):
    result = make_retriever(mode, store).search("What were Blackwater Mills' net sales in the latest report?", k=4)
    assert files(result)[0] == "2023 Q3 BLKW.txt"
    assert set(files(result)) == {f"{q} BLKW.txt" for q in QUARTERS}


def test_a_named_document_comes_with_the_passage_that_answers_not_its_first_chunks(store):
    result = make_retriever("graph", store).search("What were Zenith Robotics' net sales in Q2 2023?", k=1)
    top = result.documents[0]
    assert any("Net sales of warehouse robots" in chunk.content for chunk in top.chunks)
    assert any(p.channel == "document" for p in top.provenance)


def test_a_named_documents_passages_are_its_nearest_chunks_from_the_pool_or_from_a_scan(store, minilm):
    """A named document's passages (fragments/named_passages.surql, read with a search's KNN) are
    its best chunks from the store-wide pool of nearest chunks (a document's chunks there are its
    best ones), or a scan of its chunks when it has none there: a pool larger than the store gives every document its exact best three; a pool of 1
    gives the document of the nearest chunk that chunk alone and scans the others; a pool in
    between gives each document a prefix of its best three."""
    vector = minilm.embed_query("What were Zenith Robotics' net sales of warehouse robots in Q2 2023?")
    docs = [row["id"] for row in store.query("document_keys")[-1]]
    assert len(docs) == 12

    def passages(pool: int) -> dict[str, list[str]]:
        params = {
            "docs": docs, "embedding": vector, "per_doc": 3, "k": 1, "keep": 1, "exact": False, "threshold": 0.0,
            "filtered": False, "count_inside": False,
        }
        out = store.query("search_hybrid", params, candidates=pool, ef=max(80, pool), filter=_no_filter(), document_filter=_no_filter())[-1]
        assert out["fetched"] == 1  # the search's own pool is cut to its k
        named = [Named(str(doc.id), 1.0, "", 1.0) for doc in docs]
        found: dict[str, list[str]] = {}
        for hit in hits(named, out["passages"], 3):
            found.setdefault(hit.doc, []).append(hit.chunk)
        assert set(found) == {item.doc for item in named}
        return found

    best = passages(2000)
    assert all(len(found) == 3 for found in best.values())
    one = passages(1)
    assert sorted(len(found) for found in one.values()) == [1] + [3] * 11
    for pool in (1, 20):
        for doc, found in passages(pool).items():
            assert found and found == best[doc][: len(found)], (pool, doc)


@pytest.mark.parametrize("pool", [1, 100])
@pytest.mark.parametrize("mode", FUSED_MODES)
def test_the_document_channel_stays_inside_the_callers_scope(store, mode, pool):
    retriever = make_retriever(mode, store, access=["finance"], document_passage_pool=pool)
    result = retriever.search("What were Quartzline's optical fibre net sales in Q2 2023?", k=12)
    assert result.documents
    assert not any("QRTZ" in name for name in files(result))
    narrowed = make_retriever(mode, store, document_passage_pool=pool).search(
        "Zenith Robotics Q2 2023", k=12, filters={"title": {"$in": [f"{q} BLKW" for q in QUARTERS]}}
    )
    assert narrowed.documents and all("BLKW" in name for name in files(narrowed))


def test_names_follow_the_document_when_it_is_replaced_or_deleted(minilm, spacy_extractor):
    with SurrealStore("mem://") as s:
        ingestor = Ingestor(s, embedder=minilm, extractor=spacy_extractor)
        first = SourceDocument(key="r", text=report("ZNTH", "2023 Q1"), title="2023 Q1 ZNTH", source="/x/2023 Q1 ZNTH.txt")
        ingestor.ingest([first])
        assert _lookup(s, ["2023 q1"])[0]["n"] == 1
        moved = first.model_copy(update={"title": "2023 Q3 ZNTH", "source": "/x/2023 Q3 ZNTH.txt"})
        ingestor.ingest([moved])
        rows = _lookup(s, ["2023 q1", "2023 q3"])
        assert [(row["name"], row["n"]) for row in rows] == [("2023 q3", 1)]  # a name no document carries is left out
        ingestor.delete(["r"])
        assert _lookup(s, ["2023 q3", "znth"]) == []


def test_hostile_names_are_stored_and_matched_as_data(minilm, spacy_extractor):
    title = "Q2 2023 ]..[ '; DELETE document; -- report"
    with SurrealStore("mem://") as s:
        ingestor = Ingestor(s, embedder=minilm, extractor=spacy_extractor)
        ingestor.ingest([SourceDocument(key="h", text=report("QRTZ", "2023 Q2"), title=title, source="/x/h.txt")])
        ingestor.ingest([SourceDocument(key="z", text=report("ZNTH", "2023 Q2"), title="2023 Q2 ZNTH", source="/x/z.txt")])
        # The title is stored as the document's name, verbatim once normalised, and looked up as data.
        hostile = "q2 2023 ]..[ '; delete document; -- report"
        assert _by_name(_lookup(s, [hostile, "2023 q2"])) == {hostile: (1, ["h"]), "2023 q2": (2, ["h", "z"])}
        result = make_retriever("graph", s).search(title, k=2)
        assert {doc.id for doc in result.documents} == {"h", "z"}  # both named by the period; no clause ran
        assert s.query("stats")[0]["documents"] == 2


def test_a_names_count_is_exact_and_a_hub_is_not_read(store):
    """`n` is how many documents carry a name, all of them (the engine-kept view); a name that
    `per_name` or more documents carry is a hub, returned without its documents."""
    rows = {row["name"]: row for row in _lookup(store, ["znth", "2023 q1", "zenith robotics", "no such name"], per_name=4)}
    assert {name: row["n"] for name, row in rows.items()} == {"znth": 4, "2023 q1": 3, "zenith robotics": 4}
    assert rows["znth"]["docs"] == [] and rows["zenith robotics"]["docs"] == []
    assert sorted(str(hit["doc"].id).rsplit("/", 1)[-1] for hit in rows["2023 q1"]["docs"]) == [
        f"2023 Q1 {ticker}.txt" for ticker in sorted(COMPANIES)
    ]
    assert store.query("check_integrity")[-1]["name_counts_out_of_step"] == 0


def test_a_schema_10_store_finds_the_same_documents_before_and_after_it_gains_the_name_counts(minilm, spacy_extractor):
    """A store written before the document_name_count view is read by counting each name's rows,
    and gets the view when it is next opened for ingest: the same lookups and rankings throughout."""
    names = ["znth", "blkw", "2023 q1", "2023 q2", "zenith robotics", "blackwater mills", "q1", "nothing here"]
    question = "What were Blackwater Mills' net sales of paper and pulp in Q2 2023?"
    with SurrealStore("mem://") as s:
        docs = [
            SourceDocument(key=f"{q} {t}", text=report(t, q), title=f"{q} {t}", source=f"/x/{q} {t}.txt")
            for t in ("ZNTH", "BLKW") for q in QUARTERS[1:3]
        ]
        Ingestor(s, embedder=minilm, extractor=spacy_extractor).ingest(docs)
        expected = _by_name(_lookup(s, names))
        assert set(expected) == set(names) - {"nothing here"}
        ranked = {mode: [d.id for d in make_retriever(mode, s).search(question, k=4).documents] for mode in FUSED_MODES}
        assert all(ids[0] == "2023 Q2 BLKW" for ids in ranked.values()), ranked

        meta = s.query("store_meta")[-1]
        s.query("store_meta_write", {"meta": {**meta, "schema_version": 10}})
        s.query_text("test: as schema 10", "REMOVE TABLE document_name_count; REMOVE FIELD name ON document_name; UPDATE document_name UNSET name;")
        with pytest.raises(QueryExecutionError, match="document_name_count' does not exist"):
            s.query_text("test: no view", "SELECT * FROM document_name_count;")
        assert _by_name(_lookup(s, names, counted=False)) == expected
        assert {mode: [d.id for d in make_retriever(mode, s).search(question, k=4).documents] for mode in FUSED_MODES} == ranked

        ensure_schema(s, dimension=minilm.dimension, embedder=minilm.name)
        assert s.query("store_meta")[-1]["schema_version"] == SCHEMA_VERSION
        assert s.query("check_integrity")[-1]["name_counts_out_of_step"] == 0
        assert len(s.query_text("test: the view", "SELECT * FROM document_name_count;")[-1]) > len(names)
        assert _by_name(_lookup(s, names)) == expected
        assert {mode: [d.id for d in make_retriever(mode, s).search(question, k=4).documents] for mode in FUSED_MODES} == ranked


def _lookup(s, names, per_name=10, counted=True):
    params = {"names": names, "per_name": per_name, "counted": counted}
    return s.query("document_names", params, filter=_no_filter())[-1]


def _by_name(rows):
    return {row["name"]: (row["n"], sorted(str(hit["doc"].id) for hit in row["docs"])) for row in rows}


def _no_filter():
    from surreal_kgrag.surql import NO_FILTER

    return NO_FILTER


MANUAL_PAGES = {
    "copy": [
        "Assignment statements do not copy objects, they create bindings between a target and an object.",
        "A shallow copy constructs a new compound object and then inserts references to the objects found in the original.",
        "A deep copy constructs a new compound object and then, recursively, inserts copies of the objects found in the original.",
        "Deep copy operations can run into recursive objects, which may cause a recursive loop; a memo dictionary keeps track of them.",
        "Classes can define __copy__ and __deepcopy__ to control how their instances are duplicated in memory.",
    ],
    "shutil": [
        "The shutil module offers high-level operations on files and collections of files on disk.",
        "copytree recursively copies an entire directory tree rooted at src to a directory named dst and returns the destination.",
        "rmtree deletes an entire directory tree; path must point to a directory, not a symbolic link to one.",
        "move recursively moves a file or directory to another location on the file system and returns the destination.",
        "disk_usage returns the total, used and free space of the file system that holds a given path.",
    ],
    "time": [
        "This module provides functions for reading the clocks of the operating system and converting between time representations.",
        "monotonic returns the value of a clock that cannot go backwards and is not affected by system clock updates.",
        "sleep suspends execution of the calling thread for the given number of seconds.",
        "strftime converts a tuple representing a time to a string as specified by the format argument.",
        "gmtime converts a time expressed in seconds since the epoch to a struct_time in UTC.",
    ],
}


@pytest.fixture(scope="module")
def manual(minilm, spacy_extractor, tmp_path_factory):
    """Long manual pages named by common words (copy.txt, time.txt), as a library's reference is."""
    folder = tmp_path_factory.mktemp("manual")
    for name, sentences in MANUAL_PAGES.items():
        paragraphs = [f"{sentence} Section {i} of the {name} reference repeats it with example {i}." for i in range(8) for sentence in sentences]
        (folder / f"{name}.txt").write_text("\n\n".join(paragraphs))
    with SurrealStore("mem://") as s:
        summary = Ingestor(s, embedder=minilm, extractor=spacy_extractor).ingest([folder])
        assert summary.added == 3
        yield s


@pytest.mark.parametrize("mode", ["hybrid", "graph"])  # concept mode walks from the question's concepts alone
def test_a_common_word_in_lower_case_does_not_name_a_document(manual, mode):
    """ "copy" in "how do I copy a directory tree" is a verb, not the page copy.txt: a name written in
    lower case weighs a tenth of one in the fusion, so the page the other channels find comes first.
    Before, the document channel's first place outweighed them whatever the match."""
    retriever = make_retriever(mode, manual)
    spans = question_names("How do I copy an entire directory tree recursively?")[0]
    assert "copy" in {span.name for span in spans}  # the premise: copy.txt is named "copy"
    assert files(retriever.search("How do I copy an entire directory tree recursively?", k=3))[0] == "shutil.txt"
    assert files(retriever.search("Which clock cannot go backwards when the system time changes?", k=3))[0] == "time.txt"
    # Written as a name, the same word still names its page.
    assert files(retriever.search("What does Copy say about directory trees?", k=3))[0] == "copy.txt"
