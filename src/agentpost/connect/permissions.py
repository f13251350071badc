"""`session/request_permission` (docs/connect.md): rejected unless allowed, chosen by the
option's `kind` (never by its id, which agents change between releases); every decision
is logged. One exception to the default: a read (tool kind `read`) of files strictly
inside the running Turn's attachment folder is allowed once — the agent must read what
it was sent, and nothing wider."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

from agentpost.connect.acp import PermissionAsk

log = logging.getLogger("agentpost.connect.permissions")

KINDS = ("allow_once", "allow_always", "reject_once", "reject_always")
_REJECT_ORDER = ("reject_once", "reject_always")
ALLOW_FLAG_HINT = "start the Worker with --allow-permission allow_once to allow"


@dataclass(frozen=True)
class PermissionDecision:
    """The option to answer with (None: the request is cancelled), whether that allows the
    tool call, and the policy in a few words when it does not (for the Turn's reply)."""

    option_id: str | None
    allowed: bool
    policy: str = ""


class PermissionPolicy:
    def __init__(self, allowed_kinds: list[str]) -> None:
        unknown = [k for k in allowed_kinds if k not in KINDS]
        if unknown:
            raise ValueError(f"unknown permission kind(s): {', '.join(unknown)}")
        self.allowed = tuple(allowed_kinds)

    def choose(self, ask: PermissionAsk, readable: Path | None = None) -> PermissionDecision:
        """`readable`: the running Turn's attachment folder, whose files may be read."""
        what, sid = ask.what(), ask.session_id
        for kind in self.allowed:
            for o in ask.options:
                if o.kind == kind:
                    allows = kind.startswith("allow")
                    verb = "allowed" if allows else "rejected"
                    log.info("permission %r in %s: %s (%s)", what, sid, verb, kind)
                    return PermissionDecision(o.option_id, allows, "" if allows else f"policy: {kind}")
        if readable is not None and ask.kind == "read" and _all_inside(ask.paths, readable):
            for o in ask.options:
                if o.kind == "allow_once":
                    log.info("permission %r in %s: allowed (allow_once): a read of this Turn's "
                             "attachments only", what, sid)
                    return PermissionDecision(o.option_id, True)
        policy = (
            f"policy: allow {', '.join(self.allowed)}, which the agent did not offer"
            if any(k.startswith("allow") for k in self.allowed)
            else f"policy: reject; {ALLOW_FLAG_HINT}"
        )
        for kind in _REJECT_ORDER:
            for o in ask.options:
                if o.kind == kind:
                    log.info("permission %r in %s: rejected (%s)", what, sid, kind)
                    return PermissionDecision(o.option_id, False, policy)
        log.info("permission %r in %s: refused (no reject option offered)", what, sid)
        return PermissionDecision(None, False, policy)


def _all_inside(paths: tuple[str, ...], folder: Path) -> bool:
    """Every path lies strictly inside `folder` once symlinks and `..` are resolved (a link
    in the folder to a file elsewhere is elsewhere); no path at all is not inside."""
    if not paths:
        return False
    root = os.path.realpath(folder)
    for p in paths:
        if not os.path.isabs(p):
            return False
        if not os.path.realpath(p).startswith(root + os.sep):
            return False
    return True
