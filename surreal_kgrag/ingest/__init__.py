"""Ingestion: load -> chunk -> extract concepts -> embed -> write, as a pipeline of overlapping stages."""

from .config import IngestConfig
from .delete import adelete_documents, delete_documents
from .pipeline import IngestInterrupted, Ingestor

__all__ = ["IngestConfig", "IngestInterrupted", "Ingestor", "adelete_documents", "delete_documents"]
