"""benchmarks/memory_limit.py: a command runs as in a container with a memory limit: the limit is
where the embedded engine reads it, the kernel enforces it, and the embedded engine's write buffer
follows it (the same writes raise RSS less than without the limit). Inside a small limit (small
memtables), a store keeps taking writes past many memtables: each is written to disk as it fills
(through the SDK's async embedded connection none ever was, and writes stopped after two)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "memory_limit.py"


def _can_limit() -> str | None:
    if sys.platform != "linux" or os.geteuid() != 0:
        return "needs root on Linux (a child cgroup and a private mount namespace)"
    probe = subprocess.run([sys.executable, str(SCRIPT), "100M", "--", "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        return f"no writable memory cgroup here: {probe.stderr.strip() or probe.stdout.strip()}"
    return None


REASON = _can_limit()
pytestmark = pytest.mark.skipif(REASON is not None, reason=str(REASON))

READ_LIMIT = """
from pathlib import Path
for name in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
    if Path(name).exists():
        print(Path(name).read_text().strip())
        break
"""

WRITE_ROWS = """
import sys
from surrealdb import Surreal

def rss_mb():
    return next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmRSS")) / 1024

db = Surreal("surrealkv://" + sys.argv[1]); db.connect(); db.use("t", "t")
before = rss_mb()
for batch in range(1000):  # about 200 MB of rows
    db.query_raw("INSERT INTO t $rows RETURN NONE", {"rows": [{"i": batch * 200 + j, "s": "x" * 1000} for j in range(200)]})
print(round(rss_mb() - before))
"""


def _limited(limit: str, *command: str) -> subprocess.CompletedProcess[str]:
    # A write that waits for ever on the engine fails here, by the timeout, rather than hanging the suite.
    return subprocess.run([sys.executable, str(SCRIPT), limit, "--", *command], capture_output=True, text=True, timeout=300)


def _printed(done: subprocess.CompletedProcess[str]) -> str:
    """What the command printed (memory_limit.py's own lines start with words)."""
    return [line for line in done.stdout.splitlines() if line and not line[0].isalpha()][-1]


def test_the_command_sees_the_limit_where_the_engine_reads_it():
    done = _limited("300M", sys.executable, "-c", READ_LIMIT)
    assert done.returncode == 0, done.stderr
    assert _printed(done) == str(300 * 2**20)


def test_the_kernel_enforces_the_limit():
    fits = _limited("400M", sys.executable, "-c", "b = bytearray(100 * 2**20); b[::4096] = b'x' * len(b[::4096])")
    assert fits.returncode == 0, fits.stderr
    too_big = _limited("200M", sys.executable, "-c", "b = bytearray(600 * 2**20); b[::4096] = b'x' * len(b[::4096])")
    assert too_big.returncode != 0  # killed by the kernel, not allowed to grow past the limit


def _ram_gib() -> float:
    return next(int(line.split()[1]) for line in Path("/proc/meminfo").read_text().splitlines() if line.startswith("MemTotal:")) / 2**20


@pytest.mark.skipif(_ram_gib() < 16, reason="the engine already takes a small write buffer on a machine under 16 GiB")
def test_the_embedded_engine_buffers_less_inside_the_limit(tmp_path):
    free = subprocess.run([sys.executable, "-c", WRITE_ROWS, str(tmp_path / "free")], capture_output=True, text=True, timeout=300)
    assert free.returncode == 0, free.stderr
    limited = _limited("1500M", sys.executable, "-c", WRITE_ROWS, str(tmp_path / "limited"))
    assert limited.returncode == 0, limited.stderr
    grew_free, grew_limited = int(free.stdout.strip()), int(_printed(limited))
    # Without a limit the engine's memtable (1 GiB on a 16-64 GiB machine) keeps all 200 MB; in a
    # container under 4 GiB it is 128 MiB, written to disk as it fills.
    assert grew_limited < 0.8 * grew_free, (grew_limited, grew_free)


STORE_WRITES = """
import glob, sys
from surreal_kgrag import SurrealStore

path = sys.argv[1]
with SurrealStore("surrealkv://" + path) as store:
    for batch in range(1000):  # about 200 MB of rows: several 64 MiB memtables
        rows = [{"i": batch * 200 + j, "s": "x" * 1000} for j in range(200)]
        store.query_text("bulk", "INSERT INTO t $rows RETURN NONE", {"rows": rows})
    print(len(glob.glob(path + "/sstables/*")))
"""


def test_a_store_keeps_taking_writes_past_its_memtables(tmp_path):
    done = _limited("900M", sys.executable, "-c", STORE_WRITES, str(tmp_path / "kg"))
    assert done.returncode == 0, done.stderr[-2000:]
    assert int(_printed(done)) >= 2  # memtables were written to disk while the store was open
