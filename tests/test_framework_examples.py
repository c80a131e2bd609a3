"""The LangChain and LlamaIndex examples run as users run them (a subprocess with this Python), offline
with the frameworks' fake LLMs, and the LangChain one also against an OpenAI-compatible server."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from json_server import JsonServer, chat_payload

ROOT = Path(__file__).resolve().parents[1]


def run_example(name: str, *args: str, env: dict[str, str] | None = None) -> str:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    # The checkout under test first, whatever is installed.
    environment["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), environment.get("PYTHONPATH")]))
    environment.update(env or {})
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / name), *args],
        capture_output=True, text=True, env=environment, timeout=300, check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_langchain_rag_example_offline():
    pytest.importorskip("langchain_surreal_kgrag", reason="install integrations/langchain (scripts/setup.sh does)")
    out = run_example("langchain_rag.py", "Where was Marie Curie born?", "--mode", "chunk")
    assert "no OPENAI_API_KEY set, so using FakeListChatModel" in out
    assert "6 added" in out
    assert "Answer: [canned answer from FakeListChatModel]" in out
    sources = out.split("Sources (chunk mode):")[1].strip().splitlines()
    assert len(sources) == 3 and sources[0].startswith("[1] Marie Curie") and "marie-curie.md" in sources[0]


def test_llama_index_query_engine_example_offline():
    pytest.importorskip("llama_index.retrievers.surreal_kgrag", reason="install integrations/llama_index (scripts/setup.sh does)")
    out = run_example("llama_index_query_engine.py", "Which element did the Curies discover?", "--mode", "hybrid")
    assert "no OPENAI_API_KEY set, so using MockLLM" in out
    # MockLLM echoes the prompt, so the answer shows the retrieved context reached the LLM
    assert "Answer: Context information is below." in out and "Curie" in out.split("Answer:")[1]
    nodes = [line for line in out.split("Source nodes (hybrid mode):")[1].splitlines() if line.strip()]
    assert len(nodes) >= 3
    assert all("score=" in line and "ref_doc_id=" in line for line in nodes)
    assert any("polonium.txt" in line for line in nodes)


@pytest.fixture
def chat_server():
    """An OpenAI-compatible /v1/chat/completions endpoint that answers from the prompt it receives."""

    def answer(path: str, body: dict) -> tuple[int, dict]:
        prompt = "\n".join(str(m.get("content")) for m in body.get("messages", []))
        content = "Warsaw [1]." if "Warsaw" in prompt else "I do not know."
        status = 200 if path == "/v1/chat/completions" else 404
        return status, chat_payload({"role": "assistant", "content": content}, body.get("model", "m"))

    with JsonServer(answer) as server:
        yield server


def prompts(server: JsonServer) -> list[str]:
    return ["\n".join(str(m.get("content")) for m in body.get("messages", [])) for body in server.requests]


def test_langchain_rag_example_with_an_openai_key(chat_server):
    pytest.importorskip("langchain_openai", reason="install langchain-surreal-kgrag[openai] for the real-model path")
    env = {"OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": chat_server.base_url, "OPENAI_MODEL": "test-chat"}
    out = run_example("langchain_rag.py", "Where was Marie Curie born?", "--mode", "chunk", env=env)
    assert "LLM: ChatOpenAI (test-chat)" in out
    assert "Answer: Warsaw [1]." in out
    [prompt] = prompts(chat_server)
    assert "Cite passages as [n]" in prompt and "[1] Marie Curie" in prompt and "Question: Where was Marie Curie born?" in prompt
