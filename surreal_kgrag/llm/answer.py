"""Cited answers: retrieve, ask the model for an answer with the sentences that support it, and keep
only the citations that really occur in the retrieved text.

Each cited sentence is looked up, after whitespace normalisation, in the chunks that were shown to
the model: first in the cited document's chunks, then in any other's (the citation is then filed
under that document's title and counted as reattributed). A citation found nowhere is dropped and
counted. With no citation left, the answer is the configured "cannot answer" text.

Then the answer itself is checked sentence by sentence against the citations that held: a sentence
is kept when every name and number in it (a capitalised word past its first, a word with a digit)
occurs in the cited sentences, and at least ``min_sentence_support`` of its other words do. The
other sentences are dropped and counted; with none kept, the answer is "cannot answer". This is a
lexical check, not entailment: it catches an answer about something the citations never mention.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ..db import SurrealStore
from ..errors import ConfigurationError
from ..retrieval import BaseRetriever, RetrievalResult, RetrievedDocument, make_retriever
from ..retrieval.config import DEFAULT_MODE
from ..retrieval.plan import Call, Plan, arun, run
from .client import ChatReply, LLMClient, LLMReplyError, Message, chat, parse_reply
from .settings import LLMSettings, LLMUsage

CANNOT_ANSWER = "I cannot answer this from the retrieved documents."

SYSTEM_PROMPT = """You answer questions from the numbered passages given, and from nothing else.
Reply with one JSON object and nothing else:
{"answer": "a short answer", "supporting": [{"title": "the passage's title", "sentence": "a sentence copied exactly from that passage"}]}
Every sentence in "supporting" must be copied word for word from one passage, and together they must support the answer.
If the passages do not contain the answer, reply {"answer": "", "supporting": []}."""


#: The most documents one answer shows the model: a caller's (or an agent's) ``k`` is held to it.
MAX_ANSWER_K = 100


class AnswerConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    k: int = Field(5, ge=1, le=MAX_ANSWER_K, description="documents retrieved")
    chunks_per_document: int = Field(3, ge=1, le=20, description="best chunks of each document shown to the model")
    max_passage_chars: int = Field(3000, ge=100, le=100_000, description="a longer chunk is cut (citations past the cut cannot be checked)")
    min_citation_chars: int = Field(12, ge=1, description="shorter citations are dropped: a few words occur anywhere")
    min_sentence_support: float = Field(
        0.6, ge=0.0, le=1.0, description="share of an answer sentence's plain words its citations must hold (names and numbers: all)"
    )
    repair_attempts: int = Field(1, ge=0, le=3, description="times an invalid reply is sent back with the error")
    cannot_answer: str = CANNOT_ANSWER
    system_prompt: str = SYSTEM_PROMPT


class ReplyCitation(BaseModel):
    title: str = ""
    sentence: str


class AnswerReply(BaseModel):
    answer: str
    supporting: list[ReplyCitation] = Field(default_factory=list)


class Citation(BaseModel):
    title: str = Field(description="the document's title (its id when it has none)")
    document_id: str
    chunk_id: str
    sentence: str = Field(description="the cited sentence as the model wrote it (it occurs in the chunk, whitespace aside)")


class Answer(BaseModel):
    question: str
    answer: str
    answered: bool = Field(description="False when the model found no answer or none of its citations held")
    supporting: dict[str, str] = Field(description="document title -> a supporting sentence (the first checked one per title)")
    citations: list[Citation] = Field(description="every checked citation")
    dropped_citations: int = Field(description="citations that do not occur in the retrieved text, or are too short")
    reattributed_citations: int = Field(0, description="citations found in another retrieved document than the one named")
    dropped_sentences: int = Field(0, description="sentences of the model's answer that no kept citation supports")
    retrieval: RetrievalResult
    shown: list[str] = Field(default_factory=list, description="the chunks shown to the model, by id, in the order they were numbered")
    usage: LLMUsage = Field(default_factory=LLMUsage)


def normalise_space(text: str) -> str:
    return " ".join(text.split())


def _title(document: RetrievedDocument) -> str:
    return document.title.strip() if document.title and document.title.strip() else document.id


class _Passages:
    """The chunks shown to the model, numbered, and the lookups that check citations against them."""

    def __init__(self, documents: list[RetrievedDocument], config: AnswerConfig) -> None:
        self.items: list[tuple[RetrievedDocument, str, str]] = []  # document, chunk id, text shown
        for document in documents:
            best = sorted(document.chunks, key=lambda c: -c.score)[: config.chunks_per_document]
            for chunk in sorted(best, key=lambda c: c.index):
                self.items.append((document, chunk.id, chunk.content[: config.max_passage_chars]))
        self._normalised = [normalise_space(text) for _, _, text in self.items]

    def prompt(self) -> str:
        return "\n\n".join(f"[{i}] Title: {_title(doc)}\n{text}" for i, (doc, _, text) in enumerate(self.items, 1))

    def locate(self, title: str, sentence: str) -> tuple[int, bool] | None:
        """The passage holding ``sentence`` (preferring the titled document) and whether it is
        another document than the one named; None when no passage holds it."""
        wanted = normalise_space(title).casefold()
        hits = [i for i, text in enumerate(self._normalised) if sentence in text]
        if not hits:
            return None
        for i in hits:
            if normalise_space(_title(self.items[i][0])).casefold() == wanted:
                return i, False
        return hits[0], True


def check_citations(reply: AnswerReply, passages: _Passages, config: AnswerConfig) -> tuple[list[Citation], int, int]:
    """The citations that hold, how many were dropped, how many were reattributed."""
    kept: list[Citation] = []
    dropped = reattributed = 0
    seen: set[tuple[str, str]] = set()
    for item in reply.supporting:
        sentence = normalise_space(item.sentence)
        found = passages.locate(item.title, sentence) if len(sentence) >= config.min_citation_chars else None
        if found is None:
            dropped += 1
            continue
        index, moved = found
        document, chunk_id, _ = passages.items[index]
        if (chunk_id, sentence) in seen:
            continue
        seen.add((chunk_id, sentence))
        reattributed += moved
        kept.append(Citation(title=_title(document), document_id=document.id, chunk_id=chunk_id, sentence=item.sentence.strip()))
    return kept, dropped, reattributed


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=\S)")
_WORD = re.compile(r"\w+")
_STOP_WORDS = frozenset(
    """a an and are as at be been but by did do does for from had has have he her his how i in is it its
    of on or she so than that the their them then there these they this to was we were what when where
    which who why will with you""".split()
)


def supported_sentences(answer_text: str, citations: list[Citation], min_support: float) -> tuple[list[str], int]:
    """The sentences of ``answer_text`` the citations support (see the module docs), and how many
    were dropped."""
    cited = {word.casefold() for citation in citations for word in _WORD.findall(citation.sentence)}
    kept: list[str] = []
    sentences = [s.strip() for s in _SENTENCE_END.split(answer_text.strip()) if s.strip()]
    for sentence in sentences:
        words = _WORD.findall(sentence)
        facts = [w for i, w in enumerate(words) if any(c.isdigit() for c in w) or (i > 0 and w[0].isupper())]
        plain = [w for w in words if w not in facts and w.casefold() not in _STOP_WORDS]
        held = sum(w.casefold() in cited for w in plain)
        if all(w.casefold() in cited for w in facts) and held >= min_support * len(plain) and (facts or plain):
            kept.append(sentence)
    return kept, len(sentences) - len(kept)


def answer_plan(
    question: str, retriever: BaseRetriever, client: LLMClient, *, k: int | None, filters: Mapping[str, Any] | None, config: AnswerConfig
) -> Plan[Answer]:
    if not isinstance(question, str) or not question.strip():
        raise ConfigurationError("the question is empty")
    if k is not None and (isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_ANSWER_K):
        raise ConfigurationError(f"k must be a whole number of documents from 1 to {MAX_ANSWER_K} for an answer, got {k!r}")
    options: dict[str, Any] = {"k": config.k if k is None else k}
    if filters is not None:
        options["filters"] = filters
    retrieval: RetrievalResult = yield Call(
        lambda: retriever.search(question, **options), lambda: retriever.asearch(question, **options), "retrieve"
    )
    passages = _Passages(retrieval.documents, config)
    shown = [chunk_id for _, chunk_id, _ in passages.items]
    usage = LLMUsage()

    def unanswered(dropped: int = 0) -> Answer:
        return Answer(question=question, answer=config.cannot_answer, answered=False, supporting={}, citations=[],
                      dropped_citations=dropped, retrieval=retrieval, shown=shown, usage=usage)

    if not passages.items:
        return unanswered()
    messages: list[Message] = [
        {"role": "system", "content": config.system_prompt},
        {"role": "user", "content": f"Passages:\n\n{passages.prompt()}\n\nQuestion: {question.strip()}"},
    ]
    for attempt in range(config.repair_attempts + 1):
        reply: ChatReply = yield chat(client, messages, AnswerReply)
        usage.add(reply.usage)
        try:
            parsed = parse_reply(reply.content, AnswerReply)
            break
        except LLMReplyError as error:
            if attempt == config.repair_attempts:
                raise LLMReplyError(f"the model's answer is not the expected JSON after {attempt + 1} tries: {error}") from error
            messages += [
                {"role": "assistant", "content": reply.content},
                {"role": "user", "content": f"That reply is not valid: {error}. Reply again with the JSON object only."},
            ]
    citations, dropped, reattributed = check_citations(parsed, passages, config)
    sentences, unsupported = supported_sentences(parsed.answer, citations, config.min_sentence_support)
    if not sentences or not citations:
        return unanswered(dropped).model_copy(update={"dropped_sentences": unsupported})
    supporting: dict[str, str] = {}
    for citation in citations:
        supporting.setdefault(citation.title, citation.sentence)
    return Answer(
        question=question,
        answer=" ".join(sentences),
        answered=True,
        supporting=supporting,
        citations=citations,
        dropped_citations=dropped,
        reattributed_citations=reattributed,
        dropped_sentences=unsupported,
        retrieval=retrieval,
        shown=shown,
        usage=usage,
    )


def resolve_retriever(retriever: Any, mode: str | None) -> BaseRetriever:
    """A core retriever from one, from a framework retriever of this package (its ``core``), or
    from a store (``make_retriever(mode or DEFAULT_MODE, store)``)."""
    if isinstance(retriever, SurrealStore):
        return make_retriever(mode or DEFAULT_MODE, retriever)
    core = getattr(retriever, "core", retriever)
    if not isinstance(core, BaseRetriever):
        raise ConfigurationError(f"answer() needs a retriever or a SurrealStore, not {type(retriever).__name__}")
    if mode is not None and mode != core.mode:
        raise ConfigurationError(f"mode={mode!r} only applies when a store is given; this retriever's mode is {core.mode!r}")
    return core


def _client(llm: LLMSettings | LLMClient) -> LLMClient:
    return llm if isinstance(llm, LLMClient) else LLMClient(llm)


def answer(
    question: str,
    retriever: BaseRetriever | SurrealStore | Any,
    llm: LLMSettings | LLMClient,
    *,
    mode: str | None = None,
    k: int | None = None,
    filters: Mapping[str, Any] | None = None,
    config: AnswerConfig | None = None,
) -> Answer:
    """Retrieve ``k`` documents for ``question`` and answer it with checked citations.

    ``retriever``: a core retriever, a LangChain/LlamaIndex ``SurrealKGRetriever``, or a store (then
    ``mode`` picks the retriever, hybrid by default). Raises :class:`~.client.LLMCallError` when the
    endpoint fails and :class:`~.client.LLMReplyError` when the reply stays malformed."""
    config = config or AnswerConfig()
    return run(None, answer_plan(question, resolve_retriever(retriever, mode), _client(llm), k=k, filters=filters, config=config))


async def aanswer(
    question: str,
    retriever: BaseRetriever | SurrealStore | Any,
    llm: LLMSettings | LLMClient,
    *,
    mode: str | None = None,
    k: int | None = None,
    filters: Mapping[str, Any] | None = None,
    config: AnswerConfig | None = None,
) -> Answer:
    config = config or AnswerConfig()
    return await arun(None, answer_plan(question, resolve_retriever(retriever, mode), _client(llm), k=k, filters=filters, config=config))
