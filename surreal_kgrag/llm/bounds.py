"""What a read-only statement may cost: the guard's second half (:mod:`.guard` checks that it only
reads; this module that the engine can bound it).

Refused, wherever they appear:

- a ``LIMIT`` or ``START`` that is not a plain integer, or is above the row limit (the engine sizes
  some buffers by the limit before it reads a row: ``ORDER BY rand() LIMIT 1000000000`` aborted
  the process), and ``ORDER BY rand()`` itself;
- a KNN operator whose k is above the row limit or whose ef is above :data:`MAX_KNN_EF`;
- a subquery (a nested ``SELECT`` runs once per row: memory grows with rows times rows), ``SPLIT``
  and ``VERSION`` (a versioned store's past states: a document before it was relabelled), and
  ranges (``1..1000000000`` materialise on use);
- the session's variables (``$auth``, ``$session``, ``$token``, ``$access``);
- reading anything outside the knowledge graph: ``FROM`` takes only the graph's tables
  (:data:`GRAPH_TABLES`) or their record ids, a record id elsewhere must be one of theirs, the
  store's own tables (readers, settings, counters) are refused by name, written plainly or escaped
  (`` `kg_meta` ``, ``⟨kg_meta⟩``: the engine reads both as the table), and so is every way to
  build a reference from a string (``type::record``, ``type::thing``, ``type::table``,
  ``<record>``, ``r"..."``).

A statement without a ``LIMIT`` at its top level gets ``LIMIT <row limit + 1>``, so the engine
never collects more rows than the runner returns (the runner sees one more to report truncation).
"""

from __future__ import annotations

from .guard import MAX_CHARS, CheckedStatement, ReadonlyQueryError, Token, check_readonly, tokenize

#: Tables of the knowledge graph a query may read.
GRAPH_TABLES = frozenset({"document", "chunk", "chunk_text", "concept", "MENTIONS_CONCEPT", "RELATES_TO"})
#: The store's other tables: readers and their secrets, settings, store-wide counters, work queues.
PRIVATE_TABLES = frozenset(
    {
        "kg_reader", "kg_meta", "term", "concept_chunks", "chunk_concepts", "concept_vector", "concept_vector_queue",
        "pending_write", "concept_title", "document_name", "document_name_count",
    }
)
SESSION_PARAMS = frozenset({"$auth", "$session", "$token", "$access", "$scope"})
REFERENCE_FUNCTIONS = frozenset({"type::record", "type::thing", "type::table"})
MAX_KNN_EF = 1_000
_CLAUSE_END = frozenset({"LIMIT", "START", "FETCH", "TIMEOUT", "PARALLEL", "GROUP", "SPLIT", "WITH", "WHERE"})
_LIMIT_BEFORE = ("START", "FETCH")  # clauses that follow LIMIT: an added LIMIT goes before them


def bound(text: str, tokens: list[Token], max_rows: int) -> str:
    """``text`` (the tokens of one SELECT the guard accepted) with a top-level LIMIT, or raise
    :class:`ReadonlyQueryError` naming the first rule it breaks."""
    depth = 0
    top_limit = False
    for i, token in enumerate(tokens):
        word = token.text.upper() if token.kind == "word" else ""
        if token.kind == "punct" and token.text in "([{":
            depth += 1
        elif token.kind == "punct" and token.text in ")]}":
            depth -= 1
        if word == "SELECT" and i > 0:
            _refuse("a subquery (SELECT inside SELECT) runs once per row: write one SELECT, use graph paths "
                    "(->MENTIONS_CONCEPT->concept) to follow links, or run a second query", "unbounded", token)
        if word in ("SPLIT", "VERSION"):
            _refuse(f"{token.text} is not allowed: it reads more rows, or past states, than the statement names", "unbounded", token)
        if word in ("LIMIT", "START"):
            top_limit = top_limit or (word == "LIMIT" and depth == 0)
            _check_count(tokens, i, max_rows)
        if word == "ORDER":
            _check_order(tokens, i)
        if word == "FROM":
            _check_from(tokens, i)
        if token.kind == "param" and token.text.lower() in SESSION_PARAMS:
            _refuse(f"{token.text} is not allowed: the query reads the knowledge graph, not the session", "forbidden_word", token)
        name = _name(token)
        if name in PRIVATE_TABLES:
            _refuse(f"the table {name} is not part of the knowledge graph; read {', '.join(sorted(GRAPH_TABLES))}", "table", token)
        if name is not None and _record_literal(tokens, i) and name not in GRAPH_TABLES:
            _refuse(f"{name}:... names a record outside the knowledge graph tables {sorted(GRAPH_TABLES)}", "table", token)
        _check_references(tokens, i)
        if token.text == "<" and i + 1 < len(tokens) and tokens[i + 1].text == "|":
            _check_knn(tokens, i + 2, max_rows)
        if token.text == "." and i + 1 < len(tokens) and tokens[i + 1].text == "." and (i == 0 or tokens[i - 1].text != "."):
            _refuse("ranges (a..b) are not allowed: they can stand for more values than the query may hold", "unbounded", token)
    if top_limit:
        return text
    return _with_limit(text, tokens, max_rows + 1)


def _refuse(message: str, code: str, token: Token) -> None:
    raise ReadonlyQueryError(f"{message} (character {token.position + 1})", code)


def _next(tokens: list[Token], i: int, optional: str) -> int:
    """The index after ``tokens[i]``, past an optional word (``LIMIT BY``, ``START AT``)."""
    j = i + 1
    if j < len(tokens) and tokens[j].text.upper() == optional:
        j += 1
    return j


def _check_count(tokens: list[Token], i: int, max_rows: int) -> None:
    keyword = tokens[i]
    j = _next(tokens, i, "BY" if keyword.text.upper() == "LIMIT" else "AT")
    if j >= len(tokens) or tokens[j].kind != "number" or (j + 1 < len(tokens) and tokens[j + 1].text in ".*+-/"):
        _refuse(f"{keyword.text.upper()} takes a plain whole number", "limit", keyword)
    if int(tokens[j].text) > max_rows:
        _refuse(f"{keyword.text.upper()} {tokens[j].text} is above the row limit {max_rows}: use at most {max_rows}", "limit", keyword)


def _check_order(tokens: list[Token], i: int) -> None:
    depth = 0
    for j in range(i + 1, len(tokens)):
        text = tokens[j].text
        depth += text in "([{" if tokens[j].kind == "punct" else 0
        depth -= text in ")]}" if tokens[j].kind == "punct" else 0
        if depth < 0 or (depth == 0 and tokens[j].kind == "word" and text.upper() in _CLAUSE_END):
            return
        if tokens[j].kind == "word" and text.lower() == "rand" and j + 1 < len(tokens) and tokens[j + 1].text == "(":
            _refuse("ORDER BY rand() is not allowed: the engine allocates for the whole result before it reads a row; "
                    "order by a field", "unbounded", tokens[j])


def _check_from(tokens: list[Token], i: int) -> None:
    j = _next(tokens, i, "ONLY")
    while True:
        if j >= len(tokens) or _name(tokens[j]) not in GRAPH_TABLES:
            where = tokens[j] if j < len(tokens) else tokens[i]
            _refuse(f"FROM takes knowledge graph tables only ({', '.join(sorted(GRAPH_TABLES))}) or their record ids", "table", where)
        j += 1
        if j < len(tokens) and tokens[j].text == ":" and not (j + 1 < len(tokens) and tokens[j + 1].text == ":"):
            j += 2  # table:id (the id is one token: a word, a number, an escaped name or a string)
        if j < len(tokens) and tokens[j].text == ",":
            j += 1
            continue
        return


def _name(token: Token) -> str | None:
    """The name a word or an escaped identifier stands for: the engine reads `kg_meta` and
    ⟨kg_meta⟩ as kg_meta, as a table in FROM, in a record id and in a graph path alike."""
    if token.kind == "word":
        return token.text
    if token.kind == "ident":
        return token.text[1:-1]  # no escapes inside: the guard refuses backslashes
    return None


def _record_literal(tokens: list[Token], i: int) -> bool:
    """``name:`` (one colon) outside an object literal: a record id."""
    if i + 1 >= len(tokens) or tokens[i + 1].text != ":" or (i + 2 < len(tokens) and tokens[i + 2].text == ":"):
        return False
    if i > 0 and tokens[i - 1].text == ":":
        return False  # the end of a function path a::b
    depth = 0
    for j in range(i - 1, -1, -1):  # the innermost open bracket: '{' makes this an object key
        text = tokens[j].text if tokens[j].kind == "punct" else ""
        if text and text in ")]}":
            depth += 1
        elif text and text in "([{":
            if depth == 0:
                return text != "{"
            depth -= 1
    return True


def _check_references(tokens: list[Token], i: int) -> None:
    token = tokens[i]
    if token.kind == "string" and token.text[0].lower() == "r":
        _refuse('record ids written as strings (r"...") are not allowed: write table:id', "forbidden_function", token)
    if token.kind == "word" and i + 3 < len(tokens) and tokens[i + 1].text == ":" and tokens[i + 2].text == ":":
        path = f"{token.text}::{tokens[i + 3].text}".lower()
        if path in REFERENCE_FUNCTIONS:
            _refuse(f"{path}() builds a reference from text; write table:id for a graph record", "forbidden_function", token)
    if token.text == "<" and i + 1 < len(tokens) and tokens[i + 1].text.lower() in ("record", "table"):
        _refuse(f"the cast <{tokens[i + 1].text}> is not allowed: write table:id for a graph record", "forbidden_function", token)


def _check_knn(tokens: list[Token], j: int, max_rows: int) -> None:
    numbers = []
    while j < len(tokens) and tokens[j].text != "|":
        if tokens[j].kind == "number":
            numbers.append(int(tokens[j].text))
        j += 1
    if numbers and numbers[0] > max_rows:
        _refuse(f"KNN k={numbers[0]} is above the row limit {max_rows}", "limit", tokens[j - 1])
    if len(numbers) > 1 and numbers[1] > MAX_KNN_EF:
        _refuse(f"KNN ef={numbers[1]} is above {MAX_KNN_EF}", "limit", tokens[j - 1])


def _with_limit(text: str, tokens: list[Token], rows: int) -> str:
    depth = 0
    for token in tokens:
        if token.kind == "punct" and token.text in "([{":
            depth += 1
        elif token.kind == "punct" and token.text in ")]}":
            depth -= 1
        elif depth == 0 and token.kind == "word" and token.text.upper() in _LIMIT_BEFORE:
            return f"{text[: token.position].rstrip()} LIMIT {rows} {text[token.position :]}"
    return f"{text} LIMIT {rows}"


def check_bounded(statement: str, *, max_rows: int, max_chars: int = MAX_CHARS) -> CheckedStatement:
    """:func:`.guard.check_readonly`, then the bounds above: the statement the runner may send,
    with its top-level LIMIT."""
    checked = check_readonly(statement, max_chars=max_chars)
    return CheckedStatement(bound(checked.text, tokenize(checked.text), max_rows))
