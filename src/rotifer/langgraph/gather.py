"""Concurrent ``abatch`` calls gathered per event-loop tick.

Every ``aget``/``aput``/``asearch``/... of LangGraph's ``BaseStore`` ends in
``abatch``.  The first call of a tick starts a list for its loop and asks the
loop to flush it once the tick's other ready callbacks have run
(``call_soon``); every call of that tick joins the list; the flush runs them all
as ONE batch (one embedding call, one trip to the thread pool, identical reads
made once) and hands each caller its own results, or its own error: a refusal
of one caller's op never reaches another caller.  This is what LangGraph's
``AsyncBatchedBaseStore`` does for AsyncSqliteStore and AsyncPostgresStore,
without its background task, and with errors kept per caller.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from langgraph.store.base import Op, Result

#: One caller's ops, the future its results go to, and the run it came from
#: (its audit context: see rotifer.memory.context).
Call = tuple[list[Op], "asyncio.Future[list[Result]]", "dict[str, str] | None"]


class Gatherer:
    """The calls waiting for the next flush, per event loop."""

    def __init__(self, run: Callable[[list[Call]], Awaitable[None]]) -> None:
        self._run = run
        self._waiting: dict[asyncio.AbstractEventLoop, list[Call]] = {}
        self._running: set[asyncio.Task[Any]] = set()

    async def submit(self, ops: list[Op], context: dict[str, str] | None) -> list[Result]:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[list[Result]] = loop.create_future()
        waiting = self._waiting.get(loop)
        if waiting is None:
            waiting = self._waiting[loop] = []
            loop.call_soon(self._flush, loop)
        waiting.append((ops, future, context))
        return await future

    def _flush(self, loop: asyncio.AbstractEventLoop) -> None:
        calls = self._waiting.pop(loop)
        task = loop.create_task(self._guarded(calls))
        self._running.add(task)  # a task nobody holds may be collected mid-run
        task.add_done_callback(self._running.discard)

    async def _guarded(self, calls: list[Call]) -> None:
        try:
            await self._run(calls)
        except BaseException as exc:
            for _, future, _ in calls:
                if not future.done():
                    future.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
