"""Word (.docx) files: headings become sections and tables stay tables, through ingestion and
retrieval; broken, foreign and oversized files are reported and skipped."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

docx = pytest.importorskip("docx", reason="install surreal-kgrag[docx] (scripts/setup.sh does)")

from docx.oxml import OxmlElement  # noqa: E402
from docx.oxml.ns import qn  # noqa: E402

from surreal_kgrag import Ingestor, SurrealStore, make_retriever  # noqa: E402
from surreal_kgrag.loaders import iter_sources  # noqa: E402
from surreal_kgrag.models import LoadFailure, SourceDocument  # noqa: E402

PARTS = ["Hoist rope", "Slew bearing", "Boom hinge", "Trolley wheels", "Spreader twistlocks", "Brake pads"]


def _manual(path: Path, crane: str) -> Path:
    """A maintenance manual: a title, nested numbered headings, long sections, a table."""
    document = docx.Document()
    document.core_properties.title = f"{crane} Maintenance Manual"
    document.core_properties.author = "Ines Ortega"
    document.add_heading(f"{crane} Maintenance Manual", 0)
    document.add_heading("1. Safety", level=1)
    for i in range(12):
        document.add_paragraph(
            f"Rule {i + 1}: lock out the main breaker of the {crane} and tag the cabin door before anyone climbs "
            "the access ladder; a second technician stays on the quay with the radio for the whole shift."
        )
    document.add_heading("1.1 Wind limits", level=2)
    document.add_paragraph(
        f"The {crane} stops lifting when gusts exceed 20 metres per second at the boom tip, as the anemometer on "
        "the apex beam reports, and parks its boom at the storm pin before gusts reach 25."
    )
    document.add_heading("2. Inspection intervals", level=1)
    table = document.add_table(rows=len(PARTS) + 1, cols=3)
    for column, header in enumerate(["Part", "Interval", "Torque | tolerance"]):
        table.cell(0, column).text = header
    for row, part in enumerate(PARTS, start=1):
        table.cell(row, 0).text = part
        table.cell(row, 1).text = "monthly" if row % 2 else "yearly"
        table.cell(row, 2).text = f"{800 + 10 * row} Nm"
    for i in range(12):
        document.add_paragraph(f"Record every inspection of the {crane} in the log book, line {i + 1}, with the technician's name.")
    document.save(path)
    return path


def test_a_word_file_keeps_its_title_sections_and_tables(tmp_path: Path) -> None:
    [doc] = list(iter_sources(_manual(tmp_path / "north.docx", "North Crane")))
    assert isinstance(doc, SourceDocument), doc
    assert doc.title == "North Crane Maintenance Manual"
    assert doc.metadata["docx_author"] == "Ines Ortega" and "author" not in doc.metadata
    assert "| Part | Interval | Torque \\| tolerance |\n| --- | --- | --- |\n| Hoist rope | monthly | 810 Nm |" in doc.text
    assert doc.layout is not None
    sections = [path for _, path in doc.layout.sections]
    assert ("1. Safety", "1.1 Wind limits") in sections and ("2. Inspection intervals",) in sections
    [(start, _, end)] = doc.layout.tables
    assert doc.text[start:end].startswith("| Part |") and doc.text[start:end].rstrip().endswith("| 860 Nm |")


def test_a_cell_spanning_columns_is_written_once(tmp_path: Path) -> None:
    document = docx.Document()
    table = document.add_table(rows=2, cols=3)
    table.cell(0, 0).merge(table.cell(0, 2)).text = "Quarterly figures"
    for column, value in enumerate(["Q1", "Q2", "Q3"]):
        table.cell(1, column).text = value
    document.save(tmp_path / "figures.docx")
    [doc] = list(iter_sources(tmp_path / "figures.docx"))
    assert doc.text.count("Quarterly figures") == 1 and "| Q1 | Q2 | Q3 |" in doc.text


def test_ingested_word_files_answer_with_the_section_a_chunk_lies_under(tmp_path: Path, minilm, spacy_extractor) -> None:
    folder = tmp_path / "manuals"
    folder.mkdir()
    for crane in ("North Crane", "South Crane", "Harbour Gantry"):
        _manual(folder / f"{crane.lower().replace(' ', '_')}.docx", crane)
    with SurrealStore("mem://") as store:
        summary = Ingestor(store, embedder=minilm, extractor=spacy_extractor).ingest(folder)
        assert summary.added == 3 and not summary.failures and summary.chunks >= 9
        for mode in ("chunk", "hybrid"):
            result = make_retriever(mode, store, embedder=minilm).search("At what gust speed does the South Crane stop lifting?", k=3)
            best = result.documents[0]
            assert best.title == "South Crane Maintenance Manual", (mode, [d.title for d in result.documents])
            assert best.chunks[0].section == ["1. Safety", "1.1 Wind limits"], (mode, best.chunks[0])


def test_broken_foreign_and_empty_word_files_are_reported_and_the_rest_load(tmp_path: Path) -> None:
    _manual(tmp_path / "good.docx", "North Crane")
    (tmp_path / "legacy.docx").write_bytes(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(512))  # an old binary .doc renamed
    with zipfile.ZipFile(tmp_path / "archive.docx", "w") as archive:
        archive.writestr("notes.txt", "a zip file, but not a Word document")
    docx.Document().save(tmp_path / "blank.docx")
    found = {Path(item.source).name: item for item in iter_sources(tmp_path)}
    assert isinstance(found["good.docx"], SourceDocument)
    reasons = {name: item.reason for name, item in found.items() if isinstance(item, LoadFailure)}
    assert reasons.keys() == {"legacy.docx", "archive.docx", "blank.docx"}, reasons
    assert "not a Word (.docx) file" in reasons["legacy.docx"] and "saved as .docx" in reasons["legacy.docx"]
    assert reasons["archive.docx"].startswith("malformed .docx")
    assert reasons["blank.docx"] == "the .docx has no text"


def test_a_word_file_that_unpacks_past_max_file_bytes_is_refused_before_it_is_parsed(tmp_path: Path) -> None:
    """A .docx is a zip: a small file can unpack to gigabytes of XML, so its members' sizes count."""
    path = _manual(tmp_path / "north.docx", "North Crane")
    with zipfile.ZipFile(path) as archive:
        unpacked = sum(member.file_size for member in archive.infolist())
    assert unpacked > 2 * path.stat().st_size  # compressed: the file alone would pass the cap
    [failure] = list(iter_sources(path, max_file_bytes=unpacked - 1))
    assert isinstance(failure, LoadFailure) and f"unpacks to {unpacked:,} bytes, more than max_file_bytes" in failure.reason
    assert isinstance(next(iter(iter_sources(path, max_file_bytes=unpacked))), SourceDocument)
    bomb = tmp_path / "bomb.docx"
    with zipfile.ZipFile(bomb, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("word/document.xml", b"<w:document>" + b" " * (64 << 20) + b"</w:document>")
    assert bomb.stat().st_size < 1 << 20
    [failure] = list(iter_sources(bomb, max_file_bytes=32 << 20))
    assert isinstance(failure, LoadFailure) and "unpacks to" in failure.reason


def test_headings_are_found_by_style_name_whatever_the_style_id_and_runs_join_as_written(tmp_path: Path) -> None:
    """A localised Word gives the heading styles ids of its own ("berschrift1" in German); their
    names stay "heading 1". Tabs and line breaks inside a paragraph read as spaces."""
    document = docx.Document()
    document.styles["Heading 1"].style_id = "berschrift1"
    document.styles["Heading 2"].style_id = "berschrift2"
    document.add_heading("Wartung", level=1)
    document.add_heading("Windgrenzen", level=2)
    paragraph = document.add_paragraph("Torque")
    paragraph.add_run().add_tab()
    paragraph.add_run("limit 850 Nm")
    paragraph.add_run().add_break()
    paragraph.add_run("checked yearly.")
    document.save(tmp_path / "wartung.docx")
    [doc] = list(iter_sources(tmp_path / "wartung.docx"))
    assert doc.title == "Wartung"
    assert [path for _, path in doc.layout.sections] == [("Wartung",), ("Wartung", "Windgrenzen")]
    assert doc.text.endswith("## Windgrenzen\n\nTorque limit 850 Nm checked yearly.")


def _control(element, *, placeholder: bool = False):
    """Wrap ``element`` (a paragraph, table, row, cell or run) in a content control, in place, as Word
    does for a cover page, a table of contents, a form field or a repeating section; the control."""
    element = getattr(element, "_element", element)  # python-docx's Paragraph, Table: their XML
    sdt = OxmlElement("w:sdt")
    properties = OxmlElement("w:sdtPr")
    alias = OxmlElement("w:alias")
    alias.set(qn("w:val"), "Field")
    properties.append(alias)
    if placeholder:
        properties.append(OxmlElement("w:showingPlcHdr"))
    sdt.append(properties)
    content = OxmlElement("w:sdtContent")
    sdt.append(content)
    element.addprevious(sdt)
    content.append(element)
    return sdt


def test_content_controls_in_the_body_tables_and_paragraphs_are_read_in_document_order(tmp_path: Path) -> None:
    """A Word template puts its cover page, table of contents and form in content controls
    (``w:sdt``), at the body's level, around table rows and cells, around runs; nested ones too."""
    document = docx.Document()
    cover = document.add_heading("Quay Crane Handbook", 0)
    subtitle = document.add_paragraph("Issued by the harbour engineering office.")
    _control(cover)
    _control(subtitle)
    document.add_paragraph("Read this handbook before the first shift.")
    outer = _control(document.add_heading("1. Lifting", level=1))
    inner_paragraph = document.add_paragraph("The spreader locks before every lift.")
    inner = _control(inner_paragraph)
    table = document.add_table(rows=3, cols=2)
    for row, (part, interval) in enumerate([("Part", "Interval"), ("Hoist rope", "monthly"), ("Slew bearing", "yearly")]):
        table.cell(row, 0).text = part
        table.cell(row, 1).text = interval
    inner.find(qn("w:sdtContent")).append(table._tbl)  # a table in a control in a control
    outer.addnext(inner)
    outer.find(qn("w:sdtContent")).append(inner)
    _control(table.rows[2]._tr)  # a repeating section's row
    _control(table.rows[1]._tr.tc_lst[1])  # a form field filling a cell
    _control(table.cell(1, 0).paragraphs[0])  # a control inside a cell
    sentence = document.add_paragraph("Wind limit ")
    _control(sentence.add_run("20 m/s")._r)  # an inline (run-level) control
    sentence.add_run(" at the boom tip.")
    document.save(tmp_path / "handbook.docx")
    [doc] = list(iter_sources(tmp_path / "handbook.docx"))
    assert isinstance(doc, SourceDocument), doc
    assert doc.title == "Quay Crane Handbook"
    assert doc.text == (
        "# Quay Crane Handbook\n\nIssued by the harbour engineering office.\n\nRead this handbook before the first shift.\n\n"
        "# 1. Lifting\n\nThe spreader locks before every lift.\n\n"
        "| Part | Interval |\n| --- | --- |\n| Hoist rope | monthly |\n| Slew bearing | yearly |\n\n"
        "Wind limit 20 m/s at the boom tip."
    )
    assert [path for _, path in doc.layout.sections] == [("Quay Crane Handbook",), ("1. Lifting",)]
    [(start, _, end)] = doc.layout.tables
    assert doc.text[start:end].startswith("| Part | Interval |")


def test_a_content_control_showing_its_placeholder_and_deleted_text_are_left_out(tmp_path: Path) -> None:
    """An unfilled cover page shows "[Document title]" in the Title style: not the document's title.
    Tracked changes: inserted text is read, deleted text is not."""
    document = docx.Document()
    _control(document.add_heading("[Document title]", 0), placeholder=True)
    _control(document.add_paragraph("Click or tap here to enter text."), placeholder=True)
    document.add_heading("Brake inspection", level=1)
    paragraph = document.add_paragraph("Replace the pads at ")
    deleted, inserted = OxmlElement("w:del"), OxmlElement("w:ins")
    for change in (deleted, inserted):
        change.set(qn("w:id"), str(len(paragraph._p)))
        change.set(qn("w:author"), "Ines Ortega")
    old = OxmlElement("w:r")
    old_text = OxmlElement("w:delText")
    old_text.text = "5 mm"
    old.append(old_text)
    deleted.append(old)
    inserted.append(paragraph.add_run("3 mm")._r)
    paragraph._p.append(deleted)
    paragraph._p.append(inserted)
    paragraph.add_run(" of lining.")
    document.save(tmp_path / "brakes.docx")
    [doc] = list(iter_sources(tmp_path / "brakes.docx"))
    assert doc.title == "Brake inspection"
    assert doc.text == "# Brake inspection\n\nReplace the pads at 3 mm of lining."


def test_custom_xml_around_paragraphs_is_read(tmp_path: Path) -> None:
    document = docx.Document()
    wrapped = document.add_paragraph("Certified by the port authority.")
    custom = OxmlElement("w:customXml")
    custom.set(qn("w:element"), "certificate")
    custom.append(OxmlElement("w:customXmlPr"))
    wrapped._p.addprevious(custom)
    custom.append(wrapped._p)
    document.add_paragraph("Valid for one year.")
    document.save(tmp_path / "certificate.docx")
    [doc] = list(iter_sources(tmp_path / "certificate.docx"))
    assert doc.text == "Certified by the port authority.\n\nValid for one year."


def test_the_text_after_an_entity_reference_is_read_and_no_entity_is_resolved(tmp_path: Path) -> None:
    """Word writes no DTD, but a crafted file can declare entities: python-docx leaves them unresolved
    (no XXE, no billion laughs), and the text after one must not be lost with it."""
    secret = tmp_path / "secret.txt"
    secret.write_text("root-password-hunter2")
    document = docx.Document()
    document.add_heading("Gantry GANTRY report", level=1)
    document.add_paragraph("The GANTRY lifted 40 tonnes; SECRET the log was signed.")
    document.save(tmp_path / "plain.docx")
    with zipfile.ZipFile(tmp_path / "plain.docx") as source, zipfile.ZipFile(tmp_path / "entities.docx", "w") as target:
        for member in source.infolist():
            data = source.read(member)
            if member.filename == "word/document.xml":
                declaration, body = data.split(b"\n", 1)
                doctype = (
                    b'<!DOCTYPE w:document [<!ENTITY crane "North Crane">'
                    b'<!ENTITY secret SYSTEM "' + secret.as_uri().encode() + b'">]>\n'
                )
                body = body.replace(b"GANTRY", b"&crane;").replace(b"SECRET", b"&secret;<!-- a comment -->")
                data = declaration + b"\n" + doctype + body
            target.writestr(member, data)
    [doc] = list(iter_sources(tmp_path / "entities.docx"))
    assert isinstance(doc, SourceDocument), doc
    assert doc.text == "# Gantry &crane; report\n\nThe &crane; lifted 40 tonnes; &secret; the log was signed."
    assert "North Crane" not in doc.text and "hunter2" not in doc.text and "comment" not in doc.text


def test_a_text_box_is_read_once(tmp_path: Path) -> None:
    """Word writes a text box twice, as a drawing (``mc:Choice``) and as a VML fallback (``mc:Fallback``)
    for older readers: its text must not come out twice."""
    from lxml import etree

    mc = "http://schemas.openxmlformats.org/markup-compatibility/2006"
    document = docx.Document()
    paragraph = document.add_paragraph("Crane notice:")
    alternate = etree.SubElement(paragraph.add_run()._r, f"{{{mc}}}AlternateContent")
    for branch, holder in (("Choice", "w:drawing"), ("Fallback", "w:pict")):
        element = etree.SubElement(alternate, f"{{{mc}}}{branch}")
        if branch == "Choice":
            element.set("Requires", "wps")
        box = OxmlElement("w:txbxContent")
        box.append(OxmlElement("w:p"))
        run = OxmlElement("w:r")
        text = OxmlElement("w:t")
        text.text = "Load limit 40 t"
        run.append(text)
        box[0].append(run)
        wrapper = OxmlElement(holder)
        wrapper.append(box)
        element.append(wrapper)
    document.add_paragraph("Keep clear of the boom.")
    document.save(tmp_path / "notice.docx")
    [doc] = list(iter_sources(tmp_path / "notice.docx"))
    assert doc.text == "Crane notice: Load limit 40 t\n\nKeep clear of the boom."


def test_the_paragraphs_of_a_table_cell_are_kept_apart(tmp_path: Path) -> None:
    document = docx.Document()
    table = document.add_table(rows=2, cols=2)
    table.cell(0, 0).text, table.cell(0, 1).text = "Part", "Check"
    table.cell(1, 0).text = "Hoist rope"
    table.cell(1, 1).text = "Look for broken wires."
    table.cell(1, 1).add_paragraph("Measure the diameter.")
    document.save(tmp_path / "checks.docx")
    [doc] = list(iter_sources(tmp_path / "checks.docx"))
    assert doc.text == "| Part | Check |\n| --- | --- |\n| Hoist rope | Look for broken wires. Measure the diameter. |"
