"""Concurrency hygiene on the real embedded engine: a failing query cancels its siblings, the event
loop a thread's sync calls run on is closed with the thread, and a record that moves to another file
is written again."""

from __future__ import annotations

import asyncio
import os
import threading

import pytest
from surrealdb import RecordID

from surreal_kgrag import Ingestor, SourceDocument, SurrealStore
from surreal_kgrag.retrieval.plan import Call, Gather, arun


@pytest.fixture
def store():
    with SurrealStore("mem://") as s:
        s.query("store_meta")  # opened
        yield s


def _plan(sibling: Call, failing: Call):
    return (yield Gather((sibling, failing), limit=2))


async def test_a_failing_call_cancels_its_siblings(store):
    queries = []

    async def sibling() -> None:
        while True:  # real queries, one after another, until cancelled
            await store.aquery("store_meta")
            queries.append(1)

    async def failing() -> None:
        await asyncio.sleep(0.05)
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        await arun(store, _plan(Call(lambda: None, sibling), Call(lambda: None, failing)))
    stopped = len(queries)
    await asyncio.sleep(0.3)
    assert len(queries) == stopped  # nothing keeps running once the error is raised


def _open_fds() -> int:
    return len(os.listdir(f"/proc/{os.getpid()}/fd"))


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts open descriptors through /proc")
def test_each_threads_event_loop_is_closed_with_the_thread(store):
    def work() -> None:
        store.query("store_meta")

    work()  # this thread's loop exists before counting
    before = _open_fds()
    for _ in range(40):
        thread = threading.Thread(target=work)
        thread.start()
        thread.join()
    # An open event loop holds a selector and a self-pipe (3 descriptors on Linux): 120 for 40 threads.
    assert _open_fds() - before < 10


def test_a_record_that_moves_to_another_file_is_written_again(minilm, spacy_extractor):
    with SurrealStore("mem://") as store:
        ingestor = Ingestor(store, embedder=minilm, extractor=spacy_extractor)
        first = SourceDocument(key="r1", text="Marie Curie was born in Warsaw.", source="old.jsonl")
        assert ingestor.ingest([first]).added == 1
        moved = first.model_copy(update={"source": "new.jsonl"})
        summary = ingestor.ingest([moved])
        assert summary.updated == 1 and summary.skipped == 0
        (stored,) = store.query("get_document", {"ids": [RecordID("document", "r1")]})[-1]
        assert stored["source"] == "new.jsonl"
