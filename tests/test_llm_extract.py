"""The LLM extractor against a scripted OpenAI-compatible server on 127.0.0.1 (spaCy is the real
fallback). Its relations in the store: tests/test_llm_relations.py."""

from __future__ import annotations

import asyncio
import json
import threading
import time
import warnings

import pytest
from llm_support import CORPUS, ONTOLOGY, extraction_responder, passage_text, scripted_extraction

from surreal_kgrag import ConfigurationError
from surreal_kgrag.llm import ExtractionCache, LLMExtractionWarning, LLMExtractor, LLMSettings, Ontology, load_ontology
from surreal_kgrag.llm.scripted import Reply, ScriptedChatServer

NOBEL = "Alfred Nobel was born in Stockholm. Alfred Nobel invented dynamite. Stockholm is the capital of Sweden."


@pytest.fixture
def server():
    with ScriptedChatServer(extraction_responder) as s:
        yield s


def settings(server: ScriptedChatServer, **options) -> LLMSettings:
    options = {"backoff": 0.01, "max_backoff": 0.05, "timeout": 5.0, **options}
    return LLMSettings(model="scripted", base_url=server.base_url, api_key="local", **options)


def extractor(server, *, cache=None, fallback="spacy", **options) -> LLMExtractor:
    llm_options = {k: options.pop(k) for k in list(options) if k in LLMSettings.model_fields}
    return LLMExtractor(settings(server, **llm_options), cache=cache, fallback=fallback, **options)


def count_tokens(server) -> tuple[int, int]:
    """The token counts the scripted server reported, recomputed from what it received."""
    prompt = sum(max(1, sum(len(m["content"]) for m in r["messages"]) // 4) for r in server.requests)
    return prompt, 0


# -- replies ---------------------------------------------------------------------------------------


def test_a_valid_reply_gives_normalised_mentions_and_relations(server):
    text = "Marie Curie was born in Warsaw. Warsaw is the capital of Poland."
    result = extractor(server).extract_graph([text])
    chunk = result.chunks[0]
    assert chunk.source == "llm"
    assert [(m.name, m.display, m.kind, m.count) for m in chunk.mentions] == [
        ("marie curie", "Marie Curie", "person", 1),
        ("warsaw", "Warsaw", "city", 2),
        ("poland", "Poland", "country", 1),
    ]
    # No ontology: every relation is kept, its type in snake_case ("born in" -> born_in).
    assert {(r.subject, r.type, r.object) for r in chunk.relations} == {
        ("marie curie", "born_in", "warsaw"),
        ("warsaw", "capital_of", "poland"),
        ("poland", "capital_of", "warsaw"),
    }
    assert all(r.in_ontology for r in chunk.relations)
    request = server.requests[0]
    assert request["response_format"]["type"] == "json_schema"
    assert request["messages"][1]["content"] == text
    stats = result.stats
    assert (stats.chunks, stats.from_llm, stats.from_cache, stats.fallbacks) == (1, 1, 0, 0)
    assert stats.usage.requests == 1 and stats.usage.retries == 0
    assert stats.usage.prompt_tokens == count_tokens(server)[0]
    assert stats.usage.completion_tokens == len(json.dumps(scripted_extraction(text))) // 4


def test_the_extractor_is_a_concept_extractor_and_counts_across_calls(server):
    llm = extractor(server)
    texts = [CORPUS["warsaw"][1], CORPUS["paris"][1]]
    mentions = llm.extract(texts)
    assert [[m.name for m in found] for found in mentions] == [
        ["warsaw", "poland", "vistula", "marie curie", "polonium"],
        ["paris", "france", "sorbonne", "marie curie", "pierre curie"],
    ]
    llm.extract([CORPUS["nobel"][1]])
    assert llm.stats.chunks == 3 and llm.stats.usage.requests == 3


def test_ontology_reject_drops_and_counts_out_of_ontology_kinds_types_and_roles(server):
    result = extractor(server, ontology=ONTOLOGY).extract_graph([NOBEL])
    chunk = result.chunks[0]
    assert {(m.name, m.kind) for m in chunk.mentions} == {("alfred nobel", "person"), ("stockholm", "city"), ("sweden", "country")}
    assert {(r.subject, r.type, r.object) for r in chunk.relations} == {
        ("alfred nobel", "born_in", "stockholm"),
        ("stockholm", "capital_of", "sweden"),
    }
    stats = result.stats
    assert stats.concepts_rejected == 1  # dynamite: an invention
    assert stats.relations_rejected == 2  # invented (its object was rejected), capital_of sweden -> stockholm (roles)
    assert stats.concepts_flagged == stats.relations_flagged == 0
    prompt = server.requests[0]["messages"][0]["content"]
    assert "- capital_of: city -> country" in prompt and "- person: a human being" in prompt


def test_ontology_flag_keeps_and_marks_what_breaks_it(server):
    result = extractor(server, ontology=ONTOLOGY, on_violation="flag").extract_graph([NOBEL])
    chunk = result.chunks[0]
    assert ("dynamite", "unlisted:invention") in {(m.name, m.kind) for m in chunk.mentions}
    flagged = {(r.subject, r.type, r.object): r.violation for r in chunk.relations if not r.in_ontology}
    assert flagged == {
        ("alfred nobel", "invented", "dynamite"): "'invented' is not a relation type of the ontology",
        ("sweden", "capital_of", "stockholm"): "a country cannot be the subject of capital_of (allowed: city)",
    }
    assert {(r.subject, r.type) for r in chunk.relations if r.in_ontology} == {("alfred nobel", "born_in"), ("stockholm", "capital_of")}
    assert (result.stats.concepts_flagged, result.stats.relations_flagged) == (1, 2)
    assert result.stats.concepts_rejected == result.stats.relations_rejected == 0


def test_relations_to_names_the_reply_did_not_list_are_dropped(server):
    server.responder = lambda request: json.dumps(
        {
            "concepts": [{"name": "Marie Curie", "kind": "person"}, {"name": "the", "kind": "person"}],
            "relations": [
                {"subject": "Marie Curie", "relation": "born_in", "object": "Warsaw"},
                {"subject": "Marie Curie", "relation": "knows", "object": "Marie Curie"},
            ],
        }
    )
    result = extractor(server).extract_graph(["Marie Curie was born in Warsaw."])
    assert [m.name for m in result.chunks[0].mentions] == ["marie curie"]
    assert result.chunks[0].relations == []
    assert result.stats.relations_dropped == 2 and result.stats.concepts_dropped == 1


# -- failures --------------------------------------------------------------------------------------


def test_malformed_json_is_sent_back_once_and_repaired(server):
    def responder(request):
        if len(request["messages"]) == 2:
            return 'Sure! {"concepts": [{"name": "Warsaw", "kind": }'
        assert "not valid" in request["messages"][-1]["content"]
        return extraction_responder(request)

    server.responder = responder
    result = extractor(server).extract_graph([CORPUS["warsaw"][1]])
    assert result.chunks[0].source == "llm" and result.chunks[0].mentions
    assert (result.stats.malformed_replies, result.stats.repaired, result.stats.fallbacks) == (1, 1, 0)
    assert result.stats.usage.requests == 2


def test_a_reply_that_stays_malformed_falls_back_to_spacy_with_a_warning(server, spacy_extractor):
    server.responder = lambda request: "I found Warsaw and Poland."
    texts = [CORPUS["warsaw"][1]]
    with pytest.warns(LLMExtractionWarning, match="extraction failed for 1 of 1 chunks"):
        result = extractor(server, fallback=spacy_extractor).extract_graph(texts)
    assert result.chunks[0].source == "fallback"
    assert result.chunks[0].mentions == spacy_extractor.extract(texts)[0]
    assert (result.stats.malformed_replies, result.stats.fallbacks) == (2, 1)


def test_the_default_fallback_loads_spacy_when_first_needed(server, spacy_nlp):
    server.responder = lambda request: Reply(status=500)
    with pytest.warns(LLMExtractionWarning, match="SpacyConceptExtractor"):
        result = extractor(server, max_retries=0).extract_graph([CORPUS["warsaw"][1]])
    assert "warsaw" in {m.name for m in result.chunks[0].mentions}


@pytest.mark.parametrize("status", [429, 500, 503])
def test_transient_statuses_are_retried_with_backoff(server, status):
    calls = []

    def responder(request):
        calls.append(time.perf_counter())
        return Reply(status=status, retry_after=0.02) if len(calls) <= 2 else extraction_responder(request)

    server.responder = responder
    result = extractor(server, max_retries=3).extract_graph([NOBEL])
    assert result.chunks[0].source == "llm"
    assert (result.stats.usage.requests, result.stats.usage.retries) == (3, 2)
    assert calls[1] - calls[0] >= 0.015  # the server's Retry-After was honoured


def test_an_error_past_the_retries_falls_back_and_the_batch_goes_on(server, spacy_extractor):
    texts = [CORPUS[key][1] for key in CORPUS]
    bad = texts[2]
    server.responder = lambda request: Reply(status=500, content="model crashed") if passage_text(request) == bad else extraction_responder(request)
    with pytest.warns(LLMExtractionWarning, match="HTTP 500 after 3 attempts: model crashed"):
        result = extractor(server, fallback=spacy_extractor, max_retries=2).extract_graph(texts)
    assert [c.source for c in result.chunks] == ["llm", "llm", "fallback", "llm", "llm", "llm"]
    assert result.chunks[2].mentions == spacy_extractor.extract([bad])[0]
    assert (result.stats.failed_requests, result.stats.fallbacks, result.stats.from_llm) == (1, 1, 5)
    assert result.stats.usage.retries == 2 and result.stats.usage.requests == 5 + 3


def test_client_errors_are_not_retried(server):
    server.responder = lambda request: Reply(status=400, content="bad request: unknown model")
    with pytest.warns(LLMExtractionWarning, match="HTTP 400: bad request"):
        result = extractor(server, fallback=None, max_retries=3).extract_graph([NOBEL])
    assert result.chunks[0].mentions == [] and result.stats.usage.requests == 1 and result.stats.usage.retries == 0


def test_a_timeout_is_retried_then_falls_back(server):
    server.responder = lambda request: Reply(content=extraction_responder(request), delay=0.6)
    with pytest.warns(LLMExtractionWarning, match="did not answer in time after 2 attempts"):
        result = extractor(server, fallback=None, timeout=0.2, max_retries=1).extract_graph([NOBEL])
    assert result.chunks[0].source == "fallback"
    assert (result.stats.failed_requests, result.stats.usage.retries) == (1, 1)


def test_a_missing_api_key_is_a_configuration_error_not_a_fallback(server, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    llm = LLMExtractor(LLMSettings(model="scripted", base_url=server.base_url), cache=None)
    with pytest.raises(ConfigurationError, match="OPENAI_API_KEY"):
        llm.extract(["Warsaw"])


# -- concurrency -----------------------------------------------------------------------------------


class InFlight:
    def __init__(self) -> None:
        self.now = self.peak = 0
        self.lock = threading.Lock()

    def __call__(self, request):
        with self.lock:
            self.now += 1
            self.peak = max(self.peak, self.now)
        time.sleep(0.08)
        with self.lock:
            self.now -= 1
        return extraction_responder(request)


def test_requests_run_concurrently_up_to_the_limit(server):
    server.responder = counter = InFlight()
    texts = [f"{CORPUS[key][1]} ({i})" for i in range(3) for key in CORPUS]
    result = extractor(server, max_concurrency=3).extract_graph(texts)
    assert result.stats.from_llm == len(texts)
    assert 2 <= counter.peak <= 3


async def test_async_extraction_is_bounded_and_equals_sync(server):
    server.responder = counter = InFlight()
    texts = [CORPUS[key][1] for key in CORPUS] * 2
    llm = extractor(server, max_concurrency=2)
    async_result = await llm.aextract_graph(texts)
    assert 1 <= counter.peak <= 2
    sync_result = await asyncio.to_thread(llm.extract_graph, texts)
    assert [c.model_dump() for c in async_result.chunks] == [c.model_dump() for c in sync_result.chunks]


# -- cache -----------------------------------------------------------------------------------------


def test_the_cache_makes_a_second_run_cost_no_tokens(server, tmp_path):
    path = tmp_path / "cache" / "extractions.sqlite3"
    texts = [CORPUS[key][1] for key in CORPUS]
    first = extractor(server, cache=str(path), ontology=ONTOLOGY).extract_graph(texts)
    assert first.stats.from_llm == len(texts) and len(server.requests) == len(texts)

    again = extractor(server, cache=ExtractionCache(path), ontology=ONTOLOGY).extract_graph(texts)  # a new object, same file
    assert len(server.requests) == len(texts)  # no new request
    assert again.stats.from_cache == len(texts) and again.stats.usage.total_tokens == 0
    assert [c.mentions for c in again.chunks] == [c.mentions for c in first.chunks]
    assert [c.relations for c in again.chunks] == [c.relations for c in first.chunks]

    # What is done with a reply is not part of the key: flag mode reads the same cached replies...
    flagged = extractor(server, cache=ExtractionCache(path), ontology=ONTOLOGY, on_violation="flag").extract_graph(texts)
    assert flagged.stats.from_cache == len(texts) and flagged.stats.relations_flagged > 0
    # ...but another ontology is another prompt, and another model another key.
    smaller = {**ONTOLOGY, "relations": {"born_in": ONTOLOGY["relations"]["born_in"]}}
    extractor(server, cache=ExtractionCache(path), ontology=smaller).extract_graph(texts[:2])
    extractor(server, cache=ExtractionCache(path), ontology=ONTOLOGY, temperature=0.5).extract_graph(texts[:1])
    assert len(server.requests) == len(texts) + 3


def test_failed_chunks_are_not_cached(server, tmp_path):
    cache = ExtractionCache(tmp_path / "c.sqlite3")
    server.responder = lambda request: Reply(status=500)
    with pytest.warns(LLMExtractionWarning):
        extractor(server, cache=cache, fallback=None, max_retries=0).extract_graph([NOBEL])
    assert len(cache) == 0
    server.responder = extraction_responder
    assert extractor(server, cache=cache).extract_graph([NOBEL]).chunks[0].source == "llm"
    assert len(cache) == 1


def test_an_unreadable_cache_entry_is_asked_again(server, tmp_path):
    cache = ExtractionCache(tmp_path / "c.sqlite3")
    llm = extractor(server, cache=cache)
    cache.put_many({llm.key(NOBEL): "{not json"})
    assert llm.extract_graph([NOBEL]).chunks[0].source == "llm"
    assert json.loads(cache.get_many([llm.key(NOBEL)])[llm.key(NOBEL)])["concepts"]


def test_the_default_cache_lives_in_the_user_cache_folder(server, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    llm = LLMExtractor(settings(server))
    llm.extract([NOBEL])
    assert llm.cache is not None and llm.cache.path == str(tmp_path / "surreal-kgrag" / "llm-extractions.sqlite3")
    assert len(llm.cache) == 1


# -- ontology files --------------------------------------------------------------------------------


def test_an_ontology_reads_the_same_from_yaml_json_and_a_dict(tmp_path):
    import yaml

    (tmp_path / "o.yaml").write_text(yaml.safe_dump(ONTOLOGY, sort_keys=False))
    (tmp_path / "o.json").write_text(json.dumps(ONTOLOGY))
    from_dict = load_ontology(ONTOLOGY)
    assert Ontology.from_file(tmp_path / "o.yaml") == Ontology.from_file(tmp_path / "o.json") == from_dict
    assert from_dict.kind("PERSON") == "person" and from_dict.relation("Born in").name == "born_in"
    born_in = from_dict.relation("born_in")
    assert from_dict.role_violation(born_in, "person", "country") is None
    assert from_dict.role_violation(born_in, "city", "country") == "a city cannot be the subject of born_in (allowed: person)"


@pytest.mark.parametrize(
    ("content", "suffix", "message"),
    [
        ("concepts: [person]\nrelations:\n  born_in: {subject: [person], object: [planet]}\n", ".yaml", "not concepts of the ontology: \\['planet'\\]"),
        ("concepts: [person, Person]\n", ".yml", "listed twice"),
        ("concepts: [person\n", ".yaml", "not valid YAML"),
        ('{"concepts": []}', ".json", "at least 1 item"),
        ("{concepts", ".json", "not valid JSON"),
    ],
)
def test_a_bad_ontology_file_says_what_is_wrong(tmp_path, content, suffix, message):
    path = tmp_path / f"o{suffix}"
    path.write_text(content)
    with pytest.raises(ConfigurationError, match=message):
        Ontology.from_file(path)


def test_warnings_are_not_raised_for_clean_runs(server):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        extractor(server).extract([CORPUS["paris"][1]])
