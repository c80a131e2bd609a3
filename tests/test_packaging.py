"""The integration distributions' metadata (integrations/*/pyproject.toml): each asks for the core with
the extras its defaults need, below the core's next minor release, and the LlamaIndex ones carry the
[tool.llamahub] section llama_index's own integration packages have. Read from the files, nothing imported."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    tomllib = pytest.importorskip("tomli")

ROOT = Path(__file__).resolve().parents[1]
CORE = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
INTEGRATIONS = sorted(path.parent for path in (ROOT / "integrations").glob("*/pyproject.toml"))
#: The default embedder (MiniLM) runs on sentence-transformers, the default concept extractor on spaCy.
DEFAULT_EXTRAS = {"nlp": "spacy", "sentence-transformers": "sentence-transformers"}
#: Distributions of this repository, each at the core's version.
SIBLINGS = {"surreal-kgrag"} | {tomllib.loads((path / "pyproject.toml").read_text())["project"]["name"] for path in INTEGRATIONS}


def _project(folder: Path) -> dict:
    return tomllib.loads((folder / "pyproject.toml").read_text())


def _own_requirements(folder: Path) -> dict[str, Requirement]:
    requirements = [Requirement(line) for line in _project(folder)["project"]["dependencies"]]
    return {r.name: r for r in requirements if r.name in SIBLINGS}


def test_the_extras_the_defaults_need_name_their_libraries():
    extras = CORE["optional-dependencies"]
    for extra, library in DEFAULT_EXTRAS.items():
        assert any(Requirement(line).name == library for line in extras[extra]), (extra, extras[extra])


@pytest.mark.parametrize("folder", INTEGRATIONS, ids=lambda path: path.name)
def test_integrations_require_the_core_with_its_default_extras_and_an_upper_bound(folder):
    version = Version(CORE["version"])
    next_minor = Version(f"{version.major}.{version.minor + 1}")
    requirements = _own_requirements(folder)
    assert set(DEFAULT_EXTRAS) <= requirements["surreal-kgrag"].extras
    for requirement in requirements.values():  # the core and any sibling distribution
        assert requirement.specifier.contains(version), requirement
        assert not requirement.specifier.contains(next_minor), f"{requirement}: no upper bound below {next_minor}"


@pytest.mark.parametrize("folder", [path for path in INTEGRATIONS if (path / "llama_index").is_dir()], ids=lambda path: path.name)
def test_llama_index_integrations_carry_llamahub_metadata(folder):
    hub = _project(folder)["tool"]["llamahub"]
    package = folder.joinpath(*hub["import_path"].split("."))
    assert (package / "__init__.py").is_file(), hub["import_path"]
    module = ast.parse((package / "__init__.py").read_text())
    exported = next(
        ast.literal_eval(node.value) for node in module.body if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "__all__"
    )
    assert hub["class_authors"] and set(hub["class_authors"]) <= set(exported)
    assert isinstance(hub["contains_example"], bool)
