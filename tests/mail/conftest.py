"""Real git for mail tests: a bare remote in a temp dir and clones acting as machines.

Every clone runs the real CLI (`python -m agentpost mail …`) in a subprocess with its
own AGENTPOST_MACHINE, so two clones are two machines (DESIGN.md §7).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest


def git_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTPOST_", "GIT_"))}
    env.update(
        HOME=str(home),
        GIT_CONFIG_NOSYSTEM="1",
        GIT_AUTHOR_NAME="test",
        GIT_AUTHOR_EMAIL="test@example.invalid",
        GIT_COMMITTER_NAME="test",
        GIT_COMMITTER_EMAIL="test@example.invalid",
    )
    return env


def git(cwd: Path, *args: str, env: dict[str, str], stdin: bytes | None = None) -> str:
    out = subprocess.run(
        ["git", *args], cwd=cwd, env=env, input=stdin, capture_output=True, check=True, timeout=60
    )
    return out.stdout.decode().strip()


@dataclass
class Result:
    code: int
    stdout: str
    stderr: str

    @property
    def json(self) -> Any:
        return json.loads(self.stdout)


@dataclass
class Clone:
    """One clone of the shared bare remote, acting as machine `machine`."""

    path: Path
    machine: str
    env: dict[str, str]
    instance_id: str | None = None
    sessions: dict[str, str] = field(default_factory=dict)

    def mail(
        self,
        *args: str,
        now: str | None = None,
        env: dict[str, str] | None = None,
        stdin: str | None = None,
        check: bool = True,
    ) -> Result:
        run_env = dict(self.env)
        run_env["AGENTPOST_MACHINE"] = self.machine
        if self.instance_id:
            run_env["AGENTPOST_INSTANCE_ID"] = self.instance_id
        if now is not None:
            run_env["AGENTPOST_MAIL_NOW"] = now
        run_env.update(env or {})
        proc = subprocess.run(
            [sys.executable, "-m", "agentpost", "mail", *args],
            cwd=self.path,
            env=run_env,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=120,
        )
        result = Result(proc.returncode, proc.stdout, proc.stderr)
        if check and proc.returncode != 0:
            raise AssertionError(
                f"mail {args} exited {proc.returncode}: {proc.stderr}{proc.stdout}"
            )
        return result

    def join(self, name: str, now: str | None = None) -> str:
        """Join as `name`; later commands act as this session."""
        out = self.mail("join", "--name", name, "--json", now=now).json
        self.instance_id = out["instance_id"]
        self.sessions[name] = out["instance_id"]
        return str(out["instance_id"])

    def send(self, to: str, text: str, *extra: str, now: str | None = None) -> Any:
        return self.mail("send", "--to", to, "--text", text, "--json", *extra, now=now).json

    def sync(self, now: str | None = None) -> Any:
        return self.mail("sync", "--json", now=now).json

    def inbox(self, *extra: str, now: str | None = None) -> list[Any]:
        return list(self.mail("inbox", "--json", *extra, now=now).json["messages"])

    def outbox(self, now: str | None = None) -> list[Any]:
        return list(self.mail("outbox", "--json", now=now).json["messages"])

    def git(self, *args: str, stdin: bytes | None = None) -> str:
        return git(self.path, *args, env=self.env, stdin=stdin)

    @property
    def mail_dir(self) -> Path:
        return self.path / ".git" / "agentpost"

    def push_document(self, ref: str, message: bytes) -> None:
        """Publish any bytes as a ref document, as a hand with push access could."""
        tree = self.git("mktree", stdin=b"")
        sha = self.git("commit-tree", tree, stdin=message)
        self.git("push", "--quiet", "--force", "origin", f"{sha}:{ref}")


@dataclass
class Network:
    """A bare remote and a factory of clones."""

    root: Path
    remote: Path
    env: dict[str, str]

    def clone(self, machine: str) -> Clone:
        path = self.root / machine
        git(self.root, "clone", "--quiet", str(self.remote), str(path), env=self.env)
        return Clone(path, machine, dict(self.env))

    def remote_refs(self) -> dict[str, str]:
        out = git(self.remote, "for-each-ref", "--format=%(refname) %(objectname)", env=self.env)
        refs: dict[str, str] = {}
        for line in out.splitlines():
            name, sha = line.split(" ", 1)
            refs[name] = sha
        return refs

    def remote_document(self, ref: str) -> Any:
        message = git(self.remote, "log", "-1", "--format=%B", ref, env=self.env)
        return json.loads(message)


@pytest.fixture
def network(tmp_path: Path) -> Network:
    home = tmp_path / "home"
    home.mkdir()
    env = git_env(home)
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "--quiet", "--bare", str(remote), env=env)
    return Network(tmp_path, remote, env)


@pytest.fixture
def two_machines(network: Network) -> tuple[Clone, Clone]:
    """Clone `ma` with session alice and clone `mb` with session bob, both joined."""
    a, b = network.clone("ma"), network.clone("mb")
    a.join("alice")
    b.join("bob")
    return a, b
