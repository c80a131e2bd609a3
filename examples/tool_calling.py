"""An OpenAI tool-calling loop over surreal-kgrag's agent tools.

    python examples/tool_calling.py ["your question"]

The example data (examples/data) is ingested into an in-memory store; the model gets the tools'
schemas (`ToolDispatcher.schemas()`) and every tool call it makes is answered with
`ToolDispatcher.call()`, which returns JSON, also for a bad call, so the loop never breaks.

With OPENAI_API_KEY set, a real model decides which tools to call (OPENAI_MODEL, default
gpt-4o-mini; OPENAI_BASE_URL for any OpenAI-compatible server). Without it, a scripted stand-in
drives the same loop: a fixed sequence of tool calls written in this file, not a model. It even
misspells a concept once, to show how a tool error comes back to the caller.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from surreal_kgrag import Ingestor, SurrealStore, ToolDispatcher

DATA = Path(__file__).resolve().parent / "data"
QUESTION = "Where was the scientist who discovered polonium born, and who did she work with?"
SYSTEM = (
    "You answer questions from a knowledge base. Use the tools: search_chunks to find passages, the concept "
    "tools to follow people, places and topics, get_document to read a document. Cite document titles."
)
MAX_TURNS = 8


class OpenAIChat:
    """A real model through the `openai` package's chat completions."""

    label = "OpenAI"

    def __init__(self) -> None:
        from openai import OpenAI

        self.client = OpenAI()
        self.model = os.environ.get("OPENAI_MODEL", "gpt-4o-mini")

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
        response = self.client.chat.completions.create(model=self.model, messages=messages, tools=tools)
        return response.choices[0].message.model_dump(exclude_none=True)


class ScriptedStandIn:
    """NOT a model: a fixed sequence of tool calls, some arguments taken from earlier tool results."""

    label = "scripted stand-in, not a model"

    def __init__(self) -> None:
        self.turn = 0

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
        self.turn += 1
        results = [json.loads(m["content"]) for m in messages if m["role"] == "tool"]
        if self.turn == 1:
            return _calls(("search_chunks", {"query": QUESTION, "k": 2}), ("search_concepts", {"query": "polonium", "k": 3}))
        if self.turn == 2:
            return _calls(("documents_for_concept", {"concept": "Polonium"}), ("related_concepts", {"concept": "Marie Curies"}))
        if self.turn == 3:  # the misspelt concept came back as not_found, with suggestions
            suggestion = results[-1]["error"]["details"]["suggestions"][0]
            top_document = results[0]["documents"][0]["id"]
            return _calls(
                ("related_concepts", {"concept": suggestion, "limit": 5}),
                ("get_document", {"document_id": top_document, "max_chunks": 1}),
            )
        passage = results[0]["documents"][0]["chunks"][0]["content"]
        people = [c["display"] for c in results[-2]["related"] if c["kind"] == "PERSON"]
        return {
            "role": "assistant",
            "content": f"(scripted, not generated) Best passage: {' '.join(passage.split())[:240]}... "
            f"People mentioned with her: {', '.join(people)}.",
        }


def _calls(*calls: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    return {
        "role": "assistant",
        "tool_calls": [
            {"id": f"call_{i}", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}
            for i, (name, arguments) in enumerate(calls)
        ],
    }


def run_agent(chat: OpenAIChat | ScriptedStandIn, tools: ToolDispatcher, question: str) -> str:
    messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}]
    for _ in range(MAX_TURNS):
        message = chat.complete(messages, tools.schemas())
        messages.append(message)
        if not message.get("tool_calls"):
            return message.get("content") or ""
        for call in message["tool_calls"]:
            name, arguments = call["function"]["name"], call["function"]["arguments"]
            print(f"-> {name}({arguments})")
            content = tools.call(name, arguments)
            print(f"   <- {content[:300]}{'...' if len(content) > 300 else ''}")
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": content})
    return "(no answer within the turn limit)"


def main() -> int:
    question = " ".join(sys.argv[1:]) or QUESTION
    if os.environ.get("OPENAI_API_KEY"):
        chat: OpenAIChat | ScriptedStandIn = OpenAIChat()
    else:
        print("OPENAI_API_KEY is not set: the tool calls below come from a scripted stand-in, not a model.")
        chat = ScriptedStandIn()
    with SurrealStore("mem://") as store:
        ingestor = Ingestor(store)
        summary = ingestor.ingest([DATA])
        print(f"ingested {summary.added} documents, {summary.chunks} chunks, {summary.concepts} concepts")
        tools = ToolDispatcher(store, embedder=ingestor.embedder)
        print(f"question: {question}  [{chat.label}]")
        answer = run_agent(chat, tools, question)
    print(f"answer: {answer}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
