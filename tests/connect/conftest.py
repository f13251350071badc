"""Fixtures for connect: a real hub, a real Worker process (`agentpost connect`) and real
ACP agent subprocesses written with the SDK (examples/echo_agent.py, tests/connect/agents/)."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from hubproc import HubProcess, Setup, fresh_workspace, make_setup, poll
from workerproc import WorkerProcess

REPO_ROOT = Path(__file__).resolve().parents[2]
ECHO_AGENT = REPO_ROOT / "examples" / "echo_agent.py"
AGENTS = Path(__file__).parent / "agents"


def agent_cmd(script: Path, *args: str) -> str:
    return " ".join([sys.executable, str(script), *args])


@dataclass
class Connected:
    """A workspace (humans alice, carol; agents bot, helper, owned by alice; room general)
    and a way to run Workers for `bot`."""

    setup: Setup
    tmp: Path
    workers: list[WorkerProcess] = field(default_factory=list)

    @property
    def hub(self) -> HubProcess:
        return self.setup.hub

    def worker(
        self,
        agent: str | None = None,
        *extra: str,
        member: str = "bot",
        env: dict[str, str] | None = None,
        start: bool = True,
        wait_agent: bool = True,
        repo: Path | None = None,
        workspace: Path | None = None,
        log_name: str | None = None,
        python: list[str] | None = None,
    ) -> WorkerProcess:
        repo = repo or self.tmp / f"repo-{member}"
        repo.mkdir(exist_ok=True)
        workspace = workspace or self.tmp / f"ws-{member}"
        full_env = {
            **os.environ,
            "AGENTPOST_HUB": self.hub.url,
            "AGENTPOST_TOKEN": self.setup.tokens[member],
            **(env or {}),
        }
        w = WorkerProcess(
            args=[
                "--agent",
                agent or agent_cmd(ECHO_AGENT),
                "--workspace-dir",
                str(workspace),
                "--repo",
                str(repo),
                *extra,
            ],
            env=full_env,
            log_path=self.tmp / f"worker-{log_name or member}.log",
            python=python or [sys.executable],
        )
        self.workers.append(w)
        return w.start(wait_agent) if start else w

    def say(self, who: str, text: str, **body: Any) -> dict[str, Any]:
        with self.hub.client(self.setup.tokens[who]) as c:
            r = c.post(f"/v1/rooms/{self.setup.room}/messages", json={"text": text, **body})
        assert r.status_code == 201, r.text
        event: dict[str, Any] = r.json()["event"]
        return event

    def events(self, who: str = "alice") -> list[dict[str, Any]]:
        with self.hub.client(self.setup.tokens[who]) as c:
            out: list[dict[str, Any]] = c.get(
                f"/v1/rooms/{self.setup.room}/events", params={"limit": 1000}
            ).json()["events"]
        return out

    def replies_to(self, event_id: str, who: str = "alice") -> list[dict[str, Any]]:
        return [e for e in self.events(who) if e["in_reply_to"] == event_id]

    def wait_reply(self, event_id: str, timeout: float = 60.0) -> dict[str, Any]:
        found = poll(lambda: self.replies_to(event_id), timeout=timeout)
        return found[0]

    def inbox(self, who: str) -> list[dict[str, Any]]:
        with self.hub.client(self.setup.tokens[who]) as c:
            items = c.get("/v1/inbox", params={"after": 0, "limit": 1000}).json()["items"]
        return [i["event"] for i in items]

    def acked(self, who: str = "bot") -> int:
        with self.hub.client(self.setup.tokens[who]) as c:
            return int(c.get("/v1/me").json()["inbox_cursor"])


@pytest.fixture
def connected(hub: HubProcess, tmp_path: Path) -> Iterator[Connected]:
    """On `hub`; a module whose tests never stop the hub or set its flags makes that
    `shared_hub` (one per engine for the module), so the workspace is the test's own."""
    s = make_setup(hub, ["alice", "carol"], ["bot", "helper"], workspace=fresh_workspace())
    c = Connected(s, tmp_path)
    yield c
    for w in c.workers:
        w.stop()


def wait_for(predicate: Callable[[], Any], timeout: float = 60.0) -> Any:
    return poll(predicate, timeout=timeout, interval=0.05)


def quiet_for(seconds: float) -> None:
    """Let time pass to show that something does NOT happen (never to synchronise)."""
    time.sleep(seconds)


@pytest.fixture
def c_trick(connected: Connected) -> Connected:
    """`connected` with bot's Worker running the trick agent (it declares ag2/deliver)."""
    connected.worker(agent_cmd(AGENTS / "trick_agent.py"))
    return connected


@pytest.fixture
def c_echo(connected: Connected) -> Connected:
    """`connected` with bot's Worker running the example agent."""
    connected.worker()
    return connected
