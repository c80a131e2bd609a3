"""A LlamaIndex RetrieverQueryEngine over a surreal-kgrag store of examples/data.

    python examples/llama_index_query_engine.py "Which element did the Curies discover?" [--mode hybrid] [--db mem://]

Offline by default: without OPENAI_API_KEY the engine's LLM is LlamaIndex's MockLLM (it echoes its
prompt; the retrieval is real). With OPENAI_API_KEY set it uses OpenAI ($OPENAI_MODEL, default
gpt-4o-mini; needs `pip install llama-index-retrievers-surreal-kgrag[openai]`).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from llama_index.core.llms import LLM, MockLLM
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.schema import NodeRelationship
from llama_index.retrievers.surreal_kgrag import SurrealKGRetriever

from surreal_kgrag import Ingestor, SurrealStore
from surreal_kgrag.retrieval import make_retriever

DATA = Path(__file__).resolve().parent / "data"


def llm() -> LLM:
    if os.environ.get("OPENAI_API_KEY"):
        from llama_index.llms.openai import OpenAI

        model = os.environ.get("OPENAI_MODEL", "gpt-4o-mini")
        print(f"LLM: OpenAI ({model})")
        return OpenAI(model=model, temperature=0)
    print("LLM: no OPENAI_API_KEY set, so using MockLLM (it echoes its prompt; retrieval is real)")
    return MockLLM()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("question", nargs="?", default="Which element did the Curies discover?")
    parser.add_argument("--mode", default="graph", help="retrieval mode: chunk, concept, hybrid, graph (default: graph)")
    parser.add_argument("--db", default="mem://", help="store URL (default: a private in-memory store)")
    parser.add_argument("-k", type=int, default=3)
    args = parser.parse_args()

    with SurrealStore(args.db) as store:
        ingestor = Ingestor(store)
        summary = ingestor.ingest(DATA)
        print(f"store: {args.db}, {summary.added} added / {summary.skipped} unchanged documents from {DATA.name}/")

        retriever = SurrealKGRetriever.from_retriever(make_retriever(args.mode, store, embedder=ingestor.embedder), similarity_top_k=args.k)
        engine = RetrieverQueryEngine.from_args(retriever, llm=llm())
        response = engine.query(args.question)

        answer = " ".join(str(response).split())
        print(f"\nQuestion: {args.question}\nAnswer: {answer[:300]}{' ...' if len(answer) > 300 else ''}\n")
        print(f"Source nodes ({args.mode} mode):")
        for item in response.source_nodes:
            node = item.node
            neighbours = [rel.name.lower() for rel in (NodeRelationship.PREVIOUS, NodeRelationship.NEXT) if rel in node.relationships]
            print(
                f"  score={item.score:.3f}  {node.metadata['title']}  ref_doc_id={node.ref_doc_id}  "
                f"chunk={node.metadata['chunk_index']}  neighbours={neighbours or '-'}  concepts={node.metadata['concepts'][:3]}"
            )


if __name__ == "__main__":
    main()
