"""``python -m bench.mcp_server PROJECT``: ``rotifer mcp bot --as notes`` over stdio, as
:func:`rotifer.mcp.run.serve_stdio` serves it, plus two tools answered by the same
server loop, for :mod:`bench.mcp`:

* ``bench_empty``: no memory call, an empty result -- the transport's own round trip;
* ``bench_like``: ``{"tool": NAME, "arguments": {...}}`` answers the result tool NAME
  gave for those arguments the first time, again, without calling it -- the same
  bytes through the same SDK, so the SDK's own cost for that much content (the
  floor a tool returning it can reach).  ``"textOnly": true`` drops its structured
  content (what answering the JSON once, as text, would save);
* ``bench_timing``: ``{"on": true}`` starts timing, inside this server, each
  ``memory_*`` tool's handler and the memory call it makes (thread CPU time);
  ``{"on": false}`` stops and answers the medians in µs, ``{"read": {"handler":
  ..., "memory": ..., "calls": N}, ...}``.  Off while the bench times the calls
  themselves: the clock reads cost a little.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.server.stdio import stdio_server

from rotifer.agents.project import Project
from rotifer.mcp.acting import Acting, WritePolicy
from rotifer.mcp.run import opened
from rotifer.mcp.server import build_server


def _text_only(result: Any) -> Any:
    if isinstance(result, dict):
        return {k: v for k, v in result.items() if k != "structuredContent"}
    return result.model_copy(update={"structured_content": None})


class Timing:
    """Thread CPU ns of each timed part (``read handler``, ``read memory``, ...) while on.

    The memory calls are timed by wrapping the ``acting``'s methods for as long
    as timing is on, so that the calls the bench times are made exactly as
    ``rotifer mcp`` makes them."""

    def __init__(self, acting: Acting | None) -> None:
        self.acting = acting
        self.on = False
        self.samples: dict[str, list[int]] = {}

    def add(self, part: str, ns: int) -> None:
        self.samples.setdefault(part, []).append(ns)

    def start(self) -> None:
        self.on = True
        self.samples.clear()
        if self.acting is None:
            return
        for name in ("read", "write"):
            real = getattr(self.acting, name)

            def timed(*args: Any, _real: Any = real, _part: str = f"{name} memory") -> Any:
                start = time.thread_time_ns()
                try:
                    return _real(*args)
                finally:
                    self.add(_part, time.thread_time_ns() - start)

            setattr(self.acting, name, timed)  # on the instance: the class's method hidden

    def stop(self) -> dict[str, dict[str, float]]:
        """Timing off; the medians in µs, and how many calls each tool's are of."""
        self.on = False
        if self.acting is not None:
            for name in ("read", "write"):
                vars(self.acting).pop(name, None)
        out: dict[str, dict[str, float]] = {}
        for part, ns in sorted(self.samples.items()):
            tool, what = part.split()
            out.setdefault(tool, {})[what] = statistics.median(ns) / 1e3
            if what == "handler":
                out[tool]["calls"] = len(ns)
        return out


def with_bench_tools(server: Any, acting: Acting | None = None) -> Any:
    """``server`` (``build_server``'s) with ``bench_empty``, ``bench_like`` and
    ``bench_timing`` added; the memory calls timed are ``acting``'s (if given)."""
    real = server.get_request_handler("tools/call")
    assert real is not None
    empty = types.CallToolResult(content=[])
    answered: dict[tuple[str, bool], Any] = {}
    timing = Timing(acting)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> Any:
        if params.name == "bench_empty":
            return empty
        if params.name == "bench_like":
            args = params.arguments or {}
            name, text_only = str(args["tool"]), bool(args.get("textOnly"))
            if (name, text_only) not in answered:
                like = types.CallToolRequestParams(name=name, arguments=args["arguments"])
                result = await real.handler(ctx, like)
                answered[name, text_only] = _text_only(result) if text_only else result
            return answered[name, text_only]
        if params.name == "bench_timing":
            if (params.arguments or {}).get("on"):
                timing.start()
                return empty
            return types.CallToolResult(content=[], structured_content=timing.stop())
        if not timing.on:
            return await real.handler(ctx, params)
        start = time.thread_time_ns()
        try:
            return await real.handler(ctx, params)
        finally:
            timing.add(f"{params.name.removeprefix('memory_')} handler",
                       time.thread_time_ns() - start)

    server.add_request_handler("tools/call", types.CallToolRequestParams, call_tool)
    listed = server.get_request_handler("tools/list")
    assert listed is not None
    extra = [types.Tool(name=name, description="a bench tool", input_schema={"type": "object"})
             for name in ("bench_empty", "bench_like", "bench_timing")]

    async def list_tools(ctx: Any, params: Any) -> Any:
        answer = await listed.handler(ctx, params)
        assert isinstance(answer, types.ListToolsResult)
        return types.ListToolsResult(tools=[*answer.tools, *extra])

    server.add_request_handler("tools/list", types.PaginatedRequestParams, list_tools)
    return server


def main() -> None:
    policy = WritePolicy()
    with opened(Project(Path(sys.argv[1])), "bot", "notes", policy) as acting:
        server = with_bench_tools(build_server(acting, policy), acting)

        async def serve() -> None:
            async with stdio_server() as (read, write):
                await server.run(read, write, server.create_initialization_options())

        anyio.run(serve)


if __name__ == "__main__":
    main()
