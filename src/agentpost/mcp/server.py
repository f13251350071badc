"""The one seam to the `mcp` SDK (2.3.x; CONVENTIONS "One seam per foreign protocol").

The SDK's low-level `Server` serves `tools/list` from `catalog.TOOLS` (input schemas from the
argument Structs) and `tools/call` through `Toolbox.call`, over stdio. A result carries its
JSON as `structured_content` and a text block (`content.py`); a failure is `is_error` with
`{"error": {"code", "message", "retryable"}}` in both, so a model that reads only text still
sees the code. An unknown tool is the JSON-RPC error -32602. The low-level server is used
rather than `MCPServer` so that argument checks (and their error codes) are ours, not
pydantic's (docs/mcp.md). `front.py` answers the handshake before this module is loaded and
hands the connection over with `serve_handover`.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, cast

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

from agentpost.mcp import content
from agentpost.mcp.catalog import INSTRUCTIONS, SERVER_NAME, SERVER_VERSION, TOOLS, wire_tool
from agentpost.mcp.failures import ToolFailure, UnknownTool
from agentpost.mcp.tools import Toolbox

SDK_RANGE = ">=2.3,<3"


def _result(tool: str, outcome: dict[str, Any] | ToolFailure, hub: str) -> types.CallToolResult:
    if isinstance(outcome, ToolFailure):
        body: dict[str, Any] = outcome.body()
        blocks: list[types.ContentBlock] = [
            types.TextContent(type="text", text=json.dumps(body, ensure_ascii=False))
        ]
        return types.CallToolResult(content=blocks, structured_content=body, is_error=True)
    items: list[types.ContentBlock] = [
        types.TextContent(type="text", text=content.text_of(tool, outcome))
    ]
    for link in content.media_links(outcome, tool, hub):
        items.append(types.ResourceLink(type="resource_link", **link))
    return types.CallToolResult(content=items, structured_content=outcome, is_error=False)


def build_server(toolbox: Toolbox) -> Server[Any]:
    listed = [types.Tool.model_validate(wire_tool(spec)) for spec in TOOLS]

    async def list_tools(
        ctx: Any, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=listed)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        try:
            outcome = await toolbox.call(params.name, params.arguments)
        except UnknownTool as exc:
            raise MCPError(code=types.INVALID_PARAMS, message=str(exc)) from None
        return _result(params.name, outcome, toolbox.hub.hub)

    return Server(
        SERVER_NAME,
        version=SERVER_VERSION,
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


class _Lines:
    """The client's lines for the SDK: those the front already read, then the wire's."""

    def __init__(self, replay: Sequence[bytes], readline: Callable[[], bytes]) -> None:
        self.replay = list(replay)
        self.readline = readline

    async def __aiter__(self) -> AsyncIterator[str]:
        for line in self.replay:
            yield line.decode("utf-8", "replace")
        while line := await anyio.to_thread.run_sync(self.readline, abandon_on_cancel=True):
            yield line.decode("utf-8", "replace")


class _Out:
    """The SDK's lines to the client, less the answer to the front's replayed `initialize`
    (the client had that answer from the front already)."""

    def __init__(self, write: Callable[[bytes], None], drop_id: str | None) -> None:
        self.write_bytes = write
        self.drop = f'"id":"{drop_id}"' if drop_id is not None else None

    async def write(self, line: str) -> None:
        if self.drop is not None and self.drop in line:
            self.drop = None
            return
        await anyio.to_thread.run_sync(self.write_bytes, line.encode("utf-8"))

    async def flush(self) -> None:
        pass  # each write_bytes flushes


async def serve_handover(
    toolbox: Toolbox,
    replay: Sequence[bytes],
    readline: Callable[[], bytes],
    write: Callable[[bytes], None],
    drop_id: str | None,
) -> None:
    """Serve MCP on the wire the front claimed until the client closes it: `replay` first
    (the front's replayed `initialize` with id `drop_id`, and what came after it)."""
    server = build_server(toolbox)
    stdin, stdout = cast(Any, _Lines(replay, readline)), cast(Any, _Out(write, drop_id))
    try:
        async with stdio_server(stdin, stdout) as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())
    finally:
        await toolbox.hub.aclose()
