"""Cited answers on the real embedded SurrealDB (spaCy, MiniLM), with a scripted OpenAI-compatible model
on 127.0.0.1 that reads the passages it is sent and cites from them (or, on purpose, does not)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable

import pytest
from llm_support import CORPUS

from surreal_kgrag import ConfigurationError, IngestConfig, Ingestor, SourceDocument, SurrealStore, make_retriever
from surreal_kgrag.chunking import SentenceChunker
from surreal_kgrag.cli import main
from surreal_kgrag.llm import AnswerConfig, LLMCallError, LLMReplyError, LLMSettings, aanswer, answer
from surreal_kgrag.llm.answer import CANNOT_ANSWER
from surreal_kgrag.llm.scripted import Reply, ScriptedChatServer
from surreal_kgrag.retrieval.config import DEFAULT_MODE

PASSAGE = re.compile(r"\[(\d+)\] Title: (.*?)\n(.*?)(?=\n\n\[\d+\] Title: |\n\nQuestion: )", re.S)


def passages(request) -> list[tuple[str, str]]:
    """(title, text) of each passage the answer prompt showed the model."""
    return [(m.group(2), m.group(3)) for m in PASSAGE.finditer(request["messages"][1]["content"])]


def sentence_with(request, words: str) -> tuple[str, str]:
    """A passage sentence containing ``words``, as the model would copy it, and its passage's title."""
    for title, text in passages(request):
        for sentence in re.split(r"(?<=\.)\s+", text):
            if words in sentence:
                return title, sentence
    raise AssertionError(f"no passage says {words!r}")


def citing(answer_text: str, *words: str, extra: list[dict] | None = None) -> Callable:
    """A scripted model that answers ``answer_text`` citing the sentences that contain ``words``."""

    def respond(request):
        supporting = [dict(zip(("title", "sentence"), sentence_with(request, w))) for w in words]
        return json.dumps({"answer": answer_text, "supporting": supporting + (extra or [])})

    return respond


@pytest.fixture(scope="module")
def url(tmp_path_factory, minilm, spacy_extractor):
    url = f"surrealkv://{tmp_path_factory.mktemp('answers')}/kg"
    store = SurrealStore(url)
    documents = [
        SourceDocument(key=key, text=text, title=title, source=f"corpus/{key}", access=["staff"] if key == "nobel" else ["public"])
        for key, (title, text) in CORPUS.items()
    ]
    config = IngestConfig(chunker=SentenceChunker(max_tokens=24, overlap_tokens=0))
    assert Ingestor(store, embedder=minilm, extractor=spacy_extractor, config=config).ingest(documents).added == len(CORPUS)
    yield url  # the store stays open: stores on the same path in this process share its handle
    store.close()


@pytest.fixture
def store(url):
    with SurrealStore(url) as s:
        yield s


@pytest.fixture
def retriever(store, minilm):
    return make_retriever("hybrid", store, embedder=minilm, k=3)


@pytest.fixture
def server():
    with ScriptedChatServer(lambda request: json.dumps({"answer": "", "supporting": []})) as s:
        yield s


def llm(server, **options) -> LLMSettings:
    return LLMSettings(model="scripted", base_url=server.base_url, api_key="local", backoff=0.01, **options)


QUESTION = "Where was Marie Curie born?"


def test_a_supported_answer_keeps_its_checked_citations(retriever, server):
    server.responder = citing("In Warsaw.", "Marie Curie was born in Warsaw")
    result = answer(QUESTION, retriever, llm(server))
    assert result.answered and result.answer == "In Warsaw."
    assert list(result.supporting.values()) == ["Marie Curie was born in Warsaw."]
    assert set(result.supporting) <= {"Marie Curie", "Warsaw"}
    citation = result.citations[0]
    assert citation.chunk_id.startswith(f"{citation.document_id}::")
    assert "Marie Curie was born in Warsaw." in next(
        c.content for d in result.retrieval.documents for c in d.chunks if c.id == citation.chunk_id
    )
    assert (result.dropped_citations, result.reattributed_citations) == (0, 0)
    assert result.usage.requests == 1 and result.usage.prompt_tokens > 0
    request = server.requests[0]
    assert request["response_format"]["json_schema"]["name"] == "AnswerReply"
    assert {title for title, _ in passages(request)} == {d.title for d in result.retrieval.documents}


def test_a_citation_not_in_the_retrieved_text_is_dropped_and_counted(retriever, server):
    invented = {"title": "Marie Curie", "sentence": "Marie Curie was born in Krakow in 1867."}
    server.responder = citing("In Warsaw.", "Marie Curie was born in Warsaw", extra=[invented])
    result = answer(QUESTION, retriever, llm(server))
    assert result.answered and result.dropped_citations == 1
    assert [c.sentence for c in result.citations] == ["Marie Curie was born in Warsaw."]


def test_with_no_supported_citation_the_answer_says_it_cannot_answer(retriever, server):
    server.responder = lambda request: json.dumps(
        {"answer": "In Krakow.", "supporting": [{"title": "Marie Curie", "sentence": "Marie Curie was born in Krakow."},
                                                {"title": "Warsaw", "sentence": "Warsaw is the capital of Germany."}]}
    )
    result = answer(QUESTION, retriever, llm(server))
    assert not result.answered and result.answer == CANNOT_ANSWER
    assert result.supporting == {} and result.dropped_citations == 2
    assert result.retrieval.documents  # the retrieval is still there to inspect


def test_an_answer_without_citations_is_not_an_answer(retriever, server):
    server.responder = lambda request: json.dumps({"answer": "In Warsaw.", "supporting": []})
    assert not answer(QUESTION, retriever, llm(server)).answered


def test_whitespace_is_normalised_when_checking(retriever, server):
    def respond(request):
        title, sentence = sentence_with(request, "Marie Curie was born in Warsaw")
        return json.dumps({"answer": "Warsaw", "supporting": [{"title": title, "sentence": sentence.replace(" ", " \n\t ")}]})

    server.responder = respond
    result = answer(QUESTION, retriever, llm(server))
    assert result.answered and result.dropped_citations == 0


def test_a_sentence_cited_under_the_wrong_title_is_filed_under_its_own(retriever, server):
    def respond(request):
        title, sentence = sentence_with(request, "Marie Curie was born in Warsaw")
        other = next(t for t, _ in passages(request) if t != title)
        return json.dumps({"answer": "Warsaw", "supporting": [{"title": other, "sentence": sentence}]})

    server.responder = respond
    result = answer(QUESTION, retriever, llm(server))
    assert result.answered and result.reattributed_citations == 1
    document = next(d for d in result.retrieval.documents if d.id == result.citations[0].document_id)
    assert list(result.supporting) == [document.title]


def test_too_short_a_citation_is_dropped(retriever, server):
    server.responder = lambda request: json.dumps({"answer": "Warsaw", "supporting": [{"title": "Warsaw", "sentence": "Warsaw"}]})
    result = answer(QUESTION, retriever, llm(server))
    assert not result.answered and result.dropped_citations == 1
    assert answer(QUESTION, retriever, llm(server), config=AnswerConfig(min_citation_chars=3)).answered


def test_a_malformed_reply_is_sent_back_once(retriever, server):
    good = citing("In Warsaw.", "Marie Curie was born in Warsaw")
    server.responder = lambda request: "Warsaw!" if len(request["messages"]) == 2 else good(request)
    result = answer(QUESTION, retriever, llm(server))
    assert result.answered and result.usage.requests == 2
    server.responder = lambda request: '{"answer": 3}'
    with pytest.raises(LLMReplyError, match="after 2 tries"):
        answer(QUESTION, retriever, llm(server))


def test_endpoint_failures_are_retried_then_raised(retriever, server):
    calls = []

    def flaky(request):
        calls.append(1)
        return Reply(status=429) if len(calls) == 1 else citing("In Warsaw.", "Marie Curie was born in Warsaw")(request)

    server.responder = flaky
    assert answer(QUESTION, retriever, llm(server)).usage.retries == 1
    server.responder = lambda request: Reply(status=500, content="overloaded")
    with pytest.raises(LLMCallError, match="HTTP 500 after 3 attempts: overloaded"):
        answer(QUESTION, retriever, llm(server, max_retries=2))


def test_a_scoped_retriever_never_shows_the_model_other_documents(store, minilm, server):
    public = make_retriever("hybrid", store, embedder=minilm, k=6, access=["public"])
    server.responder = lambda request: json.dumps(
        {"answer": "Stockholm", "supporting": [{"title": "Alfred Nobel", "sentence": "Alfred Nobel was born in Stockholm."}]}
    )
    result = answer("Where was Alfred Nobel born?", public, llm(server))
    assert "Alfred Nobel" not in {title for title, _ in passages(server.requests[0])}
    assert not result.answered and result.dropped_citations == 1
    staff = make_retriever("hybrid", store, embedder=minilm, k=6, access=["staff"])
    assert answer("Where was Alfred Nobel born?", staff, llm(server)).answered


def test_nothing_retrieved_means_no_request(retriever, server):
    result = answer(QUESTION, retriever, llm(server), filters={"source": "corpus/none"})
    assert not result.answered and server.requests == []


async def test_async_answers_the_same(retriever, server):
    server.responder = citing("In Warsaw.", "Marie Curie was born in Warsaw")
    sync = answer(QUESTION, retriever, llm(server))
    result = await aanswer(QUESTION, retriever, llm(server))
    assert result.model_dump(exclude={"usage", "retrieval"}) == sync.model_dump(exclude={"usage", "retrieval"})


def test_a_store_and_a_mode_make_the_retriever(store, minilm, server):
    server.responder = citing("In Warsaw.", "Marie Curie was born in Warsaw")
    assert answer(QUESTION, store, llm(server), mode="chunk", k=2).retrieval.mode == "chunk"
    with pytest.raises(ConfigurationError, match="only applies when a store is given"):
        answer(QUESTION, make_retriever("chunk", store, embedder=minilm), llm(server), mode="hybrid")
    with pytest.raises(ConfigurationError, match="question is empty"):
        answer("  ", store, llm(server))


# -- CLI -------------------------------------------------------------------------------------------


def test_the_answer_command(url, server, monkeypatch, capsys):
    monkeypatch.setenv("OPENAI_API_KEY", "local")
    server.responder = citing("In Warsaw.", "Marie Curie was born in Warsaw")
    args = ["answer", QUESTION, "--db", url, "--model", "scripted", "--base-url", server.base_url, "-k", "3"]
    assert main([*args, "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["answered"] and list(payload["supporting"].values()) == ["Marie Curie was born in Warsaw."]
    assert payload["retrieval"]["mode"] == DEFAULT_MODE == "graph" and len(payload["retrieval"]["documents"]) == 3
    assert main(args) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "In Warsaw." and out[1].endswith(": Marie Curie was born in Warsaw.")
    monkeypatch.delenv("SURREAL_KGRAG_LLM_MODEL", raising=False)
    assert main(["answer", QUESTION, "--db", url]) == 1
    assert "--model" in capsys.readouterr().err


# -- frameworks ------------------------------------------------------------------------------------


async def test_the_langchain_runnable(retriever, server):
    from langchain_surreal_kgrag import SurrealKGRetriever, create_answer_runnable

    server.responder = citing("In Warsaw.", "Marie Curie was born in Warsaw")
    runnable = create_answer_runnable(SurrealKGRetriever.from_retriever(retriever), llm(server))
    result = runnable.invoke(QUESTION)
    assert result.answered and result.supporting
    assert len((await runnable.ainvoke({"question": QUESTION, "k": 1})).retrieval.documents) == 1
    assert [r.answered for r in runnable.batch([QUESTION, QUESTION])] == [True, True]
    requests = len(server.requests)
    for k in (0, 1000, "5"):  # what a chain or an agent may send: refused before anything is retrieved or asked
        with pytest.raises(ConfigurationError, match="from 1 to 100"):
            runnable.invoke({"question": QUESTION, "k": k})
    assert len(server.requests) == requests


async def test_the_llama_index_query_engine(retriever, server):
    from llama_index.retrievers.surreal_kgrag import SurrealKGAnswerQueryEngine, SurrealKGRetriever

    server.responder = citing("In Warsaw.", "Marie Curie was born in Warsaw")
    engine = SurrealKGAnswerQueryEngine(SurrealKGRetriever.from_retriever(retriever), llm(server))
    response = engine.query(QUESTION)
    assert response.response == "In Warsaw." and response.metadata["answered"]
    cited = [n for n in response.source_nodes if n.node.metadata["cited"]]
    assert len(cited) == 1 and response.source_nodes[0] is cited[0]
    assert "Marie Curie was born in Warsaw." in cited[0].node.get_content()
    assert cited[0].node.ref_doc_id == response.metadata["answer"].citations[0].document_id
    assert (await engine.aquery(QUESTION)).response == "In Warsaw."
    # the source nodes are the passages the prompt numbered: one a document here, each a retrieved chunk
    one_each = SurrealKGAnswerQueryEngine(SurrealKGRetriever.from_retriever(retriever), llm(server), config=AnswerConfig(chunks_per_document=1))
    response = one_each.query(QUESTION)
    prompt = server.requests[-1]["messages"][-1]["content"]
    shown = response.metadata["answer"].shown
    assert sorted(n.node.node_id for n in response.source_nodes) == sorted(shown)
    assert len(response.source_nodes) == len(shown) == prompt.count("Title: ") == len({n.node.ref_doc_id for n in response.source_nodes})
    retrieved = sum(len(d.chunks) for d in response.metadata["answer"].retrieval.documents)
    assert retrieved > len(shown)  # chunks retrieved but not shown are not sources
    assert all(" ".join(n.node.get_content().split())[:60] in " ".join(prompt.split()) for n in response.source_nodes)


def test_an_answer_sentence_no_citation_supports_is_dropped(retriever, server):
    # One true sentence, one the citation does not support: only the supported one is returned.
    server.responder = citing("Marie Curie was born in Warsaw. She later moved to Berlin in 1891.", "Marie Curie was born in Warsaw")
    result = answer(QUESTION, retriever, llm(server))
    assert result.answered and result.answer == "Marie Curie was born in Warsaw." and result.dropped_sentences == 1
    # Nothing the citation says: the citation holds, the answer does not.
    server.responder = citing("The Eiffel Tower stands in Berlin.", "Marie Curie was born in Warsaw")
    result = answer(QUESTION, retriever, llm(server))
    assert not result.answered and result.answer == CANNOT_ANSWER and result.dropped_sentences == 1
    assert len(result.citations) == 0 and result.dropped_citations == 0
