"""Scoped writers on the real embedded engine (spaCy, MiniLM): a caller restricted to access labels
or a filter writes only under its own labels and never replaces or deletes a document outside its
scope, on every write path (core ingest and delete, TextStore, both vector stores, both retrievers'
add_documents), also when several tenants write at once from several threads."""

from __future__ import annotations

import asyncio
import datetime
import threading

import pytest
from langchain_core.documents import Document
from llama_index.core.schema import Document as LlamaDocument
from llama_index.core.schema import TextNode
from llama_index.retrievers.surreal_kgrag import SurrealKGRetriever as LlamaRetriever
from llama_index.vector_stores.surreal_kgrag import SurrealKGVectorStore as LlamaVectorStore
from surrealdb import RecordID

from langchain_surreal_kgrag import SurrealKGRetriever as LangChainRetriever
from langchain_surreal_kgrag import SurrealKGVectorStore as LangChainVectorStore
from surreal_kgrag import IngestConfig, Ingestor, ScopeError, SourceDocument, SurrealStore, make_retriever
from surreal_kgrag.chunking import SentenceChunker
from surreal_kgrag.ingest.delete import delete_records
from surreal_kgrag.ingest.scoped import visible
from surreal_kgrag.ingest.slices import finish_pending_writes
from surreal_kgrag.retrieval import Scope
from surreal_kgrag.vectors import TextStore, VectorWriteError

SECRET = "The launch code of Project Zephyr is kept in Krakow."


@pytest.fixture
def store(minilm, spacy_extractor):
    with SurrealStore("mem://") as s:
        admin = Ingestor(s, embedder=minilm, extractor=spacy_extractor)
        documents = [
            SourceDocument(key="secret", title="Zephyr", text=SECRET, source="vault.txt", access=["staff"]),
            SourceDocument(key="notes.txt#part-00002", text="Second part of the staff notes.", source="notes.txt",
                           access=["staff"], parts=2),
            SourceDocument(key="shared", text="Warsaw is the capital of Poland.", source="shared.txt", access=["public", "staff"]),
        ]
        assert admin.ingest(documents).added == 3
        yield s


def _stored(store: SurrealStore, key: str) -> dict | None:
    rows = store.query("get_document", {"ids": [RecordID("document", key)]})[-1]
    return {k: rows[0][k] for k in ("source", "access", "content_hash", "chunk_count")} if rows else None


def _langchain_vectorstore(store, minilm, spacy_extractor):
    vs = LangChainVectorStore(minilm, store=store, access=["public"], extractor=spacy_extractor)
    return lambda: vs.add_documents([Document(page_content="x overwritten", id="secret")])


def _llama_vectorstore(store, minilm, spacy_extractor):
    vs = LlamaVectorStore(store=store, embedder=minilm, extractor=spacy_extractor, access=["public"])
    return lambda: vs.add([TextNode(id_="secret", text="x overwritten", embedding=[0.0] * 384)])


def _langchain_retriever(store, minilm, spacy_extractor):
    retriever = LangChainRetriever.from_retriever(make_retriever("chunk", store, embedder=minilm), access=["public"])
    return lambda: retriever.add_documents([Document(page_content="x overwritten", id="secret")], extractor=spacy_extractor)


def _llama_retriever(store, minilm, spacy_extractor):
    retriever = LlamaRetriever.from_retriever(make_retriever("chunk", store, embedder=minilm), access=["public"])
    return lambda: retriever.add_documents([LlamaDocument(text="x overwritten", doc_id="secret")], extractor=spacy_extractor)


def _text_store(store, minilm, spacy_extractor):
    texts = TextStore(store, embedder=minilm, extractor=spacy_extractor, scope=Scope(access=["public"]))
    return lambda: texts.add(["x overwritten"], ids=["secret"])


def _text_store_async(store, minilm, spacy_extractor):
    texts = TextStore(store, embedder=minilm, extractor=spacy_extractor, scope=Scope(access=["public"]))
    return lambda: asyncio.run(texts.aadd(["x overwritten"], ids=["secret"]))


def _ingestor(store, minilm, spacy_extractor):
    ingestor = Ingestor(store, embedder=minilm, extractor=spacy_extractor, scope=Scope(access=["public"]))
    return lambda: ingestor.ingest([SourceDocument(key="secret", text="x overwritten", source="x.txt", access=["public"])])


WRITERS = {
    "ingestor": _ingestor,
    "text_store": _text_store,
    "text_store_async": _text_store_async,
    "langchain_vectorstore": _langchain_vectorstore,
    "llama_vectorstore": _llama_vectorstore,
    "langchain_retriever": _langchain_retriever,
    "llama_retriever": _llama_retriever,
}


@pytest.mark.parametrize("path", sorted(WRITERS))
def test_no_write_path_replaces_a_document_outside_the_scope(store, minilm, spacy_extractor, path):
    before = _stored(store, "secret")
    write = WRITERS[path](store, minilm, spacy_extractor)
    try:
        outcome = write()
    except VectorWriteError as error:
        outcome = error
    reported = str(outcome.failures if hasattr(outcome, "failures") else outcome)
    assert "'secret'" in reported and "outside the caller's scope" in reported, reported
    assert _stored(store, "secret") == before  # labels, text and source untouched


def test_a_scoped_writer_writes_only_under_its_own_labels(store, minilm, spacy_extractor):
    with pytest.raises(ScopeError, match=r"labels \['staff'\] are outside this store's access labels \['public'\]"):
        TextStore(store, embedder=minilm, scope=Scope(access=["public"]), labels=["public", "staff"])
    ingestor = Ingestor(store, embedder=minilm, extractor=spacy_extractor, scope=Scope(access=["public"]))
    summary = ingestor.ingest([
        SourceDocument(key="mine", text="Gdansk lies on the Baltic Sea.", source="mine.txt"),
        SourceDocument(key="sneaky", text="A staff-only memo.", source="sneaky.txt", access=["staff"]),
    ])
    assert summary.added == 1 and "carries access labels ['staff'] outside this caller's labels" in str(summary.failures)
    assert _stored(store, "mine")["access"] == ["public"] and _stored(store, "sneaky") is None
    # A document both can read may be replaced, and only under the writer's labels.
    assert ingestor.ingest([SourceDocument(key="shared", text="Warsaw lies on the Vistula.", source="shared.txt")]).updated == 1
    assert _stored(store, "shared")["access"] == ["public"]


def test_a_writer_scoped_by_a_filter_writes_only_what_matches_it(store, minilm, spacy_extractor):
    red = Ingestor(store, embedder=minilm, extractor=spacy_extractor, scope=Scope(filters={"metadata.team": "red"}))
    summary = red.ingest([
        SourceDocument(key="blue-plan", text="The blue plan.", source="b.txt", metadata={"team": "blue"}),
        SourceDocument(key="red-plan", text="The red plan.", source="r.txt", metadata={"team": "red"}),
    ])
    assert summary.added == 1 and "'blue-plan'" in str(summary.failures) and _stored(store, "blue-plan") is None
    unrestricted = Ingestor(store, embedder=minilm, extractor=spacy_extractor)
    unrestricted.ingest([SourceDocument(key="blue-only", text="Blue.", source="bo.txt", metadata={"team": "blue"})])
    relabel = red.ingest([SourceDocument(key="blue-only", text="Now red.", source="bo.txt", metadata={"team": "red"})])
    assert "'blue-only'" in str(relabel.failures) and _stored(store, "blue-only")["chunk_count"] == 1


def test_a_scoped_writer_cannot_confirm_a_hidden_documents_text_by_writing_it_again(store, minilm, spacy_extractor):
    """Writing a guess of a hidden document under its id, labels and metadata must be refused whether
    the guess is right or wrong: a right guess reported as unchanged would confirm the hidden text."""
    unrestricted = Ingestor(store, embedder=minilm, extractor=spacy_extractor)
    blue = SourceDocument(key="blue-memo", text="Blue moves first.", source="bm.txt", metadata={"team": "blue"})
    unrestricted.ingest([blue])
    red = Ingestor(store, embedder=minilm, extractor=spacy_extractor, scope=Scope(filters={"metadata.team": "red"}))
    for guess in (blue, blue.model_copy(update={"text": "Blue waits."})):
        summary = red.ingest([guess])
        assert summary.skipped == 0 and "'blue-memo'" in str(summary.failures), guess.text
    assert _stored(store, "blue-memo")["content_hash"] == blue.content_hash


def test_scoped_deletes_reach_only_readable_documents(store, minilm, spacy_extractor):
    ingestor = Ingestor(store, embedder=minilm, extractor=spacy_extractor, scope=Scope(access=["public"]))
    assert ingestor.delete(["secret", "shared"]) == 1
    assert asyncio.run(ingestor.adelete(["secret"])) == 0
    assert _stored(store, "secret") is not None and _stored(store, "shared") is None
    assert TextStore(store, embedder=minilm, scope=Scope(access=["public"])).delete(["secret"]) == 0
    # Reading notes.txt whole makes its stored part 2 stale; it is staff's, so it stays.
    assert ingestor.ingest([SourceDocument(key="notes.txt", text="All the public notes.", source="notes.txt")]).added == 1
    assert _stored(store, "notes.txt#part-00002") is not None and _stored(store, "secret") is not None


def test_tenants_writing_at_once_from_threads_never_touch_each_others_documents(store, minilm, spacy_extractor):
    tenants = ["red", "green", "blue"]
    stores = {t: TextStore(store, embedder=minilm, extractor=spacy_extractor, scope=Scope(access=[t])) for t in tenants}
    for tenant in tenants:
        stores[tenant].add([f"The {tenant} tenant's first memo."], ids=[f"{tenant}-memo"])
    owned = {f"{t}-memo": _stored(store, f"{t}-memo") for t in tenants}
    refused: dict[str, list[str]] = {t: [] for t in tenants}
    won: list[str] = []
    barrier = threading.Barrier(len(tenants))

    def attack(tenant: str) -> None:
        barrier.wait()
        try:  # everyone creates the same new id at once: one wins, the others may not overwrite it
            stores[tenant].add([f"{tenant} claims it."], ids=["contested"])
            won.append(tenant)
        except VectorWriteError as error:
            refused[tenant].append(str(error))
        for other in tenants:
            if other != tenant:
                with pytest.raises(VectorWriteError, match=f"'{other}-memo'"):
                    stores[tenant].add([f"{tenant} was here."], ids=[f"{other}-memo"])
                assert stores[tenant].delete([f"{other}-memo"]) == 0

    threads = [threading.Thread(target=attack, args=(t,)) for t in tenants]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert {key: _stored(store, key) for key in owned} == owned
    assert len(won) == 1 and _stored(store, "contested")["access"] == won
    for loser in set(tenants) - set(won):
        assert len(refused[loser]) == 1 and "'contested'" in refused[loser][0]


def _long_text(place: str, n: int) -> str:
    return " ".join(f"Report {i} from {place} counts {i * 7} crates of amber." for i in range(n))


def test_scoped_writers_stay_inside_their_scope_on_documents_written_in_slices(store, minilm, spacy_extractor):
    """A document longer than a write group is written in slices before its row commits it
    (surreal_kgrag.ingest.writer): each slice and the commit check the writer's scope."""
    config = IngestConfig(chunker=SentenceChunker(max_tokens=16, overlap_tokens=0), group_chunks=8)
    public = Ingestor(store, embedder=minilm, extractor=spacy_extractor, scope=Scope(access=["public"]), config=config)
    red = Ingestor(store, embedder=minilm, extractor=spacy_extractor, scope=Scope(filters={"metadata.team": "red"}), config=config)
    admin = Ingestor(store, embedder=minilm, extractor=spacy_extractor, config=config)
    secret = _stored(store, "secret")

    # Replacing a document it cannot read: refused at the first slice.
    refused = public.ingest([SourceDocument(key="secret", text=_long_text("Krakow", 40), source="x.txt")])
    assert refused.added == refused.updated == 0 and "'secret'" in str(refused.failures)
    # A document it could not read afterwards: the slices are written, the commit refuses them and
    # they are removed.
    blue = red.ingest([SourceDocument(key="blue-long", text=_long_text("Gdansk", 40), source="b.txt", metadata={"team": "blue"})])
    assert blue.added == 0 and "'blue-long'" in str(blue.failures) and _stored(store, "blue-long") is None
    # Its own long document is written whole, under its labels.
    assert public.ingest([SourceDocument(key="mine-long", text=_long_text("Poznan", 40), source="m.txt")]).added == 1
    mine = _stored(store, "mine-long")
    assert mine["access"] == ["public"] and mine["chunk_count"] > 3 * 8
    # Another's long document is not deleted; its own is, in steps.
    assert admin.ingest([SourceDocument(key="staff-long", text=_long_text("Lodz", 40), source="s.txt", access=["staff"])]).added == 1
    assert public.delete(["staff-long", "mine-long"]) == 1
    assert _stored(store, "staff-long")["chunk_count"] > 3 * 8 and _stored(store, "mine-long") is None

    assert _stored(store, "secret") == secret
    report = store.query("check_integrity")[-1]
    # (chunks_without_edges: the fixture's "Second part of the staff notes." names no concept.)
    assert {k: v for k, v in report.items() if v} == {"chunks_without_edges": 1}, report
    searched = make_retriever("chunk", store, embedder=minilm).search("crates of amber from Gdansk", k=5)
    assert searched.documents and all(d.id != "blue-long" for d in searched.documents)


@pytest.mark.parametrize(("scope", "linked"), [(None, True), (Scope(access=["staff"]), True), (Scope(access=["public"]), False)])
def test_a_scoped_writers_chunks_are_bridged_only_to_titles_it_can_read(minilm, spacy_extractor, scope, linked):
    """A chunk that names a stored document's title gets an edge to it (a forward bridge), unless the
    writer could not read that document: the edge would tell it the document exists."""
    memo = "Minutes of the review. The Heron Ledger figures were checked against the bank statements by the auditors."
    with SurrealStore("mem://") as s:
        Ingestor(s, embedder=minilm, extractor=spacy_extractor).ingest([SourceDocument(
            key="ledger", title="Heron Ledger", text="The Heron Ledger lists every payment of the project.", source="ledger.txt",
            access=["staff"],
        )])
        writer = Ingestor(s, embedder=minilm, extractor=spacy_extractor, scope=scope)
        access = scope.access if scope else ["public"]
        assert writer.ingest([SourceDocument(key="memo", title="Review memo", text=memo, source="memo.txt", access=access)]).added == 1
        named = {str(edge["out"].id) for edge in s.query("mention_edges")[-1] if edge["doc"].id == "memo"}
        assert "heron ledger figure" in named  # what spaCy finds is linked either way
        assert ("heron ledger" in named) is linked


@pytest.mark.parametrize(("scope", "linked"), [(None, True), (Scope(access=["staff"]), True), (Scope(access=["public"]), False)])
def test_a_scoped_writers_new_title_is_bridged_only_from_chunks_it_can_read(minilm, spacy_extractor, scope, linked):
    """The reverse bridge: a new document's title is searched in the stored chunks, and a chunk that
    names it gets an edge to it, unless the writer could not read that chunk's document (the edge
    would change a document outside its scope)."""
    memo = "Minutes of the review. The Heron Ledger figures were checked against the bank statements by the auditors."
    with SurrealStore("mem://") as s:
        Ingestor(s, embedder=minilm, extractor=spacy_extractor).ingest([SourceDocument(
            key="memo", title="Review memo", text=memo, source="memo.txt", access=["staff"],
        )])
        writer = Ingestor(s, embedder=minilm, extractor=spacy_extractor, scope=scope)
        access = scope.access if scope else ["public"]
        ledger = SourceDocument(key="ledger", title="Heron Ledger", text="The ledger lists every payment of the project.", source="ledger.txt", access=access)
        assert writer.ingest([ledger]).added == 1
        named = {str(edge["out"].id) for edge in s.query("mention_edges")[-1] if edge["doc"].id == "memo"}
        assert "heron ledger figure" in named  # the memo's own concepts, written before
        assert ("heron ledger" in named) is linked


def _in_slices(store: SurrealStore, key: str) -> tuple[dict | None, list, list]:
    """A document's row, every chunk stored for it (of any version) and the pending_write markers."""
    chunks = store.query_text("test: chunks", "SELECT VALUE id FROM chunk WHERE doc = $d ORDER BY id", {"d": RecordID("document", key)})
    markers = store.query_text("test: markers", "SELECT VALUE doc FROM pending_write ORDER BY doc")
    return _stored(store, key), chunks[-1], markers[-1]


def test_a_tenant_cannot_claim_clean_up_or_finish_another_tenants_write_in_slices(minilm, spacy_extractor, monkeypatch):
    """Tenant a replaces its long document; while its new version's slices sit beside the old one
    (a pending_write marker stands for them), tenant b writes a long document under the same key
    and finishes abandoned writes. b is refused as for a short document, nothing of a's write is
    touched, and a's commit succeeds."""
    config = IngestConfig(chunker=SentenceChunker(max_tokens=16, overlap_tokens=0), group_chunks=8, embedding_process=False)
    with SurrealStore("mem://") as s:
        a = Ingestor(s, embedder=minilm, extractor=spacy_extractor, scope=Scope(access=["a"]), config=config)
        b = Ingestor(s, embedder=minilm, extractor=spacy_extractor, scope=Scope(access=["b"]), config=config)
        assert a.ingest([SourceDocument(key="ledger", text=_long_text("Krakow", 40), source="a.txt")]).added == 1
        paused, resume = threading.Event(), threading.Event()
        claims: list[str] = []
        query = s.query

        def pausing(name, params=None, **placeholders):
            if name == "pending_write" and (params or {}).get("scope_access") == ["a"]:
                claims.append(name)
                if len(claims) == 2:  # a renews its marker after its first slice: it stops there a while
                    paused.set()
                    resume.wait(120)
            return query(name, params, **placeholders)

        monkeypatch.setattr(s, "query", pausing)
        done: list = []
        writer = threading.Thread(
            target=lambda: done.append(a.ingest([SourceDocument(key="ledger", text=_long_text("Lodz", 40), source="a.txt")]))
        )
        writer.start()
        try:
            assert paused.wait(120)
            during = _in_slices(s, "ledger")
            assert during[2] == [RecordID("document", "ledger")] and len(during[1]) == during[0]["chunk_count"] + 8

            refused = b.ingest([SourceDocument(key="ledger", text=_long_text("Gdansk", 40), source="b.txt")])
            assert refused.added == refused.updated == 0 and len(refused.failures) == 1
            assert "outside the caller's scope: document ['ledger'] exists and cannot be read" in refused.failures[0].reason
            # What b's next run would do if a's write had been left by a crash: not a's to finish.
            assert finish_pending_writes(s, 8, abandoned_after=datetime.timedelta(0), scope=Scope(access=["b"]).compile()) == 0
            assert _in_slices(s, "ledger") == during
        finally:
            resume.set()
            writer.join(120)
        summary = done[0]
        assert summary.failures == [] and summary.updated == 1
        row, chunks, markers = _in_slices(s, "ledger")
        assert row["access"] == ["a"] and row["content_hash"] != during[0]["content_hash"]
        assert len(chunks) == row["chunk_count"] and markers == []
        assert {k: v for k, v in s.query("check_integrity")[-1].items() if v} == {}


def test_a_scoped_delete_checks_the_scope_inside_its_transaction(store, minilm, spacy_extractor):
    """A scoped delete lists the documents it can read, then deletes them: one replaced in between
    under labels outside its scope (short or written in slices) is not deleted."""
    config = IngestConfig(chunker=SentenceChunker(max_tokens=16, overlap_tokens=0), group_chunks=8)
    admin = Ingestor(store, embedder=minilm, extractor=spacy_extractor, config=config)
    public = Scope(access=["public"])

    def memos(access: list[str], edition: str) -> list[SourceDocument]:
        return [
            SourceDocument(key="memo", text=f"A memo about Gdansk, {edition}.", source="memo.txt", access=access),
            SourceDocument(key="long-memo", text=_long_text(f"Torun {edition}", 40), source="lm.txt", access=access),
        ]

    assert admin.ingest(memos(["public"], "first edition")).added == 2
    listed = visible(store, [RecordID("document", "memo"), RecordID("document", "long-memo")], public)
    assert len(listed) == 2
    assert admin.ingest(memos(["staff"], "second edition")).updated == 2
    kept = {key: _stored(store, key) for key in ("memo", "long-memo")}
    assert kept["long-memo"]["chunk_count"] > 8
    assert delete_records(store, listed, 8, public) == 0
    assert {key: _stored(store, key) for key in kept} == kept
    report = store.query("check_integrity")[-1]
    assert {k: v for k, v in report.items() if v} == {"chunks_without_edges": 1}, report


@pytest.mark.parametrize("run", ["sync", "async"])
def test_a_text_store_deletes_by_filter_in_bounded_transactions(minilm, spacy_extractor, monkeypatch, run):
    """A filter may match the whole store: the texts go in transactions of at most group_chunks
    chunks, each checking the scope and filter again; texts outside them stay."""
    config = IngestConfig(chunker=SentenceChunker(max_tokens=16, overlap_tokens=0), group_chunks=8)
    cities = ["Warsaw", "Krakow", "Gdansk", "Poznan", "Lodz"]
    with SurrealStore("mem://") as s:
        texts = TextStore(s, embedder=minilm, extractor=spacy_extractor, scope=Scope(access=["public"]), config=config)
        bodies = [f"{cities[i % 5]} has a river. {cities[i % 5]} has an old town square and a castle." for i in range(30)]
        texts.add(bodies, metadatas=[{"batch": "old" if i < 24 else "new"} for i in range(30)], ids=[f"t{i}" for i in range(30)])
        staff = Ingestor(s, embedder=minilm, extractor=spacy_extractor)
        staff.ingest([SourceDocument(key="staff", text="Warsaw has a river.", source="s.txt", access=["staff"], metadata={"batch": "old"})])
        transactions = []
        query = s.query

        def recorded(name, params=None, **placeholders):
            if name == "delete_documents":
                transactions.append(len(params["doc_ids"]))
            return query(name, params, **placeholders)

        monkeypatch.setattr(s, "query", recorded)
        deleted = texts.delete(filters={"batch": "old"}) if run == "sync" else asyncio.run(texts.adelete(filters={"batch": "old"}))
        assert deleted == 24 == sum(transactions) and len(transactions) >= 3 and max(transactions) <= 8
        assert sorted(t.id for t in texts.get([f"t{i}" for i in range(30)])) == sorted(f"t{i}" for i in range(24, 30))
        assert _stored(s, "staff") is not None  # outside the scope: it stays
        state = s.query("check_consistency")[-1]
        assert (state["documents"], state["torn"], state["dangling"]) == (7, [], [])
