"""benchmarks/fulltext_scorer.py runs on a real embedded store and times what its docs say it does:
a search that matches exactly one row (the script refuses to time anything else), scored and not,
at each size, after rows are replaced, and on a new index over the same rows. Timings are printed,
not asserted."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_fulltext_scorer_times_a_one_row_search_at_each_step():
    run = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "fulltext_scorer.py"), "--docs", "600,1500", "--replace", "300"],
        capture_output=True, text=True, timeout=600, cwd=ROOT,
    )
    assert run.returncode == 0, run.stderr[-2000:] + run.stdout[-2000:]
    rows = re.findall(r"^\s+(.+?)\s+scored\s+([\d.]+) ms\s+unscored\s+([\d.]+) ms\s+scorer\s+(-?[\d.]+) ms$", run.stdout, re.M)
    labels = [label for label, *_ in rows]
    assert labels == ["600 rows indexed", "1,500 rows indexed", "then 300 of them deleted and written again", "the new index"], run.stdout
    for _, scored, unscored, scorer in rows:
        assert float(scored) > 0 and float(unscored) > 0
        assert abs(float(scored) - float(unscored) - float(scorer)) < 0.02
