"""A room's seqs stay gap-free under every refusal of a keyed post (docs/api.md): the
ones that roll back with the job and the ones that are themselves recorded under the key
(a room policy's `command_rejected`), alone or mixed into one group-commit batch."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import httpx

from hubproc import Setup

SECRET = "the key is AKIAIOSFODNN7EXAMPLE"
NO_EVENT = "ev_01M8RKJCJGYAXAPFFFJ3BAHR5M"  # well-shaped, never made


def post(c: httpx.Client, room: str, body: dict, key: str) -> httpx.Response:
    return c.post(f"/v1/rooms/{room}/messages", json=body, headers={"Idempotency-Key": key})


def upload(c: httpx.Client, room: str, caption: str, key: str) -> httpx.Response:
    return c.post(
        f"/v1/rooms/{room}/media",
        files={"file": ("a.txt", b"bytes", "text/plain")},
        data={"text": caption},
        headers={"Idempotency-Key": key},
    )


def assert_gap_free(c: httpx.Client, room: str) -> int:
    seqs = [e["seq"] for e in c.get(f"/v1/rooms/{room}/events?limit=1000").json()["events"]]
    assert seqs == list(range(1, len(seqs) + 1)), seqs
    assert c.get(f"/v1/rooms/{room}").json()["room"]["last_seq"] == len(seqs)
    return len(seqs)


def test_every_refusal_kind_leaves_no_gap_in_the_seqs(setup: Setup) -> None:
    room = setup.room
    with (
        setup.hub.client(setup.tokens["alice"]) as alice,
        setup.hub.client(setup.tokens["bot"]) as bot,
    ):
        assert alice.patch(f"/v1/rooms/{room}", json={"sensitive_filter": True}).status_code == 200
        assert post(alice, room, {"text": "one"}, "ok-1").status_code == 201
        refused = {
            "secret text": post(alice, room, {"text": SECRET}, "secret"),
            "secret replayed": post(alice, room, {"text": SECRET}, "secret"),
            "secret caption": upload(alice, room, SECRET, "secret-media"),
            "other body, same key": post(alice, room, {"text": "other"}, "secret"),
            "unknown attachment": post(alice, room, {"text": "x", "attachments": ["md_x"]}, "att"),
            "blank text": post(alice, room, {"text": "  "}, "blank"),
            "reply to nothing": post(alice, room, {"text": "re", "in_reply_to": NO_EVENT}, "re"),
        }
        assert alice.delete(f"/v1/rooms/{room}/participants/bot").status_code == 200
        refused["not a participant"] = post(bot, room, {"text": "hi"}, "bot-1")
        assert alice.post(f"/v1/rooms/{room}/archive").status_code == 200
        refused["archived"] = post(alice, room, {"text": "late"}, "late")
        assert alice.post(f"/v1/rooms/{room}/unarchive").status_code == 200
        codes = {what: r.json()["error"]["code"] for what, r in refused.items()}
        assert codes == {
            "secret text": "command_rejected",
            "secret replayed": "command_rejected",
            "secret caption": "command_rejected",
            "other body, same key": "idempotency_conflict",
            "unknown attachment": "invalid_request",
            "blank text": "invalid_request",
            "reply to nothing": "invalid_request",
            "not a participant": "channel_membership_required",
            "archived": "room_archived",
        }
        assert refused["secret replayed"].headers["idempotency-status"] == "replayed"
        assert refused["secret replayed"].content == refused["secret text"].content
        assert assert_gap_free(alice, room) == 1
        two = post(alice, room, {"text": "two"}, "ok-2")
        assert two.json()["event"]["seq"] == 2
        media = upload(alice, room, "clean caption", "ok-media")
        assert media.json()["event"]["seq"] == 3
        assert assert_gap_free(alice, room) == 3


def test_refusals_mixed_into_one_batch_leave_no_gap(setup: Setup) -> None:
    """Concurrent posts share group-commit batches: a recorded refusal undoes its own seq
    only, never a neighbour's event."""
    room = setup.room
    with setup.hub.client(setup.tokens["alice"]) as alice:
        assert alice.patch(f"/v1/rooms/{room}", json={"sensitive_filter": True}).status_code == 200

    def one(i: int) -> int:
        with setup.hub.client(setup.tokens["alice"]) as c:
            text = SECRET if i % 3 == 0 else f"fine {i}"
            return post(c, room, {"text": text}, f"mix-{i}").status_code

    with ThreadPoolExecutor(16) as pool:
        statuses = list(pool.map(one, range(96)))
    assert statuses.count(422) == 32 and statuses.count(201) == 64
    with setup.hub.client(setup.tokens["alice"]) as alice:
        assert assert_gap_free(alice, room) == 64
        # Every refused key is recorded as rejected and replays so.
        again = post(alice, room, {"text": SECRET}, "mix-0")
        assert again.headers["idempotency-status"] == "replayed"
        assert again.json()["error"]["reason"] == "sensitive_data"
        assert alice.get(f"/v1/rooms/{room}/sends?key=mix-3").json()["send"]["state"] == "rejected"
