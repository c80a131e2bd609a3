"""A LangChain LCEL RAG chain over a surreal-kgrag store of examples/data.

    python examples/langchain_rag.py "Where was Marie Curie born?" [--mode graph] [--db mem://]

Offline by default: without OPENAI_API_KEY the chain's model is LangChain's FakeListChatModel (a
canned answer; the retrieval is real). With OPENAI_API_KEY set it uses ChatOpenAI ($OPENAI_MODEL,
default gpt-4o-mini; needs `pip install langchain-surreal-kgrag[openai]`).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from langchain_core.language_models import BaseChatModel, FakeListChatModel
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnableParallel, RunnablePassthrough

from langchain_surreal_kgrag import SurrealKGRetriever, format_documents
from surreal_kgrag import Ingestor, SurrealStore
from surreal_kgrag.retrieval import make_retriever

DATA = Path(__file__).resolve().parent / "data"

PROMPT = ChatPromptTemplate.from_messages(
    [
        ("system", "Answer the question using only the numbered passages. Cite passages as [n]."),
        ("human", "Passages:\n{context}\n\nQuestion: {question}"),
    ]
)


def chat_model() -> BaseChatModel:
    if os.environ.get("OPENAI_API_KEY"):
        from langchain_openai import ChatOpenAI

        model = os.environ.get("OPENAI_MODEL", "gpt-4o-mini")
        print(f"LLM: ChatOpenAI ({model})")
        return ChatOpenAI(model=model, temperature=0)
    print("LLM: no OPENAI_API_KEY set, so using FakeListChatModel (a canned answer; retrieval is real)")
    return FakeListChatModel(responses=["[canned answer from FakeListChatModel] See passage [1]."])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("question", nargs="?", default="Where was Marie Curie born?")
    parser.add_argument("--mode", default="graph", help="retrieval mode: chunk, concept, hybrid or graph")
    parser.add_argument("--db", default="mem://", help="store URL (default: a private in-memory store)")
    parser.add_argument("-k", type=int, default=3)
    args = parser.parse_args()

    with SurrealStore(args.db) as store:
        ingestor = Ingestor(store)
        summary = ingestor.ingest(DATA)
        print(f"store: {args.db}, {summary.added} added / {summary.skipped} unchanged documents from {DATA.name}/")

        retriever = SurrealKGRetriever.from_retriever(
            make_retriever(args.mode, store, embedder=ingestor.embedder), k=args.k
        )
        # LCEL: retrieve documents and keep them, then prompt -> model -> text.
        answer = (
            {"context": lambda x: format_documents(x["documents"]), "question": lambda x: x["question"]}
            | PROMPT
            | chat_model()
            | StrOutputParser()
        )
        chain = RunnableParallel(documents=retriever, question=RunnablePassthrough()).assign(answer=answer)

        result = chain.invoke(args.question)
        print(f"\nQuestion: {args.question}\nAnswer: {result['answer']}\n\nSources ({args.mode} mode):")
        for number, doc in enumerate(result["documents"], 1):
            meta = doc.metadata
            concepts = ", ".join(meta["concepts"][:4]) or "-"
            print(f"[{number}] {meta['title']}  score={meta['score']:.3f}  id={doc.id}  concepts: {concepts}")


if __name__ == "__main__":
    main()
