"""Edits, reactions and redactions (docs/api.md "Relations") on both engines: each is an
event of its own, keyed and gated like a post; reads of the target show its latest text,
its reactions, or that it was redacted; every refusal has a stable code and changes
nothing."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from hubproc import Setup


# One hub per engine for this module; each test makes its own workspace on it.
@pytest.fixture
def setup(shared_setup: Setup) -> Setup:
    return shared_setup


SECRET = "here is the key AKIAABCDEFGHIJKLMNOP for prod"


class Room:
    def __init__(self, setup: Setup) -> None:
        self.s = setup
        self.id = setup.room

    def client(self, who: str) -> httpx.Client:
        return self.s.hub.client(self.s.tokens[who])

    def say(self, who: str, text: str) -> dict[str, Any]:
        with self.client(who) as c:
            r = c.post(f"/v1/rooms/{self.id}/messages", json={"text": text})
        assert r.status_code == 201, r.text
        ev: dict[str, Any] = r.json()["event"]
        return ev

    def relate(
        self, who: str, event_id: str, kind: str, key: str | None = None, **body: Any
    ) -> httpx.Response:
        headers = {"Idempotency-Key": key} if key else {}
        with self.client(who) as c:
            return c.post(
                f"/v1/rooms/{self.id}/events/{event_id}/{kind}", json=body, headers=headers
            )

    def event(self, who: str, event_id: str) -> dict[str, Any]:
        with self.client(who) as c:
            r = c.get(f"/v1/events/{event_id}")
        assert r.status_code == 200, r.text
        ev: dict[str, Any] = r.json()["event"]
        return ev

    def events(self, who: str = "alice") -> list[dict[str, Any]]:
        with self.client(who) as c:
            got: list[dict[str, Any]] = c.get(f"/v1/rooms/{self.id}/events").json()["events"]
        return got


@pytest.fixture
def room(setup: Setup) -> Room:
    return Room(setup)


def code(r: httpx.Response) -> tuple[int, str]:
    return r.status_code, r.json()["error"]["code"]


# -- edits ---------------------------------------------------------------------------------


def test_an_edit_is_its_own_event_and_reads_show_the_latest_text(room: Room) -> None:
    target = room.say("alice", "helo world")
    r = room.relate("alice", target["id"], "edits", text="  hello world ")
    assert r.status_code == 201, r.text
    edit = r.json()["event"]
    assert (edit["type"], edit["relates_to"], edit["text"]) == ("edit", target["id"], "hello world")
    assert (edit["targets"], edit["route"], edit["sender"]) == ([], "relation", "alice")
    shown = room.event("carol", target["id"])
    assert (shown["text"], shown["edited"], shown["edited_at"]) == (
        "hello world",
        True,
        edit["created_at"],
    )
    assert (shown["id"], shown["seq"], shown["relates_to"]) == (target["id"], target["seq"], None)
    listed = room.events("carol")
    assert [e["id"] for e in listed] == [target["id"], edit["id"]]
    assert listed[0] == shown and listed[1] == edit


def test_an_edit_of_an_edit_edits_the_original(room: Room) -> None:
    target = room.say("alice", "one")
    first = room.relate("alice", target["id"], "edits", text="two").json()["event"]
    second = room.relate("alice", first["id"], "edits", text="three").json()["event"]
    assert second["relates_to"] == target["id"]
    assert room.event("alice", target["id"])["text"] == "three"
    assert room.event("alice", first["id"])["text"] == "two"  # the log is append-only


def test_only_the_sender_edits_and_the_refusal_changes_nothing(room: Room) -> None:
    target = room.say("alice", "mine")
    before = room.events()
    for who in ("carol", "bot"):
        r = room.relate(who, target["id"], "edits", text="yours now")
        assert code(r) == (403, "not_event_sender")
        assert "alice" in r.json()["error"]["message"]
    assert room.events() == before


def test_a_media_caption_may_be_edited(room: Room) -> None:
    with room.client("alice") as c:
        up = c.post(
            f"/v1/rooms/{room.id}/media",
            files={"file": ("a.txt", b"abc", "text/plain")},
            data={"text": "old caption"},
        )
    target = up.json()["event"]
    r = room.relate("alice", target["id"], "edits", text="new caption")
    assert r.status_code == 201, r.text
    shown = room.event("alice", target["id"])
    assert (shown["text"], shown["edited"]) == ("new caption", True)
    assert shown["attachments"] == target["attachments"]


def test_bad_edits_are_refused_with_stable_codes(room: Room) -> None:
    target = room.say("alice", "text")
    reaction = room.relate("alice", target["id"], "reactions", emoji="👍").json()["event"]
    before = room.events()
    cases = [
        (room.relate("alice", target["id"], "edits", text="   "), (400, "invalid_request")),
        (room.relate("alice", reaction["id"], "edits", text="x"), (422, "invalid_relation_target")),
        (
            room.relate("alice", "ev_00000000000000000000000000", "edits", text="x"),
            (404, "event_not_found"),
        ),
        (room.relate("alice", target["id"], "edits", texte="x"), (400, "invalid_request")),
    ]
    for r, expected in cases:
        assert code(r) == expected, r.text
    assert room.events() == before


def test_an_edit_in_another_room_is_event_not_found(room: Room) -> None:
    target = room.say("alice", "here")
    with room.client("alice") as c:
        other = c.post(f"/v1/workspaces/{room.s.workspace}/rooms", json={"name": "other"}).json()[
            "room"
        ]["id"]
        r = c.post(f"/v1/rooms/{other}/events/{target['id']}/edits", json={"text": "x"})
    assert code(r) == (404, "event_not_found")


def test_edits_are_keyed_like_posts_replay_and_conflict(room: Room) -> None:
    target = room.say("alice", "v1")
    first = room.relate("alice", target["id"], "edits", key="e-1", text="v2")
    again = room.relate("alice", target["id"], "edits", key="e-1", text="v2")
    other = room.relate("alice", target["id"], "edits", key="e-1", text="v3")
    assert first.status_code == 201 and first.headers["idempotency-status"] == "created"
    assert (again.status_code, again.headers["idempotency-status"]) == (201, "replayed")
    assert again.content == first.content
    assert code(other) == (422, "idempotency_conflict")
    assert [e["type"] for e in room.events()] == ["message", "edit"]
    assert room.event("alice", target["id"])["text"] == "v2"
    # A key is the member's across routes: a message key cannot be spent again on an edit.
    with room.client("alice") as c:
        c.post(
            f"/v1/rooms/{room.id}/messages", json={"text": "m"}, headers={"Idempotency-Key": "k"}
        )
    assert code(room.relate("alice", target["id"], "edits", key="k", text="v2")) == (
        422,
        "idempotency_conflict",
    )


def test_an_edit_passes_the_sensitive_data_filter_and_spends_its_key(room: Room) -> None:
    target = room.say("alice", "harmless")
    with room.client("alice") as c:
        assert c.patch(f"/v1/rooms/{room.id}", json={"sensitive_filter": True}).status_code == 200
    r = room.relate("alice", target["id"], "edits", key="s-1", text=SECRET)
    assert code(r) == (422, "command_rejected")
    assert r.json()["error"]["reason"] == "sensitive_data"
    again = room.relate("alice", target["id"], "edits", key="s-1", text=SECRET)
    assert again.content == r.content and again.headers["idempotency-status"] == "replayed"
    assert room.event("alice", target["id"])["text"] == "harmless"
    assert [e["type"] for e in room.events()] == ["message"]


def test_edits_and_reactions_wake_no_one(room: Room) -> None:
    with room.client("bot") as c:
        before = c.get("/v1/inbox", params={"after": 0}).json()["items"]
    target = room.say("alice", "hi @bot")
    room.relate("alice", target["id"], "edits", text="hi again @bot and @helper")
    room.relate("carol", target["id"], "reactions", emoji="👀")
    with room.client("bot") as c:
        items = c.get("/v1/inbox", params={"after": 0}).json()["items"]
    with room.client("helper") as c:
        helper_items = c.get("/v1/inbox", params={"after": 0}).json()["items"]
    # bot was woken once, by the post; the inbox item shows the event as it reads now.
    assert len(items) == len(before) + 1
    assert items[-1]["event"]["id"] == target["id"]
    assert items[-1]["event"]["text"] == "hi again @bot and @helper"
    assert items[-1]["event"]["reactions"] == [{"emoji": "👀", "count": 1, "members": ["carol"]}]
    assert helper_items == []


# -- reactions -----------------------------------------------------------------------------


def test_reactions_are_summarized_on_the_target(room: Room) -> None:
    target = room.say("alice", "ship it?")
    for who, emoji in [("alice", "👍"), ("carol", "👍"), ("bot", "🎉"), ("carol", "👍")]:
        r = room.relate(who, target["id"], "reactions", emoji=emoji)
        assert r.status_code == 201, r.text
        ev = r.json()["event"]
        assert (ev["type"], ev["relates_to"], ev["metadata"]) == (
            "reaction",
            target["id"],
            {"emoji": emoji},
        )
    assert room.event("helper", target["id"])["reactions"] == [
        {"emoji": "👍", "count": 2, "members": ["alice", "carol"]},
        {"emoji": "🎉", "count": 1, "members": ["bot"]},
    ]
    removed = room.relate("alice", target["id"], "reactions", emoji="👍", remove=True)
    assert removed.json()["event"]["metadata"] == {"emoji": "👍", "remove": True}
    room.relate("bot", target["id"], "reactions", emoji="🎉", remove=True)
    assert room.event("helper", target["id"])["reactions"] == [
        {"emoji": "👍", "count": 1, "members": ["carol"]}
    ]
    assert [e["type"] for e in room.events()].count("reaction") == 6


@pytest.mark.parametrize(
    "emoji",
    ["", " ", "👍 ", "a b", "\n", "\u0007", "\u200b", "x" * 33, "👍" * 9, "🙂\u202e"],
)
def test_a_bad_emoji_is_refused_invalid_emoji_and_changes_nothing(room: Room, emoji: str) -> None:
    target = room.say("alice", "react")
    r = room.relate("alice", target["id"], "reactions", emoji=emoji)
    assert code(r) == (400, "invalid_emoji"), r.text
    assert room.events() == [target]


@pytest.mark.parametrize("emoji", ["👍", "+1", "👨‍👩‍👧‍👦", "1️⃣", "🏴󠁧󠁢󠁥󠁮󠁧󠁿", "👍🏽"])
def test_emoji_sequences_are_one_reaction(room: Room, emoji: str) -> None:
    target = room.say("alice", "react")
    assert room.relate("carol", target["id"], "reactions", emoji=emoji).status_code == 201
    assert room.event("alice", target["id"])["reactions"][0]["emoji"] == emoji


def test_a_relation_event_takes_no_reaction(room: Room) -> None:
    target = room.say("alice", "x")
    reaction = room.relate("alice", target["id"], "reactions", emoji="👍").json()["event"]
    r = room.relate("carol", reaction["id"], "reactions", emoji="👍")
    assert code(r) == (422, "invalid_relation_target")
    # A reaction to an edit goes to the message it edits.
    edit = room.relate("alice", target["id"], "edits", text="y").json()["event"]
    on_edit = room.relate("carol", edit["id"], "reactions", emoji="🎉").json()["event"]
    assert on_edit["relates_to"] == target["id"]


# -- redactions ----------------------------------------------------------------------------


def test_a_redaction_hides_text_files_and_edits_and_keeps_the_event(room: Room) -> None:
    with room.client("alice") as c:
        up = c.post(
            f"/v1/rooms/{room.id}/media",
            files={"file": ("s.txt", b"secret bytes", "text/plain")},
            data={"text": "the file"},
        ).json()
    target = up["event"]
    edit = room.relate("alice", target["id"], "edits", text="the file, edited").json()["event"]
    room.relate("carol", target["id"], "reactions", emoji="👍")
    r = room.relate("alice", target["id"], "redactions", reason="wrong file")
    assert r.status_code == 201, r.text
    red = r.json()["event"]
    assert (red["type"], red["relates_to"], red["metadata"]) == (
        "redaction",
        target["id"],
        {"reason": "wrong file"},
    )
    shown = room.event("carol", target["id"])
    assert (shown["id"], shown["seq"], shown["redacted"]) == (target["id"], target["seq"], True)
    assert (shown["text"], shown["attachments"], shown["reactions"]) == ("", [], [])
    hidden_edit = room.event("carol", edit["id"])
    assert (hidden_edit["text"], hidden_edit["redacted"]) == ("", True)
    with room.client("carol") as c:
        got = c.get(f"/v1/media/{up['media']['id']}")
    assert code(got) == (410, "media_redacted")
    # Nothing more may change it, and the file cannot be attached again.
    before = room.events()
    assert code(room.relate("alice", target["id"], "edits", text="back")) == (409, "event_redacted")
    assert code(room.relate("carol", target["id"], "reactions", emoji="🎉")) == (
        409,
        "event_redacted",
    )
    assert code(room.relate("alice", target["id"], "redactions")) == (409, "event_redacted")
    with room.client("alice") as c:
        again = c.post(
            f"/v1/rooms/{room.id}/messages",
            json={"text": "again", "attachments": [up["media"]["id"]]},
        )
    assert code(again) == (400, "invalid_request")
    assert room.events() == before


def test_who_may_redact(room: Room) -> None:
    by_alice = room.say("alice", "a")
    by_bot = room.say("bot", "b")
    # carol neither sent it nor owns its sender; helper is an agent, not bot's owner.
    assert code(room.relate("carol", by_alice["id"], "redactions")) == (403, "not_event_sender")
    assert code(room.relate("helper", by_bot["id"], "redactions")) == (403, "not_event_sender")
    # alice owns the agent bot (tests/hubproc.py make_setup): she may redact what it sent.
    assert room.relate("alice", by_bot["id"], "redactions").status_code == 201
    assert room.relate("alice", by_alice["id"], "redactions").status_code == 201
    assert [room.event("carol", e["id"])["redacted"] for e in (by_alice, by_bot)] == [True, True]


def test_a_relation_event_cannot_be_redacted(room: Room) -> None:
    target = room.say("alice", "x")
    edit = room.relate("alice", target["id"], "edits", text="y").json()["event"]
    assert code(room.relate("alice", edit["id"], "redactions")) == (422, "invalid_relation_target")


def test_redactions_are_keyed(room: Room) -> None:
    target = room.say("alice", "x")
    first = room.relate("alice", target["id"], "redactions", key="r-1")
    again = room.relate("alice", target["id"], "redactions", key="r-1")
    assert first.status_code == 201
    assert (again.headers["idempotency-status"], again.content) == ("replayed", first.content)
    other = room.relate("alice", target["id"], "redactions", key="r-1", reason="why")
    assert code(other) == (422, "idempotency_conflict")


# -- search --------------------------------------------------------------------------------


def hits(room: Room, q: str) -> list[str]:
    with room.client("carol") as c:
        r = c.get("/v1/search", params={"q": q, "room": room.id})
    assert r.status_code == 200, r.text
    return [h["event"]["id"] for h in r.json()["hits"]]


def test_search_sees_the_latest_text_and_forgets_a_redaction(room: Room) -> None:
    target = room.say("alice", "the okapi grazes")
    assert hits(room, "okapi") == [target["id"]]
    room.relate("alice", target["id"], "edits", text="the axolotl swims")
    assert hits(room, "okapi") == [] and hits(room, "axolotl") == [target["id"]]
    room.relate("alice", target["id"], "edits", text="the axolotl and the quokka")
    assert hits(room, "axolotl") == [target["id"]] and hits(room, "quokka") == [target["id"]]
    room.relate("alice", target["id"], "redactions")
    assert hits(room, "axolotl") == [] and hits(room, "quokka") == []


# -- gates ---------------------------------------------------------------------------------


def test_relations_are_gated_like_posts(room: Room) -> None:
    target = room.say("alice", "x")
    with room.client("alice") as c:
        assert c.delete(f"/v1/rooms/{room.id}/participants/helper").status_code == 200
    assert code(room.relate("helper", target["id"], "reactions", emoji="👍")) == (
        403,
        "channel_membership_required",
    )
    with room.s.hub.client(room.s.hub.admin_token) as admin:
        gone = admin.delete(f"/v1/admin/workspaces/{room.s.workspace}/members/carol")
        assert gone.status_code == 200
    assert code(room.relate("carol", target["id"], "reactions", emoji="👍")) == (
        403,
        "member_removed",
    )
    with room.client("alice") as c:
        assert c.post(f"/v1/rooms/{room.id}/archive").status_code == 200
    for kind, body in [
        ("edits", {"text": "y"}),
        ("reactions", {"emoji": "👍"}),
        ("redactions", {}),
    ]:
        assert code(room.relate("alice", target["id"], kind, **body)) == (409, "room_archived")
    with room.s.hub.client() as anon:
        r = anon.post(f"/v1/rooms/{room.id}/events/{target['id']}/edits", json={"text": "y"})
    assert code(r) == (401, "unauthorized")
    assert room.events() == [target]
