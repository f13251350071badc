"""This clone's machine name: chosen at first use, then remembered (docs/mail.md).

`AGENTPOST_MACHINE`, else the host name, names the machine the first time mail is
used; the name is then kept in `.git/agentpost/machine.json`. Later, an environment
that names another machine (the variable forgotten in one shell, a host renamed, a
clone copied elsewhere) is refused loudly instead of splitting the machine in two:
only `mail rename-machine NEW` changes the name, and it remembers the former ones.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import msgspec

from agentpost.mail.errors import InvalidName, MachineChanged, StateUnreadable
from agentpost.mail.fsio import atomic_write
from agentpost.mail.repo import MACHINE_ENV, MailPaths, check_name

FROM_ENV = "AGENTPOST_MACHINE"
FROM_HOST = "host name"


class Identity(msgspec.Struct):
    """What `.git/agentpost/machine.json` holds."""

    machine: str
    # Names this clone published under before a `mail rename-machine`, oldest first.
    former: list[str] = msgspec.field(default_factory=list)


@dataclass(frozen=True)
class Asked:
    """The name the environment gives, and where it comes from."""

    name: str
    source: str = FROM_ENV

    @classmethod
    def from_env(cls) -> Asked:
        explicit = os.environ.get(MACHINE_ENV)
        if explicit:
            return cls(check_name(explicit, "machine"), FROM_ENV)
        return cls(check_name(socket.gethostname(), "machine"), FROM_HOST)


def identity_path(paths: MailPaths) -> Path:
    return paths.root / "machine.json"


def load_identity(paths: MailPaths) -> Identity | None:
    """The remembered identity; None before first use; a damaged file fails closed."""
    path = identity_path(paths)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        ident = msgspec.json.decode(data, type=Identity)
        check_name(ident.machine, "machine")
    except (msgspec.DecodeError, InvalidName) as exc:
        raise StateUnreadable(
            f"{path} cannot be read ({exc}); it names the machine this clone is. Restore "
            'it (`{"machine": "NAME"}`, NAME as the clone published it) and retry'
        ) from exc
    return ident


def save_identity(paths: MailPaths, ident: Identity) -> None:
    atomic_write(identity_path(paths), msgspec.json.encode(ident) + b"\n")


def resolve_machine(paths: MailPaths, own_presence: Callable[[], list[str]]) -> str:
    """The machine name commands act as; remembered on first use of mail in this clone.

    `own_presence` lists the machines this clone's own presence refs name; it is
    called only to adopt state written before names were remembered (an upgrade).
    """
    asked = Asked.from_env()
    ident = load_identity(paths)
    if ident is None:
        if not paths.root.is_dir():
            return asked.name  # mail never used here: remember nothing, write nothing
        ident = Identity(_first_name(asked, own_presence() if paths.log.exists() else []))
        save_identity(paths, ident)
    if asked.name != ident.machine:
        raise MachineChanged(_changed_message(ident.machine, asked))
    return ident.machine


def _first_name(asked: Asked, published: list[str]) -> str:
    # Before names were remembered, a clone's name was whatever each command saw; its
    # own presence refs show what it published under.
    if not published or asked.name in published:
        return asked.name
    if len(published) == 1:
        return published[0]  # adopted, then checked against the environment as usual
    raise MachineChanged(
        f"this clone published presence as {', '.join(sorted(published))}, and the "
        f"environment names {asked.name} ({asked.source}). Set {FROM_ENV} to the one "
        "this clone is, then drop the others with `agentpost mail forget NAME`",
        extra={"published": sorted(published)},
    )


def _changed_message(remembered: str, asked: Asked) -> str:
    how = (
        f"{FROM_ENV}={asked.name}"
        if asked.source == FROM_ENV
        else f"the host name {asked.name} ({FROM_ENV} is unset)"
    )
    return (
        f"this clone is mail machine {remembered} (remembered in .git/agentpost/machine.json), "
        f"but the environment names {how}. To keep the name, run "
        f"`export {FROM_ENV}={remembered}`; to rename this clone on purpose, run "
        f"`agentpost mail rename-machine {asked.name}`"
    )

