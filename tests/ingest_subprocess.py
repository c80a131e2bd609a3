"""Run by tests/test_crash_safety.py in a subprocess: the CLI's ingest, printing a line to stdout
before and after each write transaction so the test can kill the process at a chosen point.

    python tests/ingest_subprocess.py CORPUS DB_URL [LLM_BASE_URL]

With LLM_BASE_URL (the test's scripted OpenAI-compatible server) the ingest extracts concepts and
relations with the LLM extractor instead of spaCy.
"""

from __future__ import annotations

import signal
import sys

import surreal_kgrag.ingest
from surreal_kgrag import IngestConfig, SurrealStore
from surreal_kgrag.cli import run

query = SurrealStore.query
writes = 0


def announced(self, name, params=None, **placeholders):
    global writes
    if name != "write_documents":
        return query(self, name, params, **placeholders)
    writes += 1
    print(f"write-start {writes}", flush=True)
    result = query(self, name, params, **placeholders)
    print(f"write-done {writes} {len(params['doc_ids'])}", flush=True)  # and how many documents
    return result


SurrealStore.query = announced
# A process started in the background by a shell inherits SIGINT ignored; Ctrl-C is what is tested.
signal.signal(signal.SIGINT, signal.default_int_handler)
# Small batches and groups: many transactions, several batches in flight at once.


def small_batches(**options):
    return IngestConfig(**options, batch_size=4, batch_chunks=12, group_size=2, group_chunks=6)


surreal_kgrag.ingest.IngestConfig = small_batches  # what cmd_ingest builds its config with

if len(sys.argv) > 3:
    from surreal_kgrag.llm import LLMExtractor, LLMSettings

    ingestor = surreal_kgrag.ingest.Ingestor
    settings = LLMSettings(model="scripted", base_url=sys.argv[3], api_key="local", backoff=0.01)

    def with_llm(store, **options):
        return ingestor(store, **{**options, "extractor": LLMExtractor(settings, cache=None, fallback=None)})

    surreal_kgrag.ingest.Ingestor = with_llm  # what cmd_ingest builds its ingestor with
run(["ingest", sys.argv[1], "--db", sys.argv[2], "--no-progress", "--json"])  # as the console script ends
