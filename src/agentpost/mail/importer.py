"""Whether one envelope from a peer's mail ref may enter a local inbox (docs/mail.md).

Every acceptance rule is here, in the order applied. An envelope for another
machine is none of our business (skipped, not reported); a duplicate is skipped;
everything else refused is reported by `mail sync` with its reason and stays unacked.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime

from agentpost.core.jcs import canonical
from agentpost.mail import envelope as env_mod
from agentpost.mail.clock import parse_ts
from agentpost.mail.envelope import Envelope
from agentpost.mail.limits import MAX_BODY_BYTES, MAX_CLOCK_SKEW
from agentpost.mail.log import Join
from agentpost.mail.state import MailState

# Refusal reasons, stable: they appear in `mail sync --json` under "refused".
MALFORMED = "malformed"
SENDER_MISMATCH = "sender_mismatch"
EXPIRED = "expired"
MISSING_SIGNATURE = "missing_signature"
KEY_CHANGED = "key_changed"
UNKNOWN_KEY = "unknown_key"
BAD_SIGNATURE = "bad_signature"
NO_RECIPIENT = "no_recipient"
INBOX_FULL = "inbox_full"
BAD_TIMESTAMP = "bad_timestamp"
BODY_TOO_LARGE = "body_too_large"
DUPLICATE_ID = "duplicate_id"
# Whole-ref reasons come from the document reader: corrupt_ref, too_large,
# machine_mismatch, bad_ref_name (see wire.py and view.py).

ACCEPT = "accept"
SKIP = "skip"
REFUSE = "refuse"


@dataclass(frozen=True)
class Verdict:
    action: str
    reason: str = ""
    envelope: Envelope | None = None
    recipient: Join | None = None


def judge(
    raw: object,
    ref_machine: str,
    me: str,
    state: MailState,
    changed_keys: set[str],
    now: datetime,
    former: Collection[str] = (),
) -> Verdict:
    """Accept, skip or refuse `raw`, found in the mail ref of `ref_machine`.

    `former` are this clone's names before a `rename-machine`: notes addressed to them
    are still ours (senders learn the new name from presence at their next sync).
    """
    if not isinstance(raw, dict):
        return Verdict(REFUSE, MALFORMED)
    to = raw.get("to")
    if not isinstance(to, dict) or (to.get("machine") != me and to.get("machine") not in former):
        # Addressed elsewhere: other machines' mail shares the ref; not ours to judge.
        return Verdict(SKIP) if isinstance(to, dict) else Verdict(REFUSE, MALFORMED)
    try:
        env = env_mod.decode(raw)
    except ValueError:
        return Verdict(REFUSE, MALFORMED)
    if env.from_.machine != ref_machine:
        # Only the ref of the machine an envelope names may carry it.
        return Verdict(REFUSE, SENDER_MISMATCH, env)
    if state.seen(ref_machine, env.id, now):
        return Verdict(SKIP, envelope=env)
    sent, expires = parse_ts(env.sent_at), parse_ts(env.expires_at)
    if sent > now + MAX_CLOCK_SKEW or expires <= sent:
        # Dated far ahead (or ending before it began): it would sit in dedup and acks
        # for as long as its sender likes.
        return Verdict(REFUSE, BAD_TIMESTAMP, env)
    if len(env.body.encode("utf-8")) > MAX_BODY_BYTES:
        # The sender's cap, applied again: a peer's software is not ours to trust.
        return Verdict(REFUSE, BODY_TOO_LARGE, env)
    if env.expired(now):
        return Verdict(REFUSE, EXPIRED, env)
    if env.sig is None:
        return Verdict(REFUSE, MISSING_SIGNATURE, env)
    if ref_machine in changed_keys:
        return Verdict(REFUSE, KEY_CHANGED, env)
    pin = state.pins.get(ref_machine)
    if pin is None:
        return Verdict(REFUSE, UNKNOWN_KEY, env)
    if not env_mod.signature_valid(raw, pin.public_key):
        return Verdict(REFUSE, BAD_SIGNATURE, env)
    recipient = _recipient(env, state)
    if recipient is None:
        return Verdict(REFUSE, NO_RECIPIENT, env)
    return Verdict(ACCEPT, envelope=env, recipient=recipient)


def _recipient(env: Envelope, state: MailState) -> Join | None:
    # The instance the sender saw in presence; if that session re-joined under a
    # new id, the name still finds it.
    if env.to.instance_id is not None and env.to.instance_id in state.instances:
        return state.instances[env.to.instance_id]
    return state.instance_by_name(env.to.name)


def repeated_ids(outbox: Sequence[object]) -> set[int]:
    """Positions in one outbox refused as `duplicate_id`.

    One machine offers each id once. Copies of one identical envelope are the same
    note: the first is judged, later copies are reported. Different envelopes under one
    id cannot all be right and none is chosen by guess: all of them are refused.
    """
    seen: dict[str, list[int]] = {}
    for pos, raw in enumerate(outbox):
        if isinstance(raw, dict) and isinstance(raw.get("id"), str):
            seen.setdefault(raw["id"], []).append(pos)
    refused: set[int] = set()
    for positions in seen.values():
        if len(positions) < 2:
            continue
        forms = {canonical(outbox[pos]) for pos in positions}
        refused.update(positions[1:] if len(forms) == 1 else positions)
    return refused
