"""The package's seams: every module imports on its own, the modules' imports form no cycle, and
every public import path that worked on main at 6ae43bb (``tests/data/public_imports.txt``, written
by ``scripts/public_imports.py``) still works."""

from __future__ import annotations

import ast
import importlib
import json
import pkgutil
import subprocess
import sys
from pathlib import Path

import surreal_kgrag

PACKAGE = Path(surreal_kgrag.__file__).parent
PUBLIC_IMPORTS = Path(__file__).parent / "data" / "public_imports.txt"
OPTIONAL = {"surreal_kgrag.mcp_server"}  # imports the mcp extra at import time


def _modules() -> list[str]:
    names = ["surreal_kgrag"]
    names += [info.name for info in pkgutil.walk_packages([str(PACKAGE)], prefix="surreal_kgrag.")]
    return sorted(names)


def test_every_module_imports_on_its_own_in_a_fresh_interpreter():
    # One interpreter; before each module, every surreal_kgrag module is forgotten, so each one is
    # imported first, as a user's first import would (third-party modules stay loaded: speed).
    script = """
import importlib, json, sys, traceback
failures = {}
for name in json.loads(sys.argv[1]):
    for loaded in [m for m in sys.modules if m == "surreal_kgrag" or m.startswith("surreal_kgrag.")]:
        del sys.modules[loaded]
    try:
        importlib.import_module(name)
    except Exception:
        failures[name] = traceback.format_exc(limit=3)
print(json.dumps(failures))
"""
    names = [n for n in _modules() if n not in OPTIONAL]
    assert len(names) > 80
    out = subprocess.run([sys.executable, "-c", script, json.dumps(names)], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {}


def _imports(path: Path, module: str) -> set[str]:
    """The package modules ``module`` imports at its top level (``if TYPE_CHECKING:`` included)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    body = list(ast.parse(path.read_text(encoding="utf-8")).body)
    for node in list(body):
        if isinstance(node, ast.If):  # if TYPE_CHECKING: ...
            body.extend(node.body)
    for node in body:
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[: len(parts) - node.level + 1]
                base = ".".join(parts + ([node.module] if node.module else []))
            if not base.startswith("surreal_kgrag"):
                continue
            for alias in node.names:  # `from . import surql` names a module
                candidate = f"{base}.{alias.name}"
                found.add(candidate if importlib.util.find_spec(base) and _is_module(candidate) else base)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("surreal_kgrag"))
    return found


def _is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False


def test_the_modules_import_one_another_without_a_cycle():
    graph: dict[str, set[str]] = {}
    for name in _modules():
        spec = importlib.util.find_spec(name)
        assert spec is not None and spec.origin
        graph[name] = {m for m in _imports(Path(spec.origin), name) if m != name}
    # A package imports its own submodules to re-export them; a submodule importing its package's
    # __init__ back would be the cycle, so the edges package -> its submodules are left out.
    edges = {n: {m for m in deps if not m.startswith(n + ".")} for n, deps in graph.items()}
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                cycles.append([*path[path.index(nxt) :], nxt] if nxt in path else [node, nxt])
            elif nxt not in state:
                visit(nxt, [*path, nxt])
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node, [node])
    assert cycles == []


def test_every_public_import_path_of_main_6ae43bb_still_works():
    paths = [line.split(":") for line in PUBLIC_IMPORTS.read_text().split() if line]
    assert len(paths) > 600
    missing = []
    for module, name in paths:
        if module in OPTIONAL:
            continue
        try:
            getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError) as error:
            missing.append(f"{module}:{name} ({error})")
    assert missing == []


def test_store_and_embed_names_are_the_same_objects_on_old_and_new_paths():
    from surreal_kgrag import db, embed, indexes, store
    from surreal_kgrag.db import catalog
    from surreal_kgrag.embed.local import SentenceTransformerEmbedder

    assert store.SurrealStore is db.SurrealStore
    assert indexes.IndexCatalog is catalog.IndexCatalog
    assert embed.SentenceTransformerEmbedder is SentenceTransformerEmbedder
