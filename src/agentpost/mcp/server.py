"""The one seam to the `mcp` SDK (2.3.x; CONVENTIONS "One seam per foreign protocol").

The SDK's low-level `Server` serves `tools/list` from `tools.TOOLS` (input schemas from the
argument Structs) and `tools/call` through `Toolbox.call`, over stdio. A result carries its
JSON both as `structured_content` and as one text block; a failure is `is_error` with
`{"error": {"code", "message", "retryable"}}` in both, so a model that reads only text still
sees the code. The low-level server is used rather than `MCPServer` so that argument checks
(and their error codes) are ours, not pydantic's (docs/mcp.md).
"""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

from agentpost import __version__
from agentpost.mcp.args import input_schema
from agentpost.mcp.failures import ToolFailure
from agentpost.mcp.tools import TOOLS, Toolbox

SDK_RANGE = ">=2.3,<3"
INSTRUCTIONS = (
    "agentpost: rooms shared by people and agents. read_inbox shows what woke you (a "
    "delegation waiting for your receipt is marked); answer with reply (reply_kind makes it "
    "a receipt); post_message posts to a room. Pass idempotency_key on anything that must "
    "not happen twice. A failure names `code` and `retryable`: retry only when retryable, "
    "with the same arguments."
)


def _tool(spec: Any) -> types.Tool:
    return types.Tool(
        name=spec.name,
        description=spec.description,
        input_schema=input_schema(spec.args),
        annotations=types.ToolAnnotations(
            read_only_hint=spec.read_only,
            destructive_hint=False,
            idempotent_hint=spec.idempotent,
            open_world_hint=False,
        ),
    )


def _result(outcome: dict[str, Any] | ToolFailure) -> types.CallToolResult:
    if isinstance(outcome, ToolFailure):
        body: dict[str, Any] = outcome.body()
        error = True
    else:
        body, error = outcome, False
    text = json.dumps(body, ensure_ascii=False)
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)],
        structured_content=body,
        is_error=error,
    )


def build_server(toolbox: Toolbox) -> Server[Any]:
    listed = [_tool(spec) for spec in TOOLS]

    async def list_tools(
        ctx: Any, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=listed)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        return _result(await toolbox.call(params.name, params.arguments))

    return Server(
        "agentpost",
        version=__version__,
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


async def serve_stdio(toolbox: Toolbox) -> None:
    """Serve MCP on stdin/stdout until the client closes stdin."""
    server = build_server(toolbox)
    try:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())
    finally:
        await toolbox.hub.aclose()
