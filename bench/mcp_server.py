"""``python -m bench.mcp_server PROJECT``: ``rotifer mcp bot --as notes`` over stdio, as
:func:`rotifer.mcp.run.serve_stdio` serves it, plus two tools answered by the same
server loop, for :mod:`bench.mcp`:

* ``bench_empty``: no memory call, an empty result -- the transport's own round trip;
* ``bench_like``: ``{"tool": NAME, "arguments": {...}}`` answers the result tool NAME
  gave for those arguments the first time, again, without calling it -- the same
  bytes through the same SDK, so the SDK's own cost for that much content (the
  floor a tool returning it can reach).  ``"textOnly": true`` drops its structured
  content (what answering the JSON once, as text, would save).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.server.stdio import stdio_server

from rotifer.agents.project import Project
from rotifer.mcp.acting import WritePolicy
from rotifer.mcp.run import opened
from rotifer.mcp.server import build_server


def _text_only(result: Any) -> Any:
    if isinstance(result, dict):
        return {k: v for k, v in result.items() if k != "structuredContent"}
    return result.model_copy(update={"structured_content": None})


def with_bench_tools(server: Any) -> Any:
    """``server`` (``build_server``'s) with ``bench_empty`` and ``bench_like`` added."""
    real = server.get_request_handler("tools/call")
    assert real is not None
    empty = types.CallToolResult(content=[])
    answered: dict[tuple[str, bool], Any] = {}

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
        return await real.handler(ctx, params)

    server.add_request_handler("tools/call", types.CallToolRequestParams, call_tool)
    listed = server.get_request_handler("tools/list")
    assert listed is not None
    extra = [types.Tool(name=name, description="a bench tool", input_schema={"type": "object"})
             for name in ("bench_empty", "bench_like")]

    async def list_tools(ctx: Any, params: Any) -> Any:
        answer = await listed.handler(ctx, params)
        assert isinstance(answer, types.ListToolsResult)
        return types.ListToolsResult(tools=[*answer.tools, *extra])

    server.add_request_handler("tools/list", types.PaginatedRequestParams, list_tools)
    return server


def main() -> None:
    policy = WritePolicy()
    with opened(Project(Path(sys.argv[1])), "bot", "notes", policy) as acting:
        server = with_bench_tools(build_server(acting, policy))

        async def serve() -> None:
            async with stdio_server() as (read, write):
                await server.run(read, write, server.create_initialization_options())

        anyio.run(serve)


if __name__ == "__main__":
    main()
