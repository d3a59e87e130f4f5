"""``python -m bench.mcp_server PROJECT``: ``rotifer mcp bot --as notes`` over stdio, as
:func:`rotifer.mcp.run.serve_stdio` serves it, plus one empty tool (``bench_empty``)
answered by the same server loop, for :mod:`bench.mcp`."""

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


def main() -> None:
    policy = WritePolicy()
    with opened(Project(Path(sys.argv[1])), "bot", "notes", policy) as acting:
        server = build_server(acting, policy)
        real = server.get_request_handler("tools/call")
        assert real is not None
        empty = types.CallToolResult(content=[])

        async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> Any:
            if params.name == "bench_empty":
                return empty
            return await real.handler(ctx, params)

        server.add_request_handler("tools/call", types.CallToolRequestParams, call_tool)
        listed = server.get_request_handler("tools/list")
        assert listed is not None
        extra = types.Tool(name="bench_empty", description="does nothing",
                           input_schema={"type": "object", "properties": {}})

        async def list_tools(ctx: Any, params: Any) -> Any:
            answer = await listed.handler(ctx, params)
            return types.ListToolsResult(tools=[*answer.tools, extra])

        server.add_request_handler("tools/list", types.PaginatedRequestParams, list_tools)

        async def serve() -> None:
            async with stdio_server() as (read, write):
                await server.run(read, write, server.create_initialization_options())

        anyio.run(serve)


if __name__ == "__main__":
    main()
