"""The same code against a SurrealDB server over ws:// and http://, in a testcontainers container.

Runs where a Docker engine answers; elsewhere it is skipped with the reason. Every other test uses
the embedded engine.
"""

from __future__ import annotations

import pytest

from surreal_kgrag.schema import ensure_schema
from surreal_kgrag.store import SurrealStore

IMAGE = "surrealdb/surrealdb:v3"


def _docker_reason() -> str | None:
    try:
        import docker
    except ImportError:
        return "the docker package is not installed (pip install testcontainers)"
    try:
        docker.from_env().ping()
    except Exception as error:
        return f"no Docker engine answers ({type(error).__name__}: {error})"
    return None


@pytest.fixture(scope="module")
def surreal_server():
    reason = _docker_reason()
    if reason:
        pytest.skip(f"remote SurrealDB server test needs Docker: {reason}")
    from testcontainers.core.container import DockerContainer
    from testcontainers.core.waiting_utils import wait_for_logs

    container = DockerContainer(IMAGE).with_command("start --user root --pass root memory").with_exposed_ports(8000)
    with container:
        wait_for_logs(container, "Started web server", timeout=60)
        host, port = container.get_container_host_ip(), container.get_exposed_port(8000)
        yield host, port


@pytest.mark.docker
@pytest.mark.parametrize("scheme", ["ws", "http"])
def test_schema_ingest_and_stats_against_a_server(surreal_server, scheme, minilm, spacy_extractor):
    from surreal_kgrag.ingest import Ingestor
    from surreal_kgrag.stats import get_stats

    host, port = surreal_server
    store = SurrealStore(f"{scheme}://{host}:{port}", namespace="test", database=scheme, username="root", password="root")
    with store:
        assert store.major_version >= 2
        ensure_schema(store, dimension=minilm.dimension, embedder=minilm.name)
        ingestor = Ingestor(store, embedder=minilm, extractor=spacy_extractor)
        summary = ingestor.ingest_texts(["Ada Lovelace wrote the first program.", "Charles Babbage designed the Analytical Engine."], ids=["a", "b"])
        assert summary.added == 2
        stats = get_stats(store)
        assert (stats.documents, stats.chunks) == (2, 2) and stats.concepts > 0 and stats.mentions > 0
        assert ingestor.ingest_texts(["Ada Lovelace wrote the first program."], ids=["a"]).skipped == 1


@pytest.mark.docker
async def test_async_queries_against_a_server(surreal_server):
    host, port = surreal_server
    store = SurrealStore(f"ws://{host}:{port}", namespace="test", database="async", username="root", password="root")
    ensure_schema(store, dimension=4, embedder="e")
    assert (await store.aquery("store_meta"))[-1]["dimension"] == 4
    await store.aclose()
