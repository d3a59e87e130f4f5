"""The MCP server: the tools of :mod:`rotifer.mcp.tools` and the entries as
resources, on the official SDK's low-level ``Server``.

Why the low-level server rather than FastMCP: the tools' JSON schemas and
descriptions are written out (categories, limits, error codes), every refusal
must come back as a tool error carrying the memory's ``CODE: message`` (the
SDK would validate arguments against the schema first and answer its own
text), and the tools offered depend on who the server acts as.

Resources: ``rotifer://AGENT/KEY`` with the key percent-encoded (``/`` kept),
one per entry the caller may read (a gene: its ``query_memory``; the
deployer: every entry).  Reading one is the caller's read, so a value the
gene may not read is refused exactly as ``memory_read`` refuses it.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, unquote, urlsplit

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError
from pydantic_core import to_json

from rotifer.memory.errors import AgentMemoryError, ErrorCode

from .acting import Acting, WritePolicy, encode_value, error_json
from .tools import ToolSpec, call, tool_specs

SCHEME = "rotifer"
#: Resources listed per page (``nextCursor`` pages on).
RESOURCE_PAGE = 100
#: JSON-RPC codes for resources/read refusals: the MCP specification's
#: "resource not found", and invalid params / internal error.
RESOURCE_NOT_FOUND = -32002
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603


def resource_uri(agent: str, key: str) -> str:
    return f"{SCHEME}://{quote(agent, safe='')}/{quote(key, safe='/')}"


def parse_uri(agent: str, uri: str) -> str:
    """The key a ``rotifer://AGENT/KEY`` names (MEMORY_INVALID_INPUT if it names none here)."""
    parts = urlsplit(uri)
    if parts.scheme != SCHEME or unquote(parts.netloc) != agent or not parts.path[1:] \
            or parts.query or parts.fragment:
        raise AgentMemoryError(ErrorCode.INVALID_INPUT,
                               f"not an entry of agent '{agent}': resources are "
                               f"{SCHEME}://{quote(agent, safe='')}/KEY")
    return unquote(parts.path[1:], errors="strict")


def tool_result(payload: dict[str, Any]) -> dict[str, Any]:
    """A tool's result in its wire form: the JSON as text content and as structured content.

    A plain mapping, not the SDK's models: the SDK validates and shapes a result
    against the negotiated protocol version's schema whatever the handler returns,
    so building ``CallToolResult``/``TextContent`` first (and the SDK dumping them
    back to a mapping) was work done twice per call (docs/benchmarks.md,
    "rotifer mcp over stdio").  ``resultType`` is the 2026-07-28 protocol's
    (required there; earlier versions' schemas drop it).  The text is compact JSON."""
    return {"content": [{"type": "text", "text": _json_text(payload)}],
            "structuredContent": payload, "isError": False, "resultType": "complete"}


def tool_error(code: str, message: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": f"{code}: {message}"}],
            "structuredContent": {"error": {"code": code, "message": message}},
            "isError": True, "resultType": "complete"}


def _json_text(payload: dict[str, Any]) -> str:
    """Compact JSON text, encoded by pydantic's serializer (the SDK's own, in Rust):
    ~14 times faster than the standard library's for an entry's result."""
    return to_json(payload).decode("utf-8")


def _unexpected(exc: Exception) -> tuple[str, str]:
    code = getattr(exc, "code", None)
    if isinstance(code, str) and code.isupper():  # a RotiferError: CODE and message
        return code, str(getattr(exc, "message", exc))
    # Only the type: the text of an unexpected error could hold anything.
    return ErrorCode.STORAGE_ERROR.value, f"the server failed ({type(exc).__name__})"


def build_server(acting: Acting, policy: WritePolicy | None = None) -> Server[Any]:
    """The server acting as ``acting`` (a gene, with ``policy`` for its writes, or the deployer)."""
    specs = {s.name: s for s in tool_specs(acting, policy)}
    tools = [_tool(s) for s in specs.values()]

    async def list_tools(ctx: ServerRequestContext[Any],
                         params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: ServerRequestContext[Any],
                        params: types.CallToolRequestParams) -> dict[str, Any]:
        try:
            return tool_result(call(acting, specs, params.name, params.arguments))
        except AgentMemoryError as exc:
            body = error_json(exc)
            return tool_error(body["code"], body["message"])
        except Exception as exc:  # never a crash of the server: a tool error
            return tool_error(*_unexpected(exc))

    async def list_resources(ctx: ServerRequestContext[Any],
                             params: types.PaginatedRequestParams | None
                             ) -> types.ListResourcesResult:
        start = _cursor(params.cursor if params is not None else None)
        try:
            page = _page(acting, start)
        except AgentMemoryError as exc:
            raise MCPError(INTERNAL_ERROR, str(exc)) from None
        more = len(page) > RESOURCE_PAGE
        return types.ListResourcesResult(
            resources=[_resource(acting.agent, e) for e in page[:RESOURCE_PAGE]],
            next_cursor=str(start + RESOURCE_PAGE) if more else None)

    async def read_resource(ctx: ServerRequestContext[Any],
                            params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        uri = str(params.uri)
        try:
            key = parse_uri(acting.agent, uri)
            entry = acting.read(key, None)
        except AgentMemoryError as exc:
            code = INVALID_PARAMS if exc.code is ErrorCode.INVALID_INPUT else INTERNAL_ERROR
            raise MCPError(code, str(exc), error_json(exc)) from None
        except UnicodeDecodeError:
            raise MCPError(INVALID_PARAMS, "MEMORY_INVALID_INPUT: the key in the URI is not "
                           "UTF-8") from None
        if entry is None:
            raise MCPError(RESOURCE_NOT_FOUND, f"MEMORY_NOT_FOUND: no memory entry {key!r}",
                           {"uri": uri})
        value, encoding = encode_value(entry.value)
        content: types.TextResourceContents | types.BlobResourceContents
        if encoding == "text":
            content = types.TextResourceContents(uri=uri, text=value, mime_type="text/plain")
        else:
            content = types.BlobResourceContents(uri=uri, blob=value,
                                                 mime_type="application/octet-stream")
        return types.ReadResourceResult(contents=[content])

    server: Server[Any] = Server(
        "rotifer-memory", version=_version(),
        instructions=(f"The memory of rotifer agent '{acting.agent}'. Use memory_search before "
                      "asking the user again; write what is worth keeping with memory_write."
                      if acting.writes else
                      f"The memory of rotifer agent '{acting.agent}', as its deployer: read, "
                      "search and delete entries; nothing can be written here."),
        on_list_tools=list_tools,
        on_list_resources=list_resources, on_read_resource=read_resource)
    # Registered as a plain request handler: it answers the wire form (tool_result).
    server.add_request_handler("tools/call", types.CallToolRequestParams, call_tool)
    # No OpenTelemetry span per message (the SDK's default middleware): nothing about
    # the calls leaves the process but the answers, and each call costs less.
    server.middleware = []
    return server


def _tool(spec: ToolSpec) -> types.Tool:
    return types.Tool(
        name=spec.name, title=spec.title, description=spec.description,
        input_schema=spec.schema,
        annotations=types.ToolAnnotations(
            title=spec.title, read_only_hint=spec.read_only,
            destructive_hint=spec.destructive if not spec.read_only else None,
            idempotent_hint=spec.name != "memory_write" or None, open_world_hint=False))


def _cursor(cursor: str | None) -> int:
    if cursor is None:
        return 0
    if not cursor.isdigit() or len(cursor) > 12:
        raise MCPError(INVALID_PARAMS, "MEMORY_INVALID_INPUT: not a cursor of this server")
    return int(cursor)


def _page(acting: Acting, start: int) -> list[Any]:
    """Entries ``start`` .. ``start + RESOURCE_PAGE`` (one more, to tell if more follow)."""
    out = []
    for n, entry in enumerate(acting.readable()):
        if n >= start:
            out.append(entry)
            if len(out) > RESOURCE_PAGE:
                break
    return out


def _resource(agent: str, entry: Any) -> types.Resource:
    _, encoding = encode_value(entry.value)
    return types.Resource(
        uri=resource_uri(agent, entry.key), name=entry.key,
        title=entry.key,
        description=f"{entry.category.value} entry, {entry.size} bytes, updated "
                    f"{entry.updated_at}",
        mime_type="text/plain" if encoding == "text" else "application/octet-stream",
        size=len(entry.value))


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("rotifer")
    except PackageNotFoundError:  # pragma: no cover - run from a source tree
        return "0"
