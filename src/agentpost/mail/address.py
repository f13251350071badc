"""Addressing: which session a name means (docs/mail.md).

Local sessions first — a recipient on this machine needs no ref and no push. Then
other machines' presence (live or stale) and the senders of mail received here, so
a reply works after the sender's machine went quiet. One name on two machines is
ambiguous and needs `--instance-id`.
"""

from __future__ import annotations

from dataclasses import dataclass

from agentpost.mail.clock import parse_ts
from agentpost.mail.envelope import Address
from agentpost.mail.errors import AmbiguousRecipient
from agentpost.mail.repo import check_name
from agentpost.mail.state import MailState
from agentpost.mail.view import RemoteView

LOCAL = "local"
PRESENCE = "presence"
RECEIVED = "received"


@dataclass(frozen=True)
class Candidate:
    address: Address
    source: str
    # Set for a session on this machine: its inbox gets the note directly.
    local_instance: str | None = None

    def describe(self) -> str:
        return f"{self.address.name}@{self.address.machine} (instance {self.address.instance_id})"


def parse_recipient(text: str) -> tuple[str, str | None]:
    """`NAME` or `NAME@MACHINE` (the form mail prints), each part a valid name."""
    name, at, machine = text.partition("@")
    check_name(name, "session")
    return name, (check_name(machine, "machine") if at else None)


def resolve(
    name: str,
    instance_id: str | None,
    me: str,
    state: MailState,
    view: RemoteView,
    machine: str | None = None,
) -> Candidate | None:
    """The one session `name` (on `machine` and with `instance_id`, if given) means;
    None if none is known."""
    if machine in (None, me):
        for inst in state.instances.values():
            if inst.name == name and instance_id in (None, inst.instance_id):
                addr = Address(me, inst.name, inst.instance_id)
                return Candidate(addr, LOCAL, local_instance=inst.instance_id)
        if machine == me:
            return None
    found = _remote_candidates(name, instance_id, me, state, view, machine)
    if not found:
        return None
    machines = {c.address.machine for c in found}
    if len(machines) > 1:
        raise AmbiguousRecipient(
            f"{name!r} is a session on {len(machines)} machines; write NAME@MACHINE or pass "
            "--instance-id: " + "; ".join(c.describe() for c in found),
            extra={"candidates": [_as_json(c) for c in found]},
        )
    # One machine: its presence is current, a remembered sender may be an older instance.
    by_presence = [c for c in found if c.source == PRESENCE]
    if len({c.address.instance_id for c in by_presence}) > 1:
        raise AmbiguousRecipient(
            f"{name!r} names several sessions on {found[0].address.machine}; pass --instance-id",
            extra={"candidates": [_as_json(c) for c in by_presence]},
        )
    return by_presence[0] if by_presence else found[-1]


def _remote_candidates(
    name: str,
    instance_id: str | None,
    me: str,
    state: MailState,
    view: RemoteView,
    machine: str | None,
) -> list[Candidate]:
    found: list[Candidate] = []
    presence = view.valid_presence()
    for other, doc in sorted(presence.items()):
        if other == me or machine not in (None, other) or _forgotten(state, other, doc.updated_at):
            continue
        for inst in doc.instances:
            if inst.name == name and instance_id in (None, inst.instance_id):
                found.append(Candidate(Address(other, inst.name, inst.instance_id), PRESENCE))
    # A machine renamed on purpose presents its pinned key under its new name.
    renamed = {
        m for m, pin in state.pins.items()
        if m not in presence
        and any(d.public_key == pin.public_key for o, d in presence.items() if o != m)
    }
    for imp in state.imported.values():
        sender = imp.sender
        other = imp.machine
        if other in (me, *renamed) or sender.get("name") != name or machine not in (None, other):
            continue
        if instance_id not in (None, sender.get("instance_id")) or _forgotten(state, other, imp.at):
            continue
        addr = Address(other, name, _opt_str(sender.get("instance_id")))
        if all(c.address != addr for c in found):
            found.append(Candidate(addr, RECEIVED))
    return found


def renamed_machines(state: MailState, view: RemoteView) -> dict[str, str]:
    """Former machine name → current one, for peers renamed with `mail rename-machine`.

    A renamed machine keeps its key: the name we pinned it under publishes no presence
    any more, and exactly one other name presents that key. Addressing finds it under
    the new name only (docs/mail.md, Addressing), so the old one is never an alias;
    a key shown under two names (a copied clone) names no successor.
    """
    presence = view.valid_presence()
    moved: dict[str, str] = {}
    for old, pin in state.pins.items():
        if old in presence:
            continue
        now_named = [m for m, doc in presence.items() if doc.public_key == pin.public_key]
        if len(now_named) == 1:
            moved[old] = now_named[0]
    return moved


def _forgotten(state: MailState, machine: str, seen_at: str) -> bool:
    """`mail forget` dropped `machine`, and what names it now is not newer than that."""
    rec = state.forgotten.get(machine)
    if rec is None:
        return False
    try:
        return parse_ts(seen_at) <= parse_ts(rec.at)
    except ValueError:
        return True


def _opt_str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _as_json(c: Candidate) -> dict[str, str | None]:
    a = c.address
    return {"machine": a.machine, "instance_id": a.instance_id, "name": a.name}
