"""Workspaces, members, rooms, participants, archive; meta routes (docs/api.md "Routes").

One hub per engine serves this module's tests, each in a workspace of its own; the test that
reads the hub-wide post counters starts its own (`make_setup` on `hub`)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from hubproc import HubProcess, Setup, make_setup


@pytest.fixture
def setup(shared_setup: Setup) -> Setup:
    return shared_setup


def test_admin_routes_need_the_admin_token(setup: Setup) -> None:
    with setup.hub.client(setup.tokens["alice"]) as c:
        r = c.post("/v1/admin/workspaces", json={"name": "other"})
        assert (r.status_code, r.json()["error"]["code"]) == (401, "unauthorized")


def test_admin_token_file_is_private(shared_hub: HubProcess) -> None:
    mode = stat.S_IMODE(os.stat(shared_hub.data_dir / "admin.token").st_mode)
    assert mode == 0o600


def _stored_bytes(setup: Setup) -> bytes:
    """Everything the store holds: the SQLite files, or every PostgreSQL table as text."""
    if setup.hub.db_url is None:
        files = sorted(setup.hub.data_dir.glob("hub.sqlite3*"))
        return b"".join(f.read_bytes() for f in files)
    import psycopg

    with psycopg.connect(setup.hub.db_url) as pg:
        tables = [
            r[0]
            for r in pg.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
            )
        ]
        return b" ".join(str(pg.execute(f"SELECT * FROM {t}").fetchall()).encode() for t in tables)


def test_tokens_are_stored_hashed(setup: Setup) -> None:
    raw = _stored_bytes(setup)
    assert b"alice" in raw  # the dump really holds the member rows
    for token in setup.tokens.values():
        assert token.encode() not in raw
    assert setup.hub.admin_token.encode() not in raw


def test_duplicates_and_unknowns_have_stable_codes(setup: Setup) -> None:
    ws = setup.workspace
    with setup.hub.client(setup.hub.admin_token) as admin:
        assert (
            admin.post("/v1/admin/workspaces", json={"name": ws}).json()["error"]["code"]
            == "workspace_exists"
        )
        alice = {"name": "alice", "kind": "human"}
        r = admin.post(f"/v1/admin/workspaces/{ws}/members", json=alice)
        assert (r.status_code, r.json()["error"]["code"]) == (409, "member_exists")
        r = admin.post("/v1/admin/workspaces/nope/members", json={"name": "x", "kind": "human"})
        assert (r.status_code, r.json()["error"]["code"]) == (404, "no_workspace")
        r = admin.post(
            f"/v1/admin/workspaces/{ws}/members", json={"name": "Bad Name", "kind": "human"}
        )
        assert (r.status_code, r.json()["error"]["code"]) == (400, "invalid_request")
        r = admin.post(
            f"/v1/admin/workspaces/{ws}/members",
            json={"name": "a2", "kind": "agent", "owner": "bot"},
        )
        assert r.json()["error"]["code"] == "invalid_request"
        r = admin.delete(f"/v1/admin/workspaces/{ws}/members/ghost")
        assert (r.status_code, r.json()["error"]["code"]) == (404, "member_not_found")
    with setup.hub.client(setup.tokens["alice"]) as c:
        r = c.post(f"/v1/workspaces/{ws}/rooms", json={"name": "general"})
        assert (r.status_code, r.json()["error"]["code"]) == (409, "room_exists")
        r = c.post(f"/v1/workspaces/{ws}/rooms", json={"name": "x", "participants": ["ghost"]})
        assert r.json()["error"]["code"] == "invalid_request"
        r = c.post("/v1/workspaces/other/rooms", json={"name": "x"})
        assert (r.status_code, r.json()["error"]["code"]) == (404, "no_workspace")
        assert c.get("/v1/nowhere").json()["error"]["code"] == "not_found"


def test_room_shape_participants_and_archive(setup: Setup) -> None:
    with setup.hub.client(setup.tokens["alice"]) as c:
        room = c.get(f"/v1/rooms/{setup.room}").json()["room"]
        assert {k: room[k] for k in ("id", "name", "kind", "mode", "archived")} == {
            "id": setup.room,
            "name": "general",
            "kind": "channel",
            "mode": "dynamic",
            "archived": False,
        }
        assert room["participants"] == ["alice", "bot", "carol", "helper"]
        room = c.delete(f"/v1/rooms/{setup.room}/participants/helper").json()["room"]
        assert "helper" not in room["participants"]
        room = c.put(f"/v1/rooms/{setup.room}/participants/helper").json()["room"]
        assert "helper" in room["participants"]
        assert c.post(f"/v1/rooms/{setup.room}/archive").json()["room"]["archived"] is True
        assert c.post(f"/v1/rooms/{setup.room}/unarchive").json()["room"]["archived"] is False
        listed = c.get(f"/v1/workspaces/{setup.workspace}/rooms").json()["rooms"]
        assert [r["id"] for r in listed] == [setup.room]


def test_me_shape(setup: Setup) -> None:
    with setup.hub.client(setup.tokens["bot"]) as c:
        me = c.get("/v1/me").json()
    with setup.hub.client(setup.tokens["alice"]) as c:
        alice = c.get("/v1/me").json()["member"]
    assert me["member"] == {
        "id": me["member"]["id"],
        "name": "bot",
        "kind": "agent",
        "status": "active",
        "owner": "alice",
        "owner_id": alice["id"],  # the owner's identity (docs/api.md "Identity")
    }
    assert me["workspace"]["name"] == setup.workspace


def test_capabilities_healthz_metrics(hub: HubProcess) -> None:
    # Its own hub: the counters below count every post the hub answered.
    setup = make_setup(hub, ["alice", "carol"], ["bot", "helper"])
    with setup.hub.client() as c:
        caps = c.get("/v1/capabilities").json()
        assert caps["room_post_idempotency"] == {
            "header": "Idempotency-Key",
            "status_header": "Idempotency-Status",
            "ttl_seconds": 86400,
            "routes": [
                "POST /v1/rooms/{room}/messages",
                "POST /v1/rooms/{room}/media",
                "POST /v1/rooms/{room}/events/{event}/edits",
                "POST /v1/rooms/{room}/events/{event}/reactions",
                "POST /v1/rooms/{room}/events/{event}/redactions",
            ],
        }
        assert caps["max_upload_bytes"] > 0 and "room_post_idempotency" in caps["features"]
        # What a client may look for before using the routes of docs/delivery.md,
        # docs/presence.md and docs/search.md.
        assert {"delivery_state", "presence", "search", "relations"} <= set(caps["features"])
        assert c.get("/healthz").json() == {"status": "ok"}
    with setup.hub.client(setup.tokens["alice"]) as a:
        for text in ("x", "x", "y"):  # created, replayed, conflict
            a.post(
                f"/v1/rooms/{setup.room}/messages",
                json={"text": text},
                headers={"Idempotency-Key": "a"},
            )
    with setup.hub.client() as c:
        text = c.get("/metrics").text
    assert (
        'agentpost_posts_total{outcome="created",route="POST /v1/rooms/{room}/messages"} 1.0'
        in text
    )
    assert "agentpost_idempotent_replays_total 1.0" in text
    assert "agentpost_idempotency_conflicts_total 1.0" in text
    assert "agentpost_post_latency_seconds_bucket" in text


# The admin token manages rooms and reads no conversation (docs/api.md "The admin token").
# (route as docs/api.md's table starts its row, method, path, JSON body)
_ADMIN_MANAGES = [
    ("`POST /v1/workspaces/{ws}/rooms", "POST", "/v1/workspaces/{ws}/rooms", {"name": "ops"}),
    ("`GET /v1/rooms/{room}`", "GET", "/v1/rooms/{room}", None),
    ("`PATCH /v1/rooms/{room}", "PATCH", "/v1/rooms/{room}", {"router": "none"}),
    ("`PUT` / `DELETE /v1/rooms/{room}/participants", "DELETE", "/v1/rooms/{room}/participants/carol", None),
    ("`PUT` / `DELETE /v1/rooms/{room}/participants", "PUT", "/v1/rooms/{room}/participants/carol", None),
    ("`POST /v1/rooms/{room}/archive`", "POST", "/v1/rooms/{room}/archive", None),
    ("`POST /v1/rooms/{room}/archive`", "POST", "/v1/rooms/{room}/unarchive", None),
]
_ADMIN_REFUSED = [
    ("`POST /v1/rooms/{room}/messages", "POST", "/v1/rooms/{room}/messages", {"text": "hi"}),
    ("`GET /v1/rooms/{room}/events?", "GET", "/v1/rooms/{room}/events", None),
    ("`GET /v1/rooms/{room}/export?", "GET", "/v1/rooms/{room}/export", None),
    ("`GET /v1/rooms/{room}/stream`", "GET", "/v1/rooms/{room}/stream", None),
    ("`POST /v1/rooms/{room}/read", "POST", "/v1/rooms/{room}/read", {"seq": 1}),
    ("`POST /v1/rooms/{room}/stream-ticket`", "POST", "/v1/rooms/{room}/stream-ticket", None),
    ("`GET /v1/events/{event}`", "GET", "/v1/events/{event}", None),
    ("`GET /v1/rooms/{room}/events/{event}/delivery`", "GET", "/v1/events/{event}/delivery", None),
    ("`GET /v1/rooms/{room}/sends", "GET", "/v1/rooms/{room}/sends?key=k", None),
    ("`POST /v1/rooms/{room}/cancel", "POST", "/v1/rooms/{room}/cancel", {}),
    ("`GET /v1/workspaces/{ws}/rooms`", "GET", "/v1/workspaces/{ws}/rooms", None),
    ("`GET /v1/workspaces/{ws}/members`", "GET", "/v1/workspaces/{ws}/members", None),
    ("`GET /v1/search", "GET", "/v1/search?q=hi", None),
    ("`GET /v1/inbox?", "GET", "/v1/inbox", None),
    ("`GET /v1/me`", "GET", "/v1/me", None),
    ("`POST /v1/workspaces/{ws}/threads/ensure", "POST", "/v1/workspaces/{ws}/threads/ensure", {"name": "t"}),
]


def _who(row_start: str) -> str:
    """The "who" column of the docs/api.md row that starts with `row_start`."""
    text = (Path(__file__).parents[2] / "docs" / "api.md").read_text()
    rows = [line for line in text.splitlines() if line.startswith(f"| {row_start}")]
    assert len(rows) == 1, (row_start, rows)
    return rows[0].split(" | ")[1].strip()


def test_the_admin_token_manages_rooms_as_docs_api_says(setup: Setup) -> None:
    with setup.hub.client(setup.tokens["alice"]) as alice:
        r = alice.post(f"/v1/rooms/{setup.room}/messages", json={"text": "@bot the plan"})
        event = r.json()["event"]["id"]
    fill = {"ws": setup.workspace, "room": setup.room, "event": event}
    with setup.hub.client(setup.hub.admin_token) as admin:
        for row, method, path, body in _ADMIN_MANAGES:
            assert "admin" in _who(row), row
            r = admin.request(method, path.format(**fill), json=body)
            assert r.status_code in (200, 201), (method, path, r.text)
            if path.endswith("/rooms"):
                assert r.json()["room"]["participants"] == []  # the admin is no participant
        for row, method, path, body in _ADMIN_REFUSED:
            assert "admin" not in _who(row), row
            r = admin.request(method, path.format(**fill), json=body)
            assert (r.status_code, r.json()["error"]["code"]) == (401, "unauthorized"), (
                method,
                path,
            )
    with setup.hub.client(setup.tokens["alice"]) as alice:
        room = alice.get(f"/v1/rooms/{setup.room}").json()["room"]
        texts = [e["text"] for e in alice.get(f"/v1/rooms/{setup.room}/events").json()["events"]]
    assert room["archived"] is False and room["router"] == "none" and "carol" in room["participants"]
    assert texts == ["@bot the plan"]
