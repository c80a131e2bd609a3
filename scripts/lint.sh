#!/usr/bin/env bash
# Static checks CI runs before the tests: ruff on everything, mypy on the package and both integrations.
set -euo pipefail
cd "$(dirname "$0")/.."
.venv/bin/ruff check .
.venv/bin/mypy surreal_kgrag integrations/langchain/langchain_surreal_kgrag
# The LlamaIndex integration is a namespace package (no llama_index/__init__.py), checked from its own root.
(cd integrations/llama_index && ../../.venv/bin/mypy --config-file ../../pyproject.toml --namespace-packages \
    --explicit-package-bases -p llama_index.retrievers.surreal_kgrag)
