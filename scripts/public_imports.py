"""Print every public import path of the package and its integrations, one ``module:name`` a line.

A module is public when no part of its dotted name starts with ``_``. Its public names are those it
defines at top level (a class, a function, an assigned constant or type alias; not a ``TypeVar``)
without a leading ``_``, plus its ``__all__``, plus, for a package's ``__init__``, every name it
imports (a package re-exports its API). ``tests/data/public_imports.txt`` holds the list as it was
on main at 6ae43bb; ``tests/test_module_seams.py`` checks that every path in it still imports.

    .venv/bin/python scripts/public_imports.py > tests/data/public_imports.txt
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path

ROOTS = (
    "surreal_kgrag",
    "langchain_surreal_kgrag",
    "llama_index.retrievers.surreal_kgrag",
    "llama_index.postprocessor.surreal_kgrag",
    "llama_index.vector_stores.surreal_kgrag",
)


def modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for root in ROOTS:
        package = importlib.import_module(root)
        found[root] = Path(package.__file__ or "")
        for info in pkgutil.walk_packages(package.__path__, prefix=root + "."):
            if any(part.startswith("_") for part in info.name.split(".")):
                continue
            spec = importlib.util.find_spec(info.name)
            if spec is not None and spec.origin:
                found[info.name] = Path(spec.origin)
    return dict(sorted(found.items()))


def public_names(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: list[str] = []
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            names.append(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            value = node.value
            if isinstance(value, ast.Call) and getattr(value.func, "id", "") == "TypeVar":
                continue
            for target in targets:
                if isinstance(target, ast.Name):
                    if target.id == "__all__" and isinstance(value, (ast.List, ast.Tuple)):
                        names.extend(e.value for e in value.elts if isinstance(e, ast.Constant))
                    names.append(target.id)
        elif isinstance(node, ast.ImportFrom) and path.name == "__init__.py" and node.module != "__future__":
            names.extend(alias.asname or alias.name for alias in node.names)
    return sorted({n for n in names if not n.startswith("_")})


if __name__ == "__main__":
    for module, path in modules().items():
        for name in public_names(path):
            print(f"{module}:{name}")
