"""The MCP server (docs/mcp.md): any MCP-capable agent posts, replies and reads its inbox
as tools, with the hub's once-only keys.

`tools` holds what each tool does, in our glossary, talking to the hub only through
`agentpost.client`; `server` is the one module that imports the `mcp` SDK.
"""

from agentpost.mcp.failures import ToolFailure
from agentpost.mcp.tools import TOOLS, Toolbox, ToolSpec

__all__ = ["TOOLS", "ToolFailure", "ToolSpec", "Toolbox"]
