"""Settings of an ingest run (pydantic, documented defaults)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from ..chunking import SentenceChunker
from ..extract.metadata import MAX_METADATA_CONCEPTS
from ..schema import IndexSettings


class IngestConfig(BaseModel):
    """How documents are cut up, batched and written. Defaults suit passages of a few hundred words."""

    model_config = ConfigDict(frozen=True)

    chunker: SentenceChunker = Field(default_factory=SentenceChunker)
    metadata_concepts: tuple[str, ...] = Field(
        ("title", "author", "tags", "keywords"),
        description="document fields (title or metadata keys) whose values become concepts linked to every chunk",
    )
    max_metadata_concepts: int = Field(
        MAX_METADATA_CONCEPTS,
        ge=0,
        le=10_000,
        description="most concepts one document's metadata_concepts give (the first; the rest are logged and left out, "
        "the metadata is stored whole): each is linked to every chunk of the document",
    )
    batch_size: int = Field(64, ge=1, description="documents run through the models together (at most)")
    batch_chunks: int = Field(256, ge=1, description="chunks run through the models together (at most; a longer document goes alone)")
    group_size: int = Field(16, ge=1, le=512, description="documents written per transaction (at most)")
    group_chunks: int = Field(256, ge=1, description="chunks written per transaction (at most; a longer document goes alone)")
    queue_batches: int = Field(
        2, ge=1, le=16, description="batches waiting between two stages: bounds memory whatever the corpus size"
    )
    max_document_chars: int = Field(
        20_000_000,
        ge=1_000,
        description=(
            "longest document ingested, checked before any model work (a longer one is reported and skipped): "
            "its chunks, vectors and concepts are held in memory until written. A document longer than group_chunks "
            "chunks is written in slices of that many (bounded transactions) and shown to readers only once whole"
        ),
    )
    part_chars: int = Field(
        1_000_000,
        ge=1_000,
        description=(
            "text and Markdown files longer than this (or than max_document_chars) are read a block at a time, in "
            "parts of about this size, each stored as its own document `<path>#part-00001`, ...: memory stays "
            "bounded by the part (up to about ten batches are in flight between the stages), whatever the file's size"
        ),
    )
    concept_vector_min_chunks: int = Field(
        2,
        ge=1,
        description=(
            "a concept gets a vector (for the agent tools' concept search; no retrieval mode reads one) once this "
            "many chunks mention it, or as soon as it names a document. 2 leaves out the noun phrases one chunk "
            "mentions (85% of the concepts of the HotpotQA corpus); 1 embeds every concept"
        ),
    )
    index: IndexSettings = Field(
        default_factory=IndexSettings, description="HNSW settings of a new store, and when a run's writes rebuild the search indexes"
    )
    title_in_context: bool = Field(
        True,
        description="embed and full-text index each chunk under its document title (a passage often names its subject only there)",
    )
    keep_text: bool = Field(
        False,
        description="also store each document's exact text (chunks are trimmed and overlap); the vector stores set it, "
        "so a document reads back exactly as it was added",
    )
    show_progress: bool | None = Field(None, description="progress bar; None shows it when stderr is a terminal")
    embedding_process: bool | None = Field(
        None,
        description="embed documents with a local model in a process of its own (surreal_kgrag.embed.process): "
        "True at once, False never, None once a run has 512 texts to embed, where 4 GB of memory are available",
    )
