"""One mail command's surroundings: the repo, this machine, its remote, log and key.

Built once per command. Nothing here touches the disk or runs git until asked,
so a hook in a repo that never used mail stays free (docs/mail.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from agentpost.mail.errors import MachineChanged, NotJoined
from agentpost.mail.git import OWN_PREFIX, Git
from agentpost.mail.identity import identity_path, load_identity, resolve_machine
from agentpost.mail.inbox import Inbox
from agentpost.mail.keys import MachineKey, load_or_create_key
from agentpost.mail.log import Join, MailLog
from agentpost.mail.repo import MailPaths, Repo, find_repo, instance_from_env
from agentpost.mail.state import MailState


@dataclass
class MailContext:
    repo: Repo
    _machine: str | None = field(default=None, repr=False)
    _git: Git | None = field(default=None, repr=False)
    _remote: str | None = field(default=None, repr=False)

    @classmethod
    def discover(cls, start: Path | None = None, *, check_machine: bool = True) -> MailContext:
        """The context of the repository at `start`; once this clone remembers its machine
        name, an environment naming another is refused here, for every command alike."""
        ctx = cls(find_repo(start))
        if check_machine and identity_path(ctx.paths).exists():
            ctx.machine  # noqa: B018 - resolving is the check
        return ctx

    @property
    def machine(self) -> str:
        """This clone's machine name, remembered at first use (identity.py)."""
        if self._machine is None:
            self._machine = resolve_machine(self.paths, self._own_presence)
        return self._machine

    def remembered_machine(self) -> str:
        """The remembered name, whatever the environment says (for `rename-machine`)."""
        try:
            return self.machine
        except MachineChanged:
            ident = load_identity(self.paths)  # saved before the refusal, on an upgrade too
            if ident is None:
                raise
            return ident.machine

    def adopt_machine(self, name: str) -> None:
        """After a rename: act as `name` from now on."""
        self._machine = name

    def own_names(self) -> set[str]:
        """This clone's name and the ones it published under before a rename."""
        ident = load_identity(self.paths)
        return {self.machine, *(ident.former if ident else [])}

    def _own_presence(self) -> list[str]:
        prefix = f"{OWN_PREFIX}/presence/"
        return [ref.name.removeprefix(prefix) for ref in self.git.list_refs(prefix)]

    @property
    def paths(self) -> MailPaths:
        return self.repo.paths

    @property
    def git(self) -> Git:
        if self._git is None:
            self._git = Git(self.repo.worktree)
        return self._git

    @property
    def remote(self) -> str:
        if self._remote is None:
            self._remote = self.git.remote()
        return self._remote

    @property
    def log(self) -> MailLog:
        return MailLog(self.paths.log)

    def in_use(self) -> bool:
        """Mail was used on this clone: a session joined, so the log exists."""
        return self.log.exists()

    def load_state(self) -> MailState:
        return MailState.from_records(self.log.read().records)

    def key(self) -> MachineKey:
        return load_or_create_key(self.paths.key)

    def inbox(self, instance_id: str) -> Inbox:
        return Inbox(self.paths.inboxes, instance_id)

    def acting_instance(self, state: MailState) -> Join:
        """The session this command acts as: AGENTPOST_INSTANCE_ID, else the only one joined."""
        wanted = instance_from_env()
        if wanted is not None:
            inst = state.instances.get(wanted)
            if inst is None:
                raise NotJoined(
                    f"AGENTPOST_INSTANCE_ID={wanted} has not joined mail on machine {self.machine}"
                )
            return inst
        if len(state.instances) == 1:
            return next(iter(state.instances.values()))
        if not state.instances:
            raise NotJoined(
                "no session has joined mail here; run `agentpost mail join --name NAME`"
            )
        raise NotJoined(
            "several sessions joined mail on this machine; set AGENTPOST_INSTANCE_ID to one of "
            + ", ".join(f"{i.instance_id} ({i.name})" for i in state.instances.values())
        )
