"""Delivery state (docs/delivery.md): queued → read (handed out by poll or stream) → acked
(cursor), receipts of a delegation and answers to a person; only participants are told.
Human `hana`, agents `a`, `b`; `olga` is in the workspace but not in the room."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from routing_helpers import Room, remove

from clirun import agentpost, run_doc_block
from hubproc import HubProcess, make_setup, poll

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def room(hub: HubProcess) -> Room:
    s = make_setup(hub, ["hana"], ["a", "b"])
    with hub.client(hub.admin_token) as admin:
        r = admin.post("/v1/admin/workspaces/acme/members", json={"name": "olga", "kind": "human"})
        assert r.status_code == 201
        s.tokens["olga"] = r.json()["token"]
    return Room(hub, s.tokens, s.room)


def delivery(room: Room, who: str, event_id: str, in_room: bool = True) -> httpx.Response:
    path = f"/v1/rooms/{room.id}/events/{event_id}/delivery" if in_room else (
        f"/v1/events/{event_id}/delivery"
    )
    with room.hub.client(room.tokens[who]) as c:
        return c.get(path)


def states(room: Room, event_id: str) -> dict[str, str]:
    r = delivery(room, "hana", event_id)
    assert r.status_code == 200, r.text
    return {t["member"]: t["state"] for t in r.json()["delivery"]["targets"]}


def test_queued_then_read_by_poll_then_acked_by_cursor(room: Room) -> None:
    e = room.say("hana", "@a @b look at this")
    d = delivery(room, "hana", e["id"]).json()["delivery"]
    assert {t["member"]: (t["state"], t["read_at"], t["acked_at"]) for t in d["targets"]} == {
        "a": ("queued", None, None),
        "b": ("queued", None, None),
    }
    with room.hub.client(room.tokens["a"]) as c:
        page = c.get("/v1/inbox").json()
    assert states(room, e["id"]) == {"a": "read", "b": "queued"}
    with room.hub.client(room.tokens["a"]) as c:
        assert c.post("/v1/inbox/ack", json={"cursor": page["cursor"]}).status_code == 200
    d = delivery(room, "b", e["id"]).json()["delivery"]
    a = next(t for t in d["targets"] if t["member"] == "a")
    assert a["state"] == "acked" and a["read_at"] and a["acked_at"] >= a["read_at"]


def test_read_when_handed_out_by_the_inbox_stream(room: Room) -> None:
    e = room.say("hana", "@b stream this")
    with room.hub.client(room.tokens["b"]) as c, c.stream("GET", "/v1/inbox/stream") as s:
        for line in s.iter_lines():
            if line.startswith("data:"):
                assert e["id"] in line
                break
        poll(lambda: states(room, e["id"]) == {"b": "read"}, timeout=30)


def test_an_outsider_and_an_unknown_event_get_the_same_404(room: Room) -> None:
    e = room.say("hana", "@a secret plans")
    for r in (
        delivery(room, "olga", e["id"]),
        delivery(room, "olga", e["id"], in_room=False),
        delivery(room, "hana", "ev_nope"),
        delivery(room, "hana", "ev_nope", in_room=False),
    ):
        assert r.status_code == 404
        assert r.json()["error"]["code"] == "event_not_found"
    with room.hub.client(room.tokens["hana"]) as c:
        other = c.post("/v1/workspaces/acme/rooms", json={"name": "other"}).json()["room"]["id"]
        r = c.get(f"/v1/rooms/{other}/events/{e['id']}/delivery")  # right event, wrong room
    assert r.status_code == 404
    with room.hub.client("not-a-token") as c:
        assert c.get(f"/v1/events/{e['id']}/delivery").status_code == 401


def test_delegation_receipts_pending_then_replied(room: Room) -> None:
    e1 = room.say("a", "@b please draft the report")
    receipts = delivery(room, "hana", e1["id"]).json()["delivery"]["receipts"]
    assert receipts == [
        {"member": "b", "state": "pending", "reply_kind": None, "receipt_event": None,
         "needs_input": 0}
    ]
    room.say("b", "which format?", in_reply_to=e1["id"], reply_kind="needs_input")
    r = room.say("b", "done", in_reply_to=e1["id"], reply_kind="result")
    receipts = delivery(room, "hana", e1["id"]).json()["delivery"]["receipts"]
    assert receipts == [
        {"member": "b", "state": "replied", "reply_kind": "result", "receipt_event": r["id"],
         "needs_input": 1}
    ]


def test_a_persons_message_shows_the_agents_answer(room: Room) -> None:
    e = room.say("hana", "@a what is 2+2?")
    assert delivery(room, "hana", e["id"]).json()["delivery"]["receipts"][0]["state"] == "pending"
    answer = room.say("a", "4", in_reply_to=e["id"])
    (got,) = delivery(room, "hana", e["id"]).json()["delivery"]["receipts"]
    assert (got["member"], got["state"], got["receipt_event"]) == ("a", "replied", answer["id"])


def test_plain_message_between_people_owes_no_reply(room: Room) -> None:
    e = room.say("a", "no mention, wakes no one")
    d = delivery(room, "hana", e["id"]).json()["delivery"]
    assert (d["targets"], d["receipts"]) == ([], None)


def test_hard_removed_target_shows_removed(room: Room) -> None:
    e = room.say("hana", "@b are you there")
    remove(room.hub, "b", "hard")
    assert states(room, e["id"]) == {"b": "removed"}


def test_cli_status_waits_for_the_reply(room: Room) -> None:
    e = room.say("hana", "@a do X")
    hub, tok = room.hub, room.tokens["hana"]
    p = agentpost(hub, "status", e["id"], "--wait-for", "replied", "--timeout", "0.5",
                  "--json", token=tok, check=False)
    assert p.returncode == 75, p.stdout + p.stderr
    assert '"timeout"' in p.stdout
    room.say("a", "X done", in_reply_to=e["id"], reply_kind="result")
    p = agentpost(hub, "status", e["id"], "--wait-for", "replied", "--timeout", "30", "--json",
                  token=tok, check=False)
    assert p.returncode == 0, p.stdout + p.stderr
    assert '"replied"' in p.stdout
    p = agentpost(hub, "status", e["id"], token=tok)
    assert "queued" in p.stdout and "replied" in p.stdout


def test_cli_status_exits_1_when_it_cannot_be_reached(room: Room) -> None:
    hub, tok = room.hub, room.tokens["hana"]
    quiet = room.say("a", "wakes no one")
    for goal in ("acked", "replied"):
        p = agentpost(hub, "status", quiet["id"], "--wait-for", goal, "--timeout", "30",
                      token=tok, check=False)
        assert p.returncode == 1, p.stdout + p.stderr
    e = room.say("hana", "@b hello")
    remove(room.hub, "b", "soft")
    p = agentpost(hub, "status", e["id"], "--wait-for", "acked", "--timeout", "30", "--json",
                  token=tok, check=False)
    assert p.returncode == 1 and "removed before they acked: b" in p.stdout
    p = agentpost(hub, "status", "ev_nope", "--json", token=room.tokens["olga"], check=False)
    assert p.returncode == 1 and "event_not_found" in p.stdout


def test_cli_status_waits_for_acked(room: Room) -> None:
    e = room.say("hana", "@b hello")
    with room.hub.client(room.tokens["b"]) as c:
        cursor = c.get("/v1/inbox").json()["cursor"]
        c.post("/v1/inbox/ack", json={"cursor": cursor})
    p = agentpost(room.hub, "status", e["id"], "--wait-for", "acked", "--json",
                  token=room.tokens["hana"], check=False)
    assert p.returncode == 0, p.stdout + p.stderr
    out: dict[str, Any] = json.loads(p.stdout)
    assert out["targets"][0]["state"] == "acked"


def test_docs_delivery_md_runs_as_written(hub: HubProcess, tmp_path: Path) -> None:
    p = run_doc_block(ROOT / "docs" / "delivery.md", hub)
    last = json.loads(p.stdout.strip().splitlines()[-1])
    assert [t["state"] for t in last["targets"]] == ["acked"]
    assert [(r["state"], r["reply_kind"]) for r in last["receipts"]] == [("replied", "result")]
    assert "queued" in p.stdout and "pending" in p.stdout
