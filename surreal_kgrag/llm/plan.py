"""The LLM features as sans-I/O plans: a generator yields the I/O it needs and receives the result,
so one body serves the sync and the async API.

Steps:

- :class:`Call`: one blocking operation (a store query, a retriever search, a cache read) with an
  optional async twin; the async driver runs the sync one in a worker thread when there is none.
- :class:`Chat`: one chat request to the model.
- :class:`Gather`: several calls at once, at most ``limit`` in flight (threads in the sync driver,
  tasks in the async one); each result is the value or the :class:`~surreal_kgrag.errors.KGRagError`
  it raised, so one failure does not stop the others.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Generator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel

from ..errors import KGRagError
from .client import ChatReply, LLMClient, Message

T = TypeVar("T")


@dataclass(frozen=True)
class Call:
    run: Callable[[], Any]
    arun: Callable[[], Awaitable[Any]] | None = None


@dataclass(frozen=True)
class Chat:
    client: LLMClient
    messages: tuple[Message, ...]
    reply: type[BaseModel] | None = None


@dataclass(frozen=True)
class Gather:
    steps: tuple[Call | Chat, ...]
    limit: int = 4


Step = Call | Chat | Gather
Plan = Generator[Step, Any, T]


def chat(client: LLMClient, messages: Sequence[Message], reply: type[BaseModel] | None = None) -> Chat:
    return Chat(client, tuple(messages), reply)


def drive(plan: Plan[T]) -> T:
    """Run a plan to completion with blocking I/O. A step that raises has its exception thrown
    into the plan, at the ``yield`` that asked for it."""
    result: Any = None
    error: Exception | None = None
    while True:
        try:
            step = plan.throw(error) if error is not None else plan.send(result)
        except StopIteration as done:
            return done.value
        try:
            result, error = _run(step), None
        except Exception as raised:  # handed to the plan, which handles or re-raises it
            error = raised


async def adrive(plan: Plan[T]) -> T:
    """Run a plan to completion on the running event loop."""
    result: Any = None
    error: Exception | None = None
    while True:
        try:
            step = plan.throw(error) if error is not None else plan.send(result)
        except StopIteration as done:
            return done.value
        try:
            result, error = await _arun(step), None
        except Exception as raised:  # handed to the plan, which handles or re-raises it
            error = raised


def _run(step: Step) -> Any:
    if isinstance(step, Gather):
        if len(step.steps) <= 1 or step.limit == 1:
            return [_captured(_run, s) for s in step.steps]
        with ThreadPoolExecutor(max_workers=min(step.limit, len(step.steps)), thread_name_prefix="kgrag-llm") as pool:
            return list(pool.map(lambda s: _captured(_run, s), step.steps))
    if isinstance(step, Chat):
        reply: ChatReply = step.client.chat(step.messages, step.reply)
        return reply
    return step.run()


async def _arun(step: Step) -> Any:
    if isinstance(step, Gather):
        semaphore = asyncio.Semaphore(step.limit)

        async def bounded(s: Call | Chat) -> Any:
            async with semaphore:
                try:
                    return await _arun(s)
                except KGRagError as error:
                    return error

        return list(await asyncio.gather(*(bounded(s) for s in step.steps)))
    if isinstance(step, Chat):
        return await step.client.achat(step.messages, step.reply)
    if step.arun is not None:
        return await step.arun()
    return await asyncio.to_thread(step.run)


def _captured(run: Callable[[Step], Any], step: Step) -> Any:
    try:
        return run(step)
    except KGRagError as error:
        return error
