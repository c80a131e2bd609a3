"""Four long-document corpora of another kind than the filings: reference manuals, from Debian's
documentation packages, with questions written for them before any run (``benchmarks/manuals/``).

    .venv/bin/python benchmarks/manual_corpora.py /var/tmp/manuals
    .venv/bin/python benchmarks/retrieval_benchmark.py /var/tmp/manuals/*-docs

- ``python-docs``: 57 pages of the Python 3.11 library reference (``python3.11-doc``), 45 questions.
- ``git-docs``: 57 pages of the Git manual (``git-doc``), 43 questions.
- ``postgres-docs``: 57 pages of the PostgreSQL 15 manual (``postgresql-doc-15``), 45 questions.
- ``sqlite-docs``: 57 pages of the SQLite 3.40 documentation (``sqlite3-doc``), 45 questions.

Each page is one long HTML document (sections, tables, code) named by its module, command or topic,
often a common word (``copy.html``, ``time.html``, ``git-show.html``); the PostgreSQL and SQLite
pages share acronyms and keywords (``WAL``, ``JSON``, ``INSERT``). The questions ask what a page
explains without always naming it: the documents they name in lower case are usually words, not
names. 40 questions of each set have one gold page, the rest two (type ``two``). The Python and Git
sets were written in one release, the PostgreSQL and SQLite sets in the next by a helper that ran
nothing.

The pages come from ``apt-get download`` of the package (Debian's registry; the version of the day,
printed). The questions name the pages that answer them as their ``gold_files``; every gold page is
among the pages copied.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import tempfile
from pathlib import Path

from surreal_kgrag.evaluate import load_queries

HERE = Path(__file__).resolve().parent / "manuals"
#: corpus -> (Debian package, folder of its HTML pages inside the package, the pages besides the gold ones)
CORPORA = {
    "python-docs": (
        "python3.11-doc",
        "usr/share/doc/python3.11/html/library",
        "math random array struct copy glob fnmatch gzip calendar operator io inspect codecs http.client "
        "xml.etree.elementtree email.message queue".split(),
    ),
    "git-docs": (
        "git-doc",
        "usr/share/doc/git-doc",
        "gittutorial gitworkflows gitglossary git-commit git-add git-init git-range-diff git-request-pull "
        "git-filter-branch git-replace git-rev-parse git-send-email githooks gitattributes gitignore git-ls-files "
        "git-update-index".split(),
    ),
    "postgres-docs": (
        "postgresql-doc-15",
        "usr/share/doc/postgresql-doc-15/html",
        "hstore textsearch-intro functions-textsearch functions-aggregate arrays sql-reindex sql-vacuum sql-explain "
        "sql-createpublication runtime-config-replication runtime-config-resource app-pgbasebackup queries-with "
        "queries-table-expressions ddl-constraints".split(),
    ),
    "sqlite-docs": (
        "sqlite3-doc",
        "usr/share/doc/sqlite3",
        "lockingv3 queryplanner lang_insert faq quirks walformat fts3 compile lang_delete spellfix1 mmap limits sessionintro "
        "flextypegood sharedcache np1queryprob".split(),
    ),
}


def build(name: str, target: Path) -> None:
    package, folder, distractors = CORPORA[name]
    queries = HERE / f"{name}.queries.jsonl"
    gold = {page for query in load_queries(queries) for page in query.gold_files}
    pages = sorted(gold | {f"{stem}.html" for stem in distractors})
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(["apt-get", "download", package], cwd=tmp, check=True, capture_output=True)
        deb = next(Path(tmp).glob("*.deb"))
        subprocess.run(["dpkg-deb", "-x", str(deb), str(Path(tmp) / "x")], check=True)
        source = Path(tmp) / "x" / folder
        docs = target / name / "docs"
        docs.mkdir(parents=True, exist_ok=True)
        for page in pages:
            shutil.copyfile(source / page, docs / page)
        print(f"{name}: {len(pages)} pages of {deb.name}")
    shutil.copyfile(queries, target / name / "queries.jsonl")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("target", type=Path, help="folder to write <corpus>/docs and <corpus>/queries.jsonl into")
    parser.add_argument("--corpora", default=",".join(CORPORA))
    args = parser.parse_args()
    for name in args.corpora.split(","):
        build(name, args.target)


if __name__ == "__main__":
    main()
