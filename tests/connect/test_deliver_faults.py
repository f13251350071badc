"""`_ag2/deliver` when the hub misbehaves or the room changes
(docs/architecture.md#deferred-delivery, rules 3, 5, 6, 7, "Bindings", "Declaring", "Ledger"),
through a real Worker, a real hub and a real ACP agent. Between the Worker and the hub sits a real
fault-injecting proxy (faultproxy.py): it answers 5xx or 409 `running` for the hub, loses an answer
after the hub acted, strips the `Idempotency-Status` echo, or holds a post while the test changes
the room.

One hub and one Worker serve the whole module (each test uses its own delivery ids). The
hub runs on SQLite only: what is tested is the Worker's side, which the hub's engine does
not change (the hub's keys are tested on both engines in tests/integration). The hub takes
uploads up to 64 KiB while the proxy tells the Worker 1 MiB, so a 100 KiB file passes the
Worker's own check and meets the real hub's 413.
"""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass
from hashlib import sha256
from pathlib import Path
from typing import Any

import pytest
import rfc8785
from faultproxy import MEDIA, MESSAGES, Fault, FaultProxy, five_hundred, running

from conftest import AGENTS, Connected, WorkerProcess, agent_cmd, wait_for
from hubproc import HubProcess, make_setup

TRICK = AGENTS / "trick_agent.py"
HUB_TIMEOUT = 8.0
HUB_MAX_UPLOAD = 64 * 1024
DAY = 86400.0
POSTS_IN = "(messages|media)"  # after /v1/rooms/<room>/: what a post goes to


@dataclass
class Faulty:
    c: Connected
    proxy: FaultProxy
    worker: WorkerProcess

    @property
    def ws(self) -> Path:
        return self.c.tmp / "ws-bot"

    @property
    def worker_id(self) -> str:
        return (self.ws / "worker-id").read_text().strip()


@pytest.fixture(scope="module")
def f(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Faulty]:
    tmp = tmp_path_factory.mktemp("faults")
    hub = HubProcess(
        tmp / "hub",
        env={"AGENTPOST_SSE_KEEPALIVE": "0.5"},
        extra_args=["--max-upload-bytes", str(HUB_MAX_UPLOAD)],
    ).start()
    proxy = FaultProxy(hub.url).start()

    def more_upload(caps: dict[str, Any]) -> dict[str, Any]:
        return {**caps, "max_upload_bytes": 1024 * 1024}

    proxy.permanent = [
        Fault("GET", "/v1/capabilities", edit_json=more_upload, keyed=False, times=-1)
    ]
    try:
        c = Connected(make_setup(hub, ["alice", "carol"], ["bot", "helper"]), tmp)
        (tmp / "ws-bot").mkdir(mode=0o700)
        (tmp / "ws-bot" / "collaborators").write_text("carol\n")
        w = c.worker(
            agent_cmd(TRICK), "--hub-timeout", str(HUB_TIMEOUT), env={"AGENTPOST_HUB": proxy.url}
        )
        assert "delivery (_ag2/deliver): enabled" in w.log()
        yield Faulty(c, proxy, w)
    finally:
        for worker in c.workers:
            worker.stop()
        proxy.stop()
        hub.stop()


@pytest.fixture(autouse=True)
def no_faults_left(f: Faulty) -> Iterator[None]:
    yield
    f.proxy.disarm()


# -- talking to the room ------------------------------------------------------------------


def say(f: Faulty, who: str, text: str, room: str | None = None) -> dict[str, Any]:
    room = room or f.c.setup.room
    with f.c.hub.client(f.c.setup.tokens[who]) as h:
        r = h.post(f"/v1/rooms/{room}/messages", json={"text": text})
    assert r.status_code == 201, r.text
    return r.json()["event"]  # type: ignore[no-any-return]


def events(f: Faulty, room: str | None = None) -> list[dict[str, Any]]:
    room = room or f.c.setup.room
    with f.c.hub.client(f.c.setup.tokens["alice"]) as h:  # alice takes part in every room
        r = h.get(f"/v1/rooms/{room}/events", params={"limit": 1000})
    assert r.status_code == 200, r.text
    return r.json()["events"]  # type: ignore[no-any-return]


def reply(f: Faulty, event: dict[str, Any]) -> str:
    found = wait_for(
        lambda: [e for e in events(f, event["room"]) if e["in_reply_to"] == event["id"]]
    )
    return str(found[0]["text"])


def deliver(f: Faulty, request: dict[str, Any], who: str = "alice") -> dict[str, Any]:
    """The agent delivers from the session its binding came with, echoing the `turn` of the
    binding's latest Turn (docs/deliver.md "Whose work it is"), as work of an earlier Turn
    finishing now would, whichever Turn it is asked in."""
    request = {"sessionId": "@SESSION_OF_BINDING", "turn": "@TURN_OF_BINDING", **request}
    text = reply(f, say(f, who, "@bot deliver " + json.dumps(request)))
    assert text.startswith("{"), text
    return json.loads(text)  # type: ignore[no-any-return]


def binding(f: Faulty, who: str = "alice", room: str | None = None) -> dict[str, Any]:
    found = json.loads(reply(f, say(f, who, "@bot binding", room)))
    assert isinstance(found, dict), found
    return found  # type: ignore[no-any-return]


def texts(f: Faulty, text: str, room: str | None = None) -> list[dict[str, Any]]:
    return [e for e in events(f, room) if e["text"] == text]


def media(f: Faulty, name: str, room: str | None = None) -> list[dict[str, Any]]:
    return [
        e for e in events(f, room) if e["type"] == "media" and e["attachments"][0]["name"] == name
    ]


def notices(f: Faulty) -> list[dict[str, Any]]:
    return [e for e in events(f) if e["text"].startswith("Part of a delivery")]


def part_key(worker_id: str, delivery_id: str, part: int | str) -> str:
    """docs/architecture.md#deferred-delivery: sha256(JCS([worker_id, id, part]))."""
    return sha256(rfc8785.dumps([worker_id, delivery_id, part])).hexdigest()


def status(f: Faulty) -> dict[str, Any]:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "agentpost",
            "connect",
            "status",
            "--workspace-dir",
            str(f.ws),
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    return json.loads(out)  # type: ignore[no-any-return]


def new_room(f: Faulty, name: str, participants: list[str]) -> str:
    with f.c.hub.client(f.c.setup.tokens["alice"]) as h:
        r = h.post(
            f"/v1/workspaces/{f.c.setup.workspace}/rooms",
            json={"name": name, "participants": participants},
        )
    assert r.status_code == 201, r.text
    return str(r.json()["room"]["id"])


def remove_participant(f: Faulty, room: str, name: str) -> None:
    with f.c.hub.client(f.c.hub.admin_token) as h:
        r = h.delete(f"/v1/rooms/{room}/participants/{name}")
    assert r.status_code == 200, r.text


# -- rule 5: what the hub answers a part ------------------------------------------------


def test_hub_5xx_on_a_part_is_retry_and_the_resend_posts_each_part_once(f: Faulty) -> None:
    b = binding(f)
    Path(b["export_dir"], "five.txt").write_text("5")
    request = {
        "binding": "$BINDING",
        "id": "f5xx",
        "parts": [
            {"type": "text", "text": "after a 5xx"},
            {"type": "file", "path": "$EXPORT/five.txt"},
        ],
    }
    fault = f.proxy.arm(Fault("POST", MEDIA, answer=five_hundred()))
    r = deliver(f, request)
    assert r["status"] == "retry" and len(fault.hits) == 1, r
    assert "storage_unavailable" in r["reason"] and r["expires_at"].endswith("Z")
    assert media(f, "five.txt") == [] and texts(f, "after a 5xx") == []
    again = deliver(f, request)
    assert (again["status"], again["delivered"]) == ("delivered", [1, 0]), again
    assert len(media(f, "five.txt")) == 1 and len(texts(f, "after a 5xx")) == 1
    assert again["expires_at"] == r["expires_at"]  # first-seen + 23 h, from the first send


def test_hub_409_running_on_a_part_is_retry(f: Faulty) -> None:
    request = {
        "binding": "$BINDING",
        "id": "f409",
        "parts": [{"type": "text", "text": "after 409"}],
    }
    fault = f.proxy.arm(Fault("POST", MESSAGES, answer=running()))
    r = deliver(f, request)
    assert r["status"] == "retry" and "idempotency_in_flight" in r["reason"], r
    assert len(fault.hits) == 1 and texts(f, "after 409") == []
    again = deliver(f, request)
    assert again["status"] == "delivered"
    assert [e["id"] for e in texts(f, "after 409")] == again["event_ids"]


def test_a_hub_timeout_is_retry_and_the_resend_is_answered_by_the_hubs_key(f: Faulty) -> None:
    """The hub posted the file but its answer never came back in time: `retry`; the resend
    goes out with the same key, so the room keeps the one event."""
    b = binding(f)
    Path(b["export_dir"], "slow.txt").write_text("slow")
    request = {
        "binding": "$BINDING",
        "id": "ftimeout",
        "parts": [{"type": "file", "path": "$EXPORT/slow.txt"}],
    }
    fault = f.proxy.arm(Fault("POST", MEDIA, lose_answer=HUB_TIMEOUT + 3))
    r = deliver(f, request)
    assert r["status"] == "retry" and "hub_unreachable" in r["reason"], r
    assert len(fault.hits) == 1
    posted = media(f, "slow.txt")
    assert len(posted) == 1  # the hub did act
    again = deliver(f, request)
    assert (again["status"], again["event_ids"]) == ("delivered", [posted[0]["id"]]), again
    assert len(media(f, "slow.txt")) == 1


def test_hub_422_idempotency_conflict_is_conflict(f: Faulty) -> None:
    """The hub holds the part's key for other content (posted by this agent earlier)."""
    key = part_key(f.worker_id, "f422", 0)
    with f.c.hub.client(f.c.setup.tokens["bot"]) as h:
        r = h.post(
            f"/v1/rooms/{f.c.setup.room}/messages",
            json={"text": "what the key first carried"},
            headers={"Idempotency-Key": key},
        )
    assert r.status_code == 201, r.text
    request = {
        "binding": "$BINDING",
        "id": "f422",
        "parts": [{"type": "text", "text": "other text"}],
    }
    res = deliver(f, request)
    assert (res["status"], res["reason"]) == ("final", "conflict"), res
    assert res["data"] == {"part": 0, "hub": "idempotency_conflict"}
    assert texts(f, "other text") == []


def test_hub_413_is_rejected_with_one_keyed_notice(f: Faulty) -> None:
    b = binding(f)
    Path(b["export_dir"], "small.txt").write_text("small")
    Path(b["export_dir"], "big.bin").write_bytes(b"b" * (HUB_MAX_UPLOAD + 40_000))
    request = {
        "binding": "$BINDING",
        "id": "f413",
        "parts": [
            {"type": "text", "text": "never after a 413"},
            {"type": "file", "path": "$EXPORT/small.txt"},
            {"type": "file", "path": "$EXPORT/big.bin"},
        ],
    }
    r = deliver(f, request)
    assert (r["status"], r["reason"]) == ("final", "rejected"), r
    assert r["data"] == {"part": 2, "hub": "payload_too_large"}
    assert len(media(f, "small.txt")) == 1 and media(f, "big.bin") == []
    assert texts(f, "never after a 413") == []
    notice = [n for n in notices(f) if "(rejected); 1 of 3 parts" in n["text"]]
    assert len(notice) == 1 and "could not be sent" in notice[0]["text"]
    assert deliver(f, request) == r  # the resend: from the ledger, no second notice
    assert len([n for n in notices(f) if "(rejected); 1 of 3 parts" in n["text"]]) == 1
    with f.c.hub.client(f.c.setup.tokens["bot"]) as h:
        sent = h.get(
            f"/v1/rooms/{f.c.setup.room}/sends",
            params={"key": part_key(f.worker_id, "f413", "notice")},
        )
    assert sent.status_code == 200, sent.text
    assert sent.json()["send"]["event"]["id"] == notice[0]["id"]  # posted under the notice key


# -- the ledger fails after the parts posted ----------------------------------------------


def test_a_ledger_that_cannot_record_the_result_answers_retry_and_the_resend_posts_nothing_again(
    f: Faulty,
) -> None:
    """Every part posted, then the ledger refuses the result (a disk error, here a trigger in
    the real ledger): `retry`, never an error the agent cannot read; the resend finishes it
    from the ledger and the hub's keys, and every part is in the room once."""
    b = binding(f)
    Path(b["export_dir"], "ledger-late.txt").write_text("late")
    request = {
        "binding": "$BINDING",
        "id": "fledger",
        "parts": [
            {"type": "text", "text": "ledger refuses the result"},
            {"type": "file", "path": "$EXPORT/ledger-late.txt"},
        ],
    }
    ledger = f.ws / "deliveries.sqlite3"
    with closing(sqlite3.connect(ledger)) as db, db:  # the real ledger
        db.execute(
            "CREATE TRIGGER no_result BEFORE UPDATE OF state ON deliveries"
            " WHEN NEW.id = 'fledger' BEGIN SELECT RAISE(ABORT, 'the disk says no'); END"
        )
    try:
        r = deliver(f, request)
        assert (r["status"], r["reason"]) == ("retry", "the delivery ledger cannot be written"), r
        assert r["expires_at"] is not None
        assert len(texts(f, "ledger refuses the result")) == 1
        assert len(media(f, "ledger-late.txt")) == 1
    finally:
        with closing(sqlite3.connect(ledger)) as db, db:
            db.execute("DROP TRIGGER no_result")
    done = deliver(f, request)
    assert done["status"] == "delivered", done
    text, file = texts(f, "ledger refuses the result"), media(f, "ledger-late.txt")
    assert len(text) == 1 and len(file) == 1  # nothing posted twice
    assert done["event_ids"] == [file[0]["id"], text[0]["id"]]  # files first, then text
    assert deliver(f, request) == done  # from the ledger now


# -- rule 7: 23 hours -------------------------------------------------------------------


def test_past_23_hours_an_unfinished_delivery_is_expired_with_a_notice(f: Faulty) -> None:
    b = binding(f)
    Path(b["export_dir"], "early.txt").write_text("early")
    request = {
        "binding": "$BINDING",
        "id": "f23h",
        "parts": [
            {"type": "text", "text": "too late"},
            {"type": "file", "path": "$EXPORT/early.txt"},
        ],
    }
    f.proxy.arm(Fault("POST", MESSAGES, answer=five_hundred()))
    assert deliver(f, request)["status"] == "retry"
    assert len(media(f, "early.txt")) == 1  # the file went first; the text met the 5xx
    first_seen = time.time() - 23 * 3600 - 60
    with closing(sqlite3.connect(f.ws / "deliveries.sqlite3")) as db, db:  # the real ledger
        n = db.execute("UPDATE deliveries SET first_seen = ? WHERE id = 'f23h'", (first_seen,))
        assert n.rowcount == 1
    r = deliver(f, request)
    assert (r["status"], r["reason"]) == ("final", "expired"), r
    assert r["expires_at"] == time.strftime(
        "%Y-%m-%dT%H:%M:%SZ", time.gmtime(first_seen + 23 * 3600)
    )
    assert texts(f, "too late") == []
    assert len([n for n in notices(f) if "(expired); 1 of 2 parts" in n["text"]]) == 1
    assert deliver(f, request) == r


# -- rule 3 and "Bindings": demoted, left, removed ------------------------------------------


def test_a_resend_after_the_binding_expired_is_answered_from_the_ledger(f: Faulty) -> None:
    """Rule 1 before rule 3: a known id answers from the ledger whatever became of its
    binding; a new id under the expired binding is `rejected`."""
    side = new_room(f, "side-expired", ["bot"])
    b = binding(f, "alice", side)
    request = {
        "binding": b["binding"],
        "id": "fexpired",
        "parts": [{"type": "text", "text": "before it expired"}],
    }
    r = deliver(f, request)
    assert r["status"] == "delivered", r
    with closing(sqlite3.connect(f.ws / "deliveries.sqlite3")) as db, db:  # the real ledger
        n = db.execute(
            "UPDATE bindings SET expires_at = ? WHERE binding = ?", (time.time() - 60, b["binding"])
        )
        assert n.rowcount == 1
    assert deliver(f, request) == r
    assert len(texts(f, "before it expired", side)) == 1
    new = deliver(f, {**request, "id": "fexpired2"})
    assert (new["status"], new["reason"]) == ("final", "rejected"), new
    assert new["data"] == {"binding": b["binding"], "why": "binding expired"}


def test_a_demoted_collaborator_is_rejected_never_posted_under_the_owners_binding(
    f: Faulty,
) -> None:
    carols = binding(f, "carol")
    owners = binding(f)
    assert carols["binding"] != owners["binding"]
    reloads = f.worker.log().count("collaborators: ")
    (f.ws / "collaborators").write_text("# carol is no longer trusted\n")
    assert f.worker.proc is not None
    f.worker.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: f.worker.log().count("collaborators: (none)") == 1)
    try:
        request = {
            "binding": carols["binding"],
            "id": "fdemoted",
            "parts": [{"type": "text", "text": "for carol"}],
        }
        r = deliver(f, request)  # asked from the owner's Session, with carol's binding
        assert (r["status"], r["reason"]) == ("final", "rejected"), r
        assert r["data"] == {"binding": carols["binding"], "why": "collaborator no longer listed"}
        assert texts(f, "for carol") == []
        again = deliver(f, request)  # rule 3 records nothing: asked again, answered the same
        assert (again["reason"], again["data"]) == ("rejected", r["data"])
        assert texts(f, "for carol") == []
        own = deliver(f, {**request, "binding": "$BINDING", "id": "fowner"})
        assert own["status"] == "delivered"  # the owner's own binding still delivers its own
    finally:
        (f.ws / "collaborators").write_text("carol\n")
        f.worker.proc.send_signal(signal.SIGHUP)
        wait_for(lambda: f.worker.log().count("collaborators: ") == reloads + 2)


def add_agent(f: Faulty, name: str, owner: str) -> None:
    with f.c.hub.client(f.c.hub.admin_token) as h:
        r = h.post(
            f"/v1/admin/workspaces/{f.c.setup.workspace}/members",
            json={"name": name, "kind": "agent", "owner": owner},
        )
    assert r.status_code == 201, r.text
    f.c.setup.tokens[name] = r.json()["token"]


def test_an_agent_whose_owner_changed_is_rejected_never_posted_under_the_owners_binding(
    f: Faulty,
) -> None:
    """A collaborator by the same-owner rule (an agent of alice, bot's owner) is demoted
    when the hub's answer about its owner changes. The hub has no call that changes an
    agent's owner: the nearest real path is a hard removal (which frees the name) and the
    name added again as carol's agent, back in the room. Bot asks the hub now, at the
    delivery, not its Turn-time cache of owners: `rejected`, nothing posted anywhere."""
    add_agent(f, "scout", "alice")
    side = new_room(f, "side-owner", ["bot", "scout"])
    scouts = binding(f, "scout", side)
    owners = binding(f, "alice", side)
    assert scouts["binding"] != owners["binding"]
    with f.c.hub.client(f.c.hub.admin_token) as h:
        gone = h.delete(f"/v1/admin/workspaces/{f.c.setup.workspace}/members/scout?hard=true")
        assert gone.status_code == 200, gone.text
    add_agent(f, "scout", "carol")
    with f.c.hub.client(f.c.setup.tokens["alice"]) as h:
        back = h.put(f"/v1/rooms/{side}/participants/scout")
        assert back.status_code == 200, back.text
    posts = f.proxy.arm(Fault("POST", f"/v1/rooms/{side}/{POSTS_IN}", keyed=False, times=-1))
    request = {
        "binding": scouts["binding"],
        "id": "fowner-changed",
        "parts": [{"type": "text", "text": "for alice's scout"}],
    }
    r = deliver(f, request)  # asked from alice's Session in general, with scout's binding
    assert (r["status"], r["reason"]) == ("final", "rejected"), r
    assert r["data"] == {"binding": scouts["binding"], "why": "collaborator no longer listed"}
    assert posts.hits == [] and texts(f, "for alice's scout", side) == []
    own = deliver(f, {**request, "binding": owners["binding"], "id": "fowner-still"})
    assert own["status"] == "delivered", own  # the owner's binding in that room still works
    assert [e["id"] for e in texts(f, "for alice's scout", side)] == own["event_ids"]


def test_a_sender_who_left_the_room_has_the_binding_revoked(f: Faulty) -> None:
    side = new_room(f, "side-left", ["carol", "bot"])
    carols = binding(f, "carol", side)
    remove_participant(f, side, "carol")
    asked = f.proxy.arm(Fault("GET", f"/v1/rooms/{side}", keyed=False, times=-1))
    request = {
        "binding": carols["binding"],
        "id": "fleft1",
        "parts": [{"type": "text", "text": "to side"}],
    }
    r = deliver(f, request)
    assert (r["status"], r["reason"]) == ("final", "rejected"), r
    assert r["data"] == {
        "binding": carols["binding"],
        "why": "binding revoked: carol left the room",
    }
    assert len(asked.hits) == 1  # the hub was asked once
    later = deliver(f, {**request, "id": "fleft2"})
    assert (later["reason"], later["data"]["why"]) == ("rejected", r["data"]["why"])
    assert len(asked.hits) == 1  # answered from the ledger's revocation
    assert texts(f, "to side", side) == []
    shown = wait_for(
        lambda: [
            b
            for b in status(f)["delivery"].get("bindings", [])
            if b["binding"] == carols["binding"] and b["revoked"]
        ]
    )
    assert shown[0]["revoked_reason"] == "carol left the room"


def test_a_sender_removed_from_the_workspace_has_the_binding_revoked(f: Faulty) -> None:
    side = new_room(f, "side-removed", ["carol", "bot"])
    carols = binding(f, "carol", side)
    with f.c.hub.client(f.c.hub.admin_token) as h:
        r = h.delete(f"/v1/admin/workspaces/{f.c.setup.workspace}/members/carol")
    assert r.status_code == 200, r.text
    request = {
        "binding": carols["binding"],
        "id": "fremoved",
        "parts": [{"type": "text", "text": "to carol"}],
    }
    res = deliver(f, request)
    assert (res["status"], res["reason"]) == ("final", "rejected"), res
    assert res["data"]["why"].startswith("binding revoked: carol was removed"), res
    assert texts(f, "to carol", side) == []


def test_a_post_the_hub_refuses_403_revokes_the_binding(f: Faulty) -> None:
    """The agent is taken out of the room while its part is on the way: the hub's 403 on
    the post revokes the binding, and later deliveries under it are rejected as revoked."""
    side = new_room(f, "side-403", ["bot"])
    b = binding(f, "alice", side)
    Path(b["export_dir"], "late.txt").write_text("late")
    go = threading.Event()
    held = f.proxy.arm(Fault("POST", MEDIA, hold=go))
    request = {
        "binding": b["binding"],
        "id": "f403",
        "parts": [{"type": "file", "path": f"{b['export_dir']}/late.txt"}],
    }
    asked = say(f, "alice", "@bot deliver " + json.dumps(
        {"sessionId": "@SESSION_OF_BINDING", "turn": "@TURN_OF_BINDING", **request}
    ))
    wait_for(lambda: held.hits)
    remove_participant(f, side, "bot")
    go.set()
    r = json.loads(reply(f, asked))
    assert (r["status"], r["reason"]) == ("final", "rejected"), r
    assert r["data"]["hub"] == "channel_membership_required"
    assert r["data"]["why"].startswith("binding revoked: the hub refused a post")
    later = deliver(f, {**request, "id": "f403b"})
    assert (later["reason"], later["data"]["why"]) == ("rejected", r["data"]["why"])
    assert media(f, "late.txt", side) == []


def test_the_agent_taken_out_of_the_room_is_rejected_by_the_standing_check(f: Faulty) -> None:
    """Before a new delivery the Worker asks the hub for the room; a 403 there (this agent
    no longer takes part) revokes the binding and posts nothing, and the revocation answers
    later deliveries without asking the hub again."""
    side = new_room(f, "side-standing-403", ["bot"])
    b = binding(f, "alice", side)
    remove_participant(f, side, "bot")
    asked = f.proxy.arm(Fault("GET", f"/v1/rooms/{side}", keyed=False, times=-1))
    posts = f.proxy.arm(Fault("POST", f"/v1/rooms/{side}/{POSTS_IN}", keyed=False, times=-1))
    request = {
        "binding": b["binding"],
        "id": "fstanding403",
        "parts": [{"type": "text", "text": "into a room bot left"}],
    }
    r = deliver(f, request)
    assert (r["status"], r["reason"]) == ("final", "rejected"), r
    why = "binding revoked: bot is no longer in the room (channel_membership_required)"
    assert r["data"] == {"binding": b["binding"], "why": why}
    assert r["expires_at"].endswith("Z")
    assert len(asked.hits) == 1
    later = deliver(f, {**request, "id": "fstanding403b"})
    assert (later["reason"], later["data"]) == ("rejected", r["data"])
    assert len(asked.hits) == 1  # answered from the ledger's revocation
    assert posts.hits == [] and texts(f, "into a room bot left", side) == []
    shown = wait_for(
        lambda: [
            x
            for x in status(f)["delivery"].get("bindings", [])
            if x["binding"] == b["binding"] and x["revoked"]
        ]
    )
    assert shown[0]["revoked_reason"] == why.removeprefix("binding revoked: ")


def test_a_room_the_hub_does_not_know_is_rejected_by_the_standing_check(f: Faulty) -> None:
    """The room GET answers 404 (the binding names a room the hub has no more, e.g. a hub
    rebuilt from scratch): revoked and rejected, nothing posted."""
    side = new_room(f, "side-standing-404", ["bot"])
    b = binding(f, "alice", side)
    with closing(sqlite3.connect(f.ws / "deliveries.sqlite3")) as db, db:  # the real ledger
        n = db.execute(
            "UPDATE bindings SET room = 'rm_gone' WHERE binding = ?", (b["binding"],)
        )
        assert n.rowcount == 1
    posts = f.proxy.arm(Fault("POST", f"/v1/rooms/rm_gone/{POSTS_IN}", keyed=False, times=-1))
    r = deliver(
        f,
        {
            "binding": b["binding"],
            "id": "fstanding404",
            "parts": [{"type": "text", "text": "into no room"}],
        },
    )
    assert (r["status"], r["reason"]) == ("final", "rejected"), r
    assert r["data"]["why"] == "binding revoked: bot is no longer in the room (room_not_found)"
    assert posts.hits == []


def test_an_archived_room_is_rejected_and_keeps_the_binding_for_when_it_comes_back(
    f: Faulty,
) -> None:
    """The room GET answers 200 for an archived room: the standing check passes and the
    hub refuses the post (409 room_archived): `rejected` for that delivery, nothing
    posted, and the binding stays (unarchiving is the owner's choice; it delivers again)."""
    side = new_room(f, "side-archived", ["bot"])
    b = binding(f, "alice", side)
    with f.c.hub.client(f.c.setup.tokens["alice"]) as h:
        assert h.post(f"/v1/rooms/{side}/archive").status_code == 200
    request = {
        "binding": b["binding"],
        "id": "farchived",
        "parts": [{"type": "text", "text": "into the archive"}],
    }
    r = deliver(f, request)
    assert (r["status"], r["reason"]) == ("final", "rejected"), r
    assert r["data"] == {"part": 0, "hub": "room_archived"}
    assert texts(f, "into the archive", side) == []
    with f.c.hub.client(f.c.setup.tokens["alice"]) as h:
        assert h.post(f"/v1/rooms/{side}/unarchive").status_code == 200
    again = deliver(f, {**request, "id": "farchived2"})
    assert again["status"] == "delivered", again
    assert [e["id"] for e in texts(f, "into the archive", side)] == again["event_ids"]


# -- rule 5's missing echo, and the probe on a listener restart --------------------------


def test_a_keyed_2xx_without_the_echo_is_delivered_then_withdrawn_until_a_probe(
    f: Faulty,
) -> None:
    stripped = f.proxy.arm(Fault("POST", MESSAGES, strip_header="Idempotency-Status"))
    r = deliver(
        f, {"binding": "$BINDING", "id": "fecho1", "parts": [{"type": "text", "text": "no echo"}]}
    )
    assert r["status"] == "delivered" and len(stripped.hits) == 1, r
    assert [e["id"] for e in texts(f, "no echo")] == r["event_ids"]
    assert "delivery declaration withdrawn" in f.worker.log()
    request = {
        "binding": "$BINDING",
        "id": "fecho2",
        "parts": [{"type": "text", "text": "after the probe"}],
    }
    paused = deliver(f, request)
    assert paused["status"] == "retry" and "paused" in paused["reason"], paused
    assert wait_for(lambda: status(f)["delivery"]["enabled"] is False)
    # The listener restarts (the agent process dies and comes back): the Worker probes again.
    probes = f.proxy.arm(Fault("GET", "/v1/capabilities", keyed=False, times=-1))
    restarts = f.worker.log().count("agent started")
    reply(f, say(f, "alice", "@bot crash"))
    wait_for(lambda: f.worker.log().count("agent started") > restarts)
    assert len(probes.hits) == 1
    assert "enabled again (the probe found the hub's keys echo)" in f.worker.log()
    done = deliver(f, request)
    assert done["status"] == "delivered", done
    assert len(texts(f, "after the probe")) == 1


# -- `connect status`, the human view -----------------------------------------------------


def human_status(f: Faulty) -> dict[str, list[str]]:
    """`agentpost connect status` without --json, piped: its tables (tab-separated, or
    "(none)") under their heading line (`bindings:`, `deliveries in progress:`, ...); ""
    holds the plain lines (worker, delivery enabled and why, counts by outcome)."""
    out = subprocess.run(
        [sys.executable, "-m", "agentpost", "connect", "status", "--workspace-dir", str(f.ws)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    sections: dict[str, list[str]] = {"": []}
    current = ""
    for line in out.splitlines():
        if line.endswith(":") and "\t" not in line:
            current = line[:-1]
            sections[current] = []
        elif "\t" in line or line == "(none)":
            sections[current].append(line)
        else:
            sections[""].append(line)
    return sections


def rows(section: list[str]) -> list[list[str]]:
    """A piped table's rows (its header line dropped); [] for "(none)"."""
    return [] if section == ["(none)"] else [line.split("\t") for line in section[1:]]


def test_connect_status_shows_the_worker_bindings_and_deliveries_in_progress_and_done(
    f: Faulty,
) -> None:
    b = binding(f)
    Path(b["export_dir"], "shown.txt").write_text("shown")
    done = deliver(
        f, {"binding": "$BINDING", "id": "fshown1", "parts": [{"type": "text", "text": "shown"}]}
    )
    assert done["status"] == "delivered"
    refused = deliver(
        f,
        {"binding": "$BINDING", "id": "fshown2", "parts": [{"type": "file", "path": "$EXPORT/no"}]},
    )
    assert refused["reason"] == "rejected"
    go = threading.Event()
    held = f.proxy.arm(Fault("POST", MEDIA, hold=go))
    request = {
        "binding": "$BINDING",
        "id": "fshown3",
        "parts": [{"type": "text", "text": "held"}, {"type": "file", "path": "$EXPORT/shown.txt"}],
    }
    asked = say(f, "alice", "@bot deliver " + json.dumps(
        {"sessionId": "@SESSION_OF_BINDING", "turn": "@TURN_OF_BINDING", **request}
    ))
    try:
        wait_for(lambda: held.hits)
        s = wait_for(
            lambda: (s := human_status(f))
            and [r[0] for r in rows(s["deliveries in progress"])] == ["fshown3"]
            and s
        )
    finally:
        go.set()
    top = s[""]
    assert f"worker {f.worker_id}\trunning: yes" in top  # piped: tab-separated (docs/cli.md)
    assert (
        "delivery (_ag2/deliver): enabled (the hub's keys echo and live 24 h, the ledger is"
        " locked, the workspace is never egress)" in top
    ), top
    outcomes = [line for line in top if line.startswith("deliveries by outcome: ")]
    counts = dict(kv.split("=") for kv in outcomes[0].split(": ", 1)[1].split())
    assert counts["in_progress"] == "1" and int(counts["delivered"]) >= 1, counts
    assert int(counts["final/rejected"]) >= 1, counts
    shown = {r[0]: r for r in rows(s["bindings"])}
    assert shown[b["binding"]][1:3] == [f.c.setup.room, "alice"]
    assert shown[b["binding"]][4] == ""  # not revoked
    [(did, bound, room, posted, _)] = rows(s["deliveries in progress"])
    assert (did, bound, room, posted) == ("fshown3", b["binding"], f.c.setup.room, "0 of 2")
    recent = {r[0]: r for r in rows(s["recent deliveries"])}
    assert recent["fshown1"][1:4] == [b["binding"], f.c.setup.room, "delivered"]
    assert recent["fshown2"][3] == "final/rejected"
    assert recent["fshown3"][3] == "in_progress"
    assert json.loads(reply(f, asked))["status"] == "delivered"
    after = wait_for(
        lambda: (s := human_status(f))
        and {r[0]: r[3] for r in rows(s["recent deliveries"])}.get("fshown3") == "delivered"
        and s
    )
    assert after["deliveries in progress"] == ["(none)"]


# -- "Ledger": retention -----------------------------------------------------------------


def test_ledger_retention_30_days_cap_10000_never_in_progress_or_young(f: Faulty) -> None:
    f.worker.stop()
    now = time.time()
    wid = f.worker_id
    rows = []

    def row(i: str, state: str, first_seen: float, finished_at: float | None) -> None:
        result = json.dumps({"status": "delivered"}) if state == "finished" else None
        rows.append(
            (i, f"{wid}.old", "rm_x", wid, "[]", "{}", state, result, first_seen, finished_at)
        )

    for i in range(5):  # finished more than 30 days ago: dropped
        row(f"old{i}", "finished", now - 31 * DAY - i, now - 31 * DAY)
    row("inprogress", "in_progress", now - 31 * DAY, None)  # never dropped
    for i in range(50):  # first seen long ago, finished within 24 h: never dropped
        row(f"young{i}", "finished", now - 25 * DAY - i, now - 3600)
    for i in range(10_100):  # oldest first over the cap
        row(f"a{i}", "finished", now - 2 * DAY - i, now - 2 * DAY - i + 10)
    with closing(sqlite3.connect(f.ws / "deliveries.sqlite3")) as db, db:
        db.executemany("INSERT INTO deliveries VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
        before = dict(db.execute("SELECT id, state FROM deliveries").fetchall())
    f.worker.start()
    assert f.worker.log().count("delivery (_ag2/deliver): enabled (") == f.worker.starts
    with closing(sqlite3.connect(f.ws / "deliveries.sqlite3")) as db:
        kept = {r[0] for r in db.execute("SELECT id FROM deliveries")}
    assert len(kept) == 10_000
    assert not {f"old{i}" for i in range(5)} & kept
    assert {"inprogress", *(f"young{i}" for i in range(50))} <= kept
    earlier = {i for i in before if not i.startswith(("old", "young", "a", "inprogress"))}
    assert earlier <= kept  # this module's own deliveries, all younger than 24 h
    dropped = sorted(
        int(i[1:]) for i in before if i.startswith("a") and i[1:].isdigit() and i not in kept
    )
    assert dropped == list(range(10_100 - len(dropped), 10_100))  # the oldest went first
    assert dropped
