"""LLM layer benchmark against a scripted OpenAI-compatible server on 127.0.0.1 (no model, no network):

1. extraction of N chunks (default 100): seconds and tokens per 100 chunks, cold and from the cache,
   at concurrency 1 and 4, next to the same requests sent with the bare ``openai`` SDK (the
   difference is the layer's own cost: prompt, schema, validation, normalisation, cache);
2. ingest with the LLM extractor (relations written with their documents), then the same documents
   ingested into a fresh store: requests, cache hits and relations of each run (``IngestSummary.llm``);
3. the read-only guard on generated statements: how many it refuses (by rule), how many the engine
   refuses or fails, how many run, and whether the database changed.

    .venv/bin/python benchmarks/llm_benchmark.py [--corpus ../shared/bench/hotpotqa/corpus.jsonl] [--chunks 100] [--statements 10000]

The server answers at once with an extraction of the passage's capitalised names (about what a
model returns for a HotpotQA passage) and reports usage at 4 characters per token: token figures
are estimates of the prompt and reply sizes, not a real tokenizer's counts.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import tempfile
import time
from collections import Counter
from itertools import pairwise
from pathlib import Path
from typing import Any

from surreal_kgrag import Ingestor, SourceDocument, SurrealStore
from surreal_kgrag.chunking import SentenceChunker
from surreal_kgrag.llm import (
    ExtractionCache,
    LLMExtractor,
    LLMSettings,
    ReadonlyLimits,
    ReadonlyQueryError,
    check_readonly,
    run_readonly_query,
)
from surreal_kgrag.llm.scripted import ScriptedChatServer, first_user_message

DEFAULT_CORPUS = Path(__file__).resolve().parents[2] / "shared" / "bench" / "hotpotqa" / "corpus.jsonl"
NAME = re.compile(r"\b[A-Z][a-z]+(?: [A-Z][a-z]+)*\b")


def scripted_extraction(request: dict[str, Any]) -> str:
    text = first_user_message(request)
    names = list(dict.fromkeys(NAME.findall(text)))[:12]
    concepts = [{"name": n, "kind": "PERSON" if " " in n else "TOPIC"} for n in names]
    relations = [{"subject": a, "relation": "related_to", "object": b} for a, b in pairwise(names)][:6]
    return json.dumps({"concepts": concepts, "relations": relations})


def load_documents(corpus: Path, chunks: int) -> list[SourceDocument]:
    """Enough corpus records for ``chunks`` chunks with the default chunker."""
    chunker, documents, total = SentenceChunker(), [], 0
    with corpus.open(encoding="utf-8") as lines:
        for line in lines:
            record = json.loads(line)
            documents.append(SourceDocument(key=record["id"], text=record["text"], title=record.get("title"), source=record["id"]))
            total += len(chunker.split(record["text"]))
            if total >= chunks:
                break
    return documents


def per_100(value: float, chunks: int) -> float:
    return round(value * 100 / chunks, 3)


def extraction_figures(server: ScriptedChatServer, texts: list[str], folder: Path) -> dict[str, Any]:
    import openai

    server.requests.clear()
    report: dict[str, Any] = {"chunks": len(texts)}
    for concurrency in (1, 4):
        llm = LLMSettings(model="scripted", base_url=server.base_url, api_key="local", max_concurrency=concurrency)
        cache = ExtractionCache(folder / f"cache-{concurrency}.sqlite3")
        extractor = LLMExtractor(llm, cache=cache, fallback=None)
        started = time.perf_counter()
        cold = extractor.extract_graph(texts)
        cold_seconds = time.perf_counter() - started
        started = time.perf_counter()
        warm = LLMExtractor(llm, cache=cache, fallback=None).extract_graph(texts)
        warm_seconds = time.perf_counter() - started
        report[f"concurrency_{concurrency}"] = {
            "cold_seconds_per_100": per_100(cold_seconds, len(texts)),
            "cached_seconds_per_100": per_100(warm_seconds, len(texts)),
            "requests": cold.stats.usage.requests,
            "prompt_tokens_per_100": per_100(cold.stats.usage.prompt_tokens, len(texts)),
            "completion_tokens_per_100": per_100(cold.stats.usage.completion_tokens, len(texts)),
            "cached_requests": warm.stats.usage.requests,
            "cache_hits": warm.stats.from_cache,
            "relations_per_100": per_100(sum(len(c.relations) for c in cold.chunks), len(texts)),
        }
    # The very requests the extractor sent, replayed with the bare SDK one at a time: what the SDK and
    # the round trip to this server cost without the layer.
    sent = server.requests[: len(texts)]
    client = openai.OpenAI(base_url=server.base_url, api_key="local", max_retries=0)
    started = time.perf_counter()
    for body in sent:
        client.chat.completions.create(**body)
    report["bare_sdk_seconds_per_100"] = per_100(time.perf_counter() - started, len(texts))
    report["layer_overhead_ms_per_chunk"] = round(
        (report["concurrency_1"]["cold_seconds_per_100"] - report["bare_sdk_seconds_per_100"]) * 10, 3
    )
    return report


def ingest_figures(server: ScriptedChatServer, documents: list[SourceDocument], folder: Path, store: SurrealStore) -> dict[str, Any]:
    llm = LLMSettings(model="scripted", base_url=server.base_url, api_key="local")
    cache = folder / "ingest-cache.sqlite3"
    ingestor = Ingestor(store, extractor=LLMExtractor(llm, cache=cache, fallback=None))
    summary = ingestor.ingest(documents)
    with SurrealStore("mem://") as fresh:
        second = Ingestor(fresh, embedder=ingestor.embedder, extractor=LLMExtractor(llm, cache=cache, fallback=None)).ingest(documents)
    first_llm, second_llm = summary.llm, second.llm
    assert first_llm is not None and second_llm is not None
    return {
        "documents": summary.added,
        "chunks": summary.chunks,
        "first_ingest": {"requests": first_llm.requests, "seconds": summary.seconds, "extract_seconds": summary.timings.get("extract"),
                         "tokens": first_llm.prompt_tokens + first_llm.completion_tokens, "relations_written": first_llm.relations},
        "reingest_into_a_fresh_store": {"requests": second_llm.requests, "cache_hits": second_llm.cache_hits,
                                        "chunks": second.chunks, "relations_written": second_llm.relations,
                                        "extract_seconds": second.timings.get("extract")},
    }


VOCABULARY = [
    "SELECT", "select", "*", "FROM", "document", "chunk", "concept", "RELATES_TO", "WHERE", "title", "name", "=", "!=", ">", "'x'",
    '"y"', "'DELETE'", "(", ")", "{", "}", "[", "]", ",", ";", ".", "..", "->", "<-", "MENTIONS_CONCEPT", "true", "1", "$auth",
    "|$v|", "AND", "OR", "--", "/*", "*/", "#", "//", "\\", "`x`", "⟨y⟩", "'", '"', "`", "DELETE", "CREATE", "UPDATE", "UPSERT",
    "INSERT", "INTO", "RELATE", "DEFINE", "TABLE", "REMOVE", "LET", "RETURN", "IF", "ELSE", "KILL", "LIVE", "INFO", "FOR", "sleep",
    "http::get", "fn::x", "count()", "array::len", "string::len", "type::record", "TIMEOUT", "LIMIT", "ORDER BY", "GROUP ALL",
    "SET", "document:evil", "\n", "；", "\u00a0",
]
WRITES = ["DELETE document", "CREATE document:evil", "UPDATE concept SET df = 0", "UPSERT document:evil", "INSERT INTO chunk {}",
          "RELATE concept:a->RELATES_TO->concept:b", "DEFINE TABLE evil", "REMOVE TABLE chunk", "LET $a = 1", "INFO FOR DB"]
READS = ["SELECT * FROM document WHERE title != 'x'", "SELECT name FROM concept WHERE df > 1", "SELECT VALUE id FROM chunk LIMIT 3"]
WRAPPERS = ["({})", "{{ {} }}", "[{}]", "1..{}", "|$v| {}", "{}", "; {}", "<future> {{ {} }}"]


def statements(count: int, seed: int) -> list[tuple[str, str]]:
    """(origin, statement): random token soups (half starting as a read), and writes placed into reads."""
    rng = random.Random(seed)
    made = []
    for i in range(count):
        if i % 4 == 3:
            tokens = rng.choice(READS).split(" ")
            cut = rng.randint(0, len(tokens))
            write = rng.choice(WRITES)
            write = rng.choice([write, write.lower(), write.title()])
            made.append(("write placed in a read", " ".join([*tokens[:cut], rng.choice(WRAPPERS).format(write), *tokens[cut:]])))
        else:
            lead = ["SELECT", "*", "FROM", "document"] if i % 2 else []
            made.append(("token soup", " ".join(lead + [rng.choice(VOCABULARY) for _ in range(rng.randint(1, 12))])))
    return made


def snapshot(store: SurrealStore) -> str:
    rows = run_readonly_query(
        store,
        "SELECT VALUE [(SELECT * FROM document ORDER BY id), (SELECT id, content FROM chunk ORDER BY id), "
        "(SELECT id, name, df FROM concept ORDER BY id), (SELECT * FROM RELATES_TO ORDER BY id)] FROM ONLY {}",
        limits=ReadonlyLimits(rows=10, timeout_ms=60_000),
    ).rows
    return repr(store.query("schema_info")) + repr(rows)


def guard_figures(store: SurrealStore, count: int, seed: int) -> dict[str, Any]:
    before = snapshot(store)
    guard: Counter[str] = Counter()
    engine: Counter[str] = Counter()
    origins: Counter[str] = Counter()
    started = time.perf_counter()
    for origin, statement in statements(count, seed):
        origins[origin] += 1
        try:
            check_readonly(statement)
        except ReadonlyQueryError as error:
            guard[error.code] += 1
            continue
        try:
            run_readonly_query(store, statement, limits=ReadonlyLimits(timeout_ms=500))
            engine["ran"] += 1
        except ReadonlyQueryError as error:
            engine[error.code] += 1
    return {
        "statements": dict(origins),
        "refused_by_the_guard": dict(guard.most_common()),
        "refused_total": sum(guard.values()),
        "passed_the_guard": dict(engine.most_common()),
        "database_unchanged": snapshot(store) == before,
        "seconds": round(time.perf_counter() - started, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--chunks", type=int, default=100)
    parser.add_argument("--statements", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=14)
    args = parser.parse_args()
    documents = load_documents(args.corpus, args.chunks)
    texts = [chunk.content for doc in documents for chunk in SentenceChunker().split(doc.text)][: args.chunks]
    report: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as folder, ScriptedChatServer(scripted_extraction) as server, SurrealStore("mem://") as store:
        report["extraction"] = extraction_figures(server, texts, Path(folder))
        report["ingest"] = ingest_figures(server, documents, Path(folder), store)
        report["guard"] = guard_figures(store, args.statements, args.seed)
    print(json.dumps(report, indent=2, ensure_ascii=False))


if __name__ == "__main__":
    main()
