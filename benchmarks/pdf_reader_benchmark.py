"""PDF readers compared on a folder of real PDFs: pages per second, failures, licence, table text.

    .venv/bin/python benchmarks/pdf_reader_benchmark.py [--folder ../shared/bench/sec10q/docs]
        [--budget 120] [--sample "Total net sales"] [--readers pypdfium2,pypdf,pdfplumber,pdfminer]

Each reader extracts the text of every page of the folder's PDFs, in file order, until it has used
--budget seconds (the slow ones do not finish the folder: pages/s is over what they read). A file
that raises is a failure. The sample is the first line holding --sample in each reader's text of
the first file: how a table row comes out (cells in order on one line, or scattered). The last row
is surreal-kgrag's own PDF loader (pypdfium2 plus fonts, furniture, sections and tables).
Readers that are not installed are listed as such (pip install 'surreal-kgrag[bench]').
"""

from __future__ import annotations

import argparse
import importlib.metadata
import itertools
import time
from collections.abc import Callable
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "shared" / "bench"


def pypdfium2_pages(path: Path) -> list[str]:
    import pypdfium2 as pdfium

    pdf = pdfium.PdfDocument(path)
    try:
        return [pdf[i].get_textpage().get_text_range() for i in range(len(pdf))]
    finally:
        pdf.close()


def pypdf_pages(path: Path) -> list[str]:
    import pypdf

    return [page.extract_text() or "" for page in pypdf.PdfReader(path).pages]


def pdfplumber_pages(path: Path) -> list[str]:
    import pdfplumber

    with pdfplumber.open(path) as pdf:
        return [page.extract_text() or "" for page in pdf.pages]


def pdfminer_pages(path: Path) -> list[str]:
    from pdfminer.high_level import extract_text

    return extract_text(str(path)).split("\f")


def kgrag_pages(path: Path) -> list[str]:
    from surreal_kgrag.loaders.pdf import pdf_document

    doc = pdf_document(path, path.read_bytes(), str(path))
    if doc.layout is None:  # a LoadFailure
        raise RuntimeError(getattr(doc, "reason", "failed"))
    starts = [*doc.layout.pages, len(doc.text)]
    return [doc.text[a:b] for a, b in itertools.pairwise(starts)]


READERS: dict[str, tuple[str, Callable[[Path], list[str]]]] = {
    "pypdfium2": ("pypdfium2", pypdfium2_pages),
    "pypdf": ("pypdf", pypdf_pages),
    "pdfplumber": ("pdfplumber", pdfplumber_pages),
    "pdfminer": ("pdfminer.six", pdfminer_pages),
    "surreal-kgrag": ("pypdfium2", kgrag_pages),
}


def licence(package: str) -> str:
    try:
        meta = importlib.metadata.metadata(package)
    except importlib.metadata.PackageNotFoundError:
        return "-"
    text = meta.get("License-Expression") or meta.get("License") or ""
    if not text or len(text) > 40:
        classifiers = [c.split("::")[-1].strip() for c in meta.get_all("Classifier") or [] if c.startswith("License ::")]
        text = ", ".join(classifiers) or text[:40]
    return text


def measure(name: str, read: Callable[[Path], list[str]], files: list[Path], budget: float, sample: str) -> dict[str, object]:
    pages = read_files = 0
    failures: list[str] = []
    seconds = 0.0
    line = ""
    for path in files:
        if seconds > budget:
            break
        started = time.perf_counter()
        try:
            texts = read(path)
        except Exception as error:
            failures.append(f"{path.name}: {type(error).__name__}")
            texts = []
        seconds += time.perf_counter() - started
        read_files += 1
        pages += len(texts)
        if not line and path == files[0]:
            line = next((ln.strip() for t in texts for ln in t.splitlines() if sample in ln), "(not found)")
    return {"reader": name, "files": read_files, "pages": pages, "seconds": seconds, "failures": failures, "sample": line}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folder", type=Path, default=BENCH / "sec10q" / "docs")
    parser.add_argument("--budget", type=float, default=120.0, help="seconds per reader")
    parser.add_argument("--sample", default="Total net sales")
    parser.add_argument("--readers", default=",".join(READERS))
    args = parser.parse_args()
    files = sorted(args.folder.glob("*.pdf"))
    print(f"{len(files)} PDFs in {args.folder}; budget {args.budget:.0f} s per reader\n")
    print(f"{'reader':14} {'licence':26} {'files':>5} {'pages':>6} {'seconds':>8} {'pages/s':>8} failures")
    samples = []
    for name in args.readers.split(","):
        package, read = READERS[name]
        try:
            read(files[0])
        except ImportError:
            print(f"{name:14} {'not installed':26}")
            continue
        except Exception:
            pass
        result = measure(name, read, files, args.budget, args.sample)
        rate = result["pages"] / max(result["seconds"], 1e-9)  # type: ignore[operator]
        failures = result["failures"]
        print(
            f"{name:14} {licence(package)[:26]:26} {result['files']:>5} {result['pages']:>6} {result['seconds']:>8.1f} "
            f"{rate:>8.1f} {len(failures)} {'; '.join(failures)[:90]}"  # type: ignore[arg-type]
        )
        samples.append((name, result["sample"]))
    print(f"\nFirst line with {args.sample!r} in {files[0].name}:")
    for name, line in samples:
        print(f"  {name:14} {line}")


if __name__ == "__main__":
    main()
