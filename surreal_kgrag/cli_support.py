"""What every ``surreal-kgrag`` command shares: exit codes, the modes, opening the store, printing."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from pydantic import BaseModel

from .db import StoreConfig, SurrealStore

# The keys of surreal_kgrag.retrieval.RETRIEVERS, spelled out: the CLI parses its arguments before it
# imports the retrieval modules (and numpy with them).
MODES = ["chunk", "concept", "hybrid", "graph"]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_PARTIAL = 3  # some inputs failed, the rest were written
EXIT_NO_STORE = 4
EXIT_INTERRUPTED = 130  # Ctrl-C: what was written is complete; run again to continue

# Commands that may create a store at a path that holds none; the others only read or change one.
CREATES_STORE = frozenset({"ingest", "eval"})


def open_store(args: argparse.Namespace) -> SurrealStore:
    config = StoreConfig.from_env(
        url=args.db, namespace=args.ns, database=args.database, username=args.user, password=args.password,
        create=args.command in CREATES_STORE,
    )
    store = SurrealStore(config=config)
    if not config.create:
        _ = store.server_version  # open it now: a missing store fails before any model is loaded
    return store


def emit(args: argparse.Namespace, payload: BaseModel | dict[str, Any], text: str) -> None:
    if args.json:
        data = payload.model_dump(mode="json") if isinstance(payload, BaseModel) else payload
        print(json.dumps(data, ensure_ascii=False, indent=2))
    else:
        print(text)


def progress(label: str, args: argparse.Namespace) -> Any:
    if args.json or not sys.stderr.isatty():
        return None
    from tqdm import tqdm

    return lambda items: tqdm(items, desc=label, unit="q", file=sys.stderr)
