#!/usr/bin/env bash
# Static checks CI runs before the tests: ruff on everything, mypy on the package and both integrations.
set -euo pipefail
cd "$(dirname "$0")/.."
.venv/bin/ruff check .
.venv/bin/mypy surreal_kgrag integrations/langchain/langchain_surreal_kgrag
# The LlamaIndex integration is a namespace package (no llama_index/__init__.py), checked from its own root.
(cd integrations/llama_index && ../../.venv/bin/mypy --config-file ../../pyproject.toml --namespace-packages \
    --explicit-package-bases -p llama_index.retrievers.surreal_kgrag)
# The postprocessor and vector-store distributions, the same way (they import the retriever distribution).
for dist in llama_index_postprocessor:postprocessor llama_index_vector_stores:vector_stores; do
    (cd "integrations/${dist%%:*}" && ../../.venv/bin/mypy --config-file ../../pyproject.toml --namespace-packages \
        --explicit-package-bases -p "llama_index.${dist#*:}.surreal_kgrag")
done
