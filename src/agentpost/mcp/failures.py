"""How a tool fails (docs/mcp.md): a stable `code`, a `message` and `retryable`, so a
model knows whether calling again could help. Hub errors are translated here, once.

    ToolFailure              code, message, retryable
      from_hub(HubError)     the client's code and retryable; a refused token names
                             AGENTPOST_TOKEN; "no answer" says that the same call is safe
      from_egress(...)       a file refused by the egress roots (never retryable)
"""

from __future__ import annotations

from agentpost.client import HubError, HubUnreachable
from agentpost.egress import EgressRefused

INVALID_ARGUMENTS = "invalid_arguments"
UNKNOWN_TOOL = "unknown_tool"
UNAUTHORIZED = "unauthorized"
INTERNAL = "internal"

_REMOVED = ("agent_removed", "member_removed")


class ToolFailure(Exception):
    def __init__(self, code: str, message: str, retryable: bool = False) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.retryable = retryable

    def body(self) -> dict[str, object]:
        return {"error": {"code": self.code, "message": self.message, "retryable": self.retryable}}


def from_hub(exc: HubError, hub: str) -> ToolFailure:
    if exc.status == 401 or exc.code == UNAUTHORIZED:
        return ToolFailure(
            UNAUTHORIZED,
            f"the hub at {hub} refused the member token in AGENTPOST_TOKEN ({exc.message}); "
            "set AGENTPOST_TOKEN to a valid member token and restart the MCP server",
        )
    if exc.code in _REMOVED:
        return ToolFailure(
            exc.code, f"{exc.message} (the member of AGENTPOST_TOKEN); nothing was done"
        )
    if isinstance(exc, HubUnreachable):
        return ToolFailure(
            exc.code,
            f"{exc.message}. If this was a post, it may or may not have happened: call again "
            "with the same arguments (and the same idempotency_key), which never posts twice",
            True,
        )
    return ToolFailure(exc.code, exc.message, exc.retryable)


def from_egress(exc: EgressRefused) -> ToolFailure:
    return ToolFailure(exc.code, f"{exc.message}; nothing was uploaded")


def no_token() -> ToolFailure:
    return ToolFailure(
        UNAUTHORIZED,
        "AGENTPOST_TOKEN is not set: the MCP server needs a member token in its environment",
    )
