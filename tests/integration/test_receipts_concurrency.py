"""Receipts under real concurrency (docs/delegation.md): the claim on (E1, replier) holds with
many simultaneous receipts — on SQLite with one hub, on PostgreSQL with two hub processes
taking the receipts at once (the row lock on E1 across processes)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from routing_helpers import Room, inbox

from hubproc import HubProcess, make_setup


@pytest.fixture
def hubs(engine: str | None, make_hub: Callable[..., HubProcess]) -> list[HubProcess]:
    env = {"AGENTPOST_ADMIN_TOKEN": "admin-of-all"}
    if engine is None:
        return [make_hub(env=env)]
    return [make_hub("one", env=env), make_hub("two", env=env)]


def fire(
    hubs: list[HubProcess], token: str, room: str, e1: str, kind: str, n: int
) -> list[httpx.Response]:
    barrier = threading.Barrier(n)

    def send(i: int) -> httpx.Response:
        with hubs[i % len(hubs)].client(token) as c:
            barrier.wait()
            return c.post(
                f"/v1/rooms/{room}/messages",
                json={"text": f"report {i}", "in_reply_to": e1, "reply_kind": kind},
            )

    with ThreadPoolExecutor(n) as pool:
        return list(pool.map(send, range(n)))


def test_twenty_simultaneous_terminal_receipts_wake_the_delegator_once(
    hubs: list[HubProcess],
) -> None:
    s = make_setup(hubs[0], ["hana"], ["a", "b"])
    room = Room(hubs[0], s.tokens, s.room)
    e1 = room.say("a", "@b go")
    answers = fire(hubs, s.tokens["b"], s.room, e1["id"], "result", 20)
    assert {r.status_code for r in answers} == {201}
    routes = sorted(r.json()["event"]["route"] for r in answers)
    assert routes == ["receipt"] + ["receipt_duplicate"] * 19
    assert len(inbox(hubs[-1], s.tokens["a"])) == 1
    assert room.event("a", e1["id"])["metadata"]["receipt_from"] == ["b"]
    assert len(room.events("hana")) == 21  # every receipt is stored; one woke the delegator


def test_ten_simultaneous_needs_input_wake_the_delegator_three_times(
    hubs: list[HubProcess],
) -> None:
    s = make_setup(hubs[0], ["hana"], ["a", "b"])
    room = Room(hubs[0], s.tokens, s.room)
    e1 = room.say("a", "@b go")
    answers = fire(hubs, s.tokens["b"], s.room, e1["id"], "needs_input", 10)
    assert {r.status_code for r in answers} == {201}
    routes = sorted(r.json()["event"]["route"] for r in answers)
    assert routes == ["needs_input_limit"] * 7 + ["receipt"] * 3
    assert len(inbox(hubs[-1], s.tokens["a"])) == 3
    assert room.event("a", e1["id"])["metadata"]["needs_input_from"] == {"b": 3}
