"""A Turn: one prompt to the agent for one wake-up, and the reply it becomes (docs/connect.md).

The Worker collects the Turn's agent message text and `resource_link` files in wire order,
then maps how the Turn ended to the reply's `reply_kind` — stamped only when the trigger
was a delegation naming this agent (`delegated_to`); synthetic triggers get plain replies.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from agentpost.connect.acp import PermissionAsk, Update
from agentpost.connect.permissions import PermissionDecision

# How a Turn ended (kept in `connect status`).
END_TURN = "end_turn"
REFUSAL = "refusal"
CANCELLED = "cancelled"
NEEDS_INPUT = "needs_input"
ERROR = "error"
AGENT_CRASH = "agent_crash"
AGENT_BROKEN = "agent_broken"
TIMEOUT = "timeout"
AGENT_UNAVAILABLE = "agent_unavailable"
SESSION_FAILED = "session_failed"  # the agent runs but did not open the Turn's session
# The agent ended its Turn cancelled after the Worker refused it a permission (and no one
# asked to stop it): the refusal is what ended it, so it is said, as an error.
PERMISSION_REFUSED = "permission_refused"

INTERRUPTED = "interrupted"
EXPIRED = "expired"
WORKER_ERROR = "worker_error"

RESULT = "result"
# The reply's text is cut here (the hub takes 65,536 characters); the Worker keeps no more
# of a Turn's text than this, however much the agent streams.
MAX_REPLY_CHARS = 60000
MAX_LINKS = 64
MAX_REFUSALS = 20
REPLY_KIND_META = "ag2/reply_kind"
# Updates that say something about the session, not that the agent did something between
# two runs of its text: they may come at any time, mid-sentence too, and never split it.
_NOT_A_BREAK = frozenset(
    {
        "available_commands_update",
        "current_mode_update",
        "config_option_update",
        "session_info_update",
        "usage_update",
        "notice",  # an adapter's warning (logged by connect/acp.py), never reply text
    }
)
PARAGRAPH = "\n\n"

_KIND_OF = {
    END_TURN: RESULT,
    NEEDS_INPUT: NEEDS_INPUT,
    CANCELLED: CANCELLED,
    REFUSAL: ERROR,
    ERROR: ERROR,
    AGENT_CRASH: ERROR,
    AGENT_BROKEN: ERROR,
    TIMEOUT: ERROR,
    AGENT_UNAVAILABLE: ERROR,
    SESSION_FAILED: ERROR,
    PERMISSION_REFUSED: ERROR,
    INTERRUPTED: ERROR,
    EXPIRED: ERROR,
    WORKER_ERROR: ERROR,
}


@dataclass
class TurnCollector:
    """What the agent said during a Turn, in order."""

    session_id: str
    text: list[str] = field(default_factory=list)
    links: list[tuple[str, str]] = field(default_factory=list)
    last_meta: dict[str, Any] = field(default_factory=dict)
    kept: int = 0  # characters of text kept (at most MAX_REPLY_CHARS)
    total: int = 0  # characters the agent sent
    dropped_links: int = 0
    # The agent did something else (a tool call, a thought) since its last text: the next
    # text starts a new run, set off by a paragraph break (chunks of one run are tokens).
    broken: bool = False
    # The ACP `messageId` of the last text: text of another message is another run (an
    # adapter's line must never be glued onto the model's words, docs/architecture.md#agent-modes).
    message_id: str = ""
    readable: Path | None = None  # this Turn's attachments, which the agent may read
    refused: list[tuple[str, str]] = field(default_factory=list)  # (what, policy)

    def decided(self, ask: PermissionAsk, decision: PermissionDecision) -> None:
        """A permission the agent asked for in this Turn; a refusal is said in the reply."""
        if not decision.allowed and len(self.refused) < MAX_REFUSALS:
            self.refused.append((ask.what(), decision.policy))

    def add(self, update: Update) -> None:
        if update.kind == "text":
            text = update.text
            if not text:
                return  # an empty chunk (claude-agent-acp opens each message so) is no run
            if self.text and update.message_id != self.message_id:
                self.broken = True
            self.message_id = update.message_id
            if self.broken and self.text:
                text = _paragraph_between(self.text[-1], text) + text
            self.broken = False
            room = MAX_REPLY_CHARS - self.kept
            if room > 0:
                piece = text[:room]
                self.text.append(piece)
                self.kept += len(piece)
            self.total += len(text)
            self.last_meta = update.meta
            return
        if update.kind == "other" and update.update not in _NOT_A_BREAK:
            self.broken = True
        elif update.kind == "link":
            if len(self.links) < MAX_LINKS:
                self.links.append((update.uri, update.name))
            else:
                self.dropped_links += 1
            self.last_meta = update.meta

    def cut(self) -> int:
        """The text's full length when it was cut, else 0."""
        return self.total if self.total > self.kept else 0


def _paragraph_between(before: str, after: str) -> str:
    """What sets two runs of text apart: a paragraph break, less the newlines they have."""
    have = len(before) - len(before.rstrip("\n")) + len(after) - len(after.lstrip("\n"))
    return PARAGRAPH[: max(0, len(PARAGRAPH) - have)]


@dataclass
class TurnResult:
    outcome: str
    text: str
    links: list[tuple[str, str]]
    detail: str = ""
    cut_from: int = 0  # the text's full length when only MAX_REPLY_CHARS were kept
    dropped_links: int = 0
    refused: list[tuple[str, str]] = field(default_factory=list)  # permissions, (what, policy)
    # Files named as file:/// links in the text (`named_files`): sent like `links`, but one
    # in the Worker's own folder (an attachment's link repeated) is skipped without a notice.
    named: list[tuple[str, str]] = field(default_factory=list)


def ended(
    stop_reason: str,
    response_meta: dict[str, Any],
    c: TurnCollector,
    cancel_asked: bool = False,
) -> TurnResult:
    """The Turn's outcome from the prompt's stop reason and the final message's `_meta`;
    `cancel_asked`: the Worker cancelled it (`/stop`), so a cancel is no refusal's doing."""
    asked = response_meta.get(REPLY_KIND_META) or c.last_meta.get(REPLY_KIND_META)
    if stop_reason == END_TURN:
        outcome = NEEDS_INPUT if asked == NEEDS_INPUT else END_TURN
    elif stop_reason == CANCELLED and c.refused and not cancel_asked:
        outcome = PERMISSION_REFUSED
    elif stop_reason in (CANCELLED, REFUSAL):
        outcome = stop_reason
    else:  # max_tokens, max_turn_requests: the agent stopped before it was done
        outcome = ERROR
    text = "".join(c.text).strip()
    in_text = named_files(text, c.links)
    named = in_text[: max(0, MAX_LINKS - len(c.links))]
    dropped = c.dropped_links + len(in_text) - len(named)
    return TurnResult(
        outcome, text, list(c.links), stop_reason, c.cut(), dropped, list(c.refused), named
    )


# A `file://` link written in the reply's text (Zed's adapters render resource links so, and
# real agents' models write them): the absolute path up to whitespace or a closing bracket.
FILE_LINK = re.compile(r"file://(/[^\s)\]>\"'`]+)")


def named_files(text: str, links: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Files the agent named as `file:///…` links in its text, beyond its `resource_link`s:
    real agents (Claude Code, Codex, Gemini CLI) send text only, so this is how they hand a
    file back. Each is judged by the same egress rules as any link (docs/connect.md)."""
    seen = {uri for uri, _ in links}
    out: list[tuple[str, str]] = []
    for m in FILE_LINK.finditer(text):
        path = m.group(1).rstrip(".,;:!?")
        uri = "file://" + path
        if uri in seen:
            continue
        seen.add(uri)
        out.append((uri, os.path.basename(unquote(path))))
    return out


def failed(outcome: str, detail: str, c: TurnCollector | None) -> TurnResult:
    if c is None:
        return TurnResult(outcome, "", [], detail)
    text = "".join(c.text).strip()
    return TurnResult(
        outcome, text, list(c.links), detail, c.cut(), c.dropped_links, list(c.refused)
    )


def reply_kind(result: TurnResult, delegated_to_me: bool) -> str | None:
    return _KIND_OF[result.outcome] if delegated_to_me else None


def reply_text(result: TurnResult, agent: str) -> str:
    """The reply's text: what the agent said, and plainly what went wrong, if anything;
    a cut text says that it was cut (its end never reached the room)."""
    said = result.text
    if result.cut_from:
        said += (
            f"\n\n(cut: the reply was {result.cut_from:,} characters; "
            f"only the first {MAX_REPLY_CHARS:,} are posted)"
        )
    if result.dropped_links:
        said += f"\n\n({result.dropped_links} more file(s) named by the agent were not sent)"

    if result.outcome == PERMISSION_REFUSED:
        what, policy = result.refused[-1]
        return (said + "\n\n" if said else "") + (
            f"(@{agent}: the agent asked permission for {what} and the Worker refused it "
            f"({policy}))"
        )
    if result.outcome in (END_TURN, NEEDS_INPUT):
        said = said or ("(no text)" if not result.links else "")
        if result.refused:  # the agent went on without it: say what it was refused
            names = "; ".join(what for what, _ in result.refused)
            said = (said + "\n\n" if said else "") + (
                f"(the Worker refused the agent permission for: {names})"
            )
        return said
    if result.outcome == CANCELLED:
        return (said + "\n\n" if said else "") + f"(@{agent}'s Turn was cancelled)"
    if result.outcome == REFUSAL:
        return said or f"(@{agent} refused this request)"
    if result.outcome == SESSION_FAILED:  # the agent runs: not "could not be started"
        why = result.detail or "the agent could not open a session"
        return f"(@{agent}: {why}; this Turn was not run, and the Worker's log says more)"
    reason = {
        AGENT_CRASH: "the agent process stopped mid-Turn; this Turn was lost",
        AGENT_BROKEN: "the agent sent what cannot be read; it is restarted and this Turn "
        "was lost",
        TIMEOUT: "the Turn ran past its time limit and was stopped",
        AGENT_UNAVAILABLE: "the agent could not be started",
        ERROR: "the agent ended the Turn with an error",
        INTERRUPTED: "the Turn was interrupted after part of its reply was posted; "
        "it is not run again",
        EXPIRED: "this wake-up was not run: it is older than the hub keeps reply keys, so an "
        "earlier reply to it could not be ruled out",
        WORKER_ERROR: "the Worker failed on this Turn",
    }[result.outcome]
    detail = f": {result.detail}" if result.detail else ""
    return (said + "\n\n" if said else "") + f"(@{agent}: {reason}{detail})"
