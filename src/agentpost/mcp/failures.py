"""How a tool fails (docs/mcp.md): a stable `code`, a `message` and `retryable`, so a
model knows whether calling again could help. Hub errors are translated here, once.

    ToolFailure              code, message, retryable
      from_hub(HubError)     the client's code and retryable; a refused token names
                             AGENTPOST_TOKEN; "no answer" says what the call may have
                             done, by the tool's kind (reads, posts, other changes)
      from_egress(...)       a file refused by the egress roots (never retryable)
      token_refused(...)     the --token-file could not be used: every call says so
    UnknownTool              no such tool: a protocol error (-32602), not a tool's failure
"""

from __future__ import annotations

from agentpost.client import HubError, HubUnreachable
from agentpost.egress import EgressRefused
from agentpost.mcp.catalog import ToolSpec

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


def from_hub(exc: HubError, hub: str, spec: ToolSpec) -> ToolFailure:
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
        said = exc.message.rstrip(".")
        said += "" if said.endswith("?") else "."
        return ToolFailure(exc.code, f"{said} {_after_no_answer(spec)}", True)
    return ToolFailure(exc.code, exc.message, exc.retryable)


def _after_no_answer(spec: ToolSpec) -> str:
    """What a call without an answer may have done, said for the kind of tool it was: only
    a call that changes something can have half happened (docs/mcp.md "Failures")."""
    if spec.read_only:
        return f"Nothing changed ({spec.name} only reads): call it again once the hub answers"
    if spec.posts:
        return (
            f"The {spec.name} may or may not have posted: call it again with the same "
            "arguments (and the same idempotency_key), which never posts twice"
        )
    return (
        f"The {spec.name} may or may not have taken effect: calling it again with the same "
        "arguments is safe"
    )


def from_egress(exc: EgressRefused) -> ToolFailure:
    return ToolFailure(exc.code, f"{exc.message}; nothing was uploaded")


def no_token() -> ToolFailure:
    return ToolFailure(
        UNAUTHORIZED,
        "AGENTPOST_TOKEN is not set and no --token-file was given: start `agentpost mcp "
        "--token-file FILE` (a file of yours, mode 0600; or env AGENTPOST_TOKEN_FILE), or set "
        "AGENTPOST_TOKEN in its environment, to the member token it acts with",
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
