"""Long files read whole with their pages, sections and tables: real 10-Q filings (PDF), Markdown and
HTML; chunks along the layout; file metadata. (Ingest and retrieval over them: test_long_retrieval.py.)"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from surreal_kgrag.chunking import SentenceChunker, count_tokens
from surreal_kgrag.loaders import iter_sources
from surreal_kgrag.loaders.metadata import find_date, readable_title
from surreal_kgrag.models import SourceDocument, TextChunk
from surreal_kgrag.sections import split_document

FILINGS = Path(__file__).resolve().parents[2] / "shared" / "bench" / "sec10q" / "docs"
needs_filings = pytest.mark.skipif(not FILINGS.exists(), reason=f"the sec10q filings are not at {FILINGS}")


def load(path: Path) -> SourceDocument:
    (doc,) = iter_sources([path])
    assert isinstance(doc, SourceDocument), doc
    return doc


def chunk_with(chunks: list[TextChunk], needle: str) -> TextChunk:
    found = [c for c in chunks if needle in c.text]
    assert found, needle
    return found[0]


@pytest.fixture(scope="module")
def apple() -> tuple[SourceDocument, list[TextChunk]]:
    doc = load(FILINGS / "2023 Q3 AAPL.pdf")
    return doc, split_document(SentenceChunker(), doc)


@needs_filings
def test_income_statement_figure_is_on_the_page_the_pdf_shows_it(apple: tuple[SourceDocument, list[TextChunk]]) -> None:
    doc, chunks = apple
    assert doc.metadata["pages"] == 29 and len(doc.layout.pages) == 29  # type: ignore[union-attr]
    # Page 4 of the PDF (printed "1") holds the statement of operations: total net sales 81,797.
    chunk = chunk_with(chunks, "Total net sales 81,797 82,959 293,787 304,182")
    assert (chunk.page_start, chunk.page_end) == (4, 4)
    assert chunk.section[-1] == "CONDENSED CONSOLIDATED STATEMENTS OF OPERATIONS (Unaudited)"
    assert "Item 1. Financial Statements" in chunk.section
    # The table's header comes with its rows, and the rows are whole lines.
    assert chunk.text.startswith("Three Months Ended Nine Months Ended")
    assert "Products $ 60,584 $ 63,355 $ 230,901 $ 245,241" in chunk.text
    # A passage of the MD&A is under Item 2.
    mdna = chunk_with(chunks, "Total net sales $ 81,797 $ 82,959 (1)% $ 293,787 $ 304,182 (3)%")
    assert any(s.startswith("Item 2.") for s in mdna.section)
    # Every chunk's first and last line are on the pages it records.
    pages = [*doc.layout.pages, len(doc.text)]  # type: ignore[union-attr]
    for c in chunks:
        assert c.page_start is not None and c.page_end is not None
        assert pages[c.page_start - 1] <= c.start < pages[c.page_start] and pages[c.page_end - 1] < c.end <= pages[c.page_end]


@needs_filings
def test_tables_are_chunked_by_whole_rows_with_the_header_repeated(apple: tuple[SourceDocument, list[TextChunk]]) -> None:
    doc, chunks = apple
    assert doc.layout is not None and len(doc.layout.tables) >= 20
    for start, body, end in doc.layout.tables:
        rows = [line for line in doc.text[body:end].split("\n") if line.strip()]
        header = doc.text[start:body].strip()
        pieces = [c for c in chunks if start <= c.start < end]
        for row in rows:  # every row is whole inside one chunk of its table
            assert any(row in c.content.split("\n") for c in pieces), row
        for piece in pieces[1:]:
            if header and count_tokens(header) <= 100:
                assert piece.header == header and piece.text.startswith(header + "\n")
    assert any(c.header for c in chunks)  # some table did span chunks
    assert all(doc.text[c.start : c.end] == c.content for c in chunks)
    assert all(count_tokens(c.content) <= 200 for c in chunks)


@needs_filings
def test_running_headers_and_footers_are_dropped_table_headers_kept(apple: tuple[SourceDocument, list[TextChunk]]) -> None:
    doc, _ = apple
    assert "Form 10-Q |" not in doc.text  # "Apple Inc. | Q3 2023 Form 10-Q | 12" on every page
    assert doc.text.count("Three Months Ended Nine Months Ended") >= 10  # a table header on many pages stays


@needs_filings
def test_pdf_metadata_dates_and_title(apple: tuple[SourceDocument, list[TextChunk]]) -> None:
    doc, _ = apple
    meta = doc.metadata
    assert meta["date"] == "2023-07-01" and meta["year"] == 2023  # "quarterly period ended July 1, 2023"
    assert meta["pdf_created"] == "2023-08-04T06:02:09-04:00"
    assert meta["pdf_author"].startswith("EDGAR Online") and "author" not in meta
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", meta["modified"])
    assert doc.title == "2023 Q3 AAPL"  # the PDF's Title is an accession number, not a title


@needs_filings
def test_outline_gives_the_sections_when_the_pdf_has_one() -> None:
    doc = load(FILINGS / "2023 Q1 INTC.pdf")
    chunks = split_document(SentenceChunker(), doc)
    chunk = chunk_with(chunks, "Net revenue $ 11,715 $ 18,353")
    assert chunk.section == ("Financial Statements", "Statement of Income")
    assert chunk.page_start == chunk.page_end and chunk.page_start is not None
    page_text = doc.text[doc.layout.pages[chunk.page_start - 1] : doc.layout.pages[chunk.page_start]]  # type: ignore[union-attr]
    assert "Net revenue $ 11,715 $ 18,353" in page_text


@needs_filings
def test_the_filings_that_pypdf_gave_up_on_load_whole() -> None:
    for name in ("2023 Q1 MSFT.pdf", "2023 Q2 MSFT.pdf"):
        doc = load(FILINGS / name)
        assert doc.metadata["pages"] >= 70 and len(doc.text) > 200_000


MARKDOWN = """# Operations manual

Intro paragraph.

## Installation, configuration and usage

Run the installer.

| Setting | Default | Meaning |
|---|---|---|
{rows}

### Troubleshooting

If the service stops, restart it.
"""


def test_markdown_sections_and_a_table_split_by_rows(tmp_path: Path) -> None:
    rows = "\n".join(f"| option_{i} | {i * 10} | what option {i} does |" for i in range(40))
    path = tmp_path / "manual.md"
    path.write_text(MARKDOWN.format(rows=rows), encoding="utf-8")
    doc = load(path)
    chunks = split_document(SentenceChunker(max_tokens=60, overlap_tokens=8), doc)
    assert chunk_with(chunks, "Intro paragraph.").section == ("Operations manual",)
    restart = chunk_with(chunks, "restart it")
    assert restart.section == ("Operations manual", "Installation, configuration and usage", "Troubleshooting")
    assert restart.page_start is None  # Markdown has no pages
    table = [c for c in chunks if "option_" in c.content]
    assert len(table) > 3
    header = "| Setting | Default | Meaning |\n|---|---|---|"
    assert table[0].content.startswith(header) and not table[0].header
    for piece in table[1:]:
        assert piece.header == header and piece.text.startswith(header + "\n| option_")
        assert all(line.startswith("| option_") and line.endswith("|") for line in piece.content.split("\n"))
    assert sum(c.content.count("| option_") for c in table) == 40  # every row once, none cut


def test_a_table_header_too_long_to_repeat_is_a_chunk_of_its_own_when_no_row_fits_beside_it(tmp_path: Path) -> None:
    """A header over half the budget is not repeated; with the first row beside it the first chunk
    passed max_tokens (228 of 200 here)."""
    columns = [f"Column number {i} of it" for i in range(15)]
    header = "| " + " | ".join(columns) + " |\n|" + "---|" * 15
    rows = "\n".join("| " + " | ".join(f"value {r}.{i}" for i in range(15)) + " |" for r in range(6))
    path = tmp_path / "wide.md"
    path.write_text(f"# Wide table\n\n{header}\n{rows}\n", encoding="utf-8")
    chunker = SentenceChunker()
    chunks = split_document(chunker, load(path))
    assert all(count_tokens(c.content) <= chunker.max_tokens for c in chunks)
    assert [c.content for c in chunks][:2] == ["# Wide table", header]
    assert sum(line.startswith("| value ") for c in chunks for line in c.content.split("\n")) == 6  # every row once
    assert not any(c.header for c in chunks)


def test_html_headings_and_tables_become_sections_and_table_chunks(tmp_path: Path) -> None:
    rows = "".join(f"<tr><td>part {i}</td><td>{i}</td></tr>" for i in range(30))
    path = tmp_path / "guide.html"
    path.write_text(
        "<html><head><title>Service guide</title></head><body><article><h1>Service guide</h1>"
        "<p>This guide explains how the service is run day to day by the operations team.</p>"
        "<h2>Parts list</h2><p>The parts the service needs, with their counts, are these.</p>"
        f"<table><tr><th>Part</th><th>Count</th></tr>{rows}</table>"
        "<h2>Support</h2><p>Write to the support desk when a part is missing from the list.</p></article></body></html>",
        encoding="utf-8",
    )
    doc = load(path)
    assert doc.title == "Service guide"
    chunks = split_document(SentenceChunker(max_tokens=40, overlap_tokens=4), doc)
    assert chunk_with(chunks, "support desk").section == ("Service guide", "Support")
    table = [c for c in chunks if "| part " in c.content]
    assert len(table) > 1 and all(c.section == ("Service guide", "Parts list") for c in table)
    assert all(c.text.startswith("| Part | Count |") for c in table)


def test_titles_from_file_names_are_readable() -> None:
    assert readable_title(Path("docs/user_guide.md")) == "User guide"
    assert readable_title(Path("notes/meeting-notes.txt")) == "Meeting notes"
    assert readable_title(Path("docs/install/README.md")) == "Install"
    assert readable_title(Path("2023 Q3 AAPL.pdf")) == "2023 Q3 AAPL"


def test_dates_found_in_text_and_file_names() -> None:
    assert str(find_date("For the quarterly period ended July 1, 2023")) == "2023-07-01"
    assert str(find_date("signed on 3 Sept. 2021 in Oslo")) == "2021-09-03"
    assert str(find_date("report_2022-11-30_final")) == "2022-11-30"
    assert find_date("31 June 2023 is not a date, nor is 2023-13-01") is None
