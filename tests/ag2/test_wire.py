"""The AG2 relay profile at the wire (docs/ag2.md), spoken with httpx as ag2-relay-client
speaks it, on both engines: tasks and their leases, acks, results and their markers, room
ops, media both ways, and every refusal with its code."""

from __future__ import annotations

import base64
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import pytest
from ag2run import events, inbox, post, relay, said, served, setup_ag2, tasks

from hubproc import HubProcess, poll

FAST = {"AGENTPOST_AG2_LEASE_SECONDS": "0.6"}


@pytest.fixture
def fast_hub(make_hub: Callable[..., HubProcess]) -> HubProcess:
    return make_hub(env=FAST)


def test_owner_message_is_a_task_with_the_wire_envelope(hub: HubProcess) -> None:
    s = setup_ag2(hub)
    asked = post(hub, s.tokens["alice"], s.room, "hello @bot")
    with relay(hub, s.tokens["bot"]) as r:
        task = served(r)
        assert task["id"] == asked["id"] == task["source_message_id"]
        assert task["task"] == "hello @bot"
        assert task["channel_id"] == "!" + s.room
        assert task["user_id"] == "@alice:acme"
        assert task["access_tier"] == "owner"
        assert task["attempt"] == 1
        assert task["room_name"] == "general" and task["sender_name"] == "alice"
        assert r.post(f"/v1/tasks/{task['id']}/ack", json={"id": task["id"]}).json() == {"ok": True}
        assert tasks(r) == []  # served once: the lease is held
    got = {e["id"]: e for e in events(hub, s.tokens["alice"], s.room)}
    # The intake reaction AG2's broker places on the first ack (the Worker leaves it to us).
    assert [(x["emoji"], x["members"]) for x in got[asked["id"]]["reactions"]] == [("🫡", ["bot"])]
    post(hub, s.tokens["carol"], s.room, "and me @bot")
    with relay(hub, s.tokens["bot"]) as r:
        # One task per room is out at a time: carol's waits for alice's answer.
        assert tasks(r) == []
        assert r.post("/v1/results", json={"id": task["id"], "body": "hi"}).status_code == 200
        guest = served(r)
        assert guest["access_tier"] == "guest" and guest["user_id"] == "@carol:acme"


def test_result_is_a_reply_that_wakes_the_asker_once_and_a_repeat_is_a_duplicate(
    hub: HubProcess,
) -> None:
    s = setup_ag2(hub)
    asked = post(hub, s.tokens["alice"], s.room, "what time is it? @bot")
    with relay(hub, s.tokens["bot"]) as r:
        task = served(r)
        first = r.post("/v1/results", json={"id": task["id"], "body": "noon"})
        assert first.json() == {"ok": True, "duplicate": False}
        again = r.post("/v1/results", json={"id": task["id"], "body": "noon"})
        other = r.post("/v1/results", json={"id": task["id"], "body": "midnight"})
        assert again.json() == other.json() == {"ok": True, "duplicate": True}
    replies = said(hub, s.tokens["alice"], s.room, "bot")
    assert [(e["text"], e["in_reply_to"]) for e in replies] == [("noon", asked["id"])]
    woke = [e for e in inbox(hub, s.tokens["alice"]) if e["sender"] == "bot"]
    assert [e["text"] for e in woke] == ["noon"]
    with hub.client(s.tokens["bot"]) as c:  # the wake-up is acknowledged with the answer
        assert c.get("/v1/me").json()["inbox_cursor"] >= 1


def test_delegation_result_and_dead_letter_are_receipts(hub: HubProcess) -> None:
    s = setup_ag2(hub)
    ask = post(hub, s.tokens["helper"], s.room, "@bot sum 1 2")
    with relay(hub, s.tokens["bot"]) as r:
        task = served(r)
        assert task["access_tier"] == "guest"  # an agent is not the owner
        assert r.post("/v1/results", json={"id": task["id"], "body": "3"}).status_code == 200
    got = [e for e in inbox(hub, s.tokens["helper"]) if e["sender"] == "bot"]
    assert [(e["text"], e["reply_kind"], e["in_reply_to"]) for e in got] == [
        ("3", "result", ask["id"])
    ]
    ask2 = post(hub, s.tokens["helper"], s.room, "@bot something odd")
    with relay(hub, s.tokens["bot"]) as r:
        task = served(r)
        body = {"id": task["id"], "status": "rejected", "error_code": "INVALID_TASK"}
        assert r.post("/v1/results", json=body).json() == {"ok": True, "duplicate": False}
    got = [e for e in inbox(hub, s.tokens["helper"]) if e["in_reply_to"] == ask2["id"]]
    assert [(e["reply_kind"], e["text"]) for e in got] == [
        ("error", "bot rejected this task (INVALID_TASK).")
    ]


def test_dead_letter_of_a_person_message_is_a_notice(hub: HubProcess) -> None:
    s = setup_ag2(hub)
    asked = post(hub, s.tokens["alice"], s.room, "hm @bot")
    with relay(hub, s.tokens["bot"]) as r:
        task = served(r)
        body = {"id": task["id"], "status": "rejected", "error_code": "empty task!"}
        assert r.post("/v1/results", json=body).status_code == 200
    notes = [e for e in events(hub, s.tokens["alice"], s.room) if e["type"] == "notice"]
    assert [(n["text"], n["in_reply_to"]) for n in notes] == [
        ("bot could not answer this message (empty_task).", asked["id"])
    ]


def test_markers_skip_redirect_dm_only_and_long_text(hub: HubProcess) -> None:
    s = setup_ag2(hub)
    with hub.client(s.tokens["alice"]) as c:
        other = c.post(
            "/v1/workspaces/acme/rooms", json={"name": "other", "participants": ["bot"]}
        ).json()["room"]["id"]
    bodies = [
        "[no-send] nothing to see",
        "[REPLIED]\n\nalready said",
        "[deduped: ev_x] twice",
        f"[channel: !{other}]\nover there",
        f"[channel: !{other}]\n[dm-only]\nkept here",
        "word " * 30_000,
    ]
    with relay(hub, s.tokens["bot"]) as r:
        for body in bodies:
            post(hub, s.tokens["alice"], s.room, "go @bot")
            task = served(r)
            assert r.post("/v1/results", json={"id": task["id"], "body": body}).json() == {
                "ok": True,
                "duplicate": False,
            }
    here = [e["text"] for e in said(hub, s.tokens["alice"], s.room, "bot")]
    there = [e["text"] for e in said(hub, s.tokens["alice"], other, "bot")]
    assert there == ["over there"]
    assert here[0] == "kept here"
    long = here[1:]
    assert len(long) == 3 and all(len(t) <= 60_000 for t in long)
    assert " ".join(long).split() == ["word"] * 30_000


def test_unacked_lease_is_served_again_with_the_next_attempt(fast_hub: HubProcess) -> None:
    s = setup_ag2(fast_hub)
    post(fast_hub, s.tokens["alice"], s.room, "hello @bot")
    with relay(fast_hub, s.tokens["bot"]) as r:
        first = served(r)
        again = poll(lambda: [t for t in tasks(r) if t["attempt"] == 2], timeout=20)
        assert again[0]["id"] == first["id"]
        stale = r.post(f"/v1/tasks/{first['id']}/ack", json={"id": first["id"]})
        assert stale.status_code == 200  # the new lease is live
        bogus = r.post("/v1/tasks/ev_nothing/ack", json={"id": "ev_nothing"})
        assert bogus.status_code == 404 and "not leased" in bogus.text
        assert bogus.json()["error"]["code"] == "not_leased"


def test_acked_lease_is_kept_while_the_poller_polls(fast_hub: HubProcess) -> None:
    s = setup_ag2(fast_hub)
    post(fast_hub, s.tokens["alice"], s.room, "hello @bot")
    with relay(fast_hub, s.tokens["bot"]) as r:
        task = served(r)
        assert r.post(f"/v1/tasks/{task['id']}/ack", json={}).status_code == 200
        seen: list[int] = []
        start = time.monotonic()
        while time.monotonic() - start < 3.0:  # five lease windows, each poll waiting 0.25 s
            seen.extend(t["attempt"] for t in tasks(r, wait=0.25))
        assert seen == []  # never re-served
        assert r.post(f"/v1/tasks/{task['id']}/ack", json={}).status_code == 200


def test_task_never_answered_is_dropped_after_five_attempts(fast_hub: HubProcess) -> None:
    s = setup_ag2(fast_hub)
    asked = post(fast_hub, s.tokens["alice"], s.room, "anyone? @bot")
    attempts: list[int] = []
    with relay(fast_hub, s.tokens["bot"]) as r:

        def dropped() -> bool:
            attempts.extend(t["attempt"] for t in tasks(r, wait=0.2))
            return any(e["type"] == "notice" for e in events(fast_hub, s.tokens["alice"], s.room))

        poll(dropped, timeout=60)
        assert attempts == [1, 2, 3, 4, 5]
        assert tasks(r) == []
        # A late answer is still posted: nothing an agent says is thrown away.
        late = r.post("/v1/results", json={"id": asked["id"], "body": "sorry, late"})
        assert late.json() == {"ok": True, "duplicate": False}
    notes = [e for e in events(fast_hub, s.tokens["alice"], s.room) if e["type"] == "notice"]
    assert notes[0]["in_reply_to"] == asked["id"]
    assert "never took this message" in notes[0]["text"] and "5 times" in notes[0]["text"]
    with fast_hub.client(s.tokens["bot"]) as c:
        assert c.get("/v1/me").json()["inbox_cursor"] >= 1  # the wake-up is acked


def test_room_op_message_answers_the_task_out_in_that_room(hub: HubProcess) -> None:
    s = setup_ag2(hub)
    asked = post(hub, s.tokens["alice"], s.room, "long job @bot")
    with relay(hub, s.tokens["bot"]) as r:
        task = served(r)
        room = task["channel_id"]
        one = r.post("/v1/room", json={"op": "message", "room_id": room, "body": "⏳ On it..."})
        two = r.post(
            "/v1/room",
            json={"op": "message", "room_id": room, "body": "fyi", "mentions": ["@carol:acme"]},
        )
        assert one.status_code == two.status_code == 200, (one.text, two.text)
        assert (
            r.post("/v1/results", json={"id": task["id"], "body": "[REPLIED]"}).status_code == 200
        )
    got = {e["id"]: e for e in events(hub, s.tokens["alice"], s.room)}
    placeholder, fyi = got[one.json()["event_id"]], got[two.json()["event_id"]]
    assert placeholder["in_reply_to"] == asked["id"] and placeholder["targets"] == ["alice"]
    assert (
        fyi["in_reply_to"] is None and fyi["text"] == "fyi\n@carol" and fyi["targets"] == ["carol"]
    )
    assert [e["text"] for e in inbox(hub, s.tokens["alice"]) if e["sender"] == "bot"] == [
        "⏳ On it..."
    ]


def test_media_both_ways(hub: HubProcess) -> None:
    s = setup_ag2(hub)
    with hub.client(s.tokens["alice"]) as c:
        files = {"file": ("my report.txt", b"numbers\n", "text/plain")}
        up = c.post(f"/v1/rooms/{s.room}/media", files=files, data={"text": "see this @bot"})
        assert up.status_code == 201, up.text
    with relay(hub, s.tokens["bot"]) as r:
        task = served(r)
        marker = task["task"].split("\n")[1]
        assert marker.startswith(f"[ag2space-media: {hub.url}/ag2/v1/media/md_")
        assert "mime=text/plain name=my_report.txt size=8 kind=m.file]" in marker
        url = marker.split()[1]
        got = r.get(url)
        assert got.status_code == 200 and got.content == b"numbers\n"
        payload = {
            "content_b64": base64.b64encode(b"chart").decode(),
            "filename": "chart.png",
            "caption": "the chart",
        }
        sent = r.post(f"/v1/rooms/%21{s.room}/media", json=payload)
        assert sent.status_code == 200, sent.text
        assert sent.json()["mxc"].startswith("mxc://acme/md_")
        again = r.post(f"/v1/rooms/%21{s.room}/media", json=payload)  # a Worker's retry
        assert again.json() == sent.json()
    media = said(hub, s.tokens["alice"], s.room, "bot")
    assert [(e["type"], e["text"], e["attachments"][0]["name"]) for e in media] == [
        ("media", "the chart", "chart.png")
    ]
    assert media[0]["attachments"][0]["mime_type"] == "image/png"


def test_refusals_have_codes_and_change_nothing(hub: HubProcess) -> None:
    s = setup_ag2(hub)
    post(hub, s.tokens["alice"], s.room, "hi")
    with relay(hub, s.tokens["alice"]) as person:
        assert person.get("/v1/tasks").json()["error"]["code"] == "forbidden"
    with relay(hub, "nope") as nobody:
        assert nobody.get("/v1/tasks").status_code == 401
    with relay(hub, s.tokens["bot"]) as r:
        cases = [
            (r.post("/v1/results", content=b"{"), 400, "invalid_json"),
            (r.post("/v1/results", json={"id": "a/b", "body": "x"}), 400, "invalid_request"),
            (r.post("/v1/results", json={"id": "ev_x", "body": "  "}), 400, "invalid_request"),
            (r.post("/v1/results", json={"id": "ev_x", "body": "x"}), 404, "task_not_found"),
            (
                r.post("/v1/room", json={"op": "message", "room_id": "#x", "body": "x"}),
                404,
                "room_not_found",
            ),
            (
                r.post("/v1/room", json={"op": "message", "room_id": "!rm_none", "body": "x"}),
                404,
                "room_not_found",
            ),
            (
                r.post("/v1/room", json={"op": "shout", "room_id": "!x", "body": "x"}),
                400,
                "invalid_request",
            ),
            (
                r.post(
                    "/v1/room",
                    json={
                        "op": "message",
                        "room_id": "!" + s.room,
                        "body": "x",
                        "mentions": ["@carol:elsewhere"],
                    },
                ),
                400,
                "invalid_request",
            ),
            (
                r.post(
                    f"/v1/rooms/%21{s.room}/media", json={"content_b64": "***", "filename": "a"}
                ),
                400,
                "invalid_request",
            ),
        ]
        for answer, status, code in cases:
            assert answer.status_code == status, answer.text
            assert answer.json()["error"]["code"] == code
        assert "not leased" in cases[3][0].text
        assert r.get("/v1/healthz").json()["ok"] is True
        assert r.post("/v1/heartbeat", json={"client": "x", "inflight": 0}).json() == {"ok": True}
    assert [e["sender"] for e in events(hub, s.tokens["alice"], s.room)] == ["alice"]


def test_a_waiting_poll_gets_the_room_s_next_task_when_the_first_is_answered(
    hub: HubProcess,
) -> None:
    s = setup_ag2(hub)
    post(hub, s.tokens["alice"], s.room, "one @bot")
    second = post(hub, s.tokens["alice"], s.room, "two @bot")
    with relay(hub, s.tokens["bot"]) as r, relay(hub, s.tokens["bot"]) as waiting:
        first = served(r)
        with ThreadPoolExecutor(1) as pool:
            started = time.monotonic()
            polled = pool.submit(tasks, waiting, 20)  # the Worker's long poll, held
            time.sleep(0.5)
            assert r.post("/v1/results", json={"id": first["id"], "body": "1"}).status_code == 200
            assert [t["id"] for t in polled.result()] == [second["id"]]
            assert time.monotonic() - started < 10  # woken by the answer, not timed out


def test_a_heartbeat_with_fewer_tasks_in_hand_than_acked_serves_them_again(
    hub: HubProcess,
) -> None:
    """A Worker restarted within the lease window (SIGTERM mid-Turn, its poller guard
    released) polls like the old one but has lost the old one's Turn; its heartbeat says so
    (`inflight` 0). The hub serves the task again at once, attempt + 1, not after the lease:
    the new attempt's placeholder edits the first one's, and there is one answer."""
    s = setup_ag2(hub)  # the default lease: 60 s, far longer than this test
    asked = post(hub, s.tokens["alice"], s.room, "long job @bot")
    with relay(hub, s.tokens["bot"]) as r:
        task = served(r)
        assert r.post(f"/v1/tasks/{task['id']}/ack", json={}).status_code == 200
        room = task["channel_id"]
        first = r.post("/v1/room", json={"op": "message", "room_id": room, "body": "⏳ On it..."})
        assert first.status_code == 200, first.text
        # The Worker that runs it says it has it: the lease is kept.
        assert r.post("/v1/heartbeat", json={"inflight": 1}).json() == {"ok": True}
        assert r.post("/v1/heartbeat", json={"client": "x"}).json() == {"ok": True}
        assert tasks(r) == []
        # Its successor has nothing in hand: served again, now.
        assert r.post("/v1/heartbeat", json={"inflight": 0}).json() == {"ok": True}
        again = tasks(r)
        assert [(t["id"], t["attempt"]) for t in again] == [(task["id"], 2)]
        assert r.post(f"/v1/tasks/{task['id']}/ack", json={}).status_code == 200
        assert r.post("/v1/heartbeat", json={"inflight": 1}).json() == {"ok": True}
        assert tasks(r) == []
        second = r.post("/v1/room", json={"op": "message", "room_id": room, "body": "⏳ On it..."})
        assert second.json()["event_id"] == first.json()["event_id"]  # the first placeholder
        edit = {"op": "edit", "room_id": room, "event_id": first.json()["event_id"], "body": "done"}
        assert r.post("/v1/room", json=edit).status_code == 200
        done = r.post("/v1/results", json={"id": task["id"], "body": "[REPLIED]"})
        assert done.json() == {"ok": True, "duplicate": False}
        late = r.post("/v1/results", json={"id": task["id"], "body": "done"})
        assert late.json() == {"ok": True, "duplicate": True}
        assert r.post("/v1/heartbeat", json={"inflight": 0}).json() == {"ok": True}
        assert tasks(r) == []  # answered: nothing to serve again
    replies = said(hub, s.tokens["alice"], s.room, "bot")
    assert [(e["text"], e["in_reply_to"], e["edited"]) for e in replies] == [
        ("done", asked["id"], True)
    ]
    woke = [e["id"] for e in inbox(hub, s.tokens["alice"]) if e["sender"] == "bot"]
    assert woke == [first.json()["event_id"]]  # alice was woken once


def _ag2_task_rows(hub: HubProcess) -> int:
    if hub.db_url is None:
        import sqlite3

        db = sqlite3.connect(hub.data_dir / "hub.sqlite3")
        try:
            return int(db.execute("SELECT COUNT(*) FROM ag2_tasks").fetchone()[0])
        finally:
            db.close()
    import psycopg

    with psycopg.connect(hub.db_url) as conn:
        row = conn.execute("SELECT COUNT(*) FROM ag2_tasks").fetchone()
        assert row is not None
        return int(row[0])


def test_a_finished_task_is_removed_after_the_key_lifetime(
    make_hub: Callable[..., HubProcess],
) -> None:
    """docs/operations.md "Retention": finished tasks do not pile up; one in progress stays."""
    hub = make_hub(env={"AGENTPOST_SWEEP_INTERVAL": "0.2"}, extra_args=["--key-ttl-seconds", "1"])
    s = setup_ag2(hub)
    post(hub, s.tokens["alice"], s.room, "one @bot")
    with relay(hub, s.tokens["bot"]) as r:
        task = served(r)
        assert r.post("/v1/results", json={"id": task["id"], "body": "done"}).status_code == 200
    post(hub, s.tokens["alice"], s.room, "two @bot")
    with relay(hub, s.tokens["bot"]) as r:
        second = served(r)  # in progress: no result yet
    assert _ag2_task_rows(hub) == 2
    poll(lambda: _ag2_task_rows(hub) == 1, timeout=30)
    with relay(hub, s.tokens["bot"]) as r:  # the one in progress is still answerable
        got = r.post("/v1/results", json={"id": second["id"], "body": "later"})
        assert got.json() == {"ok": True, "duplicate": False}


def test_a_heartbeat_s_inflight_must_be_a_count_of_tasks(hub: HubProcess) -> None:
    """docs/ag2.md: `inflight` is 0..10000. A negative count (which would free every lease
    of the agent) or an absurd one is refused as malformed, 400 invalid_request, and the
    acked task stays leased."""
    s = setup_ag2(hub)
    post(hub, s.tokens["alice"], s.room, "hold this @bot")
    with relay(hub, s.tokens["bot"]) as r:
        task = served(r)
        assert r.post(f"/v1/tasks/{task['id']}/ack", json={}).status_code == 200
        for bad in (-5, 10_001, 10**30):
            refused = r.post("/v1/heartbeat", json={"inflight": bad})
            assert refused.status_code == 400, (bad, refused.text)
            assert refused.json()["error"]["code"] == "invalid_request", refused.text
        assert tasks(r) == []  # nothing was served again
        assert r.post("/v1/heartbeat", json={"inflight": 10_000}).json() == {"ok": True}


def test_a_result_after_the_key_lifetime_is_still_a_duplicate(
    make_hub: Callable[..., HubProcess],
) -> None:
    """The hub forgets a finished task after the key lifetime (3 s here); a result for it
    after that is answered from what the inbox says (handed in and acknowledged): a
    duplicate, as docs/ag2.md promises, never 404."""
    hub = make_hub(env={"AGENTPOST_SWEEP_INTERVAL": "0.2"}, extra_args=["--key-ttl-seconds", "3"])
    s = setup_ag2(hub)
    post(hub, s.tokens["alice"], s.room, "what time is it? @bot")
    with relay(hub, s.tokens["bot"]) as r:
        task = served(r)
        assert r.post("/v1/results", json={"id": task["id"], "body": "noon"}).json() == {
            "ok": True,
            "duplicate": False,
        }
    with hub.client(s.tokens["alice"]) as c:
        # Two keys made after the answer, each forgotten in turn: a whole sweep has run
        # past the task's cutoff, so the finished task is forgotten too.
        for n in range(2):
            key = f"probe-{n}"
            made = c.post(
                f"/v1/rooms/{s.room}/messages", json={"text": key}, headers={"Idempotency-Key": key}
            )
            assert made.status_code == 201
            poll(
                lambda key=key: c.get(f"/v1/rooms/{s.room}/sends", params={"key": key}).status_code
                == 404,
                timeout=30,
            )
    with relay(hub, s.tokens["bot"]) as r:
        late = r.post("/v1/results", json={"id": task["id"], "body": "noon again"})
        assert (late.status_code, late.json()) == (200, {"ok": True, "duplicate": True})
        rejected = r.post("/v1/results", json={"id": task["id"], "status": "rejected"})
        assert rejected.json() == {"ok": True, "duplicate": True}
        unknown = r.post("/v1/results", json={"id": "ev_nosuchtask", "body": "x"})
        assert unknown.status_code == 404
    replies = said(hub, s.tokens["alice"], s.room, "bot")
    assert [e["text"] for e in replies] == ["noon"]
