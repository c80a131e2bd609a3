"""examples/llm_layer.py runs offline against its labelled stand-in, and, given a key, through the
``openai`` SDK's environment settings (here pointed at a scripted server on 127.0.0.1)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

from surreal_kgrag.llm.scripted import ScriptedChatServer

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "llm_layer.py"


def run_example(tmp_path, **env) -> str:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    environment.update(PYTHONPATH=str(ROOT), XDG_CACHE_HOME=str(tmp_path / "cache"), **env)
    run = subprocess.run([sys.executable, str(EXAMPLE)], cwd=tmp_path, env=environment, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    return run.stdout


def check(out: str) -> None:
    assert "ingested 6 documents" in out
    assert "polonium -discovered-> " not in out  # the subject of discovered is a person
    assert "pierre curie -discovered-> polonium" in out and "polonium -named_after-> poland" in out
    assert "A: She named polonium after her native country, Poland." in out
    assert "[Marie Curie] She named polonium after her native country, Poland." in out
    assert "{'person': 'marie curie', 'place': 'warsaw'}" in out


def test_the_example_runs_offline_with_a_labelled_stand_in(tmp_path):
    out = run_example(tmp_path)
    assert out.startswith("model: scripted stand-in on 127.0.0.1, not a model")
    check(out)


def test_with_a_key_the_example_uses_the_sdk_settings(tmp_path):
    spec = importlib.util.spec_from_file_location("llm_layer_example", EXAMPLE)
    assert spec and spec.loader
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    with ScriptedChatServer(example.stand_in) as server:
        out = run_example(tmp_path, OPENAI_API_KEY="sk-test", OPENAI_BASE_URL=server.base_url, OPENAI_MODEL="some-model")
    assert out.startswith("model: some-model")
    assert {r["model"] for r in server.requests} == {"some-model"}
    check(out)
