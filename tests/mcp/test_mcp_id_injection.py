"""Ids and names that a model passes to a tool go into URL paths: each is checked by shape
(core/ids.py) before any URL is made, and anything else is the tool error
`invalid_arguments` with nothing sent to the hub (docs/mcp.md "Ids and names"). A posting
tool, marked `idempotentHint`, can never reach another route (archive, participants).

"Nothing sent" is measured on the hub: the bot's `last_seen` (stamped by every request its
token makes, docs/presence.md) does not move, the room is not archived, nothing is posted.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from mcp import Client
from mcphelpers import McpServer, call, events_of, mcp_server  # noqa: F401 (a fixture)

from hubproc import Setup


def _attempts(room: str, event: str) -> list[tuple[str, dict[str, Any]]]:
    """(tool, arguments) of each injection: another route, dot segments, a query or a
    fragment, encoded separators, white space, very long, other scripts, control characters."""
    rooms = [
        f"{room}/archive?",
        f"{room}/archive#",
        f"{room}/participants/carol?",
        f"rm_/../{room}",
        f"rm_/..%2F{room}",
        f"{room}%2Farchive",
        f"{room}%3F",
        "..",
        ".",
        f"./{room}",
        f"{room}/",
        f" {room}",
        f"{room} ",
        "gen eral",
        "général",
        "ｇｅｎｅｒａｌ",  # fullwidth letters
        "general\n",
        "general\x00",
        "General",
        "r" * 64,
        "r" * 5000,
        room + "0",
        "",
    ]
    events = [
        "../me?",
        f"{event}/delivery",
        f"{event}?x=1",
        f"../rooms/{room}/archive",
        f"{event}%2F..",
        event.lower(),
        f"{event} ",
        "ev_" + "Ü" * 26,
        "ev_" + "0" * 5000,
    ]
    out: list[tuple[str, dict[str, Any]]] = []
    for r in rooms:
        out += [
            ("post_message", {"room": r, "text": "injected"}),
            ("read_room", {"room": r}),
            ("upload_file", {"room": r, "path": "small.txt"}),
            ("send_to_thread", {"thread": r, "text": "injected", "idempotency_key": "k1"}),
            ("search", {"query": "injected", "room": r}),
        ]
    for e in events:
        out += [
            ("reply", {"event_id": e, "text": "injected", "reply_kind": "result"}),
            ("delivery_state", {"event_id": e}),
        ]
    for name in ("../admin", "x/../../admin/workspaces", "a?b", "ACME", "ü"):
        out += [
            ("ensure_thread", {"name": name}),
            ("ensure_thread", {"name": "t1", "workspace": name}),
            ("ensure_thread", {"name": "t1", "owner": name}),
            ("search", {"query": "injected", "sender": name}),
        ]
    return out


def _last_seen(setup: Setup, member: str) -> str | None:
    with setup.hub.client(setup.tokens["alice"]) as c:
        r = c.get(f"/v1/workspaces/{setup.workspace}/members/{member}")
        assert r.status_code == 200, r.text
        seen: str | None = r.json()["member"]["last_seen"]
        return seen


def test_ids_of_the_wrong_shape_are_refused_before_any_url_is_made(
    setup: Setup, mcp_server: Callable[..., McpServer], tmp_path: Path
) -> None:
    (tmp_path / "small.txt").write_text("small")
    with setup.hub.client(setup.tokens["alice"]) as c:
        r = c.post(f"/v1/rooms/{setup.room}/messages", json={"text": "hello @bot"})
        assert r.status_code == 201, r.text
        event = r.json()["event"]["id"]
    attempts = _attempts(setup.room, event)

    async def scenario(c: Client) -> Any:
        warm = await call(c, "read_room", {"room": setup.room})  # the bot's last request
        seen = _last_seen(setup, "bot")
        got = [(tool, args, await call(c, tool, args)) for tool, args in attempts]
        seen_after = _last_seen(setup, "bot")
        # Ids and names of the right shape still reach the hub, and work.
        valid = [
            await call(c, "post_message", {"room": "general", "text": "by name"}),
            await call(c, "post_message", {"room": setup.room, "text": "by id"}),
            await call(c, "reply", {"event_id": event, "text": "a reply"}),
        ]
        missing = [
            await call(c, "read_room", {"room": "rm_00000000000000000000000000"}),
            await call(c, "read_room", {"room": "no-such-room"}),
            await call(c, "reply", {"event_id": "ev_00000000000000000000000000", "text": "x"}),
        ]
        return warm, seen, got, seen_after, valid, missing

    (warm_err, _), seen, got, seen_after, valid, missing = mcp_server(roots=[tmp_path]).run(
        scenario
    )
    assert not warm_err
    for tool, args, (err, body) in got:
        assert err, (tool, args, body)
        assert body["error"]["code"] == "invalid_arguments", (tool, args, body)
        assert body["error"]["retryable"] is False
        assert "nothing was done" in body["error"]["message"]
    assert seen is not None and seen_after == seen  # no request reached the hub
    assert [err for err, _ in valid] == [False, False, False]
    assert [body["error"]["code"] for _, body in missing] == [
        "room_not_found",
        "room_not_found",
        "event_not_found",
    ]
    with setup.hub.client(setup.tokens["alice"]) as c:
        room = c.get(f"/v1/rooms/{setup.room}").json()["room"]
    assert room["archived"] is False
    assert "carol" in room["participants"]
    assert [e["text"] for e in events_of(setup)] == ["hello @bot", "by name", "by id", "a reply"]


def test_a_refused_id_names_the_rule_in_words(
    setup: Setup, mcp_server: Callable[..., McpServer]
) -> None:
    async def scenario(c: Client) -> Any:
        return (
            await call(c, "post_message", {"room": f"{setup.room}/archive?", "text": "x"}),
            await call(c, "reply", {"event_id": "../me?", "text": "x"}),
        )

    (_, room), (_, event) = mcp_server().run(scenario)
    assert "a room id: `rm_` and 26 Crockford base32 characters" in room["error"]["message"]
    assert "`$.room`" in room["error"]["message"]
    assert "regex" not in room["error"]["message"]
    assert "an event id: `ev_` and 26 Crockford base32" in event["error"]["message"]
