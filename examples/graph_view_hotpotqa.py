"""The graph view of a HotpotQA question: ingest passages, search in graph mode, write the page.

    python examples/graph_view_hotpotqa.py [--passages 300] [--out graph.html] [--mode graph]
        [--question "..."] [--corpus /work/shared/bench/hotpotqa/corpus.jsonl]

Open the page in any browser (it needs no network). The README's screenshot was taken from it with
headless Chromium: chromium --headless --no-sandbox --disable-gpu --screenshot=docs/graph_view_hotpotqa.png
--window-size=1400,900 file://$PWD/graph.html
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from surreal_kgrag import Ingestor, SurrealStore, make_retriever
from surreal_kgrag.graph_view import write_graph
from surreal_kgrag.loaders import from_text

CORPUS = Path("/work/shared/bench/hotpotqa/corpus.jsonl")
QUESTION = (
    "Which Canadian rock band released a song called \"Counterparts\" and had a drummer who was inducted into the "
    "Modern Drummer Hall of Fame?"
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument("--passages", type=int, default=300)
    parser.add_argument("--question", default=QUESTION)
    parser.add_argument("--mode", default="graph")
    parser.add_argument("-k", type=int, default=4)
    parser.add_argument("--out", default="graph.html")
    args = parser.parse_args()
    with open(args.corpus, encoding="utf-8") as lines:
        records = [json.loads(line) for _, line in zip(range(args.passages), lines)]
    with SurrealStore("mem://") as store:
        ingestor = Ingestor(store)
        ingestor.ingest([from_text(r["text"], key=r["id"], title=r["title"], source=str(args.corpus)) for r in records])
        result = make_retriever(args.mode, store, embedder=ingestor.embedder, k=args.k).search(args.question)
    for rank, doc in enumerate(result.documents, 1):
        print(f"{rank}. {doc.title} ({doc.score:.3f})")
    print(f"graph view written to {write_graph(result, args.out)}")


if __name__ == "__main__":
    main()
