"""`session/request_permission` (docs/connect.md): rejected unless allowed, chosen by the
option's `kind` (never by its id, which agents change between releases); every decision
is logged. One exception to the default: a read (tool kind `read`) of files strictly
inside the running Turn's attachment folder is allowed once — the agent must read what
it was sent, and nothing wider.

The policy holds only while the agent asks: each session is put in the mode in which the
agent asks before it acts, whatever mode the adapter opens it in, unless the person chose
the agent's own mode (`connect --agent-mode`, docs/architecture.md#agent-modes)."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

from agentpost.connect.acp import AgentConnection, PermissionAsk, SessionFailed

log = logging.getLogger("agentpost.connect.permissions")

KINDS = ("allow_once", "allow_always", "reject_once", "reject_always")
_REJECT_ORDER = ("reject_once", "reject_always")
ALLOW_FLAG_HINT = "start the Worker with --allow-permission allow_once to allow"
# Modes in which an agent asks (`session/request_permission`) before it edits a file or runs
# a command, by the ids adapters advertise, best first: claude-agent-acp and Gemini CLI
# `default`; codex-acp `read-only` (its `workspace-write` edits the repo unasked).
ASKING_MODES = ("default", "read-only", "ask")
# Modes in which an agent decides alone: claude-agent-acp `auto` (its default since 0.100),
# `acceptEdits`, `bypassPermissions`, `dontAsk`; codex-acp `agent` ("Auto review", its
# default since 2.0), `workspace-write`, `agent-full-access`; Gemini CLI `autoEdit`, `yolo`.
SELF_DECIDING_MODES = (
    "auto",
    "acceptEdits",
    "bypassPermissions",
    "dontAsk",
    "agent",
    "workspace-write",
    "agent-full-access",
    "autoEdit",
    "yolo",
)
AGENT_MODE_FLAG = "--agent-mode"


@dataclass(frozen=True)
class PermissionDecision:
    """The option to answer with (None: the request is cancelled), whether that allows the
    tool call, and the policy in a few words when it does not (for the Turn's reply)."""

    option_id: str | None
    allowed: bool
    policy: str = ""


@dataclass(frozen=True)
class ModeChoice:
    """The mode to put a session in (None: leave it as it is), and why, for the log."""

    mode_id: str | None
    why: str


def choose_mode(current: str, available: tuple[str, ...], chosen: str | None) -> ModeChoice:
    """The session's mode: the person's choice (`chosen`), else one in which the agent asks
    before it acts. `SessionFailed` when neither can be had: the session is not used in a
    mode where the agent would decide alone."""
    if chosen is not None:
        if chosen not in available:
            raise SessionFailed(
                f"{AGENT_MODE_FLAG} {chosen} is not a mode this agent offers "
                f"({', '.join(available) or 'none'})"
            )
        return ModeChoice(
            chosen, f"{chosen}, chosen with {AGENT_MODE_FLAG}: the agent decides in its own "
            "mode and asks the Worker only what that mode asks"
        )
    if current in ASKING_MODES:
        return ModeChoice(current, f"{current}, in which the agent asks before it acts")
    for mode in ASKING_MODES:
        if mode in available:
            return ModeChoice(
                mode, f"{mode} (the agent opened it in {current}), in which it asks before it acts"
            )
    if current in SELF_DECIDING_MODES:
        raise SessionFailed(
            f"the agent opens sessions in mode {current}, where it acts without asking, and "
            f"offers no mode in which it asks ({', '.join(available)}); choose one of its modes "
            f"with {AGENT_MODE_FLAG} to run it so"
        )
    log.warning("the agent's mode %s is not one the Worker knows (%s): kept; whether it asks "
                "before acting is the agent's", current, ", ".join(available))
    return ModeChoice(None, current)


class PermissionPolicy:
    def __init__(self, allowed_kinds: list[str], agent_mode: str | None = None) -> None:
        unknown = [k for k in allowed_kinds if k not in KINDS]
        if unknown:
            raise ValueError(f"unknown permission kind(s): {', '.join(unknown)}")
        self.allowed = tuple(allowed_kinds)
        self.agent_mode = agent_mode  # the agent's own mode, chosen by the person

    async def hold_mode(self, conn: AgentConnection, session_id: str) -> None:
        """Before each Turn: the session is in the mode the policy wants (the agent may have
        left it), set with `session/set_mode`; said once per session. An agent that
        advertises no modes is left as it is. `SessionFailed`: not to be used."""
        modes = conn.modes.get(session_id)
        if modes is None or conn.settled_modes.get(session_id) == modes.current:
            return  # no modes, or still in the one settled on
        try:
            choice = choose_mode(modes.current, modes.available, self.agent_mode)
            if choice.mode_id is not None and modes.current != choice.mode_id:
                await conn.set_mode(session_id, choice.mode_id)
        except SessionFailed as exc:  # the room is told the Worker's words; the log has more
            said = f": {exc.agent_message}" if exc.agent_message else ""
            log.error("session %s not used: %s%s", session_id, exc, said)
            raise
        conn.settled_modes[session_id] = modes.current
        if choice.mode_id is not None:
            log.info("session %s in mode %s", session_id, choice.why)

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
