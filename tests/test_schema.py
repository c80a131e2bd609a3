"""Schema: idempotent, dimension from the embedder, guarded on reopen, 2.x dialect available."""

from __future__ import annotations

import re

import pytest
from surrealdb import RecordID

from surreal_kgrag import Ingestor, SourceDocument, surql
from surreal_kgrag.errors import QueryExecutionError, SchemaMismatchError
from surreal_kgrag.schema import SCHEMA_VERSION, IndexSettings, ensure_schema
from surreal_kgrag.store import SurrealStore
from surreal_kgrag.surql import NO_FILTER


def _definitions(store: SurrealStore) -> dict:
    """Every DEFINE statement in the database, keyed by table."""
    db_info, *tables = store.query("schema_info")
    return {"db": db_info, "tables": dict(zip(["document", "chunk", "chunk_text", "concept", "MENTIONS_CONCEPT", "concept_vector"], tables))}


def test_schema_is_idempotent():
    with SurrealStore("mem://") as store:
        ensure_schema(store, dimension=8, embedder="e")
        first = _definitions(store)
        ensure_schema(store, dimension=8, embedder="e")
        ensure_schema(store, dimension=8, embedder="e")
        assert _definitions(store) == first
        assert set(first["db"]["tables"]) == {"document", "chunk", "chunk_text", "term", "concept", "concept_chunks", "chunk_concepts", "concept_vector", "concept_vector_queue", "MENTIONS_CONCEPT", "RELATES_TO", "kg_meta", "document_name", "document_name_count", "pending_write", "concept_title"}


def test_schema_declares_the_documented_indexes():
    with SurrealStore("mem://") as store:
        ensure_schema(store, dimension=8, embedder="e", settings=IndexSettings(hnsw_efc=64, hnsw_m=8))
        tables = _definitions(store)["tables"]
        chunk_indexes = tables["chunk"]["indexes"]
        assert re.search(r"HNSW DIMENSION 8 DIST COSINE TYPE F32 EFC 64 M 8", chunk_indexes["chunk_embedding"])
        assert "FULLTEXT ANALYZER kg_english BM25(1.2,0.75)" in tables["chunk_text"]["indexes"]["chunk_text_search"]
        assert "HNSW DIMENSION 8" in tables["concept_vector"]["indexes"]["concept_embedding"]
        assert "embedding" not in tables["concept"]["fields"] and not tables["concept"]["indexes"].get("concept_embedding")
        assert "FIELDS in, out UNIQUE" in tables["MENTIONS_CONCEPT"]["indexes"]["mentions_pair"]
        assert "TYPE RELATION IN chunk OUT concept" in _definitions(store)["db"]["tables"]["MENTIONS_CONCEPT"]


def test_relation_pair_is_unique_and_embedding_dimension_enforced():
    with SurrealStore("mem://") as store:
        ensure_schema(store, dimension=2, embedder="e")
        doc = {"id": RecordID("document", "d"), "source": "s", "title": None, "content_type": "text/plain",
               "content_hash": "h", "metadata": {}, "access": [], "chunk_count": 1}
        chunk = {"id": RecordID("chunk", "d::h::00000"), "doc": RecordID("document", "d"), "index": 0, "content": "c",
                 "char_start": 0, "char_end": 1, "access": [], "embedding": [1.0, 0.0]}
        concept = {"id": RecordID("concept", "c"), "name": "c", "display": "C", "kind": "X", "aliases": []}
        edge = {"in": chunk["id"], "out": concept["id"], "doc": doc["id"], "count": 1}
        text = {"id": RecordID("chunk_text", "d::h::00000"), "chunk": chunk["id"], "doc": doc["id"], "access": [], "text": "c"}
        params = {"doc_ids": [doc["id"]], "documents": [doc], "concepts": [concept],
                  "chunks": [chunk], "texts": [text], "edges": [edge, dict(edge)]}
        with pytest.raises(QueryExecutionError, match="write_documents"):
            store.query("write_documents", params, scope=NO_FILTER)  # the same pair twice violates the unique index
        assert store.query("stats")[0]["documents"] == 0  # and the transaction left nothing behind
        params["edges"] = [edge]
        params["chunks"] = [dict(chunk, embedding=[1.0, 0.0, 0.0])]
        with pytest.raises(QueryExecutionError):
            store.query("write_documents", params, scope=NO_FILTER)  # wrong vector length
        params["chunks"] = [chunk]
        store.query("write_documents", params, scope=NO_FILTER)
        assert store.query("stats")[0] == {
            "documents": 1, "chunks": 1, "searchable_chunks": 1, "concepts": 1, "mentions": 1, "shared_concepts": 0
        }


def test_reopening_with_another_dimension_fails_clearly(tmp_path):
    url = f"surrealkv://{tmp_path / 'kg'}"
    with SurrealStore(url) as store:
        ensure_schema(store, dimension=384, embedder="sentence-transformers/all-MiniLM-L6-v2")
    with SurrealStore(url) as store, pytest.raises(SchemaMismatchError) as caught:
        ensure_schema(store, dimension=768, embedder="other-model")
    message = str(caught.value)
    assert "384" in message and "768" in message and "all-MiniLM-L6-v2" in message


def test_same_dimension_other_model_warns():
    with SurrealStore("mem://") as store:
        ensure_schema(store, dimension=4, embedder="a")
        with pytest.warns(UserWarning, match="different models"):
            ensure_schema(store, dimension=4, embedder="b")


def test_v2_dialect_differs_only_in_object_and_fulltext_syntax():
    # One schema.surql; its 2.x lines are the .v2 variants of two fragments (surql/fragments/schema_*).
    def statements(major):
        return [line for line in surql.load("schema", major).splitlines() if line.strip() and not line.startswith("--")]

    v3, v2 = statements(3), statements(2)
    assert len(v2) == len(v3)
    changed = [(a, b) for a, b in zip(v3, v2) if a != b]
    assert len(changed) == 2  # the flexible object, no record reference on 2.x
    assert any("FLEXIBLE TYPE object" in b for _, b in changed)
    assert any("REFERENCE ON DELETE CASCADE" in a and "REFERENCE" not in b.split("--")[0] for a, b in changed)
    # The full-text index is defined apart from the schema (under its live generation's name).
    assert "SEARCH ANALYZER kg_english BM25" in surql.load("index_fulltext", 2)
    assert "FULLTEXT ANALYZER kg_english BM25" in surql.load("index_fulltext", 3)
    assert "FULLTEXT" not in "\n".join(v2) + surql.load("index_fulltext", 2)


def test_store_from_an_older_schema_asks_for_a_new_ingest():
    with SurrealStore("mem://") as store:
        ensure_schema(store, dimension=4, embedder="e")
        store.query("store_meta_write", {"meta": {"dimension": 4, "embedder": "e", "schema_version": 1}})
        with pytest.raises(SchemaMismatchError, match="store schema 1.*Ingest your documents again"):
            ensure_schema(store, dimension=4, embedder="e")


@pytest.mark.parametrize("version", [2, 3])
def test_store_from_before_the_graph_schema_asks_for_a_new_ingest(version):
    """Schema 4 derives title, alias and bridge edges from every document: an older store is ingested again."""
    with SurrealStore("mem://") as store:
        ensure_schema(store, dimension=4, embedder="e")
        store.query("store_meta_write", {"meta": {"dimension": 4, "embedder": "e", "schema_version": version}})
        with pytest.raises(SchemaMismatchError, match=f"store schema {version}.*Ingest your documents again"):
            ensure_schema(store, dimension=4, embedder="e")
    assert SCHEMA_VERSION == 12


def test_a_schema_4_store_gains_its_concept_chunk_counts_in_place(minilm, spacy_extractor):
    with SurrealStore("mem://") as store:
        ingestor = Ingestor(store, embedder=minilm, extractor=spacy_extractor)
        ingestor.ingest_texts(["Ada Lovelace wrote to Charles Babbage.", "Charles Babbage built the engine."], ids=["a", "b"])
        counts = dict(store.query("concept_chunk_counts")[-1])
        assert counts["charles babbage"] == 2
        # As a schema-4 store: no counts at all.
        meta = store.query("store_meta")[-1]
        store.query("store_meta_write", {"meta": {**meta, "schema_version": 4}})
        store.query_text("test: as schema 4", "REMOVE TABLE concept_chunks;")
        ensure_schema(store, dimension=minilm.dimension, embedder=minilm.name)
        assert store.query("store_meta")[-1]["schema_version"] == SCHEMA_VERSION  # 4 -> 5 -> 6 -> 7 -> 8 -> 9
        assert dict(store.query("concept_chunk_counts")[-1]) == counts


def test_a_schema_5_store_takes_concepts_without_vectors_after_migrating(minilm, spacy_extractor):
    with SurrealStore("mem://") as store:
        ingestor = Ingestor(store, embedder=minilm, extractor=spacy_extractor)
        ingestor.ingest_texts(["Ada Lovelace wrote to Charles Babbage.", "Charles Babbage built the engine."], ids=["a", "b"])
        # As a schema-5 store: every concept had to carry a vector.
        meta = store.query("store_meta")[-1]
        store.query("store_meta_write", {"meta": {**meta, "schema_version": 5}})
        store.query_text("test: as schema 5", "DEFINE FIELD OVERWRITE embedding ON concept TYPE array;")
        with pytest.raises(QueryExecutionError, match="embedding"):
            store.query_text("test: a concept without a vector", "CREATE concept:probe SET name = 'probe', display = 'probe', kind = 'x';")
        summary = Ingestor(store, embedder=minilm, extractor=spacy_extractor).ingest_texts(
            ["Grace Hopper visited the Harvard Computation Lab."], ids=["c"]
        )
        assert summary.added == 1 and store.query("store_meta")[-1]["schema_version"] == SCHEMA_VERSION
        vectors = {row["name"]: row.get("embedding") for row in store.query("concept_vectors")[-1]}
        assert vectors["grace hopper"] is None and vectors["charles babbage"] is not None


def test_a_schema_8_store_moves_its_concept_vectors_into_rows_of_their_own(minilm, spacy_extractor):
    """Schema 9 keeps a concept's vector in a concept_vector row (a count or flag change no longer
    rewrites it): a store written with the vectors in the concept rows, indexed there, gets the same
    vectors in their own rows on open, the index with them, and nothing left on `concept`."""
    texts = [
        "Ada Lovelace wrote to Charles Babbage about the Analytical Engine.",
        "Charles Babbage built the Difference Engine in London.",
        "Ada Lovelace published notes on the Analytical Engine in London.",
    ]
    with SurrealStore("mem://") as store:
        Ingestor(store, embedder=minilm, extractor=spacy_extractor).ingest_texts(texts, ids=["a", "b", "c"])
        before = {row["name"]: row["embedding"] for row in store.query("concept_vectors")[-1] if row.get("embedding")}
        assert {"charles babbage", "london", "analytical engine"} <= set(before)
        live = store.index_states()["concept"].name
        store.query_text("test: as schema 8", f"""
            DEFINE FIELD embedding ON concept TYPE option<array>;
            UPDATE concept SET embedding = type::record('concept_vector', record::id(id)).embedding;
            DELETE concept_vector;
            REMOVE INDEX {live} ON concept_vector;
            DEFINE INDEX {live} ON concept FIELDS embedding HNSW DIMENSION {minilm.dimension} DIST COSINE TYPE F32;
        """)
        meta = store.query("store_meta")[-1]
        store.query("store_meta_write", {"meta": {**meta, "schema_version": 8}})
        ensure_schema(store, dimension=minilm.dimension, embedder=minilm.name)
        assert store.query("store_meta")[-1]["schema_version"] == SCHEMA_VERSION
        after = {row["name"]: row["embedding"] for row in store.query("concept_vectors")[-1] if row.get("embedding")}
        assert after == before
        tables = _definitions(store)["tables"]
        assert "embedding" not in tables["concept"]["fields"] and live not in tables["concept"]["indexes"]
        assert live in tables["concept_vector"]["indexes"]
        assert not any(store.query("check_integrity")[-1].values())
        nearest = store.query_text(
            "test: nearest concept", f"SELECT VALUE record::id(id) FROM concept_vector WITH INDEX {live} WHERE embedding <|1,40|> $v;",
            {"v": before["london"]},
        )[-1]
        assert nearest == ["london"]


def test_a_schema_11_store_loses_the_index_on_concept_names(minilm, spacy_extractor):
    """Schema 12 has no UNIQUE index on `concept.name` (a concept's id is its name): a store written
    with it loses it on open, keeps every concept, and a later ingest still finds the concepts it
    shares with the stored documents."""
    with SurrealStore("mem://") as store:
        ingestor = Ingestor(store, embedder=minilm, extractor=spacy_extractor)
        ingestor.ingest_texts(["Ada Lovelace wrote to Charles Babbage.", "Charles Babbage built the engine."], ids=["a", "b"])
        assert "concept_name" not in _definitions(store)["tables"]["concept"]["indexes"]
        store.query_text("test: as schema 11", "DEFINE INDEX concept_name ON concept FIELDS name UNIQUE;")
        meta = store.query("store_meta")[-1]
        store.query("store_meta_write", {"meta": {**meta, "schema_version": 11}})
        counts = dict(store.query("concept_chunk_counts")[-1])
        ensure_schema(store, dimension=minilm.dimension, embedder=minilm.name)
        assert store.query("store_meta")[-1]["schema_version"] == SCHEMA_VERSION
        assert "concept_name" not in _definitions(store)["tables"]["concept"]["indexes"]
        assert dict(store.query("concept_chunk_counts")[-1]) == counts
        Ingestor(store, embedder=minilm, extractor=spacy_extractor).ingest_texts(["Ada Lovelace met Charles Babbage again."], ids=["c"])
        after = dict(store.query("concept_chunk_counts")[-1])
        assert after["charles babbage"] == counts["charles babbage"] + 1 and after["ada lovelace"] == counts["ada lovelace"] + 1
        assert not any(store.query("check_integrity")[-1].values())


def test_a_schema_7_store_gains_its_title_rows(minilm, spacy_extractor):
    """Schema 8 looks titles up in `concept_title` rows (the forward bridges of every write): a store written
    before them gets them on open."""
    with SurrealStore("mem://") as store:
        ingestor = Ingestor(store, embedder=minilm, extractor=spacy_extractor)
        ingestor.ingest([SourceDocument(key="z", title="Zanzibar Archive", text="The archive holds ledgers.", source="z.txt")])
        meta = store.query("store_meta")[-1]
        store.query("store_meta_write", {"meta": {**meta, "schema_version": 7}})
        store.query_text("test: as schema 7", "DELETE concept_title;")
        asked = [RecordID("concept_title", name) for name in ("zanzibar archive", "ledgers", "nowhere")]
        assert store.query("title_concepts", {"ids": asked, "scoped": False}, scope=NO_FILTER)[-1] == []
        ensure_schema(store, dimension=minilm.dimension, embedder=minilm.name)
        assert store.query("store_meta")[-1]["schema_version"] == SCHEMA_VERSION
        assert store.query("check_integrity")[-1]["titles_out_of_step"] == 0
        assert store.query("title_concepts", {"ids": asked, "scoped": False}, scope=NO_FILTER)[-1] == [RecordID("concept_title", "zanzibar archive")]
