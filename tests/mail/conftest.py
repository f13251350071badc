"""Real git for mail tests: a bare remote in a temp dir and clones acting as machines.

Every clone runs the real CLI (`python -m agentpost mail …`) in a subprocess with its
own AGENTPOST_MACHINE, so two clones are two machines (docs/mail.md).
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

import hubproc
from forkserver import ForkServer


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
        argv = [sys.executable, "-m", "agentpost", "mail", *args]
        server = ForkServer.get() if hubproc.FORK_SERVER else None
        if server is not None and server.fits(run_env):  # a fork, not a Python start
            proc = server.run(argv, run_env, stdin, 120, cwd=self.path)
        else:
            proc = subprocess.run(
                argv,
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


_SIGN_SCRIPT = """
import json, sys
from agentpost.mail.context import MailContext
from agentpost.mail import clock
from agentpost.mail.envelope import Address, new_envelope, sign
ctx = MailContext.discover()
me = ctx.acting_instance(ctx.load_state())
to = Address(sys.argv[1], sys.argv[2], sys.argv[3])
raw = new_envelope(Address(ctx.machine, me.name, me.instance_id), to, sys.argv[4], clock.now())
raw.update(json.loads(sys.argv[5]))
print(json.dumps(sign(raw, ctx.key())))
"""


def signed_envelope(
    sender: Clone, to: Clone, to_name: str, body: str, **overrides: object
) -> dict[str, Any]:
    """An envelope from `sender`'s acting session, `overrides` applied, then validly signed
    by `sender`'s machine key: what a peer's own (buggy or hostile) software could offer."""
    env = dict(sender.env, AGENTPOST_MACHINE=sender.machine)
    env["AGENTPOST_INSTANCE_ID"] = sender.instance_id or ""
    args = [to.machine, to_name, to.sessions[to_name], body, json.dumps(overrides)]
    out = subprocess.run(
        [sys.executable, "-c", _SIGN_SCRIPT, *args],
        cwd=sender.path,
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    envelope: dict[str, Any] = json.loads(out.stdout)
    return envelope


def offer(clone: Clone, envelopes: list[dict[str, Any]]) -> None:
    """Publish `envelopes` as `clone`'s mail ref (no document signature), by hand."""
    doc = {
        "machine": clone.machine,
        "updated_at": "2026-11-30T00:00:00.000Z",
        "outbox": envelopes,
        "acks": [],
    }
    clone.push_document(f"refs/agentpost/mail/{clone.machine}", json.dumps(doc).encode())


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
