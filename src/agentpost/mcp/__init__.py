"""The MCP server (docs/mcp.md): any MCP-capable agent posts, replies and reads its inbox
as tools, with the hub's once-only keys.

`catalog` names the tools; `tools` holds what each does, in our glossary, talking to the hub
only through `agentpost.client`; `server` is the one module that imports the `mcp` SDK;
`front` answers the handshake before either is loaded. The names below load on first use,
so importing this package stays as cheap as `agentpost mcp`'s start needs.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["TOOLS", "ToolFailure", "ToolSpec", "Toolbox"]
_HOME = {
    "TOOLS": "catalog",
    "ToolSpec": "catalog",
    "ToolFailure": "failures",
    "Toolbox": "tools",
}


def __getattr__(name: str) -> Any:
    if name in _HOME:
        return getattr(importlib.import_module(f"agentpost.mcp.{_HOME[name]}"), name)
    raise AttributeError(f"module 'agentpost.mcp' has no attribute {name!r}")
