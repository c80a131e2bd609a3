"""How often a short CLI run ends with an exit code other than its own: runs `surreal-kgrag stats`
on a small embedded store N times and tallies the exit codes (134 is the SDK engine's abort at
process exit, which the CLI now avoids).

    .venv/bin/python benchmarks/cli_exit_benchmark.py [--runs 50] [--command "python -m surreal_kgrag.cli"]

``--command`` runs another entry point (e.g. an older checkout's ``main``) for a before/after figure.
"""

from __future__ import annotations

import argparse
import collections
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

from surreal_kgrag.schema import ensure_schema
from surreal_kgrag.store import SurrealStore


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--command", default=str(Path(sys.executable).with_name("surreal-kgrag")), help="the CLI to run")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        url = f"surrealkv://{folder}/kg"
        with SurrealStore(url) as store:
            ensure_schema(store, dimension=8, embedder="e")
        codes: collections.Counter[int] = collections.Counter()
        complete = 0
        for _ in range(args.runs):
            done = subprocess.run([*shlex.split(args.command), "stats", "--db", url, "--json"], capture_output=True, text=True, timeout=300)
            codes[done.returncode] += 1
            complete += '"documents": 0' in done.stdout
    print(f"{args.runs} runs of `{args.command} stats`: exit codes {dict(sorted(codes.items()))}; complete output in {complete}")


if __name__ == "__main__":
    main()
