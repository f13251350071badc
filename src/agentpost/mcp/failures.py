"""How a tool fails (docs/mcp.md): a stable `code`, a `message` and `retryable`, so a
model knows whether calling again could help. Hub errors are translated here, once.

    ToolFailure              code, message, retryable
      from_hub(HubError)     the client's code and retryable; a refused token names
                             AGENTPOST_TOKEN; "no answer" says that the same call is safe
      from_egress(...)       a file refused by the egress roots (never retryable)
      token_refused(...)     the --token-file could not be used: every call says so
    UnknownTool              no such tool: a protocol error (-32602), not a tool's failure
"""

from __future__ import annotations

from agentpost.client import HubError, HubUnreachable
from agentpost.egress import EgressRefused

INVALID_ARGUMENTS = "invalid_arguments"
UNAUTHORIZED = "unauthorized"
TOKEN_FILE_REFUSED = "token_file_refused"
NOT_CONFIGURED = "not_configured"
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


class UnknownTool(Exception):
    """A call named no tool of tools/list; the server answers the JSON-RPC error the MCP
    spec names (-32602, "Unknown tool: <name>")."""

    def __init__(self, name: str) -> None:
        super().__init__(f"Unknown tool: {name}")
        self.name = name


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


def token_refused(message: str) -> ToolFailure:
    """The token file named at start could not be used (missing, unreadable, empty, not
    yours, open to other users): `message` names the file and what is wrong."""
    return ToolFailure(
        TOKEN_FILE_REFUSED,
        f"{message}; fix it and restart the MCP server (nothing was done)",
    )


def not_configured(message: str) -> ToolFailure:
    """The server's settings cannot work (a `--hub` that is no http(s) URL): `message`
    says which. Every call says so, rather than the server dying after its handshake."""
    return ToolFailure(NOT_CONFIGURED, f"{message}; fix it and restart the MCP server (nothing was done)")
