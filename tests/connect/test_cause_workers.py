"""Loops where two paths meet, with real Workers (docs/delegation.md "Cause"): agents that
relay through `_ag2/deliver` (a new message, no `in_reply_to`) and a Worker whose A2A remote
is this very hub. Each used to run for ever; each now ends with one notice, well under 60
events, because every event an agent causes stays in the chain of the person's message."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from conftest import AGENTS, Connected, agent_cmd, wait_for
from hubproc import HubProcess
from workerproc import WorkerProcess


@pytest.fixture
def hub(shared_hub: HubProcess) -> HubProcess:
    return shared_hub


def all_events(c: Connected) -> list[dict[str, Any]]:
    """Every event of every room alice is in (the A2A calls land in her direct room)."""
    out: list[dict[str, Any]] = []
    with c.hub.client(c.setup.tokens["alice"]) as client:
        rooms = client.get(f"/v1/workspaces/{c.setup.workspace}/rooms").json()["rooms"]
        for room in rooms:
            evs = client.get(f"/v1/rooms/{room['id']}/events", params={"limit": 1000})
            out += evs.json()["events"]
    return out


def stop_notice(c: Connected) -> dict[str, Any] | None:
    stops = ("depth_limit", "origin_limit")
    return next(
        (e for e in all_events(c) if e["metadata"].get("agentpost/notice") in stops), None
    )


def settled_count(c: Connected, quiet: float = 4.0, timeout: float = 120.0) -> int:
    """The number of events once it has stayed the same for `quiet` seconds (polled)."""
    deadline = time.monotonic() + timeout
    count, since = len(all_events(c)), time.monotonic()
    while time.monotonic() < deadline:
        now = len(all_events(c))
        if now != count:
            count, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet:
            return count
        time.sleep(0.25)
    raise AssertionError(f"events still growing after {timeout} s: {count}")


def relay_worker(c: Connected, member: str, to: str) -> WorkerProcess:
    return c.worker(agent_cmd(AGENTS / "relay_agent.py"), member=member, env={"RELAY_TO": to})


def test_two_agents_relaying_by_delivery_stop_with_one_notice(connected: Connected) -> None:
    relay_worker(connected, "bot", "helper")
    relay_worker(connected, "helper", "bot")
    start = connected.say("alice", "@bot relay this to helper")
    notice = wait_for(lambda: stop_notice(connected), timeout=180)
    total = settled_count(connected)
    assert total < 60, total
    evs = all_events(connected)
    assert [e for e in evs if e["type"] == "notice"] == [notice]
    deliveries = [e for e in evs if e["text"].endswith("please relay on")]
    assert len(deliveries) >= 2
    # Every delivery names the Turn it serves (the Worker's fenced trigger), and all of them
    # descend from alice's one message.
    assert {d["cause"]["origin"] for d in deliveries} == {start["id"]}
    assert {d["cause"]["via"] for d in deliveries} == {"trigger"}
    assert [d["metadata"]["delegation_depth"] for d in deliveries] == list(
        range(1, len(deliveries) + 1)
    )
    assert deliveries[-1]["route"] in ("depth_limit", "origin_limit")
    assert deliveries[-1]["targets"] == []


def test_a_worker_whose_a2a_remote_is_on_this_hub_does_not_wake_itself(
    connected: Connected, tmp_path: Path
) -> None:
    """bot's Worker runs `--a2a` pointed at helper's A2A endpoint on this very hub, calling
    as alice (its owner); helper runs the echo agent. The forwarded text used to carry bot's
    own mention, so each call, posted as alice, woke bot again (hundreds of events in
    seconds). Now the bridge drops its own agent's mention and the call names its cause."""
    token = tmp_path / "alice.token"
    token.write_text(connected.setup.tokens["alice"] + "\n")
    token.chmod(0o600)
    connected.worker(member="helper")
    url = f"{connected.hub.url}/a2a/{connected.setup.workspace}/helper"
    repo, ws = connected.tmp / "repo-bot", connected.tmp / "ws-bot"
    repo.mkdir(exist_ok=True)
    w = WorkerProcess(
        args=["--a2a", url, "--a2a-token-file", str(token), "--workspace-dir", str(ws),
              "--repo", str(repo)],
        env={
            **os.environ,
            "AGENTPOST_HUB": connected.hub.url,
            "AGENTPOST_TOKEN": connected.setup.tokens["bot"],
        },
        log_path=connected.tmp / "worker-bot.log",
    )
    connected.workers.append(w)
    w.start()
    start = connected.say("alice", "@bot hello there")
    reply = connected.wait_reply(start["id"], timeout=120)
    assert reply["sender"] == "bot" and "echo:" in reply["text"]
    total = settled_count(connected)
    assert total < 60, total
    evs = all_events(connected)
    calls = [e for e in evs if e["metadata"].get("a2a")]
    # The echo agent quotes the mentions it got, so helper and bot go on a while in the
    # room, a chain the depth limit ends; but no call, posted as alice, woke bot.
    assert calls and all(c["sender"] == "alice" for c in calls)
    assert all("@bot" not in c["text"] and "bot" not in c["targets"] for c in calls)
    assert {c["cause"]["origin"] for c in calls} == {start["id"]}
    assert {c["cause"]["via"] for c in calls} == {"trigger"}
    assert calls[0]["metadata"]["delegation_depth"] == 1
    assert all(e["cause"]["origin"] == start["id"] for e in evs if e["cause"] is not None)
