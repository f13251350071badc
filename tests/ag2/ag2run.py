"""Helpers for the AG2 relay profile's tests: a workspace with an owner, a guest and an agent;
the relay wire spoken with httpx; the real `ag2-agent-connect` Worker as a subprocess."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from hubproc import HubProcess, Setup, make_setup, poll

ROOT = Path(__file__).resolve().parents[2]
ECHO_AGENT = ROOT / "examples" / "echo_agent.py"


def setup_ag2(hub: HubProcess) -> Setup:
    """Workspace `acme`: alice (human, owner of `bot`), carol (human, a guest to `bot`), the
    agents `bot` and `helper` (also alice's); room `general` with all of them."""
    return make_setup(hub, ["alice", "carol"], ["bot", "helper"])


def relay(hub: HubProcess, token: str, timeout: float = 40.0) -> httpx.Client:
    """The relay wire as the agent: base `<hub>/ag2`, the agent's bearer."""
    return httpx.Client(
        base_url=hub.url + "/ag2", headers={"Authorization": f"Bearer {token}"}, timeout=timeout
    )


def post(hub: HubProcess, token: str, room: str, text: str, **extra: Any) -> dict[str, Any]:
    with hub.client(token) as c:
        r = c.post(f"/v1/rooms/{room}/messages", json={"text": text, **extra})
        assert r.status_code == 201, r.text
        event: dict[str, Any] = r.json()["event"]
        return event


def events(hub: HubProcess, token: str, room: str) -> list[dict[str, Any]]:
    with hub.client(token) as c:
        r = c.get(f"/v1/rooms/{room}/events", params={"after": 0, "limit": 1000})
        assert r.status_code == 200, r.text
        found: list[dict[str, Any]] = r.json()["events"]
        return found


def said(hub: HubProcess, token: str, room: str, sender: str) -> list[dict[str, Any]]:
    """The messages and files `sender` posted in the room (no relations, no notices)."""
    return [
        e
        for e in events(hub, token, room)
        if e["sender"] == sender and e["type"] in ("message", "media")
    ]


def inbox(hub: HubProcess, token: str) -> list[dict[str, Any]]:
    with hub.client(token) as c:
        r = c.get("/v1/inbox", params={"after": 0})
        assert r.status_code == 200, r.text
        return [item["event"] for item in r.json()["items"]]


def tasks(client: httpx.Client, wait: float = 0) -> list[dict[str, Any]]:
    r = client.get("/v1/tasks", params={"wait": wait})
    assert r.status_code == 200, r.text
    found: list[dict[str, Any]] = r.json()["tasks"]
    return found


def served(client: httpx.Client, timeout: float = 20.0) -> dict[str, Any]:
    """Poll until a task is served; that task."""

    def one() -> dict[str, Any] | None:
        got = tasks(client, wait=1)
        return got[0] if got else None

    found: dict[str, Any] = poll(one, timeout=timeout)
    return found


@dataclass
class Worker:
    """The unmodified agent-connect Worker (adapter `acp`, agent examples/echo_agent.py)."""

    proc: subprocess.Popen[bytes]
    log: Path
    repo: Path
    workspace: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def kill(self) -> None:
        """SIGKILL of the Worker's whole process group (its agent with it), as a crash."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def release_guard(self) -> None:
        """Empty the poller guard's record of this Worker, dead by now, as agent-connect's
        own clean stop does (`ag2_relay_client.singleton.PollerGuard.release`: emptied, never
        unlinked). Without it a Worker restarted on the same workspace after a kill -9
        stands by until the record is `STALE_AFTER_S` (150 s) old."""
        assert self.proc.poll() is not None, "only a Worker that is gone leaves its guard"
        guard = self.workspace / "relay" / "default" / "poller.lock"
        if guard.exists():
            with open(guard, "r+b") as f:
                f.truncate(0)

    def stop(self, grace: float = 3.0) -> None:
        """SIGTERM, then SIGKILL after `grace` seconds: a Worker inside a long poll waits
        up to 12 s for it before it exits (agent-connect's STOP_BUDGET_S), which a test
        that is over need not."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(grace)
            except subprocess.TimeoutExpired:
                self.kill()


def start_worker(base: str, token: str, home: Path, name: str = "w") -> Worker:
    """agent-connect against `base` (the hub's URL), as the agent with `token`. `home`
    holds its repo, workspace and log; a second start with the same `home` is the same
    Worker restarted (same journal)."""
    repo, workspace = home / "repo", home / "workspace"
    repo.mkdir(parents=True, exist_ok=True)
    workspace.mkdir(parents=True, exist_ok=True)
    log = home / f"{name}.log"
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("AGENT_CONNECT_", "REMOTE_TASK_"))
    }
    env.update(
        {
            "HOME": str(home),  # no ~/.agent-connect/config.env of the machine's user
            "AGENT_CONNECT_TOKEN": f"{base}/ag2|{token}",
            "AGENT_CONNECT_ADAPTER": "acp",
            "AGENT_CONNECT_ACP_COMMAND": f"{sys.executable} {ECHO_AGENT}",
            "AGENT_CONNECT_REPO": str(repo),
            "AGENT_CONNECT_WORKSPACE": str(workspace),
            "PYTHONUNBUFFERED": "1",
        }
    )
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "agent_connect"],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=home,
            start_new_session=True,
        )
    return Worker(proc, log, repo, workspace)
