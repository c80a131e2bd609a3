"""Loaders on real files: each format, bad inputs, folders, framework documents, stable keys."""

from __future__ import annotations

import datetime as dt
import io
import json
import os
import subprocess
import sys
import textwrap
from decimal import Decimal
from pathlib import Path
from typing import Any
from uuid import UUID

import pypdf
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pypdf.generic import DecodedStreamObject, DictionaryObject, NameObject

from surreal_kgrag import Ingestor, SurrealStore
from surreal_kgrag.errors import ConfigurationError, LoaderError
from surreal_kgrag.extract import CallableConceptExtractor
from surreal_kgrag.loaders import (
    SUPPORTED_SUFFIXES,
    find_unstorable,
    from_langchain,
    from_llama_index,
    from_text,
    iter_sources,
    load_path,
)
from surreal_kgrag.loaders.formats import markdown_layout, markdown_part_layout, markdown_title
from surreal_kgrag.models import LoadFailure, SourceDocument

DATA = Path(__file__).parent / "data" / "loaders"
DOCS = DATA / "docs"
BENCH_CORPUS = Path(__file__).resolve().parents[2] / "shared" / "bench" / "hotpotqa" / "corpus.jsonl"


def one(path: Path | str, **options: Any) -> SourceDocument | LoadFailure:
    results = list(load_path(path, **options))
    assert len(results) == 1, results
    return results[0]


def doc(path: Path | str, **options: Any) -> SourceDocument:
    result = one(path, **options)
    assert isinstance(result, SourceDocument), result
    return result


def failure(path: Path | str, **options: Any) -> LoadFailure:
    result = one(path, **options)
    assert isinstance(result, LoadFailure), result
    return result


def split(results: list[SourceDocument | LoadFailure]) -> tuple[list[SourceDocument], list[LoadFailure]]:
    docs = [r for r in results if isinstance(r, SourceDocument)]
    failures = [r for r in results if isinstance(r, LoadFailure)]
    assert len(docs) + len(failures) == len(results)
    return docs, failures


# --- formats ----------------------------------------------------------------------------------


def test_plain_text_file() -> None:
    path = DOCS / "notes.txt"
    d = doc(path)
    assert d.key == path.resolve().as_posix()
    assert d.source == d.key
    assert d.text == path.read_text(encoding="utf-8")
    assert d.title == "Notes"  # the file stem, made readable
    assert d.content_type == "text/plain"
    modified = d.metadata.pop("modified")  # the file's mtime, for filters; left out of the content hash
    assert modified == dt.datetime.fromtimestamp(path.stat().st_mtime, dt.timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")
    assert d.metadata == {"file_name": "notes.txt"}
    os.utime(path)  # touched, not changed: the same hash, so it is not ingested again
    assert doc(path).content_hash == d.content_hash
    assert d.access == []


def test_markdown_title_is_first_heading_outside_code() -> None:
    d = doc(DOCS / "guide.md")
    assert d.title == "Getting Started"
    assert d.content_type == "text/markdown"
    assert d.text == (DOCS / "guide.md").read_text(encoding="utf-8")


def test_markdown_without_heading_uses_stem(tmp_path: Path) -> None:
    path = tmp_path / "plain-notes.markdown"
    path.write_text("No heading here.\n\n## Only a level-two heading\n", encoding="utf-8")
    assert doc(path).title == "Plain notes"


@pytest.mark.parametrize(
    ("line", "level", "text"),
    [
        ("# Title", 1, "Title"),
        ("   ## Closed ##  ", 2, "Closed"),
        ("# Hash#", 1, "Hash#"),
        ("# a # b", 1, "a # b"),
        ("# ###", 1, "###"),
        ("###### Six", 6, "Six"),
        ("####### Seven", None, None),
        ("    # Indented four", None, None),
        ("#NoSpace", None, None),
        ("# ", None, None),
    ],
)
def test_markdown_atx_headings(line: str, level: int | None, text: str | None) -> None:
    sections = [path for _, path in markdown_layout(f"# Top\n{line}\nBody text.").sections]
    if text is None:
        assert sections == [("Top",)]
    else:
        assert sections == [("Top",), (text,) if level == 1 else ("Top", text)]
    assert markdown_title(line) == (text if level == 1 else None)


def test_a_megabyte_markdown_line_is_read_at_once() -> None:
    # The heading patterns used to backtrack on a long run of spaces: a 1 MB line took hours.
    spaces = " " * 1_000_000
    text = f"# a{spaces}x\n\n## Closed{spaces}##\n\nname | value\n{spaces}x\n"
    layout = markdown_layout(text)
    assert [path for _, path in layout.sections] == [(f"a{spaces}x",), (f"a{spaces}x", "Closed")]
    assert layout.tables == []  # the long line under "name | value" is no |---| rule
    assert markdown_title(text) == f"a{spaces}x"


def test_html_extracts_article_not_boilerplate() -> None:
    d = doc(DOCS / "page.html")
    assert d.title == "Graph Retrieval Explained"
    assert d.content_type == "text/html"
    assert "connects passages through the concepts they share" in d.text
    assert "multi-hop questions" in d.text
    for boilerplate in ("Log in", "About us", "All rights reserved", "should never appear", "font-family"):
        assert boilerplate not in d.text
    assert d.metadata["author"] == "Grace Hopper"
    assert d.metadata["file_name"] == "page.html"


def test_html_falls_back_to_lxml_when_trafilatura_finds_nothing(tmp_path: Path) -> None:
    path = tmp_path / "aside.htm"
    path.write_text(
        "<html><head><title>Side Notes</title><script>var hidden = 1;</script></head>"
        "<body><aside>Only sidebar text lives here.</aside></body></html>",
        encoding="utf-8",
    )
    d = doc(path)
    assert d.text == "Only sidebar text lives here."
    assert d.title == "Side Notes"


def test_a_title_longer_than_max_title_chars_gives_way_to_the_file_name(tmp_path: Path) -> None:
    """A title is written above every chunk of its document and may be a concept: a file's heading
    or <title> of thousands of characters is not used (the ingest refuses such a title)."""
    long_title = "Quarterly report " * 100
    (tmp_path / "heading-notes.md").write_text(f"# {long_title}\n\nThe body.\n", encoding="utf-8")
    (tmp_path / "page-notes.html").write_text(
        f"<html><head><title>{long_title}</title></head><body><article><p>The body of the page, "
        "long enough for a main text.</p></article></body></html>",
        encoding="utf-8",
    )
    (tmp_path / "short.md").write_text("# Quarterly report\n\nThe body.\n", encoding="utf-8")
    titles = {d.metadata["file_name"]: d.title for d in load_path(tmp_path) if isinstance(d, SourceDocument)}
    assert titles == {"heading-notes.md": "Heading notes", "page-notes.html": "Page notes", "short.md": "Quarterly report"}


def test_deeply_nested_html_keeps_its_deep_content_or_is_refused(tmp_path: Path) -> None:
    """Past 255 nested elements the parser dropped the deeper content and everything after it, and
    the page loaded without a word; now it is parsed to MAX_HTML_DEPTH, and deeper is a failure."""

    def page(levels: int) -> str:
        deep = "<div>" * levels + "<p>Deep content about Marie Curie in Paris.</p>" + "</div>" * levels
        return (
            "<html><head><title>Nested</title></head><body><article><p>A shallow opening paragraph.</p>"
            f"{deep}<p>The closing paragraph after it.</p></article></body></html>"
        )

    (tmp_path / "deep.html").write_text(page(400), encoding="utf-8")
    assert doc(tmp_path / "deep.html").text == (
        "A shallow opening paragraph.\n\nDeep content about Marie Curie in Paris.\n\nThe closing paragraph after it."
    )
    (tmp_path / "deeper.html").write_text(page(2_500), encoding="utf-8")
    assert "HTML nested 2,000 or more elements deep" in failure(tmp_path / "deeper.html").reason


def test_an_html_page_of_very_many_elements_is_read_as_plain_text_without_trafilatura(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """trafilatura's time grew faster than the page (149 s for 200,000 paragraphs, hours for a
    32 MB page); past MAX_EXTRACTED_ELEMENTS the page's text is read whole in linear time."""
    import trafilatura

    import surreal_kgrag.loaders.formats as formats

    monkeypatch.setattr(formats, "MAX_EXTRACTED_ELEMENTS", 1_000, raising=False)
    paragraphs = [f"Pier {i} of the harbour takes ships of {i % 90} metres." for i in range(2_000)]
    path = tmp_path / "log.html"
    path.write_text("<html><head><title>Harbour log</title></head><body>" + "".join(f"<p>{p}</p>" for p in paragraphs) + "</body></html>")

    def no_extraction(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("trafilatura ran on a page past the cap")

    monkeypatch.setattr(trafilatura, "extract", no_extraction)
    d = doc(path)
    assert d.text.split("\n") == paragraphs and d.title == "Harbour log"


def test_html_without_text_is_a_failure(tmp_path: Path) -> None:
    path = tmp_path / "blank.html"
    path.write_text("<html><head><title></title></head><body><img src='x.png'></body></html>", encoding="utf-8")
    assert "no text" in failure(path).reason


def test_xhtml_with_encoding_declaration(tmp_path: Path) -> None:
    path = tmp_path / "x.html"
    path.write_text(
        '<?xml version="1.0" encoding="UTF-8"?>\n<html xmlns="http://www.w3.org/1999/xhtml">'
        "<head><title>XHTML</title></head><body><aside>Aside in XHTML.</aside></body></html>",
        encoding="utf-8",
    )
    assert "Aside in XHTML." in doc(path).text


def test_pdf_text_title_author_pages() -> None:
    d = doc(DATA / "sample.pdf")
    assert d.title == "Tiny Graph Paper"
    assert d.content_type == "application/pdf"
    modified = d.metadata.pop("modified")
    assert modified.endswith("Z") and modified[:4].isdigit()
    # The PDF's own fields are pdf_*: a converter named as Author never becomes an `author` concept.
    assert d.metadata == {"file_name": "sample.pdf", "pages": 2, "pdf_author": "Ada Lovelace", "pdf_title": "Tiny Graph Paper"}
    first, second = d.text.split("\n\n")
    assert "Knowledge graphs link concepts across documents." in first
    assert second == "The second page talks about retrieval."


def test_corrupt_and_truncated_pdfs_fail_with_pdfium_error(tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.pdf"
    garbage.write_bytes(b"%PDF-1.4\nthis is not really a pdf\n")
    truncated = tmp_path / "truncated.pdf"
    truncated.write_bytes((DATA / "sample.pdf").read_bytes()[:400])
    for path in (garbage, truncated):
        f = failure(path)
        assert f.source == path.resolve().as_posix()
        assert f.reason.startswith("malformed PDF")
        assert "pdfium" in f.reason


def test_encrypted_pdf_fails_with_advice(tmp_path: Path) -> None:
    writer = pypdf.PdfWriter(clone_from=DATA / "sample.pdf")
    writer.encrypt(user_password="secret", owner_password="owner", algorithm="AES-128")
    buffer = io.BytesIO()
    writer.write(buffer)
    path = tmp_path / "locked.pdf"
    path.write_bytes(buffer.getvalue())
    assert "encrypted" in failure(path).reason


def test_jsonl_good_lines_load_and_bad_lines_name_file_and_line() -> None:
    path = DATA / "records.jsonl"
    resolved = path.resolve().as_posix()
    docs, failures = split(list(load_path(path)))

    assert [d.key for d in docs] == ["doc-1", "2", f"{resolved}#L9", "doc-10"]
    first = docs[0]
    assert first.title == "First"
    assert first.text == "The first record."
    assert first.access == ["team:research"]
    assert first.metadata == {"lang": "en", "tags": ["a", "b"]}
    assert first.source == f"{resolved}:1"
    assert docs[2].metadata == {"nested": {"k": [1, 2, {"x": None}]}}
    assert docs[3].title is None
    assert docs[3].text == "Last good record\u2028with a line separator inside."

    assert {f.source for f in failures} == {resolved}
    reasons = {f.line: f.reason for f in failures}
    assert sorted(reasons) == [4, 5, 6, 7, 8, 10]  # line 3 is blank and ignored
    assert "malformed JSON" in reasons[4]
    assert "array" in reasons[5]
    assert "no 'text' field" in reasons[6]
    assert "empty" in reasons[7]
    assert "must be a string" in reasons[8]
    assert "list of strings" in reasons[10]
    assert str(failures[0]) == f"{resolved}:4: {reasons[4]}"


def test_jsonl_a_line_python_cannot_read_is_reported_and_the_next_lines_load(tmp_path: Path) -> None:
    """Valid JSON that json.loads refuses with a plain ValueError (an integer of over 4,300 digits)
    was one failure for the whole file, and the lines after it were lost."""
    path = tmp_path / "big.jsonl"
    lines = ['{"id": "a", "text": "one"}', '{"id": "b", "text": "two", "n": ' + "9" * 5000 + "}",
             '{"id": "c", "text": "three"}', '{"id": "d", "text": "four"}']
    path.write_text("\n".join(lines), encoding="utf-8")
    docs, failures = split(list(load_path(path)))
    assert [d.key for d in docs] == ["a", "c", "d"]
    assert [(f.line, "unreadable JSON" in f.reason) for f in failures] == [(2, True)]
    array = tmp_path / "big.json"
    array.write_text('[{"id": "a", "text": "one", "n": ' + "9" * 5000 + "}]", encoding="utf-8")
    docs, failures = split(list(load_path(array)))
    assert docs == [] and len(failures) == 1 and "unreadable JSON" in failures[0].reason


def test_jsonl_raw_line_separator_inside_a_string(tmp_path: Path) -> None:
    path = tmp_path / "raw.ndjson"
    text = "before\u2028after\u2029end\x85x"
    path.write_text(json.dumps({"id": "r", "text": text}, ensure_ascii=False) + "\n", encoding="utf-8")
    assert doc(path).text == text


def test_jsonl_duplicate_ids_are_reported(tmp_path: Path) -> None:
    path = tmp_path / "dup.jsonl"
    lines = [{"id": "a", "text": "one"}, {"id": "a", "text": "two"}, {"id": "b", "text": "three"}]
    path.write_text("\n".join(json.dumps(r) for r in lines), encoding="utf-8")
    docs, failures = split(list(load_path(path)))
    assert [d.text for d in docs] == ["one", "three"]
    assert failures[0].line == 2 and "duplicate" in failures[0].reason and "line 1" in failures[0].reason


def test_jsonl_custom_field_names(tmp_path: Path) -> None:
    path = tmp_path / "custom.jsonl"
    path.write_text(
        json.dumps({"uid": "u1", "name": "Custom", "body": "Body text.", "acl": ["x"], "text": "kept as metadata"}),
        encoding="utf-8",
    )
    d = doc(path, text_field="body", title_field="name", id_field="uid", access_field="acl")
    assert (d.key, d.title, d.text, d.access) == ("u1", "Custom", "Body text.", ["x"])
    assert d.metadata == {"text": "kept as metadata"}


def test_json_array_object_and_bad_top_level(tmp_path: Path) -> None:
    path = DATA / "records.json"
    resolved = path.resolve().as_posix()
    docs, failures = split(list(load_path(path)))
    assert [d.key for d in docs] == ["json-1", f"{resolved}#1"]
    assert docs[0].metadata == {"year": 2024}
    assert [f.reason.split(":")[0] for f in failures] == ["record 2", "record 3"]

    single = tmp_path / "single.json"
    single.write_text('{"title": "Solo", "text": "Just one."}', encoding="utf-8")
    assert doc(single).key == single.resolve().as_posix()

    scalar = tmp_path / "scalar.json"
    scalar.write_text("42", encoding="utf-8")
    assert "object or an array" in failure(scalar).reason

    broken = tmp_path / "broken.json"
    broken.write_text('[\n  {"text": "a"},\n  {"text": \n]', encoding="utf-8")
    f = failure(broken)
    assert f.line == 4 and "malformed JSON" in f.reason


# --- bad files --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "content", "reason"),
    [
        ("empty.txt", b"", "empty file"),
        ("spaces.md", b"  \n\t\n", "empty file"),
        ("empty.pdf", b"", "empty file"),
        ("empty.jsonl", b"\n\n", "empty file"),
        ("nul.txt", b"text\x00with a NUL", "binary"),
        ("latin1.txt", "caf\u00e9".encode("latin-1"), "not valid UTF-8"),
        ("undeclared.html", "<p>caf\u00e9</p>".encode("latin-1"), "not valid UTF-8"),
        ("lying.html", b'<meta charset="shift_jis"><p>\x81\xff</p>', "neither valid UTF-8 nor valid shift_jis, the charset the page declares"),
        ("codec.html", b'<meta charset="base64"><p>caf\xe9</p>', "not valid UTF-8"),  # a codec, not a charset
        ("ebcdic.html", b'<meta charset="cp037"><p>caf\xe9</p>', "not valid UTF-8"),  # would read ASCII as other letters
        ("undefined.html", b'<meta charset="undefined"><p>caf\xe9</p>', "not valid UTF-8"),
        ("image.html", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "binary"),
        ("notepad.txt", "Unicode text\r\n".encode("utf-16"), "UTF-16 text (it starts with a UTF-16 byte-order mark); re-save"),
        ("wide.md", "# Wide\n".encode("utf-32"), "UTF-32 text"),
        ("export.txt", "Unicode text\r\n".encode("utf-16-le"), "UTF-16 text without a byte-order mark"),  # was "binary file"
        ("export.md", "# Unicode\n".encode("utf-16-be"), "UTF-16 text without a byte-order mark"),
        ("blob.txt", b"text\x00\x00\x00with NULs", "binary file (contains NUL bytes)"),
    ],
)
def test_bad_files_are_failures(tmp_path: Path, name: str, content: bytes, reason: str) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    f = failure(path)
    assert reason in f.reason
    assert f.source == path.resolve().as_posix()


@pytest.mark.parametrize(
    ("meta", "encoding"),
    [
        ('<meta charset="windows-1252">', "cp1252"),
        ("<META HTTP-EQUIV='Content-Type' CONTENT='text/html; charset=ISO-8859-1'>", "cp1252"),  # read as browsers do
        ('<meta http-equiv="content-type" content="text/html;charset=shift_jis">', "shift_jis"),
        ('<meta charset="latin1">', "latin-1"),  # bytes 0x80-0x9f as browsers read them: windows-1252, C1 where it has none
    ],
)
def test_an_html_page_in_the_charset_it_declares_is_read(tmp_path: Path, meta: str, encoding: str) -> None:
    """Pages saved by older tools are often in the charset their <meta> names; they were refused as
    "not valid UTF-8"."""
    body = {"cp1252": "Caf\u00e9 “curly” quotes – and a dash.", "latin-1": "Caf\u00e9\x81 at 100 \u00b0C.", "shift_jis": "東京の天気は晴れです。"}[encoding]
    path = tmp_path / "old-page.html"
    path.write_bytes(f"<html><head>{meta}<title>Old page</title></head><body><article><p>{body}</p></article></body></html>".encode(encoding))
    d = doc(path)
    assert d.text == body.replace("\x81", "") and d.title == "Old page"  # the page's text drops control characters


def test_bom_is_dropped_and_crlf_normalised(tmp_path: Path) -> None:
    path = tmp_path / "bom.txt"
    path.write_bytes(b"\xef\xbb\xbfFirst line\r\nSecond line\r\n")
    assert doc(path).text == "First line\nSecond line\n"


def test_unreadable_file(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("running as root: chmod 000 does not stop root reading (symlink-loop test covers OSError)")
    path = tmp_path / "secret.txt"
    path.write_text("secret", encoding="utf-8")
    path.chmod(0)
    try:
        assert "permission denied" in failure(path).reason
    finally:
        path.chmod(0o600)


def test_symlink_loop_and_broken_symlink_are_failures(tmp_path: Path) -> None:
    loop = tmp_path / "loop.txt"
    loop.symlink_to(loop)
    broken = tmp_path / "broken.md"
    broken.symlink_to(tmp_path / "missing.md")
    assert "symbolic links" in failure(loop).reason
    assert failure(broken).reason == "no such file or directory"

    # Inside a folder walk they are reported too, and the good file still loads.
    (tmp_path / "good.txt").write_text("good", encoding="utf-8")
    docs, failures = split(list(load_path(tmp_path)))
    assert [d.text for d in docs] == ["good"]
    assert sorted(Path(f.source).name for f in failures) == ["broken.md", "loop.txt"]


def test_unsupported_suffix_given_explicitly(tmp_path: Path) -> None:
    path = tmp_path / "data.csv"
    path.write_text("a,b\n", encoding="utf-8")
    reason = failure(path).reason
    assert "unsupported file type '.csv'" in reason and ".jsonl" in reason


# --- iter_sources -----------------------------------------------------------------------------


def test_iter_sources_never_raises_and_goes_on(tmp_path: Path) -> None:
    good = tmp_path / "good.txt"
    good.write_text("Good text.", encoding="utf-8")
    passthrough = from_text("Already a document.", key="k1")
    inputs = [
        tmp_path / "missing.txt",
        "",
        42,
        b"raw bytes",
        {"text": "a dict"},
        passthrough,
        str(good),
    ]
    results = list(iter_sources(inputs))
    assert len(results) == 7
    missing, empty, number, raw, mapping, passed, loaded = results
    assert isinstance(missing, LoadFailure) and missing.reason == "no such file or directory"
    assert missing.source == (tmp_path / "missing.txt").as_posix()
    assert isinstance(empty, LoadFailure) and "empty path" in empty.reason
    assert isinstance(number, LoadFailure) and "builtins.int" in number.reason
    assert isinstance(raw, LoadFailure) and "builtins.bytes" in raw.reason
    assert isinstance(mapping, LoadFailure) and "builtins.dict" in mapping.reason
    assert passed is passthrough
    assert isinstance(loaded, SourceDocument) and loaded.text == "Good text."


def test_invalid_paths_are_failures() -> None:
    class BytesPath(os.PathLike):
        def __fspath__(self) -> bytes:  # type: ignore[override]
            return b"/tmp"

    results = list(iter_sources(["bad\x00name.txt", BytesPath()]))
    assert all(isinstance(r, LoadFailure) and r.reason.startswith("invalid path") for r in results)
    assert len(results) == 2


def test_iter_sources_accepts_a_single_path() -> None:
    docs, failures = split(list(iter_sources(str(DOCS / "notes.txt"))))
    assert len(docs) == 1 and not failures


def test_invalid_options_raise_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="glob"):
        list(iter_sources([DOCS], glob=""))
    with pytest.raises(ConfigurationError, match="text_field"):
        list(load_path(DOCS, text_field=""))


# --- folders ----------------------------------------------------------------------------------


def relative_keys(results: list[SourceDocument | LoadFailure]) -> list[str]:
    docs, failures = split(results)
    assert not failures, failures
    return [Path(d.key).relative_to(DOCS.resolve()).as_posix() for d in docs]


def test_folder_is_recursive_sorted_and_skips_hidden_and_unsupported() -> None:
    assert relative_keys(list(load_path(DOCS))) == [
        "guide.md",
        "notes.txt",
        "page.html",
        "sub/nested.txt",
        "sub/server.log",
    ]


@pytest.mark.parametrize(
    ("glob", "expected"),
    [
        ("*.txt", ["notes.txt"]),
        ("**/*.txt", ["notes.txt", "sub/nested.txt"]),
        ("sub/*", ["sub/nested.txt", "sub/server.log"]),
        ("**/n*", ["notes.txt", "sub/nested.txt"]),
        ("**", ["guide.md", "notes.txt", "page.html", "sub/nested.txt", "sub/server.log"]),
        ("*.[mh]*", ["guide.md", "page.html"]),
        ("**/*.pdf", []),
    ],
)
def test_folder_glob(glob: str, expected: list[str]) -> None:
    assert relative_keys(list(load_path(DOCS, glob=glob))) == expected


def test_a_glob_of_many_double_stars_matches_a_deep_folder_in_linear_time(tmp_path: Path) -> None:
    """Each "**" was tried at each split of the path in turn: 20 of them against a file 30 folders
    deep never finished. Walked in a child process, so a regression fails here instead of hanging."""
    deep = tmp_path.joinpath(*[f"d{i}" for i in range(30)])
    deep.mkdir(parents=True)
    (deep / "notes.md").write_text("# Deep\n\nDeep notes.", encoding="utf-8")
    (deep / "other.txt").write_text("Other notes.", encoding="utf-8")
    program = textwrap.dedent(f"""
        import json
        from surreal_kgrag.loaders import load_path
        for glob in ("**/" * 20 + "*.md", "**/" * 20 + "d29/*.txt", "**/" * 20 + "nowhere/*.md"):
            print(json.dumps(sorted(d.metadata["file_name"] for d in load_path({str(tmp_path)!r}, glob=glob))))
    """)
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120, check=True)
    assert [json.loads(line) for line in done.stdout.splitlines()] == [["notes.md"], ["other.txt"], []]


def test_folder_skips_directories_named_like_files(tmp_path: Path) -> None:
    (tmp_path / "folder.txt").mkdir()
    (tmp_path / "folder.txt" / "inner.txt").write_text("inner", encoding="utf-8")
    docs, failures = split(list(load_path(tmp_path)))
    assert [d.text for d in docs] == ["inner"] and not failures


def test_explicit_hidden_file_is_loaded() -> None:
    assert doc(DOCS / ".hidden.txt").text.startswith("hidden file")


def test_keys_are_stable_across_calls_and_working_directories(monkeypatch: pytest.MonkeyPatch) -> None:
    first = [(d.key, d.content_hash) for d in split(list(load_path(DATA)))[0]]
    monkeypatch.chdir(DATA)
    second = [(d.key, d.content_hash) for d in split(list(load_path(".")))[0]]
    monkeypatch.chdir(DOCS / "sub")
    third = [(d.key, d.content_hash) for d in split(list(load_path("../..")))[0]]
    assert first == second == third
    assert len(first) == 12


# --- framework documents and raw text ---------------------------------------------------------


def test_from_text_defaults_and_errors() -> None:
    a = from_text("Some text.", title="T", metadata={"k": 1}, access=["team"])
    assert a.key == from_text("Some text.").key
    assert a.key.startswith("text:") and len(a.key) == len("text:") + 16
    assert (a.title, a.source, a.metadata, a.access) == ("T", "text", {"k": 1}, ["team"])
    assert from_text("x", key="mine", source="api").key == "mine"
    with pytest.raises(LoaderError, match="empty"):
        from_text("  \n")
    with pytest.raises(LoaderError, match="list of strings"):
        from_text("x", access="team")  # type: ignore[arg-type]


def test_langchain_documents() -> None:
    from langchain_core.documents import Document

    with_id = Document(
        id="lc-1",
        page_content="LangChain text.",
        metadata={"source": "https://example.com/a", "title": "LC", "access": ["g1"], "page": 3},
    )
    d = from_langchain(with_id)
    assert (d.key, d.text, d.title, d.source, d.access) == (
        "lc-1",
        "LangChain text.",
        "LC",
        "https://example.com/a",
        ["g1"],
    )
    assert d.metadata == {"source": "https://example.com/a", "title": "LC", "page": 3}
    assert with_id.metadata["access"] == ["g1"]  # the caller's document is not modified

    no_id = Document(page_content="No id here.")
    assert from_langchain(no_id).key == from_langchain(Document(page_content="No id here.")).key
    assert from_langchain(no_id).key.startswith("langchain:")

    results = list(iter_sources([with_id, Document(page_content="   ", id="blank")]))
    assert isinstance(results[0], SourceDocument) and results[0].key == "lc-1"
    assert isinstance(results[1], LoadFailure) and "empty" in results[1].reason and "blank" in results[1].source


def test_failures_of_framework_documents_without_an_id_name_their_place(minilm) -> None:
    """A batch of LangChain documents without ids (how most loaders make them): a failure said only
    "<LangChain document>" or "langchain", whichever of fifty it was."""
    from langchain_core.documents import Document

    docs = [Document(page_content=f"Note {i} about Lisbon.") for i in range(50)]
    docs[17] = Document(page_content="  ")
    docs[31] = Document(page_content="Note 31 about Lisbon.", metadata={"blob": 2**70})
    results = list(iter_sources([*docs, 42]))
    failures = [r for r in results if isinstance(r, LoadFailure)]
    assert [f.source for f in failures] == ["<LangChain document #17>", "<builtins.int #50>"]
    with SurrealStore("mem://") as store:
        summary = Ingestor(store, embedder=minilm, extractor=CallableConceptExtractor(lambda text: ["lisbon"])).ingest(docs)
    unstorable = from_langchain(docs[31]).key
    assert summary.added == 48 and [f.source for f in summary.failures] == ["<LangChain document #17>", unstorable]
    assert unstorable.startswith("langchain:") and str(2**70) in summary.failures[1].reason


def test_llama_index_documents_and_nodes() -> None:
    from llama_index.core import Document
    from llama_index.core.schema import TextNode

    document = Document(text="Llama text.", doc_id="li-1", metadata={"file_path": "/data/a.txt", "title": "LI"})
    d = from_llama_index(document)
    assert (d.key, d.text, d.title, d.source) == ("li-1", "Llama text.", "LI", "/data/a.txt")
    assert d.metadata == {"file_path": "/data/a.txt", "title": "LI"}

    node = TextNode(text="Node text.", id_="node-7", metadata={"access": ["a", "b"]})
    results = list(iter_sources([document, node]))
    assert all(isinstance(r, SourceDocument) for r in results)
    assert results[1].key == "node-7" and results[1].access == ["a", "b"] and results[1].metadata == {}


def test_frameworks_are_not_imported_at_module_import() -> None:
    code = (
        "import sys, surreal_kgrag.loaders; "
        "heavy = [m for m in ('langchain_core', 'llama_index', 'trafilatura', 'pypdf') if m in sys.modules]; "
        "assert not heavy, heavy"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# --- content passes through verbatim ----------------------------------------------------------

HOSTILE = [
    "He said \"hi\" and 'bye' `tick`",
    "x'; REMOVE TABLE chunk; --",
    "$param $auth $session {{ template }} ${env}",
    "Unicode: naïve café Ω 漢字 عربى \u200b zero-width",
    "Emoji: 🦄🔥👩‍👩‍👧 and a surrogate-free 𝔘𝔫𝔦",
    "<script>alert(1)</script> & &amp; \\n backslash \\",
]


def test_hostile_strings_pass_through_verbatim(tmp_path: Path) -> None:
    long_title = "T" * 5000 + " ; REMOVE TABLE document"
    records = [
        {"id": f"h{i}", "title": s if i else long_title, "text": s, "note": s, "access": [s]}
        for i, s in enumerate(HOSTILE)
    ]
    path = tmp_path / "hostile.jsonl"
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in records), encoding="utf-8")
    docs, failures = split(list(load_path(path)))
    assert not failures
    for record, d in zip(records, docs, strict=True):
        assert (d.text, d.title, d.metadata["note"], d.access) == (
            record["text"],
            record["title"],
            record["note"],
            record["access"],
        )

    text = "\n".join(HOSTILE)
    txt = tmp_path / "hostile $name; REMOVE TABLE x 🦄.txt"
    txt.write_text(text, encoding="utf-8")
    d = doc(txt)
    assert d.text == text and d.title == "H" + txt.stem[1:]  # verbatim but for the readable capital
    assert from_text(text, title=long_title).title == long_title


@settings(max_examples=60, deadline=None)
@given(
    records=st.lists(
        st.fixed_dictionaries(
            {"id": st.text(min_size=1), "title": st.text(min_size=1), "text": st.text().filter(str.strip)},
            optional={"extra": st.text(), "access": st.lists(st.text())},
        ),
        min_size=1,
        max_size=5,
        unique_by=lambda r: r["id"],
    ),
    ascii_only=st.booleans(),
)
def test_any_record_strings_round_trip(records: list[dict], ascii_only: bool) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "records.jsonl"
        path.write_text("\n".join(json.dumps(r, ensure_ascii=ascii_only) for r in records), encoding="utf-8")
        docs, failures = split(list(load_path(path)))
    assert not failures
    assert [(d.key, d.title, d.text, d.access) for d in docs] == [
        (r["id"], r["title"], r["text"], r.get("access", [])) for r in records
    ]
    assert [d.metadata for d in docs] == [{"extra": r["extra"]} if "extra" in r else {} for r in records]


# --- the bench corpus -------------------------------------------------------------------------


def test_bench_corpus_loads_every_record_in_order() -> None:
    if not BENCH_CORPUS.exists():
        pytest.skip(f"bench corpus not found at {BENCH_CORPUS}")
    with BENCH_CORPUS.open(encoding="utf-8") as handle:
        expected_ids = [json.loads(line)["id"] for line in handle if line.strip()]
    docs, failures = split(list(load_path(BENCH_CORPUS)))
    assert not failures
    assert len(docs) == 1971
    assert [d.key for d in docs] == expected_ids
    assert all(d.title and d.text for d in docs)


def test_supported_suffixes_map_to_content_types() -> None:
    assert SUPPORTED_SUFFIXES[".md"] == "text/markdown"
    assert SUPPORTED_SUFFIXES[".pdf"] == "application/pdf"
    assert all(suffix.startswith(".") and suffix == suffix.lower() for suffix in SUPPORTED_SUFFIXES)


# --- symlinks, size cap, long files -------------------------------------------------------------


def test_a_symlink_leaving_the_folder_is_not_followed_unless_asked(tmp_path: Path) -> None:
    secret = tmp_path / "outside" / "credentials.txt"
    secret.parent.mkdir()
    secret.write_text("password=hunter2", encoding="utf-8")
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "real.md").write_text("# Real\n\nA real note.", encoding="utf-8")
    (folder / "notes.txt").symlink_to(secret)
    (folder / "alias.md").symlink_to(folder / "real.md")  # stays inside: read
    docs, failures = split(list(load_path(folder)))
    assert sorted(Path(d.key).name for d in docs) == ["real.md", "real.md"]
    assert [Path(f.source).name for f in failures] == ["notes.txt"]
    assert "outside the folder" in failures[0].reason and "hunter2" not in str(docs)
    docs, failures = split(list(load_path(folder, follow_symlinks=True)))
    assert failures == [] and "password=hunter2" in [d.text for d in docs]
    # A file named explicitly is the caller's choice: it is read.
    assert doc(folder / "notes.txt").text == "password=hunter2"


def test_a_symlinked_folder_is_reported_or_followed_and_a_link_back_up_is_no_loop(tmp_path: Path) -> None:
    """A symlinked folder was skipped without a word, even with follow_symlinks=True."""
    shared = tmp_path / "shared"
    (shared / "deep").mkdir(parents=True)
    (shared / "policy.md").write_text("# Policy\n\nThe shared policy.", encoding="utf-8")
    (shared / "deep" / "terms.txt").write_text("The shared terms.", encoding="utf-8")
    (shared / "deep" / "up").symlink_to(shared)  # a link back up: walking it would never end
    folder = tmp_path / "docs"
    (folder / "own").mkdir(parents=True)
    (folder / "own" / "note.txt").write_text("Our own note.", encoding="utf-8")
    (folder / "shared").symlink_to(shared)  # leaves the folder
    for name in ("again", "more", "still"):  # stay inside: their files are read where they are
        (folder / name).symlink_to(folder / "own")
    docs, failures = split(list(load_path(folder)))
    assert [d.text for d in docs] == ["Our own note."]
    assert [(Path(f.source).name, "folder outside" in f.reason) for f in failures] == [("shared", True)]
    # a glob that could match nothing in the linked folder has nothing to report about it
    assert split(list(load_path(folder, glob="own/*.txt"))) == (docs, [])
    docs, failures = split(list(load_path(folder, follow_symlinks=True)))
    assert failures == []  # each real folder read once, through whichever name the walk met first
    assert sorted(d.text for d in docs) == ["# Policy\n\nThe shared policy.", "Our own note.", "The shared terms."]


def test_a_file_over_the_size_cap_is_reported_and_not_read(tmp_path: Path) -> None:
    path = tmp_path / "big.txt"
    path.write_text("word " * 1000, encoding="utf-8")
    reason = failure(path, max_file_bytes=4_000).reason
    assert "5,000 bytes" in reason and "max_file_bytes=4,000" in reason
    assert doc(path, max_file_bytes=5_000).text.startswith("word")


def test_files_read_in_pieces_may_be_larger_than_the_size_cap(tmp_path: Path) -> None:
    """JSON Lines and long text hold a line or a part at a time, so a corpus larger than the cap loads."""
    lines = tmp_path / "corpus.jsonl"
    lines.write_text("".join(json.dumps({"id": f"r{i}", "text": f"record {i} " * 20}) + "\n" for i in range(200)), encoding="utf-8")
    text = tmp_path / "book.txt"
    text.write_text("A sentence of the book. " * 2_000, encoding="utf-8")
    docs, failures = split(list(iter_sources([lines, text], max_file_bytes=10_000, part_chars=5_000)))
    assert failures == [] and lines.stat().st_size > 10_000 and text.stat().st_size > 10_000
    assert sorted(d.key for d in docs if "corpus.jsonl" in d.source) == sorted(f"r{i}" for i in range(200))
    assert "".join(d.text for d in docs if d.source.endswith("book.txt")).count("A sentence of the book.") >= 1_900


def text_pdf(path: Path, pages: list[str]) -> Path:
    """A PDF with one page of Helvetica text (lines split at "\\n") per string, its content
    streams Flate-compressed as real PDFs' are."""
    writer = pypdf.PdfWriter()
    font = writer._add_object(
        DictionaryObject({NameObject("/Type"): NameObject("/Font"), NameObject("/Subtype"): NameObject("/Type1"),
                          NameObject("/BaseFont"): NameObject("/Helvetica")})
    )
    for text in pages:
        page = writer.add_blank_page(612, 792)
        page[NameObject("/Resources")] = DictionaryObject({NameObject("/Font"): DictionaryObject({NameObject("/F1"): font})})
        stream = DecodedStreamObject()
        stream.set_data(("BT /F1 12 Tf 72 720 Td " + "".join(f"({line}) Tj 0 -14 Td " for line in text.split("\n")) + "ET").encode())
        page[NameObject("/Contents")] = writer._add_object(stream.flate_encode())
    writer.write(path)
    return path


def test_inputs_over_each_cap_are_reported_by_name_and_the_rest_of_the_batch_loads(tmp_path: Path) -> None:
    folder = tmp_path / "corpus"
    folder.mkdir()
    (folder / "notes.txt").write_text("Lisbon lies on the river Tagus.", encoding="utf-8")
    (folder / "guide.md").write_text("# Harbours\n\nPorto lies on the Douro.", encoding="utf-8")
    big = folder / "dump.json"
    big.write_text(json.dumps([{"id": str(i), "text": f"Record {i} about ships."} for i in range(2_000)]), encoding="utf-8")
    lines = [json.dumps({"id": "a", "text": "short"}), json.dumps({"id": "b", "text": "x" * 5_000}), json.dumps({"id": "c", "text": "after"})]
    (folder / "records.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    text_pdf(folder / "report.pdf", [f"Report page {n}: {n * 7} ships entered the harbour of {city}." for n, city in enumerate(["Lisbon", "Porto"], 1)])
    knots = ["bowline", "clove hitch", "reef knot", "sheet bend", "figure eight", "half hitch", "cleat hitch"]
    long = text_pdf(folder / "manual.pdf", [f"The {knot} ties a line to a post." for knot in knots])
    shown = {p.name: p.resolve().as_posix() for p in folder.iterdir()}
    assert big.stat().st_size > 40_000
    docs, failures = split(list(iter_sources([folder], max_file_bytes=40_000, max_line_bytes=1_000, max_pdf_pages=5)))
    assert sorted(Path(d.source).name for d in docs) == ["guide.md", "notes.txt", "records.jsonl:1", "records.jsonl:3", "report.pdf"]
    assert sorted((Path(f.source).name, f.line) for f in failures) == [("dump.json", None), ("manual.pdf", None), ("records.jsonl", 2)]
    by_name = {Path(f.source).name: f for f in failures}
    assert by_name["dump.json"].source == shown["dump.json"]
    assert f"{big.stat().st_size:,} bytes" in by_name["dump.json"].reason and "max_file_bytes=40,000" in by_name["dump.json"].reason
    assert by_name["records.jsonl"].reason.startswith(f"line has {len(lines[1]):,} bytes, more than max_line_bytes=1,000")
    assert by_name["manual.pdf"].source == long.resolve().as_posix()
    assert "7 pages, more than max_pdf_pages=5" in by_name["manual.pdf"].reason
    assert all("raise max_" in f.reason for f in failures)
    # With the caps raised, every file loads whole.
    docs, failures = split(list(iter_sources([folder], max_file_bytes=200_000, max_line_bytes=10_000, max_pdf_pages=7)))
    assert failures == [] and len(docs) == 2 + 2_000 + 3 + 2


def test_a_pdf_over_the_page_cap_is_refused_before_any_text_is_read(tmp_path: Path) -> None:
    ports = ["Lisbon", "Porto", "Cadiz", "Genoa", "Naples", "Venice", "Marseille", "Bristol", "Antwerp", "Bergen", "Riga", "Danzig"]
    path = text_pdf(tmp_path / "book.pdf", ["\n".join([f"The voyage to {port} took many weeks."] * 5) for port in ports])
    assert len(doc(path).layout.pages) == 12  # type: ignore[union-attr]
    assert "max_pdf_chars=1,000" in failure(path, max_pdf_chars=1_000).reason
    # The page count refuses it before any text is counted.
    f = failure(path, max_pdf_pages=10, max_pdf_chars=1_000)
    assert f.source == path.resolve().as_posix()
    assert f.reason == "PDF has 12 pages, more than max_pdf_pages=10; not read (raise max_pdf_pages to load it)"


def test_a_small_compressed_pdf_whose_text_expands_past_max_pdf_chars_is_refused(tmp_path: Path) -> None:
    line = "All work and no play makes a dull ledger."
    path = text_pdf(tmp_path / "bomb.pdf", ["A short first page.", "\n".join([line] * 5_000)])
    assert path.stat().st_size < 4_000  # 200,000 characters of text compress to a few KB
    f = failure(path, max_pdf_chars=100_000)
    assert f.source == path.resolve().as_posix()
    assert "more than max_pdf_chars=100,000 characters of text (passed at page 2 of 2)" in f.reason
    assert "raise max_pdf_chars" in f.reason
    assert len(doc(path, max_pdf_chars=300_000).text) > 200_000


def test_a_pdf_whose_every_line_recurs_digits_aside_keeps_its_text(tmp_path: Path) -> None:
    """One line a page, the same but for its number: every line was a running header, all were
    dropped, and the PDF was refused as having no text ("scanned images?")."""
    steps = [f"Step {n} of 6: tighten bolt {n} of the hoist." for n in range(1, 7)]
    path = text_pdf(tmp_path / "assembly.pdf", steps)
    assert doc(path).text == "\n\n".join(steps)
    folio = [f"Harbour report, page {n}\nThe pier {city} takes ships of {n * 3} metres." for n, city in enumerate("ABCDE", 1)]
    assert "Harbour report" not in doc(text_pdf(tmp_path / "report.pdf", folio)).text  # furniture beside text still goes


def test_a_jsonl_line_over_max_line_bytes_is_skipped_unheld_and_the_next_lines_load(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import surreal_kgrag.loaders.records as records

    monkeypatch.setattr(records, "_SKIP_BLOCK", 100)  # the long lines are skipped over many reads
    long = json.dumps({"id": "long", "text": "y" * 3_000})
    path = tmp_path / "lines.jsonl"
    path.write_bytes(
        b"\n".join([json.dumps({"id": "a", "text": "one"}).encode(), long.encode(), b"", json.dumps({"id": "b", "text": "two"}).encode(), long.encode()])
    )  # the last long line has no line end
    results = list(load_path(path, max_line_bytes=1_000))
    assert [(r.key if isinstance(r, SourceDocument) else r.line) for r in results] == ["a", 2, "b", 5]
    assert all(f.reason.startswith(f"line has {len(long):,} bytes, more than max_line_bytes=1,000") for f in results if isinstance(f, LoadFailure))
    # A line of exactly the cap is read, with or without its line end.
    exact = json.dumps({"id": "x", "text": "z" * 100})
    path.write_text(exact + "\n" + exact.replace('"x"', '"w"'), encoding="utf-8")
    assert [d.key for d in load_path(path, max_line_bytes=len(exact))] == ["x", "w"]


def test_a_fifo_named_like_a_document_is_reported_not_read(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.txt"
    os.mkfifo(fifo)  # reading it would wait for a writer forever; /dev/zero would never end
    (tmp_path / "notes.txt").write_text("Lisbon lies on the river Tagus.", encoding="utf-8")
    docs, failures = split(list(iter_sources([fifo, tmp_path / "notes.txt"])))
    assert [Path(d.source).name for d in docs] == ["notes.txt"]
    assert [(Path(f.source).name, f.reason) for f in failures] == [("pipe.txt", "not a regular file (a device, FIFO or socket); not read")]


def test_a_text_file_that_grows_past_the_size_cap_while_it_is_read_is_a_failure(tmp_path: Path) -> None:
    path = tmp_path / "live.log"
    path.write_text("A line the server wrote.\n" * 400, encoding="utf-8")
    results = load_path(path, part_chars=2_000, max_file_bytes=20_000)
    first = next(results)  # the first reading checked the file; the second one has begun
    with path.open("a", encoding="utf-8") as log:
        log.write("Another line.\n" * 5_000)
    rest = list(results)
    assert isinstance(first, SourceDocument) and isinstance(rest[-1], LoadFailure)
    assert "grew past max_file_bytes=20,000 while it was read" in rest[-1].reason


def test_a_file_that_grew_since_its_size_was_checked_is_read_up_to_the_cap() -> None:
    from surreal_kgrag.loaders.files import _read_at_most

    assert _read_at_most(io.BytesIO(b"x" * 50), 10, 100) == b"x" * 50  # grew, within the cap: read whole
    assert _read_at_most(io.BytesIO(b"x" * 200), 10, 100) is None
    assert _read_at_most(io.BytesIO(b"x" * 10), 10, 100) == b"x" * 10


def test_loader_caps_are_bounded() -> None:
    bads = ({"max_pdf_pages": 0}, {"max_file_bytes": 2 << 40}, {"max_line_bytes": 0}, {"max_pdf_chars": 10}, {"max_pdf_memory": 1 << 20}, {"pdf_timeout": 0})
    for bad in bads:
        with pytest.raises(ConfigurationError, match=next(iter(bad))):
            list(iter_sources([DOCS], **bad))
    # The highest caps read small files as usual (nothing is allocated up to the cap).
    highest = {"max_file_bytes": 1 << 40, "max_line_bytes": 1 << 32, "max_pdf_pages": 1_000_000, "max_pdf_chars": 1 << 31}
    highest |= {"max_pdf_memory": 1 << 40, "pdf_timeout": 86_400}
    assert doc(DOCS / "notes.txt", **highest).text and doc(DATA / "sample.pdf", **highest).text
    assert split(list(load_path(DATA / "records.jsonl", **highest)))[0]


def test_a_long_text_file_is_read_in_parts_that_add_up_to_the_file(tmp_path: Path) -> None:
    paragraphs = [f"Paragraph {i} about the harbour of Lisbon and ship number {i}." for i in range(40_000)]
    text = "\r\n\r\n".join(paragraphs)  # CRLF, so a block may end between "\r" and "\n"
    path = tmp_path / "book.txt"
    path.write_bytes(text.encode("utf-8"))
    assert len(text) > 2_500_000  # more than two 1 MB read blocks
    results = list(load_path(path, part_chars=400_000))
    parts = [r for r in results if isinstance(r, SourceDocument)]
    assert len(parts) == len(results) >= 6
    assert "".join(p.text for p in parts) == text.replace("\r\n", "\n")
    assert all(len(p.text) <= 400_000 for p in parts) and all(len(p.text) >= 200_000 for p in parts[:-1])
    assert all(p.text.endswith("\n\n") for p in parts[:-1])  # cut at paragraph breaks
    key = str(path.resolve())
    assert [p.key for p in parts] == [f"{key}#part-{i:05d}" for i in range(1, len(parts) + 1)]
    assert {p.source for p in parts} == {key} and {p.parts for p in parts} == {len(parts)}
    assert one(path, part_chars=3_000_000).key == key  # under the part size it is one document


def test_a_long_markdown_file_keeps_its_sections_tables_and_dates_in_every_part(tmp_path: Path) -> None:
    """A Markdown file read in parts lost its layout (each part was plain text: no sections, no
    tables chunked by rows) and the dates its name gives; a part's sections now continue the
    previous part's headings, as one read of the whole file would give them."""
    chapters = []
    for c in range(6):
        rows = "\n".join(f"| {c}.{r} | {r * 7} |" for r in range(8))
        sections = "\n\n".join(f"### Port {c}.{s}\n\n" + f"Ships of chapter {c} call at port {s}. " * 20 for s in range(3))
        chapters.append(f"## Chapter {c}\n\n{sections}\n\n| port | ships |\n|---|---|\n{rows}")
    text = "# Harbour guide\n\nAn opening paragraph.\n\n" + "\n\n".join(chapters) + "\n"
    path = tmp_path / "2024-05-01 harbour.md"
    path.write_text(text, encoding="utf-8")
    whole = one(path)
    parts = [d for d in load_path(path, part_chars=3_000) if isinstance(d, SourceDocument)]
    assert len(parts) > 4 and "".join(p.text for p in parts) == text
    assert all(p.metadata["date"] == whole.metadata["date"] == "2024-05-01" for p in parts)
    assert {p.title for p in parts} == {"Harbour guide"}
    offset = 0
    expected = {}
    for p in parts:  # every section of every part, at its place in the whole file
        assert p.layout is not None and p.layout.sections and p.layout.sections[0][0] == 0
        expected |= {offset + start: path for start, path in p.layout.sections}
        for start, body, end in p.layout.tables:
            assert p.text[start:body].startswith("| port | ships |") and p.text[end - 1] == "|"
        offset += len(p.text)
    assert whole.layout is not None and set(whole.layout.sections) <= set(expected.items())
    assert sum(len(p.layout.tables) for p in parts if p.layout) == 6


def test_markdown_cut_in_two_anywhere_gives_every_line_the_section_path_of_the_whole_file() -> None:
    """A part may start inside a code fence, whose "# comment" lines are no headings."""
    text = (
        "# Guide\n\nIntro.\n\n## Install\n\n```bash\n# comment one\n\npip install x\n# comment two\n```\n\n"
        "### Linux\n\nApt.\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n~~~\n## not a heading\n~~~\n\n## Use\n\n#### Deep\n\nRun it.\n"
    )
    starts = [0] + [i + 1 for i, c in enumerate(text) if c == "\n"]

    def path_at(sections: list[tuple[int, tuple[str, ...]]], offset: int) -> tuple[str, ...]:
        return max(((start, path) for start, path in sections if start <= offset), default=(0, ()))[1]

    whole = markdown_layout(text)
    for cut in starts[1:-1]:
        first, state = markdown_part_layout(text[:cut])
        second, _ = markdown_part_layout(text[cut:], state)
        combined = first.sections + [(cut + start, path) for start, path in second.sections]
        assert [path_at(combined, o) for o in starts] == [path_at(whole.sections, o) for o in starts], cut
        if not any(start < cut < end for start, _, end in whole.tables):  # a table cut in two is rows of prose
            assert first.tables + [(cut + a, cut + b, cut + c) for a, b, c in second.tables] == whole.tables, cut


def test_a_record_with_an_unstorable_value_is_a_failure_with_its_line(tmp_path: Path) -> None:
    path = tmp_path / "records.jsonl"
    path.write_text(
        json.dumps({"id": "a", "text": "fine"}) + "\n"
        + json.dumps({"id": "b", "text": "big", "n": 2**63}) + "\n"
        + '{"id": "c", "text": "lone \\udc80 surrogate"}\n',
        encoding="utf-8",
    )
    docs, failures = split(list(load_path(path)))
    assert [d.key for d in docs] == ["a"]
    assert [(f.line, "64-bit" in f.reason or "surrogate" in f.reason) for f in failures] == [(2, True), (3, True)]


def test_a_text_file_that_changes_between_its_two_readings_is_a_failure(tmp_path: Path) -> None:
    path = tmp_path / "growing.txt"
    path.write_text("A sentence about the harbour. " * 500, encoding="utf-8")
    results = load_path(path, part_chars=5_000)
    first = next(results)  # the first reading checked the file; the second one has begun
    path.write_bytes(b"\x00" * 20_000)
    rest = list(results)
    assert isinstance(first, SourceDocument) and first.key.endswith("#part-00001")
    assert isinstance(rest[-1], LoadFailure) and rest[-1].source == path.resolve().as_posix()
    assert "changed while it was read" in rest[-1].reason and "binary" in rest[-1].reason


# --- inputs nested too deep, values the database cannot hold -------------------------------------

DEEP = "[" * 5_000 + "]" * 5_000


def test_bad_inputs_in_a_folder_are_reported_and_every_good_document_and_line_is_ingested(tmp_path: Path, minilm) -> None:
    folder = tmp_path / "corpus"
    folder.mkdir()
    (folder / "good.txt").write_text("Lisbon lies on the river Tagus.", encoding="utf-8")
    (folder / "deep.json").write_text(DEEP, encoding="utf-8")
    (folder / "lines.jsonl").write_text(
        json.dumps({"id": "one", "text": "Warsaw is on the Vistula."}) + "\n"
        + '{"id": "two", "text": "Too deep.", "nested": ' + DEEP + "}\n"
        + json.dumps({"id": "three", "text": "Quito sits high in the Andes."}) + "\n",
        encoding="utf-8",
    )
    odd = SourceDocument(key="odd", text="Hanoi has many lakes.", source="odd.txt", metadata={"where": folder / "good.txt"})

    docs, failures = split(list(iter_sources([folder, odd])))
    assert [d.key for d in docs] == [(folder / "good.txt").resolve().as_posix(), "one", "three", "odd"]
    assert [(Path(f.source).name, f.line) for f in failures] == [("deep.json", None), ("lines.jsonl", 2)]
    assert all("nested too deeply" in f.reason for f in failures)

    with SurrealStore("mem://") as store:
        summary = Ingestor(store, embedder=minilm, extractor=CallableConceptExtractor(lambda text: [])).ingest([folder, odd])
    assert summary.added == 3
    reasons = {(Path(f.source).name, f.line): f.reason for f in summary.failures}
    assert set(reasons) == {("deep.json", None), ("lines.jsonl", 2), ("odd.txt", None)}
    assert "nested too deeply" in reasons["deep.json", None] and "nested too deeply" in reasons["lines.jsonl", 2]
    # Refused as it was loaded, naming the key and the type; not a write failure after the models ran.
    assert "['where']" in reasons["odd.txt", None] and "PosixPath" in reasons["odd.txt", None]
    assert "write failed" not in reasons["odd.txt", None]


@pytest.mark.parametrize(
    ("value", "named"),
    [
        (Path("/tmp/x"), f"type pathlib.{type(Path()).__name__},"),
        (object(), "type object,"),
        (dt.date(2024, 7, 1), "'2024-07-01'"),
        ({1: "one"}, "the key 1 (int)"),
        (json.loads("[" * 70 + "]" * 70), "more than 64 levels"),
    ],
)
def test_metadata_the_database_cannot_hold_is_named(value: Any, named: str) -> None:
    reason = find_unstorable({"metadata": {"where": value}})
    assert reason is not None and reason.startswith("record['metadata']['where']") and named in reason


def test_metadata_the_database_holds_passes() -> None:
    value = {
        "when": dt.datetime(2024, 7, 1, tzinfo=dt.timezone.utc),
        "amount": Decimal("1.50"),
        "uid": UUID(int=1),
        "raw": b"\x00\x01",
        "tags": {"a", "b"},
        "pair": (1, None),
        "deep": json.loads("[" * 60 + "]" * 60),
    }
    assert find_unstorable({"metadata": value}) is None


def test_a_documents_hash_does_not_depend_on_the_process():
    """A set of strings iterates in an order each process draws afresh (hash randomisation): its
    document must hash alike in every run, or it is written again on every ingest."""
    script = (
        "from surreal_kgrag import SourceDocument; "
        "print(SourceDocument(key='k', source='s', text='t', metadata={'tags': {'alpha', 'beta', 'gamma', 'delta'}}).content_hash)"
    )
    hashes = {
        subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, check=True, env={**os.environ, "PYTHONHASHSEED": seed}
        ).stdout
        for seed in ("1", "2", "3", "4")
    }
    assert len(hashes) == 1


def test_a_section_path_holds_at_most_max_section_depth_titles():
    """Headings nested deeper than MAX_SECTION_DEPTH (a PDF with a font size per heading) keep the
    outer titles and the deepest one: no chunk carries hundreds of titles."""
    from surreal_kgrag.loaders.layout import MAX_SECTION_DEPTH, Line, assemble

    lines = [Line(text=f"Heading {i}", heading=(i, 9)) for i in range(300)] + [Line(text="Body text under them all.")]
    _, layout = assemble([lines], paged=False)
    paths = [path for _, path in layout.sections]
    assert len(paths) == 300 and max(len(path) for path in paths) == MAX_SECTION_DEPTH
    assert paths[-1][: MAX_SECTION_DEPTH - 1] == tuple(f"Heading {i}" for i in range(MAX_SECTION_DEPTH - 1))
    assert paths[-1][-1] == "Heading 299" and paths[3] == tuple(f"Heading {i}" for i in range(4))
