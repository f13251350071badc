"""The inbox serves an item only while its member takes part in the item's room, the same
rule as `GET /v1/events/{event}` (docs/api.md "The inbox serves what you may read"): a
wake-up queued before the member was taken out is withdrawn, text and all, and never holds
the member's cursor back."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from hubproc import Setup


@pytest.fixture
def setup(shared_setup: Setup) -> Setup:
    return shared_setup


def _side_room_wake_up(setup: Setup) -> tuple[str, dict[str, Any]]:
    """Room `side` with alice and bot; alice wakes bot there, then takes bot out."""
    with setup.hub.client(setup.tokens["alice"]) as alice:
        r = alice.post(
            f"/v1/workspaces/{setup.workspace}/rooms", json={"name": "side", "participants": ["bot"]}
        )
        assert r.status_code == 201, r.text
        side = r.json()["room"]["id"]
        r = alice.post(f"/v1/rooms/{side}/messages", json={"text": "@bot the side plan"})
        assert r.status_code == 201, r.text
        event = r.json()["event"]
        assert event["targets"] == ["bot"]
        r = alice.delete(f"/v1/rooms/{side}/participants/bot")
        assert r.status_code == 200, r.text
    return side, event


def _post(setup: Setup, who: str, room: str, text: str) -> dict[str, Any]:
    with setup.hub.client(setup.tokens[who]) as c:
        r = c.post(f"/v1/rooms/{room}/messages", json={"text": text})
        assert r.status_code == 201, r.text
        event: dict[str, Any] = r.json()["event"]
        return event


def test_a_wake_up_queued_before_leaving_is_withdrawn_like_the_event(setup: Setup) -> None:
    side, withdrawn = _side_room_wake_up(setup)
    with setup.hub.client(setup.tokens["bot"]) as bot:
        by_id = bot.get(f"/v1/events/{withdrawn['id']}")
        page = bot.get("/v1/inbox", params={"after": 0})
    assert by_id.status_code == 404 and by_id.json()["error"]["code"] == "event_not_found"
    assert page.status_code == 200
    assert page.json() == {"items": [], "cursor": 0}
    assert "side plan" not in page.text
    # Added back before its cursor passed it, bot is served it again, as the event is.
    with setup.hub.client(setup.tokens["alice"]) as alice:
        assert alice.put(f"/v1/rooms/{side}/participants/bot").status_code == 200
    with setup.hub.client(setup.tokens["bot"]) as bot:
        by_id = bot.get(f"/v1/events/{withdrawn['id']}")
        page = bot.get("/v1/inbox")
    assert by_id.status_code == 200
    assert [i["event"]["id"] for i in page.json()["items"]] == [withdrawn["id"]]


def test_a_withdrawn_wake_up_does_not_hold_the_cursor_back(setup: Setup) -> None:
    _side, withdrawn = _side_room_wake_up(setup)
    later = _post(setup, "alice", setup.room, "@bot the main plan")
    with setup.hub.client(setup.tokens["bot"]) as bot:
        page = bot.get("/v1/inbox", params={"limit": 1}).json()
        assert [i["event"]["id"] for i in page["items"]] == [later["id"]]
        cursor = page["cursor"]
        assert cursor == page["items"][0]["cursor"] == 2  # 1 was the withdrawn wake-up
        acked = bot.post("/v1/inbox/ack", json={"cursor": cursor})
        assert acked.status_code == 200 and acked.json() == {"cursor": 2}
        after = bot.get("/v1/inbox").json()
        me = bot.get("/v1/me").json()
    assert after == {"items": [], "cursor": 2}
    assert me["inbox_cursor"] == 2
    with setup.hub.client(setup.tokens["alice"]) as alice:
        d = alice.get(f"/v1/events/{withdrawn['id']}/delivery").json()["delivery"]
    # Never handed out (no read_at); the cursor passed it (docs/delivery.md).
    assert [(t["member"], t["state"], t["read_at"]) for t in d["targets"]] == [
        ("bot", "acked", None)
    ]


def test_the_inbox_stream_skips_a_withdrawn_wake_up(setup: Setup) -> None:
    _side, _withdrawn = _side_room_wake_up(setup)
    later = _post(setup, "alice", setup.room, "@bot on the stream")
    with setup.hub.client(setup.tokens["bot"]) as bot, bot.stream(
        "GET", "/v1/inbox/stream", timeout=httpx.Timeout(30.0)
    ) as s:
        lines: list[str] = []
        for line in s.iter_lines():
            lines.append(line)
            if line.startswith("data:"):
                break
    assert "side plan" not in "\n".join(lines)
    assert lines[-3:] == ["id: 2", "event: inbox", lines[-1]]
    assert later["id"] in lines[-1] and '"cursor":2' in lines[-1]


def test_a_long_poll_waits_past_a_withdrawn_wake_up(setup: Setup) -> None:
    _side_room_wake_up(setup)
    with setup.hub.client(setup.tokens["bot"]) as bot:
        page = bot.get("/v1/inbox", params={"wait": 0.5}).json()
    assert page == {"items": [], "cursor": 0}
