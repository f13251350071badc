"""Every MCP tool, through the SDK's stdio client, against a real hub (docs/mcp.md)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import httpx
from mcp import Client
from mcphelpers import McpServer, call, events_of, mcp_server  # noqa: F401 (a fixture)

from hubproc import Setup

TOOLS = {
    "post_message",
    "reply",
    "send_to_thread",
    "ensure_thread",
    "upload_file",
    "read_inbox",
    "ack_inbox",
    "list_rooms",
    "read_room",
    "delivery_state",
    "wait_for_receipt",
    "members",
    "search",
    "reserve_paths",
    "renew_reservation",
    "release_reservation",
    "list_reservations",
    "check_paths",
}
POSTING = {"post_message", "reply", "send_to_thread", "upload_file"}


def test_lists_every_tool_with_its_parameters_and_posting_tools_are_idempotent(
    mcp_server: Callable[..., McpServer],
) -> None:
    async def scenario(c: Client) -> Any:
        return (await c.list_tools()).tools

    tools = {t.name: t for t in mcp_server().run(scenario)}
    assert set(tools) == TOOLS
    params = {n: set(t.input_schema["properties"]) for n, t in tools.items()}
    assert params == {
        "post_message": {"room", "text", "idempotency_key"},
        "reply": {"event_id", "text", "reply_kind", "idempotency_key"},
        "send_to_thread": {"thread", "text", "idempotency_key"},
        "ensure_thread": {"name", "workspace", "owner"},
        "upload_file": {"room", "path", "caption", "idempotency_key"},
        "read_inbox": {"after", "wait"},
        "ack_inbox": {"cursor"},
        "list_rooms": set(),
        "read_room": {"room", "after", "limit"},
        "delivery_state": {"event_id"},
        "wait_for_receipt": {"event_id", "wait"},
        "members": set(),
        "search": {"query", "room", "sender", "before", "limit"},
        "reserve_paths": {
            "paths", "project", "exclusive", "ttl_seconds", "reason", "room", "idempotency_key"
        },
        "renew_reservation": {"reservation_id", "ttl_seconds", "idempotency_key"},
        "release_reservation": {"reservation_id", "idempotency_key"},
        "list_reservations": {"project"},
        "check_paths": {"paths", "project"},
    }  # fmt: skip
    assert set(tools["send_to_thread"].input_schema["required"]) == {
        "thread",
        "text",
        "idempotency_key",
    }
    for name in POSTING:
        assert tools[name].annotations is not None
        assert tools[name].annotations.idempotent_hint is True, name
        assert "idempotency_key" in (tools[name].description or ""), name
    for name in ("list_rooms", "read_room", "delivery_state", "wait_for_receipt", "members", "search"):
        assert tools[name].annotations.read_only_hint is True, name
    for name in ("list_reservations", "check_paths"):
        assert tools[name].annotations.read_only_hint is True, name
    for name in ("reserve_paths", "renew_reservation", "release_reservation"):
        assert tools[name].annotations.idempotent_hint is True, name
    # reading the inbox marks its events `read` in their delivery state: not read-only,
    # but a second identical call changes nothing more
    inbox = tools["read_inbox"].annotations
    assert (inbox.read_only_hint, inbox.idempotent_hint) == (False, True)
    for t in tools.values():
        assert t.input_schema["type"] == "object"
        assert t.input_schema["additionalProperties"] is False


def test_post_message_by_name_and_by_id_says_sent_with_the_ids(
    setup: Setup, mcp_server: Callable[..., McpServer]
) -> None:
    async def scenario(c: Client) -> Any:
        by_name = await call(c, "post_message", {"room": "general", "text": "  hello @alice \n"})
        by_id = await call(c, "post_message", {"room": setup.room, "text": "second"})
        return by_name, by_id

    (err1, first), (err2, second) = mcp_server().run(scenario)
    assert not err1 and not err2
    assert first["delivery"] == "sent" and first["room"] == setup.room
    assert first["key_source"] == "derived" and first["idempotency_key"].startswith("mcp_")
    assert second["delivery"] == "sent"
    evs = events_of(setup)
    assert [(e["id"], e["sender"], e["text"]) for e in evs] == [
        (first["event"], "bot", "hello @alice"),
        (second["event"], "bot", "second"),
    ]
    assert first["targets"] == ["alice"]


def test_a_retried_call_without_a_key_replays_and_posts_once(
    setup: Setup, mcp_server: Callable[..., McpServer]
) -> None:
    args = {"room": "general", "text": "deploy finished"}

    async def scenario(c: Client) -> Any:
        return [await call(c, "post_message", args) for _ in range(3)]

    results = mcp_server().run(scenario)
    assert all(not err for err, _ in results)
    first, *again = [r for _, r in results]
    assert first["delivery"] == "sent" and "note" not in first
    for r in again:
        assert r["delivery"] == "replayed"
        assert r["event"] == first["event"]
        assert "your own idempotency_key" in r["note"]
    assert [e["text"] for e in events_of(setup)] == ["deploy finished"]


def test_a_new_session_without_a_key_is_a_new_message(
    setup: Setup, mcp_server: Callable[..., McpServer]
) -> None:
    """The derived key is bound to the server's session: a restarted agent that says the same
    thing again says it again (documented); only its own key spans sessions."""

    async def scenario(c: Client) -> Any:
        return await call(c, "post_message", {"room": "general", "text": "good morning"})

    one = mcp_server().run(scenario)[1]
    two = mcp_server().run(scenario)[1]
    assert (one["delivery"], two["delivery"]) == ("sent", "sent")
    assert one["idempotency_key"] != two["idempotency_key"]
    assert len(events_of(setup)) == 2


def test_a_retried_call_with_a_key_replays_across_sessions_and_posts_once(
    setup: Setup, mcp_server: Callable[..., McpServer]
) -> None:
    args = {"room": "general", "text": "build 42 is green", "idempotency_key": "build-42"}

    async def scenario(c: Client) -> Any:
        return await call(c, "post_message", args)

    err1, first = mcp_server().run(scenario)
    err2, again = mcp_server().run(scenario)  # another process: a restarted agent
    assert not err1 and not err2
    assert (first["delivery"], again["delivery"]) == ("sent", "replayed")
    assert first["event"] == again["event"] and again["key_source"] == "given"
    assert "note" not in again
    assert [e["text"] for e in events_of(setup)] == ["build 42 is green"]


def test_the_same_key_with_other_text_is_a_final_conflict_and_posts_nothing(
    setup: Setup, mcp_server: Callable[..., McpServer]
) -> None:
    async def scenario(c: Client) -> Any:
        ok = await call(
            c, "post_message", {"room": "general", "text": "a", "idempotency_key": "k1"}
        )
        bad = await call(
            c, "post_message", {"room": "general", "text": "b", "idempotency_key": "k1"}
        )
        return ok, bad

    (err1, _), (err2, bad) = mcp_server().run(scenario)
    assert not err1 and err2
    assert bad["error"]["code"] == "idempotency_conflict"
    assert bad["error"]["retryable"] is False
    assert [e["text"] for e in events_of(setup)] == ["a"]


def test_the_error_is_also_in_the_text_content_for_models_that_read_only_text(
    mcp_server: Callable[..., McpServer],
) -> None:
    async def scenario(c: Client) -> Any:
        return await c.call_tool("post_message", {"room": "nowhere", "text": "x"})

    result = mcp_server().run(scenario)
    assert result.is_error
    text = result.content[0].text
    assert '"code": "room_not_found"' in text and '"retryable": false' in text


def test_reply_stamps_in_reply_to_and_wakes_the_person_who_asked_once(
    setup: Setup, mcp_server: Callable[..., McpServer]
) -> None:
    with setup.hub.client(setup.tokens["alice"]) as alice:
        asked = alice.post(f"/v1/rooms/{setup.room}/messages", json={"text": "@bot status?"})
        e1 = asked.json()["event"]["id"]

    async def scenario(c: Client) -> Any:
        plain = await call(c, "reply", {"event_id": e1, "text": "all green"})
        kind = await call(c, "reply", {"event_id": e1, "text": "done", "reply_kind": "result"})
        return plain, kind

    (err1, plain), (err2, kind) = mcp_server().run(scenario)
    assert not err1 and not err2
    assert plain["in_reply_to"] == e1 and plain["receipt"] is False
    # A person who asks is told (docs/architecture.md#receipts).
    assert plain["targets"] == ["alice"]
    assert kind["receipt"] is False  # alice's message delegated nothing
    assert kind["targets"] == []  # once per (event, replier)
    evs = events_of(setup)[-2:]
    assert [(e["in_reply_to"], e["reply_kind"], e["text"]) for e in evs] == [
        (e1, None, "all green"),
        (e1, "result", "done"),
    ]


def test_reply_to_an_unknown_event_or_one_outside_your_rooms_is_event_not_found(
    setup: Setup, mcp_server: Callable[..., McpServer]
) -> None:
    with setup.hub.client(setup.tokens["alice"]) as alice:
        r = alice.post(f"/v1/workspaces/{setup.workspace}/rooms", json={"name": "private"})
        private = r.json()["room"]["id"]
        hidden = alice.post(f"/v1/rooms/{private}/messages", json={"text": "secret"})
        hidden_id = hidden.json()["event"]["id"]

    async def scenario(c: Client) -> Any:
        return [
            await call(c, "reply", {"event_id": ev, "text": "hi"})
            for ev in ("ev_00000000000000000000000000", hidden_id)
        ]

    for err, body in mcp_server().run(scenario):
        assert err and body["error"]["code"] == "event_not_found"
        assert body["error"]["retryable"] is False
    assert len(events_of(setup, private)) == 1


def test_send_to_thread_sends_once_per_key_and_ensure_thread_makes_one(
    setup: Setup, mcp_server: Callable[..., McpServer]
) -> None:
    async def scenario(c: Client) -> Any:
        made = await call(c, "ensure_thread", {"name": "notes"})
        found = await call(c, "ensure_thread", {"name": "notes", "workspace": "acme"})
        tid = made[1]["thread_id"]
        args = {"thread": tid, "text": "wake 7", "idempotency_key": "wake-7"}
        sent = await call(c, "send_to_thread", args)
        again = await call(c, "send_to_thread", args)
        by_name = await call(c, "send_to_thread", {**args, "thread": "notes"})
        other = await call(c, "send_to_thread", {**args, "text": "wake 8"})
        no_key = await call(c, "send_to_thread", {"thread": tid, "text": "x"})
        return made, found, sent, again, by_name, other, no_key

    made, found, sent, again, by_name, other, no_key = mcp_server().run(scenario)
    assert not made[0] and made[1]["created"] is True and made[1]["owner"] == "bot"
    assert not found[0] and found[1]["created"] is False
    assert found[1]["thread_id"] == made[1]["thread_id"] == made[1]["room"]
    assert (sent[1]["delivery"], again[1]["delivery"], by_name[1]["delivery"]) == (
        "sent",
        "replayed",
        "replayed",
    )
    assert sent[1]["event"] == again[1]["event"] == by_name[1]["event"]
    assert sent[1]["command_id"].startswith("cmd_")
    assert other[0] and other[1]["error"]["code"] == "idempotency_conflict"
    assert other[1]["error"]["retryable"] is False
    assert no_key[0] and no_key[1]["error"]["code"] == "invalid_arguments"
    assert "idempotency_key" in no_key[1]["error"]["message"]
    texts = [e["text"] for e in events_of(setup, made[1]["thread_id"], token_of="bot")]
    assert texts == ["wake 7"]


def test_read_inbox_ack_inbox_list_rooms_and_read_room(
    setup: Setup, mcp_server: Callable[..., McpServer]
) -> None:
    with setup.hub.client(setup.tokens["alice"]) as alice:
        for i in range(3):
            r = alice.post(f"/v1/rooms/{setup.room}/messages", json={"text": f"@bot task {i}"})
            assert r.status_code == 201

    async def scenario(c: Client) -> Any:
        inbox = await call(c, "read_inbox")
        rooms = await call(c, "list_rooms")
        page1 = await call(c, "read_room", {"room": "general", "limit": 2})
        page2 = await call(c, "read_room", {"room": "general", "after": page1[1]["next_after"]})
        acked = await call(c, "ack_inbox", {"cursor": inbox[1]["cursor"]})
        empty = await call(c, "read_inbox")
        again = await call(c, "read_inbox", {"after": 0})
        return inbox, rooms, page1, page2, acked, empty, again

    inbox, rooms, page1, page2, acked, empty, again = mcp_server().run(scenario)
    assert not any(r[0] for r in (inbox, rooms, page1, page2, acked, empty, again))
    items = inbox[1]["items"]
    assert [i["event"]["text"] for i in items] == ["@bot task 0", "@bot task 1", "@bot task 2"]
    assert all(i["delegation_waiting"] is False for i in items)  # a person asked: no delegation
    assert inbox[1]["cursor"] == items[-1]["cursor"]
    assert [r["name"] for r in rooms[1]["rooms"]] == ["general"]
    assert rooms[1]["rooms"][0]["id"] == setup.room
    assert [e["seq"] for e in page1[1]["events"]] == [1, 2] and page1[1]["next_after"] == 2
    assert [e["seq"] for e in page2[1]["events"]] == [3]
    assert acked[1] == {"cursor": inbox[1]["cursor"]}
    assert empty[1] == {"items": [], "cursor": inbox[1]["cursor"]}
    assert len(again[1]["items"]) == 3  # `after` reads what was acked, too


def test_read_inbox_wait_long_polls_until_a_wake_up_arrives(
    setup: Setup, mcp_server: Callable[..., McpServer]
) -> None:
    def post_later() -> None:
        with httpx.Client(base_url=setup.hub.url, timeout=10) as h:
            headers = {"Authorization": f"Bearer {setup.tokens['alice']}"}
            # Wait until the long poll is really waiting: the hub's gauge shows it.
            for _ in range(2000):
                if 'agentpost_open_streams{kind="inbox_poll"} 1.0' in h.get("/metrics").text:
                    break
                anyio.from_thread.run(anyio.sleep, 0.01)
            r = h.post(
                f"/v1/rooms/{setup.room}/messages", json={"text": "@bot wake"}, headers=headers
            )
            assert r.status_code == 201

    async def scenario(c: Client) -> Any:
        async with anyio.create_task_group() as tg:
            tg.start_soon(anyio.to_thread.run_sync, post_later)
            with anyio.fail_after(45):
                result = await call(c, "read_inbox", {"wait": 40})
        return result

    err, body = mcp_server().run(scenario)
    assert not err
    assert [i["event"]["text"] for i in body["items"]] == ["@bot wake"]


def test_delivery_state_follows_an_event_from_queued_to_replied_and_hides_other_rooms(
    setup: Setup, mcp_server: Callable[..., McpServer]
) -> None:
    with setup.hub.client(setup.tokens["alice"]) as alice:
        asked = alice.post(f"/v1/rooms/{setup.room}/messages", json={"text": "@bot do X"})
        asked_id = asked.json()["event"]["id"]
        r = alice.post(f"/v1/workspaces/{setup.workspace}/rooms", json={"name": "private"})
        hidden = alice.post(f"/v1/rooms/{r.json()['room']['id']}/messages", json={"text": "s"})
        hidden_id = hidden.json()["event"]["id"]
    state = mcp_server("alice")

    async def before(c: Client) -> Any:
        return await call(c, "delivery_state", {"event_id": asked_id})

    err, body = state.run(before)
    assert not err
    assert [(t["member"], t["state"]) for t in body["targets"]] == [("bot", "queued")]
    assert [(r["member"], r["state"]) for r in body["receipts"]] == [("bot", "pending")]

    async def bot_answers(c: Client) -> Any:
        page = await call(c, "read_inbox", {})
        await call(c, "ack_inbox", {"cursor": page[1]["cursor"]})
        return await call(
            c, "reply", {"event_id": asked_id, "text": "done", "reply_kind": "result"}
        )

    assert not mcp_server("bot").run(bot_answers)[0]

    async def after(c: Client) -> Any:
        return [
            await call(c, "delivery_state", {"event_id": ev})
            for ev in (asked_id, hidden_id, "ev_00000000000000000000000000")
        ]

    (err, body), *refused = mcp_server("carol").run(after)  # any participant may ask
    assert not err
    assert [(t["member"], t["state"]) for t in body["targets"]] == [("bot", "acked")]
    assert [(r["member"], r["state"], r["reply_kind"]) for r in body["receipts"]] == [
        ("bot", "replied", "result")
    ]
    for err, failure in refused:  # a room carol is not in, and no event at all: the same
        assert err and failure["error"]["code"] == "event_not_found"


def test_members_shows_kind_owner_and_who_is_online(
    setup: Setup, mcp_server: Callable[..., McpServer]
) -> None:
    async def scenario(c: Client) -> Any:
        return await call(c, "members")

    err, body = mcp_server("bot").run(scenario)
    assert not err and body["workspace"] == setup.workspace
    listed = {m["name"]: (m["kind"], m["owner"], m["online"]) for m in body["members"]}
    # alice made the room; bot is asking; carol and helper were never seen.
    assert listed == {
        "alice": ("human", None, True),
        "bot": ("agent", "alice", True),
        "carol": ("human", None, False),
        "helper": ("agent", "alice", False),
    }


def test_search_finds_in_your_rooms_only_and_a_bad_query_is_a_tool_error(
    setup: Setup, mcp_server: Callable[..., McpServer]
) -> None:
    with setup.hub.client(setup.tokens["alice"]) as alice:
        seen = alice.post(f"/v1/rooms/{setup.room}/messages", json={"text": "the wombat plan"})
        r = alice.post(f"/v1/workspaces/{setup.workspace}/rooms", json={"name": "secret"})
        alice.post(f"/v1/rooms/{r.json()['room']['id']}/messages", json={"text": "wombat too"})

    async def scenario(c: Client) -> Any:
        return [
            await call(c, "search", {"query": "wombat"}),
            await call(c, "search", {"query": "wombat", "room": "general", "limit": 5}),
            await call(c, "search", {"query": '"wombat'}),
        ]

    (err, body), (err2, by_room), (bad, failure) = mcp_server("bot").run(scenario)
    assert not err and not err2
    assert [h["event"]["id"] for h in body["hits"]] == [seen.json()["event"]["id"]]
    assert body["hits"][0]["highlights"] == [[4, 10]] and body["next_before"] is None
    assert by_room["hits"] == body["hits"]
    assert bad and failure["error"]["code"] == "search_query_invalid"
