"""Run a command as a container with a memory limit would run it (Linux, root).

    sudo .venv/bin/python benchmarks/memory_limit.py 2000M -- .venv/bin/python benchmarks/large_file_benchmark.py

The embedded SurrealKV engine sizes its write buffer (memtable) and block cache from the memory it
detects: the limit of the cgroup mounted at /sys/fs/cgroup when there is one (as in a container),
otherwise the machine's RAM (docs/servers.md, "Memory of the embedded engine"). The Python SDK
passes it no settings, so on a 24 GiB machine it takes a 1 GiB memtable and about 11 GiB of block
cache, and inside a 2 GB container a 128 MiB memtable and a 16 MiB cache.

This script gives the command what `docker run --memory LIMIT` gives a process: a child cgroup of
the current one with that limit (enforced by the kernel: past it the command is reclaimed from,
then killed), the command inside it, and, in a private mount namespace, that cgroup mounted where
the engine looks for the limit. Nothing outside the command is changed; the child cgroup is removed
afterwards.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30}


def parse_limit(text: str) -> int:
    match = re.fullmatch(r"(\d+)([KMG]?)(?:I?B)?", text.strip().upper())
    if not match:
        raise SystemExit(f"limit {text!r}: write it as bytes or with K, M or G (2000M, 2G)")
    return int(match[1]) * UNITS[match[2]]


def own_cgroup() -> tuple[Path, Path, str]:
    """(the current process's memory cgroup directory, where its hierarchy is mounted, the limit file's name)."""
    lines = Path("/proc/self/cgroup").read_text().splitlines()
    for line in lines:  # cgroup v1: "4:memory:/path"
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            mount = Path("/sys/fs/cgroup/memory")
            return mount / path.lstrip("/"), mount, "memory.limit_in_bytes"
    for line in lines:  # cgroup v2: "0::/path"
        if line.startswith("0::"):
            mount = Path("/sys/fs/cgroup")
            return mount / line[3:].lstrip("/"), mount, "memory.max"
    raise SystemExit("no memory cgroup for this process in /proc/self/cgroup")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("limit", help="the memory limit, e.g. 2000M or 2G")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command to run")
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command to run after --")
    limit = parse_limit(args.limit)
    parent, mount, limit_file = own_cgroup()
    child = parent / f"kgrag-limit-{os.getpid()}"
    try:
        child.mkdir()
        (child / limit_file).write_text(str(limit))
    except OSError as error:
        raise SystemExit(f"cannot make a memory-limited cgroup under {parent} ({error}): run as root on Linux") from None
    # The shell joins the child cgroup, mounts it over the hierarchy's root in its own mount
    # namespace (where the engine reads the limit), then becomes the command.
    script = 'echo $$ > "$1/cgroup.procs" && mount --bind "$1" "$2" && shift 2 && exec "$@"'
    print(f"running under a memory limit of {limit / 1e6:,.0f} MB (cgroup {child})", flush=True)
    try:
        done = subprocess.run(["unshare", "--mount", "--", "sh", "-c", script, "sh", str(child), str(mount), *command])
        peak_file = child / ("memory.max_usage_in_bytes" if limit_file == "memory.limit_in_bytes" else "memory.peak")
        if peak_file.exists():
            print(f"cgroup peak memory (RSS and page cache): {int(peak_file.read_text()) / 1e6:,.0f} MB", flush=True)
        return done.returncode
    finally:
        _remove(child)


def _remove(child: Path) -> None:
    """Remove the child cgroup once the kernel has let go of its last process (a killed one can linger a moment)."""
    for _ in range(50):
        try:
            child.rmdir()
            return
        except OSError:
            time.sleep(0.1)
    print(f"could not remove {child}: remove it once its processes are gone", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
