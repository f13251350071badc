"""`agentpost status EVENT_ID`: an event's delivery state, and waiting until every target
acked it or every agent it asked replied (docs/delivery.md)."""

from __future__ import annotations

import time
from typing import Any

import click

from agentpost.cli.app import main
from agentpost.cli.common import (
    EXIT_FINAL,
    EXIT_RETRY,
    client,
    emit,
    fail,
    hub_errors,
    hub_options,
    json_option,
    say,
    table,
)

ACKED = "acked"
REPLIED = "replied"
POLL_FIRST = 0.2
POLL_MAX = 2.0


def verdict(state: dict[str, Any], goal: str) -> tuple[bool | None, str]:
    """(True reached, False cannot be reached, None not yet; why) for `goal`."""
    if goal == ACKED:
        targets = state["targets"]
        if not targets:
            return False, "the event woke no one: nobody can ack it"
        waiting = [t for t in targets if t["state"] != ACKED]
        if not waiting:
            return True, "every target acked it"
        gone = [t["member"] for t in waiting if t["member_status"] != "active"]
        if gone:
            return False, f"removed before they acked: {', '.join(gone)}"
        return None, f"waiting for: {', '.join(t['member'] for t in waiting)}"
    receipts = state["receipts"]
    if not receipts:
        return False, "the event asked no agent: no reply is owed"
    pending = [r["member"] for r in receipts if r["state"] != REPLIED]
    if not pending:
        return True, "every agent it asked replied"
    status = {t["member"]: t["member_status"] for t in state["targets"]}
    gone = [n for n in pending if status.get(n, "removed") != "active"]
    if gone:
        return False, f"removed before they replied: {', '.join(gone)}"
    return None, f"waiting for: {', '.join(pending)}"


@main.command()
@click.argument("event_id")
@click.option(
    "--wait-for",
    type=click.Choice([ACKED, REPLIED]),
    default=None,
    help="Wait until every target acked it, or every agent it asked replied.",
)
@click.option(
    "--timeout", type=float, default=60.0, show_default=True, help="Seconds --wait-for waits."
)
@hub_options
@json_option
def status(
    event_id: str,
    wait_for: str | None,
    timeout: float,
    hub: str,
    token: str | None,
    as_json: bool,
) -> None:
    """Who got EVENT_ID, read it, acked it, replied to it. With --wait-for: exit 0 when
    reached, 1 when it cannot be, 75 when the timeout passes first."""
    deadline = time.monotonic() + timeout
    delay = POLL_FIRST
    with hub_errors(as_json), client(hub, token) as c:
        while True:
            state = c.delivery(event_id)
            if wait_for is None:
                break
            reached, why = verdict(state, wait_for)
            if reached is not None:
                break
            left = deadline - time.monotonic()
            if left <= 0:
                if not as_json:
                    _show(as_json, state)
                fail(
                    as_json,
                    "timeout",
                    f"not {wait_for} after {timeout:g} s ({why})",
                    True,
                    EXIT_RETRY,
                )
            time.sleep(min(delay, left))
            delay = min(delay * 2, POLL_MAX)
    if wait_for is not None and reached is False:
        if not as_json:
            _show(as_json, state)
        fail(as_json, "unreachable", f"cannot be {wait_for}: {why}", False, EXIT_FINAL)
    _show(as_json, state)


def _show(as_json: bool, state: dict[str, Any]) -> None:
    def human() -> None:
        table(
            ["target", "state", "read at", "acked at"],
            [[t["member"], t["state"], t["read_at"], t["acked_at"]] for t in state["targets"]],
            empty="(the event woke no one)",
        )
        for r in state["receipts"] or []:
            if r["state"] == REPLIED:
                say(f"{r['member']}: replied {r['reply_kind'] or ''} {r['receipt_event'] or ''}")
            else:
                say(f"{r['member']}: pending")

    emit(as_json, state, human)
