"""The graph view: a retrieval result's provenance as a self-contained page, checked as data, as
HTML (nothing external, hostile text inert) and rendered in headless Chromium."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from surreal_kgrag import Ingestor, SurrealStore, make_retriever
from surreal_kgrag.cli import main
from surreal_kgrag.graph_view import graph_data, render_graph, write_graph
from surreal_kgrag.retrieval.results import ChunkHit, ConceptMatch, ProvenancePath, RetrievalResult, RetrievedDocument

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "data"
QUESTION = "Which element did Marie Curie name after Poland?"


@pytest.fixture(scope="module")
def store(minilm, spacy_extractor):
    with SurrealStore("mem://") as store:
        Ingestor(store, embedder=minilm, extractor=spacy_extractor).ingest(EXAMPLES)
        yield store


@pytest.mark.parametrize("mode", ["concept", "graph"])
def test_graph_data_follows_the_provenance(store, minilm, mode):
    result = make_retriever(mode, store, embedder=minilm, k=3).search(QUESTION)
    data = graph_data(result)
    ids = {n.id for n in data.nodes}
    kinds = {kind: [n for n in data.nodes if n.kind == kind] for kind in ("query", "concept", "chunk", "document")}
    assert len(kinds["query"]) == 1 and kinds["query"][0].label == QUESTION
    assert {n.id for n in kinds["document"]} == {f"d:{d.id}" for d in result.documents}
    assert {f"c:{c.id}" for d in result.documents for c in d.chunks} <= {n.id for n in kinds["chunk"]}
    assert kinds["concept"], "concept and graph modes reach documents through concepts"
    assert all(e.source in ids and e.target in ids for e in data.edges)
    # every document is reachable from the question along the edges
    reach, frontier = {"q"}, ["q"]
    while frontier:
        here = frontier.pop()
        for edge in data.edges:
            if edge.source == here and edge.target not in reach:
                reach.add(edge.target)
                frontier.append(edge.target)
    assert {n.id for n in kinds["document"]} <= reach
    scores = {n.id: n.score for n in kinds["document"]}
    assert all(scores[f"d:{d.id}"] == pytest.approx(d.score) for d in result.documents)


def test_graph_paths_through_a_seed_chunk():
    concept = ConceptMatch(id="radium", name="radium", score=0.8)
    doc = RetrievedDocument(
        id="b",
        title="B",
        source="b.txt",
        metadata={},
        score=0.4,
        chunks=[ChunkHit(id="b::1", index=0, content="radium text", score=0.4)],
        provenance=[ProvenancePath(channel="graph", score=0.3, document_id="b", chunk_id="b::1", concept=concept, via_chunk_id="a::1")],
    )
    data = graph_data(RetrievalResult(query="q?", mode="graph", documents=[doc]))
    edges = {(e.source, e.target, e.channel) for e in data.edges}
    assert {("c:a::1", "k:radium", "graph"), ("k:radium", "c:b::1", "graph"), ("c:b::1", "d:b", "part")} <= edges


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


def test_page_is_self_contained_and_hostile_text_stays_text():
    hostile = '</script><script>alert(1)</script><img src=x onerror=alert(2)> {{data}}'
    doc = RetrievedDocument(
        id=hostile, title=hostile, source="s", metadata={}, score=0.5,
        chunks=[ChunkHit(id="h::0", index=0, content=hostile, score=0.5)],
    )
    page = render_graph(RetrievalResult(query=hostile, mode="chunk", documents=[doc]))
    parser = _Tags()
    parser.feed(page)
    assert [t for t, _ in parser.tags].count("script") == 2  # the data block and the layout script, nothing injected
    assert not [a for t, a in parser.tags if t == "img"]
    assert not re.search(r"(src|href)=[\"']?(https?:)?//", page)  # no CDN, no remote resource
    payload = page.split('id="graph-data">', 1)[1].split("</script>", 1)[0]
    assert json.loads(payload)["query"] == hostile


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    pytest.skip("headless Chromium is not installed (Debian: apt-get install chromium chromium-driver; .ci/run does it as root)")


def _browser(*args: str) -> subprocess.CompletedProcess[str]:
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
             "--no-first-run", "--disable-extensions", "--virtual-time-budget=5000"]
    return subprocess.run([_chromium(), *flags, *args], capture_output=True, text=True, timeout=120)


def test_page_renders_in_headless_chromium(store, minilm, tmp_path):
    result = make_retriever("graph", store, embedder=minilm, k=3).search(QUESTION)
    data = graph_data(result)
    page = Path(write_graph(result, tmp_path / "graph.html"))
    run = _browser("--dump-dom", page.as_uri())
    assert run.returncode == 0, run.stderr[-2000:]
    dom = _Tags()
    dom.feed(run.stdout)
    rendered = [a for t, a in dom.tags if t == "g" and "node" in (a.get("class") or "").split()]
    # The script built one SVG group per node (the page source holds none), with its kind and score.
    assert len(rendered) == len(data.nodes)
    assert {a["data-id"] for a in rendered} == {n.id for n in data.nodes}
    assert sorted(a["data-kind"] for a in rendered) == sorted(n.kind for n in data.nodes)
    assert len([a for t, a in dom.tags if t == "path"]) == len(data.edges)
    assert f'data-rendered="{len(data.nodes)}"' in run.stdout
    shot = tmp_path / "graph.png"
    run = _browser(f"--screenshot={shot}", "--window-size=1200,700", page.as_uri())
    assert shot.exists() and shot.stat().st_size > 10_000, run.stderr[-2000:]


def test_cli_query_writes_the_graph(tmp_path, minilm, spacy_extractor, capsys):
    url = f"surrealkv://{tmp_path / 'kg'}"
    with SurrealStore(url) as store:
        Ingestor(store, embedder=minilm, extractor=spacy_extractor).ingest(EXAMPLES)
    out = tmp_path / "out.html"
    assert main(["query", QUESTION, "--db", url, "--mode", "concept", "-k", "2", "--graph", str(out)]) == 0
    assert "graph view written to" in capsys.readouterr().err
    page = out.read_text(encoding="utf-8")
    data = json.loads(page.split('id="graph-data">', 1)[1].split("</script>", 1)[0])
    assert data["mode"] == "concept" and len([n for n in data["nodes"] if n["kind"] == "document"]) == 2
    # a path it cannot write: the results are printed, then the error, with no traceback
    missing = tmp_path / "no such folder" / "out.html"
    assert main(["query", QUESTION, "--db", url, "--mode", "concept", "-k", "2", "--graph", str(missing)]) == 1
    captured = capsys.readouterr()
    assert "the graph view could not be written to" in captured.err and "Traceback" not in captured.err
    assert captured.out.count("\n") > 2  # the results came first


def test_markup_in_chunk_text_cannot_open_an_escape_in_the_data_block():
    # "<!--<script>" inside a <script> element starts the double-escaped state: the data block's
    # "</script>" no longer closes it, the layout script never runs and nothing is drawn.
    hostile = "before <!--<script> after & <b>bold</b> -->"
    doc = RetrievedDocument(
        id="d", title=hostile, source="s", metadata={}, score=0.5,
        chunks=[ChunkHit(id="d::0", index=0, content=hostile, score=0.5)],
    )
    page = render_graph(RetrievalResult(query="q", mode="chunk", documents=[doc]))
    payload = page.split('id="graph-data">', 1)[1].split("</script>", 1)[0]
    assert "<" not in payload and ">" not in payload and "&" not in payload
    nodes = json.loads(payload)["nodes"]  # the escapes read back as the text itself
    assert any(hostile in (node["label"], node["detail"]) for node in nodes)
