"""The command line as a script sees it: exit codes, store paths that must not become stores,
the optimize command, and no abort at process exit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from surreal_kgrag.cli import EXIT_FAILED, EXIT_NO_STORE, EXIT_OK, EXIT_PARTIAL, EXIT_USAGE, main
from surreal_kgrag.schema import ensure_schema
from surreal_kgrag.store import SurrealStore


def _store(tmp_path: Path) -> str:
    url = f"surrealkv://{tmp_path / 'kg'}"
    with SurrealStore(url) as store:
        ensure_schema(store, dimension=8, embedder="e")
    return url


def test_commands_that_read_a_store_never_create_one(tmp_path, capsys):
    missing = tmp_path / "typo"
    for argv in (["stats"], ["query", "anything"], ["delete", "doc1"], ["optimize"]):
        assert main([*argv, "--db", f"surrealkv://{missing}"]) == EXIT_NO_STORE
        assert "no store at" in capsys.readouterr().err
    assert not missing.exists()
    # A folder that holds something else is not turned into a store, by any command.
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine")
    assert main(["stats", "--db", f"surrealkv://{folder}"]) == EXIT_NO_STORE
    assert "holds no surreal-kgrag store" in capsys.readouterr().err
    assert sorted(p.name for p in folder.iterdir()) == ["notes.txt"]


def test_an_empty_store_path_is_an_error_that_says_so(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["stats", "--db", "surrealkv://"]) == EXIT_FAILED
    assert "names no path" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []  # the working directory did not become a store


def test_a_bad_connection_setting_is_one_line_naming_the_setting(capsys):
    for argv, setting, problem in (
        (["--db", "foo://x"], "url", "unsupported database URL 'foo://x'"),
        (["--ns", "kg; REMOVE TABLE chunk"], "namespace", "invalid name"),
        (["--database", ""], "database", "invalid name ''"),
    ):
        assert main(["query", "anything", *argv]) == EXIT_FAILED
        err = capsys.readouterr().err
        assert err.startswith(f"surreal-kgrag query: {setting}: {problem}"), err
        assert err.count("\n") == 1 and "pydantic" not in err and "Value error" not in err


def test_ingesting_only_paths_that_do_not_exist_fails_at_once_and_creates_no_store(tmp_path, capsys):
    url = f"surrealkv://{tmp_path / 'kg'}"
    assert main(["ingest", str(tmp_path / "docs"), str(tmp_path / "typo.pdf"), "--db", url]) == EXIT_FAILED
    assert "nothing to ingest: no file or folder at" in capsys.readouterr().err
    assert not (tmp_path / "kg").exists()


def test_bad_command_lines_exit_2_and_help_exits_0(capsys):
    assert main(["stats", "--no-such-option"]) == EXIT_USAGE
    assert main(["query"]) == EXIT_USAGE
    assert main(["--help"]) == EXIT_OK
    capsys.readouterr()


def test_optimize_reports_each_index(tmp_path, capsys):
    url = _store(tmp_path)
    assert main(["optimize", "--db", url, "--json"]) == EXIT_OK
    report = json.loads(capsys.readouterr().out)
    assert report["rebuilt"] == [] and set(report["indexes"]) == {"chunk", "concept", "text"}
    assert main(["optimize", "--db", url, "--force"]) == EXIT_OK
    out = capsys.readouterr().out
    assert "rebuilt chunk, concept, text" in out and "chunk_embedding_1" in out
    assert main(["stats", "--db", url, "--json"]) == EXIT_OK
    stats = json.loads(capsys.readouterr().out)
    assert stats["indexes"]["concept"]["name"] == "concept_embedding_1" and stats["indexes"]["chunk"]["status"] == "ready"


def test_ingest_with_a_bad_file_exits_3_and_writes_the_rest(tmp_path, capsys):
    docs = tmp_path / "in"
    docs.mkdir()
    (docs / "good.txt").write_text("Marie Curie was born in Warsaw. She discovered polonium.")
    (docs / "empty.txt").write_text("")
    url = f"surrealkv://{tmp_path / 'kg'}"
    assert main(["ingest", str(docs), "--db", url, "--json", "--no-progress"]) == EXIT_PARTIAL
    summary = json.loads(capsys.readouterr().out)
    assert (summary["added"], summary["failed"]) == (1, 1)
    assert main(["ingest", str(docs / "good.txt"), "--db", url, "--no-progress"]) == EXIT_OK  # unchanged: all fine


def test_the_console_script_never_aborts_at_exit(tmp_path):
    url = _store(tmp_path)
    script = Path(sys.executable).with_name("surreal-kgrag")
    codes = []
    for _ in range(12):
        done = subprocess.run([str(script), "stats", "--db", url, "--json"], capture_output=True, text=True, timeout=300,
                              env={**os.environ, "RUST_BACKTRACE": "0"})
        codes.append(done.returncode)
        assert json.loads(done.stdout)["documents"] == 0
    assert codes == [0] * 12
    missing = subprocess.run([str(script), "stats", "--db", f"surrealkv://{tmp_path / 'nope'}"], capture_output=True, text=True, timeout=300)
    assert missing.returncode == EXIT_NO_STORE and "no store at" in missing.stderr


def test_the_cli_offers_every_retrieval_mode():
    from surreal_kgrag.cli_support import MODES
    from surreal_kgrag.retrieval import RETRIEVERS

    assert list(RETRIEVERS) == MODES


def test_ingest_caps_what_one_file_may_cost_and_writes_the_rest(tmp_path, capsys):
    docs = tmp_path / "in"
    docs.mkdir()
    (docs / "good.txt").write_text("Marie Curie was born in Warsaw. She discovered polonium.")
    (docs / "big.txt").write_text("Pierre Curie studied crystals. " * 100)
    url = f"surrealkv://{tmp_path / 'kg'}"
    assert main(["ingest", str(docs), "--db", url, "--json", "--no-progress", "--max-file-bytes", "1K"]) == EXIT_PARTIAL
    captured = capsys.readouterr()
    assert (json.loads(captured.out)["added"], json.loads(captured.out)["failed"]) == (1, 1)
    assert f"skipped {(docs / 'big.txt').resolve().as_posix()}: file has 3,100 bytes, more than max_file_bytes=1,024" in captured.err
    pdf_caps = ["--max-pdf-pages", "10", "--max-pdf-memory", "1G", "--pdf-timeout", "60"]
    assert main(["ingest", str(docs), "--db", url, "--no-progress", "--max-file-bytes", "4k", *pdf_caps]) == EXIT_OK
    assert main(["ingest", str(docs), "--db", url, "--max-file-bytes", "12X"]) == EXIT_USAGE
    assert "not a size: '12X'" in capsys.readouterr().err
    assert main(["ingest", str(docs), "--db", url, "--no-progress", "--max-pdf-pages", "0"]) == EXIT_FAILED
    assert "max_pdf_pages" in capsys.readouterr().err
    assert main(["ingest", str(docs), "--db", url, "--no-progress", "--pdf-timeout", "0"]) == EXIT_FAILED
    assert "pdf_timeout" in capsys.readouterr().err
