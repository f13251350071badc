"""One lease per agent member across profiles (docs/architecture.md#one-worker-per-agent,
docs/ag2.md "One Worker per agent"): `agentpost connect` and the unmodified ag2-agent-connect
Worker polling `/ag2` with the same agent's token never both serve it. Whichever holds the lease
answers; the other waits (an empty poll for agent-connect, a standby for `connect`) and takes over
a lease lapse after the holder stops. Every message is answered once. Both engines."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from ag2run import ECHO_AGENT, Worker, post, said, setup_ag2, start_worker

from hubproc import HubProcess, Setup, poll
from workerproc import WorkerProcess

LEASE_SECONDS = "4"  # the Worker lease's lapse, short so that a takeover comes soon


@pytest.fixture
def hub(make_hub: Callable[..., HubProcess]) -> HubProcess:
    return make_hub(env={"AGENTPOST_WORKER_LEASE_SECONDS": LEASE_SECONDS})


@pytest.fixture
def workers() -> Iterator[list[Worker | WorkerProcess]]:
    started: list[Worker | WorkerProcess] = []
    yield started
    for w in started:
        w.stop()


def connect_worker(hub: HubProcess, s: Setup, tmp: Path) -> WorkerProcess:
    repo, ws = tmp / "connect-repo", tmp / "connect-ws"
    repo.mkdir(exist_ok=True)
    return WorkerProcess(
        args=["--agent", f"{sys.executable} {ECHO_AGENT}", "--workspace-dir", str(ws),
              "--repo", str(repo)],
        env={**os.environ, "AGENTPOST_HUB": hub.url, "AGENTPOST_TOKEN": s.tokens["bot"]},
        log_path=tmp / "connect.log",
    )


def replies(hub: HubProcess, s: Setup, asked: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        e for e in said(hub, s.tokens["alice"], s.room, "bot") if e["in_reply_to"] == asked["id"]
    ]


def answered_once(hub: HubProcess, s: Setup, asked: list[dict[str, Any]]) -> bool:
    """Every message has its echo, and no message has two replies."""
    got = [replies(hub, s, a) for a in asked]
    assert all(len(r) <= 1 for r in got), [[e["text"] for e in r] for r in got]
    return all(len(r) == 1 and "echo:" in r[0]["text"] for r in got)


def acked(hub: HubProcess, s: Setup) -> int:
    with hub.client(s.tokens["bot"]) as c:
        return int(c.get("/v1/me").json()["inbox_cursor"])


def test_connect_holds_the_lease_and_an_ag2_poller_is_served_nothing(
    hub: HubProcess, tmp_path: Path, workers: list[Worker | WorkerProcess]
) -> None:
    s = setup_ag2(hub)
    w = connect_worker(hub, s, tmp_path)
    workers.append(w)
    w.start()
    ag2 = start_worker(hub.url, s.tokens["bot"], tmp_path / "ag2")
    workers.append(ag2)
    asked = [post(hub, s.tokens["alice"], s.room, f"@bot number {i}") for i in range(4)]
    poll(lambda: answered_once(hub, s, asked), timeout=90, interval=0.2)
    poll(lambda: acked(hub, s) >= 4, timeout=30)  # every wake-up is done with
    answered_once(hub, s, asked)
    assert all("On it" not in e["text"] for a in asked for e in replies(hub, s, a))
    # A poll with the agent's token is handed nothing while `connect` holds the lease.
    with hub.client(s.tokens["bot"]) as c:
        r = c.get("/ag2/v1/tasks", params={"wait": 0})
    assert r.status_code == 200 and r.json()["tasks"] == []


def test_an_ag2_poller_holds_the_lease_and_connect_waits_then_takes_over(
    hub: HubProcess, tmp_path: Path, workers: list[Worker | WorkerProcess]
) -> None:
    s = setup_ag2(hub)
    ag2 = start_worker(hub.url, s.tokens["bot"], tmp_path / "ag2")
    workers.append(ag2)
    first = post(hub, s.tokens["alice"], s.room, "@bot before connect")
    poll(lambda: answered_once(hub, s, [first]), timeout=90, interval=0.2)
    w = connect_worker(hub, s, tmp_path)
    workers.append(w)
    w.start(wait_agent=False)
    poll(lambda: "standby: an AG2 Worker polls /ag2" in w.log(), timeout=30)
    asked = [post(hub, s.tokens["alice"], s.room, f"@bot while both run {i}") for i in range(3)]
    poll(lambda: answered_once(hub, s, [first, *asked]), timeout=90, interval=0.2)
    assert "agent started" not in w.log()  # the standby never ran its agent
    # The poller goes (kill -9: its SIGTERM waits out a 12 s poll first); a lease lapse
    # later `connect` holds the lease and answers.
    ag2.kill()
    poll(lambda: "lease held" in w.log(), timeout=60)
    last = post(hub, s.tokens["alice"], s.room, "@bot after the poller")
    poll(lambda: answered_once(hub, s, [first, *asked, last]), timeout=90, interval=0.2)
