"""The one retry rule of the store: a query that lost a race with another transaction ("can be
retried") runs again when running it twice is safe, that is when it is a transaction (it rolled back
as a whole) or its file declares itself idempotent (a ``-- idempotent:`` line)."""

from __future__ import annotations

import asyncio
import random
import re
import time
from typing import Any

from ..errors import QueryExecutionError
from .connection import Connection

RETRIES = 8
_TRANSACTION = re.compile(r"^\s*BEGIN(\s+TRANSACTION)?\s*;", re.IGNORECASE | re.MULTILINE)
_IDEMPOTENT = re.compile(r"^-- idempotent:", re.MULTILINE)


def retryable(error: QueryExecutionError, template: str, attempt: int) -> bool:
    safe = bool(_TRANSACTION.search(template) or _IDEMPOTENT.search(template))
    return attempt + 1 < RETRIES and "can be retried" in str(error) and safe


def backoff(attempt: int) -> float:
    return random.uniform(0.005, 0.02) * 2**attempt


def run_retrying(connection: Connection, job: tuple[str, str, dict[str, Any]], template: str) -> list[Any]:
    for attempt in range(RETRIES):
        try:
            return connection.run(job)
        except QueryExecutionError as error:
            if not retryable(error, template, attempt):
                raise
        time.sleep(backoff(attempt))
    raise AssertionError("unreachable")


async def arun_retrying(connection: Connection, job: tuple[str, str, dict[str, Any]], template: str) -> list[Any]:
    for attempt in range(RETRIES):
        try:
            return await connection.arun(job)
        except QueryExecutionError as error:
            if not retryable(error, template, attempt):
                raise
        await asyncio.sleep(backoff(attempt))
    raise AssertionError("unreachable")
