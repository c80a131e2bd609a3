"""Queries from threads and asyncio tasks, in every mode, while documents are ingested, updated
and deleted and the search indexes are rebuilt: no query fails, and no result is torn (a document
without its chunks, a hit on a record already deleted, an edge to a missing concept)."""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass, field

from surreal_kgrag import IngestConfig, Ingestor, SurrealStore, make_retriever
from surreal_kgrag.chunking import SentenceChunker
from surreal_kgrag.indexes import IndexSettings

MODES = ("chunk", "concept", "hybrid", "graph")
QUESTIONS = [
    "Where was Marie Curie born?",
    "Which element did the Curies discover?",
    "Who founded the Nobel Prize?",
    "What river flows through Warsaw?",
    "Who taught physics at the Sorbonne?",
]
FACTS = [
    "Marie Curie was born in Warsaw in 1867.",
    "Pierre Curie taught physics at the Sorbonne in Paris.",
    "The Curies discovered polonium and radium in 1898.",
    "Polonium was named after Poland, the homeland of Marie Curie.",
    "Alfred Nobel invented dynamite and founded the Nobel Prize.",
    "The Vistula river flows through Warsaw and Krakow.",
    "Irene Joliot-Curie, their daughter, shared a Nobel Prize in Chemistry.",
    "The Radium Institute in Paris was built for Marie Curie.",
    "Henri Becquerel studied uranium rays before the Curies.",
    "The Sorbonne is a university in the Latin Quarter of Paris.",
    "Stockholm hosts the Nobel Prize ceremony every December.",
    "Krakow was the capital of Poland before Warsaw.",
]


def _text(i: int, version: int = 0) -> str:
    """A document of several chunks whose sentences name concepts other documents name too."""
    sentences = [FACTS[(i * 5 + j * 7 + version) % len(FACTS)] for j in range(8)]
    return " ".join(f"Part {j + 1} of record {i} (version {version}). {s}" for j, s in enumerate(sentences))


@dataclass
class Tally:
    queries: int = 0
    errors: list[str] = field(default_factory=list)
    torn: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def error(self, what: str) -> None:
        with self.lock:
            self.errors.append(what)


def _check(result, deleted: set[str], started: float, deleted_at: dict[str, float], tally: Tally, mode: str) -> None:
    for doc in result.documents:
        if not doc.source or not doc.chunks:
            tally.error(f"{mode}: document {doc.id} came back without its source or chunks")
        for chunk in doc.chunks:
            if not chunk.id.startswith(f"{doc.id}::") or not chunk.content:
                tally.error(f"{mode}: chunk {chunk.id} does not belong to {doc.id} or is empty")
        if doc.id in deleted and deleted_at[doc.id] < started:
            tally.error(f"{mode}: {doc.id} was deleted before this query started and came back")


def test_queries_never_fail_or_tear_while_documents_are_written_and_indexes_rebuilt(tmp_path, minilm, spacy_extractor):
    # A rule that rebuilds after every few dozen vectors, so rebuilds happen under the readers.
    settings = IndexSettings(rebuild_min_pending=40, rebuild_ratio=0.0)
    config = IngestConfig(chunker=SentenceChunker(max_tokens=40, overlap_tokens=8), index=settings)
    url = f"surrealkv://{tmp_path / 'kg'}"
    store = SurrealStore(url)
    ingestor = Ingestor(store, embedder=minilm, extractor=spacy_extractor, config=config)
    first = ingestor.ingest_texts([_text(i) for i in range(10)], ids=[f"doc{i}" for i in range(10)])
    assert first.added == 10 and first.chunks >= 30

    stop = threading.Event()
    tally = Tally()
    deleted: set[str] = set()
    deleted_at: dict[str, float] = {}

    def reader(seed: int) -> None:
        retrievers = {mode: make_retriever(mode, SurrealStore(url), embedder=minilm) for mode in MODES}
        n = seed
        while not stop.is_set():
            mode = MODES[n % len(MODES)]
            question = QUESTIONS[n % len(QUESTIONS)]
            started = time.monotonic()
            try:
                result = retrievers[mode].search(question, k=4)
                _check(result, set(deleted), started, dict(deleted_at), tally, mode)
            except Exception as error:  # every failure is a finding: collect it with its mode
                tally.error(f"{mode} (thread): {type(error).__name__}: {error}")
            with tally.lock:
                tally.queries += 1
            n += 1
        for retriever in retrievers.values():
            retriever.store.close()

    async def async_readers() -> None:
        async def one(seed: int) -> None:
            own = SurrealStore(url)
            retrievers = {mode: make_retriever(mode, own, embedder=minilm) for mode in MODES}
            n = seed
            while not stop.is_set():
                mode = MODES[n % len(MODES)]
                started = time.monotonic()
                try:
                    result = await retrievers[mode].asearch(QUESTIONS[n % len(QUESTIONS)], k=4)
                    _check(result, set(deleted), started, dict(deleted_at), tally, mode)
                except Exception as error:
                    tally.error(f"{mode} (task): {type(error).__name__}: {error}")
                with tally.lock:
                    tally.queries += 1
                n += 1
                await asyncio.sleep(0)
            await own.aclose()

        await asyncio.gather(*(one(seed) for seed in range(3)))

    def consistency() -> None:
        checker = SurrealStore(url)
        while not stop.is_set():
            try:
                state = checker.query("check_consistency")[-1]
                if state["torn"] or state["dangling"]:
                    with tally.lock:
                        tally.torn.append(f"torn {state['torn']}, dangling {state['dangling']}")
            except Exception as error:
                tally.error(f"consistency check: {type(error).__name__}: {error}")
            stop.wait(0.05)
        checker.close()

    threads = [threading.Thread(target=reader, args=(seed,)) for seed in range(3)]
    threads.append(threading.Thread(target=lambda: asyncio.run(async_readers())))
    threads.append(threading.Thread(target=consistency))
    for thread in threads:
        thread.start()
    try:
        time.sleep(1.0)
        added = ingestor.ingest_texts([_text(i) for i in range(10, 22)], ids=[f"doc{i}" for i in range(10, 22)])
        updated = ingestor.ingest_texts([_text(i, version=1) for i in range(4)], ids=[f"doc{i}" for i in range(4)])
        doomed = [f"doc{i}" for i in range(4, 8)]
        assert ingestor.delete(doomed) == 4
        now = time.monotonic()
        deleted.update(doomed)
        deleted_at.update(dict.fromkeys(doomed, now))
        more = ingestor.ingest_texts([_text(i) for i in range(22, 30)], ids=[f"doc{i}" for i in range(22, 30)])
        optimized = store.optimize(force=True)
        time.sleep(1.0)
    finally:
        stop.set()
        for thread in threads:
            thread.join(300)

    assert (added.added, updated.updated, more.added) == (12, 4, 8)
    states = store.index_states()
    assert sorted(optimized.rebuilt) == ["chunk", "concept", "text"]
    generations = {key: s.generation for key, s in states.items()}
    assert max(generations.values()) >= 2, generations  # rebuilt during the ingests, and by optimize
    final = store.query("check_consistency")[-1]
    assert final["documents"] == 26 and not final["torn"] and not final["dangling"]
    store.close()
    print(f"{tally.queries} queries during the writes; {len(tally.errors)} errors; generations {generations}")
    assert tally.errors == []
    assert tally.torn == []
    assert tally.queries >= 40


class _ReingestBeforeHydration(SurrealStore):
    """A store that re-ingests one document just before a retriever's hydration query runs: the
    window between a search and its hydration, made to happen every time instead of by chance."""

    def __init__(self, url: str, ingestor: Ingestor, doc_id: str, text: str) -> None:
        super().__init__(url)
        self.ingestor, self.doc_id, self.text = ingestor, doc_id, text
        self.replaced = 0

    def query(self, name, params=None, **placeholders):
        if name == "hydrate_results":
            self.ingestor.ingest_texts([self.text], ids=[self.doc_id])
            self.replaced += 1
        return super().query(name, params, **placeholders)


FILLER = [
    "Bakers in Lyon rise before dawn to knead the dough for the morning bread.",
    "The harbour of Valletta shelters fishing boats painted in bright colours.",
    "Glaciers in Patagonia calve icebergs into the milky turquoise lakes.",
    "A violin maker in Cremona seasons spruce for a decade before carving it.",
    "Monsoon rains fill the terraced rice fields of Bali every November.",
]


def test_a_document_rewritten_between_search_and_hydration_never_comes_back_without_chunks(
    tmp_path, minilm, spacy_extractor
):
    config = IngestConfig(chunker=SentenceChunker(max_tokens=20, overlap_tokens=0))
    url = f"surrealkv://{tmp_path / 'kg'}"
    writer_store = SurrealStore(url)
    ingestor = Ingestor(writer_store, embedder=minilm, extractor=spacy_extractor, config=config)
    target = " ".join([*FILLER, "The Zephyr lighthouse of Quillon Island was lit by Ada Thornbury in 1871."])
    others = [" ".join(FILLER[i:] + FILLER[:i]) for i in range(1, 4)]
    assert ingestor.ingest_texts([target], ids=["target"]).chunks >= 4
    ingestor.ingest_texts(others, ids=["a", "b", "c"])

    replacement = "A short note on pruning roses in the spring."  # one chunk: target::0 only
    for mode in ("concept", "hybrid", "graph"):
        ingestor.ingest_texts([target], ids=["target"])  # the long version again, for this mode
        store = _ReingestBeforeHydration(url, ingestor, "target", replacement)
        result = make_retriever(mode, store, embedder=minilm).search("Who lit the Zephyr lighthouse on Quillon Island?", k=4)
        assert store.replaced == 1, mode
        for doc in result.documents:
            assert doc.chunks, f"{mode}: {doc.id} came back without chunks"
            if doc.id == "target":  # only the chunk that survived the rewrite, with its new text
                assert [c.content for c in doc.chunks] == [replacement], mode
        store.close()
    writer_store.close()


def test_the_consistency_check_reports_a_torn_document_and_a_dangling_edge(minilm, spacy_extractor):
    """The check the readers above rely on finds what it is there to find."""
    config = IngestConfig(chunker=SentenceChunker(max_tokens=40, overlap_tokens=8))
    with SurrealStore("mem://") as store:
        Ingestor(store, embedder=minilm, extractor=spacy_extractor, config=config).ingest_texts(
            [_text(i) for i in range(3)], ids=["doc0", "doc1", "doc2"]
        )
        clean = store.query("check_consistency")[-1]
        assert (clean["documents"], clean["torn"], clean["dangling"]) == (3, [], [])
        # Tear doc1 (one chunk text gone) and leave an edge to a concept that no longer exists.
        store.query_text("test: tear", "DELETE (SELECT VALUE id FROM chunk_text WHERE doc = document:doc1 LIMIT 1);")
        store.query_text(
            "test: dangle",
            "LET $c = (SELECT VALUE id FROM chunk WHERE doc = document:doc2 LIMIT 1)[0];"
            "RELATE $c->MENTIONS_CONCEPT->concept:nowhere SET doc = document:doc2;",
        )
        broken = store.query("check_consistency")[-1]
        assert [str(doc.id) for doc in broken["torn"]] == ["doc1"]
        assert len(broken["dangling"]) == 1 and broken["dangling"][0].table_name == "MENTIONS_CONCEPT"
