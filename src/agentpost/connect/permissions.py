"""`session/request_permission` (docs/connect.md): rejected unless allowed, chosen by the
option's `kind` (never by its id, which agents change between releases); every decision
is logged."""

from __future__ import annotations

import logging

from agentpost.connect.acp import PermissionOption

log = logging.getLogger("agentpost.connect.permissions")

KINDS = ("allow_once", "allow_always", "reject_once", "reject_always")
_REJECT_ORDER = ("reject_once", "reject_always")


class PermissionPolicy:
    def __init__(self, allowed_kinds: list[str]) -> None:
        unknown = [k for k in allowed_kinds if k not in KINDS]
        if unknown:
            raise ValueError(f"unknown permission kind(s): {', '.join(unknown)}")
        self.allowed = tuple(allowed_kinds)

    def choose(self, session_id: str, title: str, options: list[PermissionOption]) -> str | None:
        """The option id to answer with; None means the request is cancelled (refused)."""
        for kind in self.allowed:
            for o in options:
                if o.kind == kind:
                    log.info("permission %r in %s: allowed (%s)", title, session_id, kind)
                    return o.option_id
        for kind in _REJECT_ORDER:
            for o in options:
                if o.kind == kind:
                    log.info("permission %r in %s: rejected (%s)", title, session_id, kind)
                    return o.option_id
        log.info("permission %r in %s: refused (no reject option offered)", title, session_id)
        return None
