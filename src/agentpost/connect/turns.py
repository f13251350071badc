"""A Turn: one prompt to the agent for one wake-up, and the reply it becomes (docs/connect.md).

The Worker collects the Turn's agent message text and `resource_link` files in wire order,
then maps how the Turn ended to the reply's `reply_kind` — stamped only when the trigger
was a delegation naming this agent (`delegated_to`); synthetic triggers get plain replies.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agentpost.connect.acp import Update

# How a Turn ended (kept in `connect status`).
END_TURN = "end_turn"
REFUSAL = "refusal"
CANCELLED = "cancelled"
NEEDS_INPUT = "needs_input"
ERROR = "error"
AGENT_CRASH = "agent_crash"
TIMEOUT = "timeout"
AGENT_UNAVAILABLE = "agent_unavailable"

RESULT = "result"
REPLY_KIND_META = "ag2/reply_kind"

_KIND_OF = {
    END_TURN: RESULT,
    NEEDS_INPUT: NEEDS_INPUT,
    CANCELLED: CANCELLED,
    REFUSAL: ERROR,
    ERROR: ERROR,
    AGENT_CRASH: ERROR,
    TIMEOUT: ERROR,
    AGENT_UNAVAILABLE: ERROR,
}


@dataclass
class TurnCollector:
    """What the agent said during a Turn, in order."""

    session_id: str
    text: list[str] = field(default_factory=list)
    links: list[tuple[str, str]] = field(default_factory=list)
    last_meta: dict[str, Any] = field(default_factory=dict)

    def add(self, update: Update) -> None:
        if update.kind == "text":
            self.text.append(update.text)
            self.last_meta = update.meta
        elif update.kind == "link":
            self.links.append((update.uri, update.name))
            self.last_meta = update.meta


@dataclass
class TurnResult:
    outcome: str
    text: str
    links: list[tuple[str, str]]
    detail: str = ""


def ended(stop_reason: str, response_meta: dict[str, Any], c: TurnCollector) -> TurnResult:
    """The Turn's outcome from the prompt's stop reason and the final message's `_meta`."""
    asked = response_meta.get(REPLY_KIND_META) or c.last_meta.get(REPLY_KIND_META)
    if stop_reason == END_TURN:
        outcome = NEEDS_INPUT if asked == NEEDS_INPUT else END_TURN
    elif stop_reason in (CANCELLED, REFUSAL):
        outcome = stop_reason
    else:  # max_tokens, max_turn_requests: the agent stopped before it was done
        outcome = ERROR
    return TurnResult(outcome, "".join(c.text).strip(), list(c.links), stop_reason)


def failed(outcome: str, detail: str, c: TurnCollector | None) -> TurnResult:
    text = "".join(c.text).strip() if c else ""
    return TurnResult(outcome, text, list(c.links) if c else [], detail)


def reply_kind(result: TurnResult, delegated_to_me: bool) -> str | None:
    return _KIND_OF[result.outcome] if delegated_to_me else None


def reply_text(result: TurnResult, agent: str) -> str:
    """The reply's text: what the agent said, and plainly what went wrong, if anything."""
    said = result.text
    if result.outcome in (END_TURN, NEEDS_INPUT):
        return said or ("(no text)" if not result.links else "")
    if result.outcome == CANCELLED:
        return (said + "\n\n" if said else "") + f"(@{agent}'s Turn was cancelled)"
    if result.outcome == REFUSAL:
        return said or f"(@{agent} refused this request)"
    reason = {
        AGENT_CRASH: "the agent process stopped mid-Turn; this Turn was lost",
        TIMEOUT: "the Turn ran past its time limit and was stopped",
        AGENT_UNAVAILABLE: "the agent could not be started",
        ERROR: "the agent ended the Turn with an error",
    }[result.outcome]
    detail = f": {result.detail}" if result.detail else ""
    return (said + "\n\n" if said else "") + f"(@{agent}: {reason}{detail})"
