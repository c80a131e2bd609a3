"""benchmarks/vector_record_cost.py runs and its disk figures say what the docs say they do: a
vector's bytes grow with its length and a 384-float record goes to SurrealKV's value log (over
4 KiB) where a 64-float one stays in the tree. Timings are printed, not asserted."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_vector_record_cost_prints_a_row_per_record_shape():
    run = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "vector_record_cost.py"), "--rows", "150"],
        capture_output=True, text=True, timeout=600, cwd=ROOT,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    rows = {
        match.group(1).strip(): (int(match.group(2)), int(match.group(3)))
        for match in re.finditer(r"^(.+?)\s+(\d+) B\s+(\d+) B\s+[\d.]+ ms", run.stdout, re.M)
    }
    assert set(rows) == {"2 KB text, no vector", "64 floats", "128 floats", "192 floats", "384 floats"}, run.stdout
    disk = {label: total for label, (total, _) in rows.items()}
    assert disk["64 floats"] < disk["192 floats"] < disk["384 floats"]
    assert rows["384 floats"][1] > 0 and rows["64 floats"][1] == 0
