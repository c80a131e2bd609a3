"""PDFs are read in a child process bounded in memory and time: a PDF past either bound, or one that
crashes pdfium, is that file's failure, and the next PDF loads."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import zlib
from pathlib import Path

import pytest

from surreal_kgrag.loaders import iter_sources, load_path
from surreal_kgrag.loaders.pdf_reader import read
from surreal_kgrag.loaders.pdf_worker import WORKER
from surreal_kgrag.models import LoadFailure, SourceDocument
from tests.test_loaders import split, text_pdf

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="the memory bound is POSIX's RLIMIT_AS")


def inflating_pdf(path: Path, inflated: int, pages: int) -> Path:
    """A small PDF whose one content stream (spaces, FlateDecode) inflates to ``inflated`` bytes,
    drawn by each of ``pages`` pages."""
    stream = zlib.compress(b" " * inflated, 9)
    kids = " ".join(f"{4 + i} 0 R" for i in range(pages))
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        f"<< /Type /Pages /Kids [{kids}] /Count {pages} >>".encode(),
        b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(stream) + stream + b"\nendstream",
    ] + [b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 3 0 R >>"] * pages
    out, offsets = bytearray(b"%PDF-1.4\n"), []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1) + b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    path.write_bytes(bytes(out))
    return path


def folder_with(tmp_path: Path, pages: int) -> Path:
    folder = tmp_path / "filings"
    folder.mkdir()
    inflating_pdf(folder / "a_crafted.pdf", 128 << 20, pages)
    text_pdf(folder / "b_report.pdf", ["Report page 1: 7 ships entered the harbour of Lisbon.", "Page 2: Porto."])
    return folder


def by_name(results: list[SourceDocument | LoadFailure]) -> dict[str, SourceDocument | LoadFailure]:
    return {Path(r.source).name: r for r in results}


@pytest.mark.parametrize(
    ("pages", "bound", "reason"),
    [
        (2, {"max_pdf_memory": 96 << 20}, "PDF needed more than 96 MB to read (max_pdf_memory); not loaded (raise max_pdf_memory to load it)"),
        (8, {"pdf_timeout": 0.5}, "PDF took longer than 0.5 s to read (pdf_timeout); not loaded (raise pdf_timeout to load it)"),
    ],
)
def test_a_pdf_past_a_bound_is_reported_by_it_and_the_next_pdf_loads(tmp_path: Path, pages: int, bound: dict, reason: str) -> None:
    folder = folder_with(tmp_path, pages=pages)
    assert (folder / "a_crafted.pdf").stat().st_size < 200_000
    started = time.monotonic()
    results = by_name(list(load_path(folder, **bound)))
    assert time.monotonic() - started < 30
    crafted, report = results["a_crafted.pdf"], results["b_report.pdf"]
    assert isinstance(crafted, LoadFailure) and crafted.reason == reason
    assert isinstance(report, SourceDocument) and "harbour of Lisbon" in report.text


def test_a_crash_of_the_reader_is_the_pdfs_failure(tmp_path: Path) -> None:
    folder = folder_with(tmp_path, pages=8)
    WORKER.close()

    def crash() -> None:
        while WORKER._child is None:
            time.sleep(0.01)
        time.sleep(0.2)
        os.kill(WORKER._child.pid, signal.SIGSEGV)

    threading.Thread(target=crash, daemon=True).start()
    results = by_name(list(load_path(folder)))
    crafted = results["a_crafted.pdf"]
    assert isinstance(crafted, LoadFailure)
    assert crafted.reason == "pdfium crashed reading the PDF (signal SIGSEGV); not loaded"
    assert isinstance(results["b_report.pdf"], SourceDocument)


def test_the_child_reads_what_pdfium_reads_in_this_process_and_serves_pdf_after_pdf(tmp_path: Path) -> None:
    path = text_pdf(tmp_path / "manual.pdf", [f"Chapter {n}\nThe knot number {n} holds {n * 3} kilos." for n in range(1, 6)])
    data = path.read_bytes()
    assert WORKER.read(data, 100, 100_000, 1 << 30, 60.0) == json.loads(json.dumps(read(data, 100, 100_000)))
    child = WORKER._child
    docs, failures = split(list(iter_sources([path, path])))
    assert failures == [] and docs[0].text == docs[1].text and "The knot number 5 holds 15 kilos." in docs[0].text
    assert docs[0].layout is not None and len(docs[0].layout.pages) == 5
    assert WORKER._child is child  # one child for every PDF


def test_the_child_ends_with_the_parent(tmp_path: Path) -> None:
    path = text_pdf(tmp_path / "note.pdf", ["A short note."])
    script = (
        "import os, sys; from surreal_kgrag.loaders import load_path; from surreal_kgrag.loaders.pdf_worker import WORKER; "
        f"list(load_path({str(path)!r})); print(WORKER._child.pid, flush=True); os._exit(0)"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True)
    pid = int(out.stdout.split()[-1])
    for _ in range(100):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    pytest.fail(f"the PDF reader process {pid} outlived its parent")
