"""Text-to-SurrealQL: a model writes one read-only query from the schema and live graph statistics,
the query runs through :mod:`.readonly`, and an error goes back to the model for another try.

>>> result = text_to_surql("Which concepts are mentioned by the most documents?", store, LLMSettings(model="gpt-4o-mini"))
>>> result.statement, result.rows
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ..db import SurrealStore
from ..errors import QueryExecutionError
from ..retrieval.plan import Plan, Query, arun, run
from ..retrieval.scope import Scope
from .client import ChatReply, LLMClient, LLMReplyError, Message, chat, parse_reply
from .guard import ALLOWED_NAMESPACES, ReadonlyQueryError
from .readonly import ReadonlyLimits, ReadonlyQueryResult, readonly_plan, scope_plan, to_json
from .settings import LLMSettings, LLMUsage

# The tables a model may query, field by field, with what each holds (tests check these against the
# live schema). id, in and out are every record's or relation's own.
TABLES: dict[str, tuple[str, list[tuple[str, str]]]] = {
    "document": ("one per ingested document", [
        ("id", "document:<key>"), ("title", "string or NONE"), ("source", "string"), ("content_type", "string"),
        ("metadata", "object"), ("access", "array of labels"), ("chunk_count", "int"), ("created_at", "datetime"),
        ("updated_at", "datetime"),
    ]),
    "chunk": ("a passage of a document", [
        ("id", "chunk:<key>"), ("doc", "record<document>"), ("index", "int, position in the document"), ("content", "string"),
        ("char_start", "int"), ("char_end", "int"), ("access", "array of labels"), ("embedding", "vector: never select it"),
    ]),
    "chunk_text": ("the full-text searchable text of a chunk", [
        ("chunk", "record<chunk>"), ("doc", "record<document>"), ("text", "the document title and the chunk content"),
    ]),
    "concept": ("a named entity, noun phrase or metadata value", [
        ("id", "concept:<name>"), ("name", "normalised lower-case string"), ("display", "as first written"),
        ("kind", "PERSON, ORG, GPE, NOUN_PHRASE, metadata:<field>, or an ontology kind"), ("aliases", "array of strings"),
        ("df", "number of documents mentioning it"),
    ]),
    "MENTIONS_CONCEPT": ("relation chunk -> concept", [
        ("in", "the chunk"), ("out", "the concept"), ("doc", "record<document>"), ("count", "mentions in the chunk"),
    ]),
}
RELATION_TABLE = ("RELATES_TO", ("relation concept -> concept extracted by an LLM", [
    ("in", "subject concept"), ("out", "object concept"), ("type", "string such as born_in"),
    ("chunk", "record<chunk> it was read from"), ("doc", "record<document>"), ("in_ontology", "bool"),
]))


def describe_tables(relations: bool) -> str:
    tables = dict(TABLES)
    if relations:
        tables[RELATION_TABLE[0]] = RELATION_TABLE[1]
    lines = ["Tables (SurrealDB 3.x, SurrealQL):"]
    for name, (what, fields) in tables.items():
        lines.append(f"- {name} ({what}): " + ", ".join(f"{field} ({meaning})" for field, meaning in fields))
    return "\n".join(lines)


EXAMPLES = """Examples:
- concepts most documents mention: SELECT name, kind, df FROM concept ORDER BY df DESC LIMIT 10
- documents mentioning a concept: SELECT VALUE doc.title FROM concept:⟨marie curie⟩<-MENTIONS_CONCEPT
- concepts sharing chunks with a concept:
  SELECT VALUE array::distinct(<-MENTIONS_CONCEPT<-chunk->MENTIONS_CONCEPT->concept.name) FROM ONLY concept:⟨marie curie⟩
- chunks of a document in order: SELECT index, content FROM chunk WHERE doc = document:⟨some key⟩ ORDER BY index
- counting: SELECT count() AS n FROM document WHERE metadata.year >= 2000 GROUP ALL"""

RELATION_EXAMPLE = """- typed relations of a concept: SELECT type, out.name AS object FROM concept:⟨marie curie⟩->RELATES_TO"""

RULES = f"""Write exactly one SurrealQL SELECT statement that answers the question from this database.
Rules: one SELECT only (subqueries in parentheses are fine); no other statement anywhere (no LET, CREATE,
UPDATE, DELETE, INSERT, RELATE, DEFINE, REMOVE, INFO, FOR); no comments; no backslashes; no TIMEOUT,
PARALLEL or EXPLAIN clause (limits are set for you); only functions of these namespaces: {", ".join(sorted(ALLOWED_NAMESPACES))}.
Record ids with spaces or punctuation are written table:⟨key⟩. Select readable fields, never embeddings.
Reply with one JSON object and nothing else: {{"query": "SELECT ..."}}"""


class QueryReply(BaseModel):
    query: str = Field(min_length=1)


class GraphStatistics(BaseModel):
    tables: dict[str, int]
    top_concepts: list[dict[str, Any]] = Field(description="name, kind and df of the concepts most documents mention")
    concept_kinds: list[dict[str, Any]]
    relation_types: list[dict[str, Any]] = Field(description="type and edges; empty when no relations were extracted")

    def describe(self) -> str:
        lines = ["Graph statistics:", "- rows: " + ", ".join(f"{t} {n}" for t, n in self.tables.items())]
        if self.top_concepts:
            lines.append("- most frequent concepts (name, kind, documents): "
                         + "; ".join(f"{c['name']} ({c['kind']}, {c['df']})" for c in self.top_concepts))
        if self.concept_kinds:
            lines.append("- concept kinds: " + ", ".join(f"{k['kind']} {k['concepts']}" for k in self.concept_kinds))
        if self.relation_types:
            types = ", ".join(f"{r['type']} {r['edges']}" for r in self.relation_types)
            lines.append(f"- relation types (RELATES_TO.type, edges): {types}")
        return "\n".join(lines)


class QueryAttempt(BaseModel):
    statement: str
    error: str | None = Field(None, description="why it was refused or failed; None for the one that ran")


class TextToSurqlResult(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)

    question: str
    statement: str
    rows: list[Any]
    truncated: bool
    note: str | None = Field(
        None, description="why rows were cut (row or size limit) and what to change in the query; None when nothing was cut"
    )
    attempts: list[QueryAttempt]
    usage: LLMUsage


class TextToSurqlError(ReadonlyQueryError):
    """No attempt of the model gave a query that ran; ``attempts`` lists each with its error."""

    def __init__(self, message: str, attempts: list[QueryAttempt], usage: LLMUsage) -> None:
        super().__init__(message, "no_valid_query")
        self.attempts = attempts
        self.usage = usage


def statistics_plan(store: SurrealStore, top: int = 15) -> Plan[GraphStatistics]:
    """Table sizes, the concepts most documents mention, concept kinds and relation types."""
    params = {"top": top}
    counts, concepts, kinds = yield Query("llm_graph_stats", params)
    try:
        relations = (yield Query("llm_relation_stats", params))[-1]
    except QueryExecutionError as error:  # a store written before RELATES_TO was part of the schema
        if "does not exist" not in str(error):
            raise
        relations = []
    tables = {**counts, "RELATES_TO": sum(r["edges"] for r in relations)} if relations else dict(counts)
    return GraphStatistics(tables=tables, top_concepts=to_json(concepts), concept_kinds=to_json(kinds), relation_types=to_json(relations))


def system_prompt(stats: GraphStatistics) -> str:
    relations = bool(stats.relation_types)
    examples = EXAMPLES + ("\n" + RELATION_EXAMPLE if relations else "")
    return "\n\n".join([RULES, describe_tables(relations), stats.describe(), examples])


def text_to_surql_plan(
    question: str,
    store: SurrealStore,
    client: LLMClient,
    *,
    attempts: int = 3,
    limits: ReadonlyLimits | None = None,
    access: Sequence[str] | None = None,
    filters: Mapping[str, Any] | None = None,
) -> Plan[TextToSurqlResult]:
    if not isinstance(question, str) or not question.strip():
        raise ReadonlyQueryError("the question is empty", "empty")
    if not 1 <= attempts <= 10:
        raise ReadonlyQueryError(f"attempts must be between 1 and 10, got {attempts}", "empty")
    scope = Scope.of(access=access, filters=filters)
    yield from scope_plan(store, scope)  # before any token is spent
    stats = yield from statistics_plan(store)
    messages: list[Message] = [{"role": "system", "content": system_prompt(stats)}, {"role": "user", "content": question.strip()}]
    usage = LLMUsage()
    tried: list[QueryAttempt] = []
    for _ in range(attempts):
        reply: ChatReply = yield chat(client, messages, QueryReply)
        usage.add(reply.usage)
        messages.append({"role": "assistant", "content": reply.content})
        try:
            statement = parse_reply(reply.content, QueryReply).query
        except LLMReplyError as error:
            tried.append(QueryAttempt(statement=reply.content[:2000], error=str(error)))
            messages.append({"role": "user", "content": f'{error}. Reply with {{"query": "SELECT ..."}} only.'})
            continue
        try:
            result: ReadonlyQueryResult = yield from readonly_plan(store, statement, limits=limits, scope=scope)
        except ReadonlyQueryError as error:
            tried.append(QueryAttempt(statement=statement, error=str(error)))
            messages.append({"role": "user", "content": f"That query was refused or failed: {error}\nWrite a corrected query."})
            continue
        tried.append(QueryAttempt(statement=result.statement))
        return TextToSurqlResult(
            question=question, statement=result.statement, rows=result.rows, truncated=result.truncated, note=result.note,
            attempts=tried, usage=usage,
        )
    raise TextToSurqlError(f"no query ran after {attempts} attempts; the last error: {tried[-1].error}", tried, usage)


def text_to_surql(
    question: str,
    store: SurrealStore,
    llm: LLMSettings | LLMClient,
    *,
    attempts: int = 3,
    limits: ReadonlyLimits | None = None,
    access: Sequence[str] | None = None,
    filters: Mapping[str, Any] | None = None,
) -> TextToSurqlResult:
    """Ask the model for one read-only query answering ``question`` and run it; a refused or failed
    query goes back to the model with the error, up to ``attempts`` times in all. Raises
    :class:`TextToSurqlError` (with every attempt) when none ran. ``access``/``filters``: as for
    :func:`~.readonly.run_readonly_query`."""
    client = llm if isinstance(llm, LLMClient) else LLMClient(llm)
    return run(store, text_to_surql_plan(question, store, client, attempts=attempts, limits=limits, access=access, filters=filters))


async def atext_to_surql(
    question: str,
    store: SurrealStore,
    llm: LLMSettings | LLMClient,
    *,
    attempts: int = 3,
    limits: ReadonlyLimits | None = None,
    access: Sequence[str] | None = None,
    filters: Mapping[str, Any] | None = None,
) -> TextToSurqlResult:
    client = llm if isinstance(llm, LLMClient) else LLMClient(llm)
    return await arun(store, text_to_surql_plan(question, store, client, attempts=attempts, limits=limits, access=access, filters=filters))


# -- the run_surql agent tool (surreal_kgrag.tools): the calling model writes the query itself ------


def readonly_tool_description() -> str:
    """The ``run_surql`` tool's description for the model: what it may write, and the schema."""
    return (
        "Run one read-only SurrealQL SELECT on the knowledge graph and get its rows. Use it for counts, lists and "
        "graph walks the other tools do not offer. " + RULES.split("Reply with")[0].strip() + "\n" + describe_tables(True)
    )
