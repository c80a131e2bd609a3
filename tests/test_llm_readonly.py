"""The read-only query guard and runner on the real embedded SurrealDB: every write form is refused and
the database is left exactly as it was; reads run under a row and a time limit; scoped callers need
a record-user connection; generated statements (hypothesis) never change the database."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from llm_support import CORPUS

from surreal_kgrag import IngestConfig, Ingestor, SourceDocument, SurrealStore
from surreal_kgrag.chunking import SentenceChunker
from surreal_kgrag.llm import ReadonlyLimits, ReadonlyQueryError, arun_readonly_query, check_readonly, run_readonly_query
from surreal_kgrag.llm.bounds import GRAPH_TABLES, PRIVATE_TABLES
from surreal_kgrag.llm.guard import FORBIDDEN_WORDS, tokenize
from surreal_kgrag.llm.text2surql import TABLES
from surreal_kgrag.retrieval import Scope
from surreal_kgrag.tenancy import READER_ACCESS, add_reader, enable_tenancy


def documents():
    return [
        SourceDocument(key=key, text=text, title=title, source=f"corpus/{key}", access=["staff"] if key == "nobel" else ["public"])
        for key, (title, text) in CORPUS.items()
    ]


def ingest(store, minilm, spacy_extractor):
    config = IngestConfig(chunker=SentenceChunker(max_tokens=12, overlap_tokens=0))
    summary = Ingestor(store, embedder=minilm, extractor=spacy_extractor, config=config).ingest(documents())
    assert summary.added == len(CORPUS) and summary.chunks >= 3 * len(CORPUS)
    return summary


@pytest.fixture(scope="module")
def store(minilm, spacy_extractor):
    with SurrealStore("mem://") as s:
        ingest(s, minilm, spacy_extractor)
        yield s


def snapshot(store) -> tuple:
    """Everything a write could change: every definition and every table's rows."""
    info = store.query("schema_info")
    rows = store.query_text(
        "snapshot",
        "SELECT VALUE [(SELECT * FROM document ORDER BY id), (SELECT id, doc, index, content, access FROM chunk ORDER BY id), "
        "(SELECT * FROM chunk_text ORDER BY id), (SELECT id, name, kind, df, display FROM concept ORDER BY id), "
        "(SELECT * FROM MENTIONS_CONCEPT ORDER BY id), (SELECT * FROM term ORDER BY id)] FROM ONLY {}",
    )
    return repr(info), repr(rows)


# -- writes are refused ----------------------------------------------------------------------------

WRITES = [
    ("DELETE concept", "not_select"),
    ("UPDATE document SET title = 'x'", "not_select"),
    ("DEFINE TABLE evil SCHEMALESS", "not_select"),
    ("REMOVE TABLE chunk", "not_select"),
    ("INSERT INTO document {id: 'x', source: 'x'}", "not_select"),
    ("RELATE concept:⟨warsaw⟩->MENTIONS_CONCEPT->concept:⟨paris⟩", "not_select"),
    ("CREATE document:evil SET source = 'x'", "not_select"),
    ("UPSERT document:evil SET source = 'x'", "not_select"),
    ("KILL u'0189d6e3-8eac-703a-9a48-d9faa78b44b9'", "not_select"),
    ("LIVE SELECT * FROM document", "not_select"),
    ("LET $x = (DELETE document)", "not_select"),
    ("BEGIN; DELETE document; COMMIT", "not_select"),
    ("INFO FOR DB", "not_select"),
    ("USE NS other", "not_select"),
    ("ACCESS reader GRANT FOR RECORD reader:x", "not_select"),
    ("SELECT * FROM document; DELETE document", "multiple_statements"),
    ("SELECT * FROM document;DELETE document;", "multiple_statements"),
    ("select * from document ; ; ", "multiple_statements"),
    ("SELECT * FROM document WHERE title = '--'; DELETE document", "multiple_statements"),
    ("SELECT * FROM (DELETE document RETURN BEFORE)", "forbidden_word"),
    ("SELECT * FROM document WHERE { DELETE chunk; true }", "multiple_statements"),
    ("SELECT * FROM document WHERE { DELETE chunk }", "forbidden_word"),
    ("SELECT * FROM document WHERE id = 1..CREATE document:evil", "forbidden_word"),
    ("SELECT *, (UPDATE concept SET df = 0) AS x FROM document", "forbidden_word"),
    ("SELECT * FROM document WHERE [UPSERT document:evil]", "forbidden_word"),
    ("SELECT * FROM document WHERE (INSERT INTO document {id: 'evil'})", "forbidden_word"),
    ("SELECT * FROM document WHERE (RELATE concept:a->MENTIONS_CONCEPT->concept:b)", "forbidden_word"),
    ("SELECT * FROM document WHERE (DEFINE TABLE evil)", "forbidden_word"),
    ("SELECT * FROM document WHERE (REMOVE TABLE chunk)", "forbidden_word"),
    ("SELECT * FROM document WHERE { KILL u'0189d6e3-8eac-703a-9a48-d9faa78b44b9' }", "forbidden_word"),
    ("SELECT * FROM document WHERE { INFO FOR DB }", "forbidden_word"),
    ("SELECT * FROM document WHERE |$x| { LET $y = 1 }", "forbidden_word"),
    ("SELECT <future> { DELETE document } FROM document", "forbidden_word"),
    ("SELECT * FROM document WHERE x.delete()", "forbidden_word"),
    ("SELECT * FROM document TIMEOUT 1h", "forbidden_word"),
    ("SELECT * FROM document PARALLEL", "forbidden_word"),
    ("SELECT * FROM document EXPLAIN", "forbidden_word"),
    ("SELECT sleep(2s) FROM document", "forbidden_word"),
    ("SELECT * FROM document -- ; DELETE document", "comment"),
    ("SELECT * FROM document /* */ ; DELETE document", "comment"),
    ("SELECT * FROM document # x\n; DELETE document", "comment"),
    ("SELECT * FROM document // x", "comment"),
    ("SELECT * FROM document WHERE title = 'x\\'; DELETE document; --'", "characters"),
    ("SELECT * FROM document；DELETE document", "characters"),
    ("SELECT * FROM document WHERE title = 'a'\x00; DELETE document", "characters"),
    ("SELECT\u00a0* FROM document", "characters"),
    ("SELECT * FROM document WHERE title = 'unterminated; DELETE document", "unterminated"),
    ("SELECT * FROM document WHERE `unterminated", "unterminated"),
    ("SELECT * FROM document) ; (SELECT * FROM document", "brackets"),
    ("SELECT * FROM (SELECT * FROM document", "brackets"),
    ("SELECT http::get('http://127.0.0.1:9') FROM document", "forbidden_function"),
    ("SELECT `http`::get('http://127.0.0.1:9') FROM document", "forbidden_function"),
    ("SELECT http :: post('http://127.0.0.1:9', {}) FROM document", "forbidden_function"),
    ("SELECT fn::evil() FROM document", "forbidden_function"),
    ("SELECT crypto::argon2::generate('x') FROM document", "forbidden_function"),
    ("SELECT type::file('bucket', 'x') FROM document", "forbidden_function"),
    ("SELECT * FROM document WHERE x = f\"bucket:/x\"", "forbidden_function"),
    ("SELECT x.put('y') FROM document", "forbidden_function"),
    ("", "empty"),
    (";", "empty"),
    ("SELECT " + "x, " * 2000 + "y FROM document", "too_long"),
]


@pytest.mark.parametrize(("statement", "code"), WRITES, ids=[f"{i}:{s[:40]}" for i, (s, _) in enumerate(WRITES)])
def test_every_write_form_is_refused_and_the_database_is_unchanged(store, statement, code):
    with pytest.raises(ReadonlyQueryError) as refused:
        check_readonly(statement)
    assert refused.value.code == code, str(refused.value)
    before = snapshot(store)
    with pytest.raises(ReadonlyQueryError):
        run_readonly_query(store, statement)
    assert snapshot(store) == before


def test_the_refusal_tells_the_model_what_to_change():
    with pytest.raises(ReadonlyQueryError, match=r"'DELETE' is not allowed \(character 16\).*backticks"):
        check_readonly("SELECT * FROM (DELETE document)")
    with pytest.raises(ReadonlyQueryError, match="remove the ';' at character 23 and what follows"):
        check_readonly("SELECT * FROM document; DELETE document")
    with pytest.raises(ReadonlyQueryError, match="the function http::get\\(\\) is not allowed; use functions of array"):
        check_readonly("SELECT http::get('x') FROM document")


def test_the_engine_itself_would_have_run_these_writes(store):
    """Why the guard refuses words anywhere: SurrealDB 3.2 runs a write inside a SELECT. The store's own
    query_text (not the guard) shows it on a scratch store."""
    with SurrealStore("mem://") as scratch:
        scratch.query_text("scratch", "CREATE a:1 SET x = 1")
        scratch.query_text("scratch", "SELECT * FROM a WHERE x = 1..CREATE a:2")
        scratch.query_text("scratch", "SELECT * FROM a:1 WHERE { CREATE a:3; true }")
        scratch.query_text("scratch", "SELECT * FROM (CREATE a:4)")
        assert [r["id"].id for r in scratch.query_text("scratch", "SELECT id FROM a ORDER BY id")[-1]] == [1, 2, 3, 4]


# -- reads run -------------------------------------------------------------------------------------


def test_reads_run_and_return_json_rows(store):
    titles = sorted(title for title, _ in CORPUS.values())
    assert run_readonly_query(store, "SELECT VALUE title FROM document ORDER BY title;").rows == titles
    assert run_readonly_query(store, "SELECT count() AS n FROM document GROUP ALL").rows == [{"n": len(CORPUS)}]
    rows = run_readonly_query(store, "SELECT id, doc, index FROM chunk WHERE doc = document:warsaw ORDER BY index").rows
    assert [r["index"] for r in rows] == list(range(len(rows))) and {r["doc"] for r in rows} == {"document:warsaw"}
    assert all(r["id"].startswith("chunk:warsaw::") for r in rows)
    # Graph walk: the documents that mention Marie Curie, through the mention edges.
    walk = run_readonly_query(
        store, "SELECT VALUE array::sort(array::distinct(<-MENTIONS_CONCEPT.doc)) FROM ONLY concept:⟨marie curie⟩"
    ).rows
    expected = sorted(f"document:{k}" for k, (_, text) in CORPUS.items() if "Marie Curie" in text)
    assert walk == expected  # ONLY: the one value itself, here a list


@pytest.mark.parametrize(
    "statement",
    [
        "SELECT VALUE id FROM document WHERE title != 'DELETE; DROP -- /* */ #'",
        'SELECT VALUE id FROM document WHERE title = "it\'s ⟨fine⟩; REMOVE TABLE chunk"',
        "SELECT `title`, metadata.`update` AS u FROM document",
        "SELECT name, kind, df FROM concept ORDER BY df DESC, name LIMIT 5",
        "SELECT kind, count() AS n FROM concept GROUP BY kind ORDER BY n DESC",
        "SELECT string::uppercase(name) AS n, math::max([df, 1]) AS m FROM concept WHERE name CONTAINS 'curie'",
        "SELECT * FROM document WHERE created_at < time::now() AND access CONTAINSANY ['public'] FETCH metadata",
        "SELECT ->MENTIONS_CONCEPT->concept.name AS names FROM chunk WHERE doc = document:paris",
        "SELECT VALUE count(<-MENTIONS_CONCEPT) FROM concept:⟨paris⟩",
        "SELECT VALUE [1, 2, 3].map(|$v| $v * 2) FROM ONLY document:paris",
        "SELECT title FROM document ORDER BY title LIMIT 3 START 1",
        "SELECT {title: title, n: chunk_count} AS o FROM document LIMIT BY 2",
    ],
)
def test_typical_reads_pass_the_guard_and_the_engine(store, statement):
    before = snapshot(store)
    result = run_readonly_query(store, statement)
    assert result.statement.replace(" LIMIT 101", "") == statement.rstrip(";") and isinstance(result.rows, list)
    assert snapshot(store) == before


def test_the_row_limit_cuts_and_says_so(store):
    every = run_readonly_query(store, "SELECT index FROM chunk", limits=ReadonlyLimits(rows=10_000))
    assert not every.truncated and len(every.rows) > 10
    three = run_readonly_query(store, "SELECT index FROM chunk", limits=ReadonlyLimits(rows=3))
    assert three.truncated and len(three.rows) == 3
    assert every.note is None and "more rows than the row limit 3" in three.note
    ids = run_readonly_query(store, "SELECT VALUE id FROM document ORDER BY id", limits=ReadonlyLimits(rows=2)).rows
    assert ids == ["document:marie", "document:nobel"]  # record ids stay ids, not the records behind them


def test_the_size_limit_cuts_and_says_so(store):
    """One row can hold a whole table: the rows sent on are the first whose JSON fits in max_bytes."""
    whole = "SELECT array::group(id.*) AS chunks FROM chunk GROUP ALL"
    uncut = run_readonly_query(store, whole, limits=ReadonlyLimits(max_bytes=64 * 1024 * 1024))
    assert not uncut.truncated and len(json.dumps(uncut.rows)) > 100_000  # every chunk, its vector included
    assert ReadonlyLimits().max_bytes == 256 * 1024
    cut = run_readonly_query(store, whole, limits=ReadonlyLimits(max_bytes=4096))
    assert cut.rows == [] and cut.truncated
    assert "may hold 4,096 bytes of JSON and row 1 alone is" in cut.note and "string::slice(content, 0, 300)" in cut.note
    rows = run_readonly_query(store, "SELECT id, content FROM chunk ORDER BY id", limits=ReadonlyLimits(max_bytes=1024))
    every = run_readonly_query(store, "SELECT id, content FROM chunk ORDER BY id").rows
    assert rows.truncated and 0 < len(rows.rows) < len(every) and rows.rows == every[: len(rows.rows)]
    assert len(json.dumps(rows.rows, ensure_ascii=False, separators=(",", ":")).encode()) <= 1024
    assert f"the first {len(rows.rows)} rows are shown" in rows.note
    # The note's advice runs, and fits.
    advice = "SELECT array::slice(array::group(string::slice(content, 0, 300)), 0, 20) AS texts FROM chunk GROUP ALL"
    assert not run_readonly_query(store, advice, limits=ReadonlyLimits(max_bytes=8192)).truncated


PRIVATE_READS = [
    "SELECT `kg_meta`:store.* AS meta FROM document",
    "SELECT ⟨kg_meta⟩:store.* AS meta FROM document",
    "SELECT * FROM `kg_meta`",
    "SELECT * FROM ⟨kg_meta⟩:store",
    "SELECT * FROM document WHERE `kg_meta`:store.schema_version > 0",
    "SELECT title, ⟨concept_vector⟩:x AS v FROM document",
    "SELECT ->`concept_chunks` AS c FROM concept",
    "SELECT `term` FROM document",
]


@pytest.mark.parametrize("statement", PRIVATE_READS)
def test_escaped_names_of_the_stores_own_tables_are_refused(store, statement):
    """The engine reads `kg_meta` and ⟨kg_meta⟩ as the table kg_meta, as a table, in a record id and
    in a graph path; the guard refuses them as it refuses the plain name."""
    plain = statement.replace("`", "").replace("⟨", "").replace("⟩", "")
    for text in (statement, plain):
        with pytest.raises(ReadonlyQueryError) as refused:
            run_readonly_query(store, text)
        assert refused.value.code == "table", str(refused.value)


def test_the_engine_reads_escaped_table_names(store):
    """Why the guard unescapes names: the engine takes both escapes for the table."""
    engine = store.query_text("engine", "SELECT VALUE [`kg_meta`:store.*, ⟨kg_meta⟩:store.*] FROM ONLY document:paris")[-1]
    assert engine[0] is not None and engine[0] == engine[1]
    assert run_readonly_query(store, "SELECT VALUE title FROM `document` WHERE id = ⟨document⟩:paris").rows == ["Paris"]


def test_every_table_of_the_schema_is_in_the_graph_or_private(store):
    tables = set(store.query("schema_info")[0]["tables"])
    assert tables <= GRAPH_TABLES | PRIVATE_TABLES, tables - GRAPH_TABLES - PRIVATE_TABLES


def test_the_time_limit_stops_a_runaway_query(store):
    inner = "array::range(0, 3000).map(|$b| array::len(array::range(0, 3000)))"
    runaway = f"SELECT VALUE array::len(array::range(0, 3000).map(|$a| array::len({inner}))) FROM document"  # 27 billion values
    with pytest.raises(ReadonlyQueryError, match="exceeded the timeout: 150ms") as stopped:
        run_readonly_query(store, runaway, limits=ReadonlyLimits(timeout_ms=150))
    assert stopped.value.code == "failed"


def test_engine_errors_come_back_as_refusals_the_model_can_read(store):
    with pytest.raises(ReadonlyQueryError, match="Parse error") as parse:
        run_readonly_query(store, "SELECT * FROM document WHERE")
    assert parse.value.code == "engine_rejected"
    with pytest.raises(ReadonlyQueryError, match="Incorrect arguments for function string::repeat") as failed:
        run_readonly_query(store, "SELECT VALUE string::repeat(title, 100000000) FROM document")
    assert failed.value.code == "failed"
    with pytest.raises(ReadonlyQueryError, match="cannot start a function path"):
        run_readonly_query(store, "SELECT `http`::get('x') FROM document")


async def test_async_runs_the_same(store):
    statement = "SELECT name, df FROM concept ORDER BY df DESC, name LIMIT 4"
    assert (await arun_readonly_query(store, statement)).rows == run_readonly_query(store, statement).rows


def test_the_described_schema_matches_the_live_one(store):
    info = {name: result for name, result in zip(["db", "document", "chunk", "chunk_text", "concept", "MENTIONS_CONCEPT"], store.query("schema_info"))}
    for table, (_, fields) in TABLES.items():
        defined = set(info[table]["fields"])
        for field, _ in fields:
            assert field in defined | {"id", "in", "out"}, f"{table}.{field} is described but not defined"


# -- scope -----------------------------------------------------------------------------------------


def test_a_scoped_caller_is_refused_on_a_root_connection(store):
    with pytest.raises(ReadonlyQueryError, match="not signed in as a record user") as refused:
        run_readonly_query(store, "SELECT VALUE id FROM document", access=["public"])
    assert refused.value.code == "scope"
    with pytest.raises(ReadonlyQueryError, match="a filter cannot be applied"):
        run_readonly_query(store, "SELECT VALUE id FROM document", filters={"source": "corpus/marie"})
    with pytest.raises(ReadonlyQueryError, match="not signed in as a record user"):
        run_readonly_query(store, "SELECT VALUE id FROM document", scope=Scope(access=["public", "staff"]))


@pytest.fixture(scope="module")
def tenancy_url(tmp_path_factory, minilm, spacy_extractor):
    """A store in the tenancy mode with three readers: public, staff, and both."""
    url = f"surrealkv://{tmp_path_factory.mktemp('readonly')}/kg"
    with SurrealStore(url) as root:
        ingest(root, minilm, spacy_extractor)
        enable_tenancy(root)
        add_reader(root, "public", "p", ["public"])
        add_reader(root, "both", "b", ["public", "staff"])
    return url


def test_a_record_user_store_reads_only_its_labels(tenancy_url):
    with SurrealStore(tenancy_url) as root:
        everything = run_readonly_query(root, "SELECT VALUE id FROM document ORDER BY id").rows
        assert "document:nobel" in everything
    with SurrealStore(tenancy_url, access=READER_ACCESS, access_variables={"name": "public", "secret": "p"}) as reader:
        visible = run_readonly_query(reader, "SELECT VALUE id FROM document ORDER BY id", access=["public"]).rows
        assert visible == [d for d in everything if d != "document:nobel"]
        chunks = run_readonly_query(reader, "SELECT VALUE doc FROM chunk", access=["public"], limits=ReadonlyLimits(rows=1000)).rows
        assert chunks and "document:nobel" not in chunks
        counted = run_readonly_query(reader, "SELECT count() AS n FROM document WHERE true GROUP ALL", access=["public"]).rows
        assert counted == [{"n": len(visible)}]
        # A caller with more labels than the reader is narrowed by the database to the reader's: inside its scope.
        assert run_readonly_query(reader, "SELECT VALUE id FROM document ORDER BY id", access=["public", "staff"]).rows == visible


def test_a_reader_with_labels_the_caller_lacks_is_refused(tenancy_url):
    with SurrealStore(tenancy_url, access=READER_ACCESS, access_variables={"name": "both", "secret": "b"}) as reader:
        assert "document:nobel" in run_readonly_query(reader, "SELECT VALUE id FROM document").rows  # unrestricted caller
        with pytest.raises(ReadonlyQueryError, match=r"labelled \['staff'\], which this caller's access labels exclude") as refused:
            run_readonly_query(reader, "SELECT VALUE id FROM document", access=["public"])
        assert refused.value.code == "scope"
        with pytest.raises(ReadonlyQueryError, match="a filter cannot be applied"):
            run_readonly_query(reader, "SELECT VALUE id FROM document", filters={"title": "Paris"})


# -- generated statements --------------------------------------------------------------------------

PIECES = [
    "SELECT", "select", "*", "FROM", "document", "chunk", "concept", "WHERE", "title", "=", "'x'", '"y"', "'DELETE'", "(", ")",
    "{", "}", "[", "]", ",", ";", ".", "..", "->", "<-", "MENTIONS_CONCEPT", "true", "1", "$auth", "$x", "|$v|", "AND", "OR",
    "--", "/*", "*/", "#", "//", "\\", "`x`", "⟨y⟩", "'", '"', "`", "⟨", "DELETE", "CREATE", "UPDATE", "UPSERT", "INSERT", "INTO",
    "RELATE", "DEFINE", "TABLE", "REMOVE", "LET", "RETURN", "IF", "THEN", "ELSE", "END", "KILL", "LIVE", "sleep", "http::get",
    "fn::x", "count()", "array::len", "string::len", "type::record", "1s", "TIMEOUT", "LIMIT", "ORDER BY", "GROUP ALL", "SET",
    "document:evil", "a:1", "\n", " ", "\t", "；", "\u00a0", "\x00",
]
WRITE_STATEMENTS = [
    "DELETE document", "CREATE document:evil SET source = 'x'", "UPDATE concept SET df = 0", "UPSERT document:evil",
    "INSERT INTO document {id: 'evil'}", "RELATE concept:a->MENTIONS_CONCEPT->concept:b", "DEFINE TABLE evil",
    "REMOVE TABLE chunk", "LET $a = 1", "KILL u'0189d6e3-8eac-703a-9a48-d9faa78b44b9'", "INFO FOR DB",
]
READS = [
    "SELECT * FROM document WHERE title = 'Paris'",
    "SELECT name FROM concept WHERE df > 1",
    "SELECT VALUE id FROM chunk WHERE doc = document:marie",
]


def soup(pieces: list[str]) -> str:
    return " ".join(pieces)


@settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    read=st.sampled_from(READS),
    write=st.sampled_from(WRITE_STATEMENTS),
    position=st.integers(min_value=0, max_value=200),
    wrapper=st.sampled_from(["({})", "{{ {} }}", "[{}]", "1..{}", "|$v| {}", "{}", "({});", "; {}", "<future> {{ {} }}"]),
    case=st.sampled_from([str.upper, str.lower, str.title, lambda s: s]),
)
def test_a_write_placed_anywhere_in_a_read_is_refused(read, write, position, wrapper, case):
    tokens = read.split(" ")
    cut = position % (len(tokens) + 1)
    statement = " ".join([*tokens[:cut], wrapper.format(case(write)), *tokens[cut:]])
    with pytest.raises(ReadonlyQueryError):
        check_readonly(statement)


@settings(max_examples=3000, deadline=None)
@given(read=st.sampled_from(READS), parts=st.lists(st.sampled_from(["DELETE", ";", "--", "/*", " ", "x", "⟨", "`", "CREATE", "'", "}"]), max_size=12))
def test_keywords_and_separators_inside_strings_are_only_data(read, parts):
    hidden = "".join(parts)
    statement = f'{read} AND title != "{hidden}"'
    accepted = check_readonly(statement)
    assert accepted.text == statement
    strings = [t for t in tokenize(statement) if t.kind == "string"]
    assert strings[-1].text == f'"{hidden}"'


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(pieces=st.lists(st.sampled_from(PIECES), min_size=1, max_size=14), lead=st.booleans())
def test_generated_statements_never_change_the_database(store, baseline, pieces, lead):
    statement = soup((["SELECT", "*", "FROM", "document"] if lead else []) + pieces)
    try:
        accepted = check_readonly(statement)
    except ReadonlyQueryError:
        return
    # An accepted statement has no statement keyword, separator or comment outside its strings.
    words = {t.text.upper() for t in tokenize(accepted.text) if t.kind == "word"}
    assert not words & FORBIDDEN_WORDS
    # (Inside a string or a quoted identifier, `...` or ⟨...⟩, "--" is text, not a comment.)
    outside = [t.text for t in tokenize(accepted.text) if t.kind != "string" and not (t.kind == "ident" and t.text[:1] in "`⟨")]
    assert not re.search(r"(--|/\*|#|//)", " ".join(outside))
    try:
        run_readonly_query(store, statement, limits=ReadonlyLimits(timeout_ms=500))
    except ReadonlyQueryError:
        pass
    assert snapshot(store) == baseline


@pytest.fixture(scope="module")
def baseline(store):
    return snapshot(store)
