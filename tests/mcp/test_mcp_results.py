"""What a tool result holds and what a call may ask (docs/mcp.md "Results", "The tools"):
`structuredContent` whole, a compact text block for pages of events, a resource link per
file; ranges refused, not clamped; Gemini CLI's injected `wait_for_previous` ignored."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcphelpers import McpServer, call, events_of, mcp_server  # noqa: F401 (a fixture)

from agentpost.mcp.catalog import TOOLS
from hubproc import Setup

BIG = 10_000


def _post(setup: Setup, text: str) -> None:
    with setup.hub.client(setup.tokens["alice"]) as alice:
        r = alice.post(f"/v1/rooms/{setup.room}/messages", json={"text": text})
        assert r.status_code == 201, r.text


def test_read_room_text_is_one_short_line_per_event_and_structured_content_is_whole(
    setup: Setup, mcp_server: Callable[..., McpServer]
) -> None:
    for i in range(5):
        _post(setup, f"@bot report {i}\n" + "x" * BIG)

    async def scenario(c: Client) -> Any:
        page = await c.call_tool("read_room", {"room": "general"})
        one = await c.call_tool("read_room", {"room": "general", "after": 2, "limit": 1})
        inbox = await c.call_tool("read_inbox")
        return page, one, inbox

    page, one, inbox = mcp_server().run(scenario)
    events = page.structured_content["events"]
    assert [len(e["text"]) for e in events] == [len(f"@bot report {i}\n") + BIG for i in range(5)]
    text = page.content[0].text
    lines = text.splitlines()
    assert lines[0] == f"room {setup.room}: 5 events, next_after 5"
    for i, (line, ev) in enumerate(zip(lines[1:6], events, strict=True)):
        assert line.startswith(f"#{ev['seq']} alice {ev['created_at']} {ev['id']}: @bot report {i} ⏎ xxx")
        assert "[…cut: " in line and "read_room after=" in line
    assert len(text) < len(json.dumps(page.structured_content)) / 5, "far smaller than the JSON"
    assert len(page.content) == 1
    whole = one.content[0].text
    assert "x" * BIG in whole and "cut" not in whole, "a page of one event shows it whole"
    assert inbox.content[0].text.startswith("inbox: 5 wake-ups, cursor 5\ncursor 1 room ")
    assert len(inbox.content[0].text) < 6 * 1200


def test_small_results_keep_their_json_text(
    setup: Setup, mcp_server: Callable[..., McpServer]
) -> None:
    async def scenario(c: Client) -> Any:
        return await c.call_tool("post_message", {"room": "general", "text": "hi"})

    res = mcp_server().run(scenario)
    assert json.loads(res.content[0].text) == res.structured_content


def test_files_of_room_events_are_resource_links_to_the_hubs_media_url(
    setup: Setup, mcp_server: Callable[..., McpServer], tmp_path: Path
) -> None:
    (tmp_path / "notes.txt").write_text("the notes\n")

    async def scenario(c: Client) -> Any:
        up = await call(c, "upload_file", {"room": "general", "path": str(tmp_path / "notes.txt"), "caption": "@alice here"})
        return up, await c.call_tool("read_room", {"room": "general"})

    (err, up), page = mcp_server(roots=[tmp_path]).run(scenario)
    assert not err
    media = up["media"]
    links = [b for b in page.content if b.type == "resource_link"]
    assert len(links) == 1
    link = links[0]
    assert link.uri == f"{setup.hub.url}/v1/media/{media['id']}"
    assert (link.name, link.mime_type, link.size) == ("notes.txt", "text/plain", len("the notes\n"))
    assert "[file notes.txt, text/plain, 10 bytes, md_" in page.content[0].text
    with setup.hub.client(setup.tokens["alice"]) as alice:
        assert alice.get(link.uri.removeprefix(setup.hub.url)).content == b"the notes\n"


@pytest.mark.parametrize(
    ("tool", "args", "said"),
    [
        ("read_room", {"room": "general", "limit": 1001}, "limit must be 1-1000"),
        ("read_room", {"room": "general", "limit": 0}, "limit must be 1-1000"),
        ("read_inbox", {"wait": 60.5}, "wait must be 0-60"),
        ("read_inbox", {"wait": -1}, "wait must be 0-60"),
        ("search", {"query": "x", "limit": 101}, "limit must be 1-100"),
    ],
)
def test_out_of_range_is_refused_naming_the_range_never_clamped(
    setup: Setup, mcp_server: Callable[..., McpServer], tool: str, args: dict[str, Any], said: str
) -> None:
    async def scenario(c: Client) -> Any:
        listed = {t.name: t for t in (await c.list_tools()).tools}
        return listed[tool].input_schema, await call(c, tool, args)

    schema, (err, body) = mcp_server().run(scenario)
    field = next(iter(set(args) - {"room", "query"}))
    assert "maximum" in schema["properties"][field]
    assert err and body["error"]["code"] == "invalid_arguments"
    assert said in body["error"]["message"]


def test_wait_for_previous_is_accepted_and_ignored_on_every_tool_and_a_typo_is_refused(
    setup: Setup, mcp_server: Callable[..., McpServer]
) -> None:
    async def scenario(c: Client) -> Any:
        posted = await call(c, "post_message", {"room": "general", "text": "hi", "wait_for_previous": True})
        listed = await call(c, "list_rooms", {"wait_for_previous": False})
        typo = await call(c, "list_rooms", {"wait_for_previus": True})
        not_bool = await call(c, "list_rooms", {"wait_for_previous": "yes"})
        # every tool: a call with only the injected argument is judged on its own arguments
        every = {s.name: await call(c, s.name, {"wait_for_previous": True}) for s in TOOLS}
        return posted, listed, typo, not_bool, every

    posted, listed, typo, not_bool, every = mcp_server().run(scenario)
    assert not posted[0] and posted[1]["delivery"] == "sent"
    assert not listed[0]
    for err, body in (typo, not_bool):
        assert err and body["error"]["code"] == "invalid_arguments"
    assert "wait_for_previus" in typo[1]["error"]["message"]
    for name, (err, body) in every.items():
        if err:
            assert "wait_for_previous" not in body["error"]["message"], (name, body)
    assert [e["text"] for e in events_of(setup)] == ["hi"]
