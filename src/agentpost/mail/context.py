"""One mail command's surroundings: the repo, this machine, its remote, log and key.

Built once per command. Nothing here touches the disk or runs git until asked,
so a hook in a repo that never used mail stays free (DESIGN.md §7).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from agentpost.mail.errors import NotJoined
from agentpost.mail.git import Git
from agentpost.mail.inbox import Inbox
from agentpost.mail.keys import MachineKey, load_or_create_key
from agentpost.mail.log import Join, MailLog
from agentpost.mail.repo import MailPaths, Repo, find_repo, instance_from_env, machine_name
from agentpost.mail.state import MailState


@dataclass
class MailContext:
    repo: Repo
    machine: str
    _git: Git | None = field(default=None, repr=False)
    _remote: str | None = field(default=None, repr=False)

    @classmethod
    def discover(cls, start: Path | None = None) -> MailContext:
        return cls(find_repo(start), machine_name())

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
