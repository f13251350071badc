"""Crashes of the hub at named crash points and by SIGKILL (issue 2, docs/api.md):
a crash before commit leaves nothing, after commit the answer is known, and a retry of
every key ends with each message stored exactly once under a gap-free `seq`."""

from __future__ import annotations

import random
from pathlib import Path

import httpx
import pytest

from conftest import (
    Burst,
    all_events,
    assert_exactly_once,
    assert_gap_free,
    hub_env,
    prepared_hub,
    restart,
)
from hubproc import HubProcess, poll

CRASH_EXIT = 137


def crashing_post(hub: HubProcess, token: str, room: str, key: str, text: str) -> None:
    """Post once; the hub must die on it without answering."""
    with hub.client(token) as c, pytest.raises(httpx.TransportError):
        c.post(f"/v1/rooms/{room}/messages", json={"text": text}, headers={"Idempotency-Key": key})
    assert hub.wait_exit(10) == CRASH_EXIT


def test_crash_before_commit_leaves_nothing_then_retry_creates_once(tmp_path: Path) -> None:
    hub, setup = prepared_hub(tmp_path / "hub")
    token = setup.tokens["alice"]
    hub = restart(hub, AGENTPOST_CRASH_POINT="before_commit")
    try:
        crashing_post(hub, token, setup.room, "k-before", "lost in the crash")
        hub = restart(hub)
        assert all_events(hub, token, setup.room) == []
        with hub.client(token) as c:
            r = c.post(
                f"/v1/rooms/{setup.room}/messages",
                json={"text": "lost in the crash"},
                headers={"Idempotency-Key": "k-before"},
            )
        assert r.status_code == 201, r.text
        assert r.headers["Idempotency-Status"] == "created"
        events = all_events(hub, token, setup.room)
        assert [(e["seq"], e["text"]) for e in events] == [(1, "lost in the crash")]
        assert events[0]["id"] == r.json()["event"]["id"]
    finally:
        hub.stop()


def test_crash_after_commit_then_retry_replays_once(tmp_path: Path) -> None:
    hub, setup = prepared_hub(tmp_path / "hub")
    token = setup.tokens["alice"]
    hub = restart(hub, AGENTPOST_CRASH_POINT="after_commit")
    try:
        crashing_post(hub, token, setup.room, "k-after", "committed, never answered")
        hub = restart(hub)
        events = all_events(hub, token, setup.room)
        assert [(e["seq"], e["text"]) for e in events] == [(1, "committed, never answered")]
        answers = []
        with hub.client(token) as c:
            for _ in range(2):
                answers.append(
                    c.post(
                        f"/v1/rooms/{setup.room}/messages",
                        json={"text": "committed, never answered"},
                        headers={"Idempotency-Key": "k-after"},
                    )
                )
        for r in answers:
            assert r.status_code == 201, r.text
            assert r.headers["Idempotency-Status"] == "replayed"
            assert r.json()["event"]["id"] == events[0]["id"]
        assert answers[0].content == answers[1].content
        assert all_events(hub, token, setup.room) == events
    finally:
        hub.stop()


@pytest.mark.parametrize("point", ["before_commit:6", "after_commit:6"])
def test_crash_at_nth_commit_under_burst_then_retry_stores_each_key_once(
    tmp_path: Path, point: str
) -> None:
    hub, setup = prepared_hub(tmp_path / "hub")
    hub = restart(hub, AGENTPOST_CRASH_POINT=point)
    keys = [f"burst-{i:03d}" for i in range(200)]
    burst = Burst(hub.url, setup.tokens["alice"], setup.room, keys)
    try:
        with burst.run():
            pass
        assert hub.wait_exit(10) == CRASH_EXIT
        acked = burst.acked()
        # The crash came mid-burst: some posts were acknowledged, some never answered.
        assert 0 < acked < len(keys), acked
        hub = restart(hub)
        assert_exactly_once(hub, setup, keys, burst.acks)
    finally:
        hub.stop()


def test_sigkill_during_burst_then_retry_stores_each_key_once(tmp_path: Path) -> None:
    hub, setup = prepared_hub(tmp_path / "hub")
    seed = random.randrange(1 << 30)
    rnd = random.Random(seed)
    all_keys: list[str] = []
    try:
        for round_ in range(3):
            keys = [f"kill{round_}-{i:03d}" for i in range(120)]
            burst = Burst(hub.url, setup.tokens["alice"], setup.room, keys)
            kill_after = rnd.randrange(5, 100)
            with burst.run(threads=8):
                poll(lambda b=burst, n=kill_after: b.acked() >= n, timeout=30, interval=0.001)
                hub.kill()
            acked = burst.acked()
            assert acked < len(keys), f"seed {seed}: the kill came after the burst"
            hub = HubProcess(hub.data_dir, env=hub_env()).start()
            assert_exactly_once(hub, setup, keys, burst.acks, before=len(all_keys))
            all_keys += keys
        events = all_events(hub, setup.tokens["alice"], setup.room)
        assert_gap_free(events)
        assert sorted(e["text"] for e in events) == sorted(all_keys)
    finally:
        hub.stop()
