"""The reservation tools (docs/reservations.md) through the SDK's stdio client against a real
hub: reserve, a conflict as a tool error naming the holder, a retried call replaying, check,
list, renew and release; the project defaults to the server's repository origin."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mcp import Client
from mcphelpers import McpServer, call, mcp_server  # noqa: F401 (a fixture)

from hubproc import Setup

PROJECT = "github.com/acme/app"


def test_reserve_conflict_check_list_renew_release(
    setup: Setup, mcp_server: Callable[..., McpServer], tmp_path: Path
) -> None:
    repo = tmp_path / "clone"
    repo.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    url = "https://github.com/acme/app.git"
    subprocess.run(["git", "remote", "add", "origin", url], cwd=repo, check=True)
    grant = {"paths": ["src/auth/**"], "reason": "auth refactor", "room": "general"}

    async def as_bot(c: Client) -> Any:
        first = await call(c, "reserve_paths", grant)
        again = await call(c, "reserve_paths", grant)
        return first, again

    (err, first), (err2, again) = mcp_server("bot", cwd=repo).run(as_bot)
    assert not err and not err2
    r = first["reservation"]
    assert r["project"] == PROJECT and r["holder"] == "bot" and r["room"] == setup.room
    assert first["key_source"] == "derived"
    assert again["reservation"]["id"] == r["id"]  # replayed, not granted twice

    async def as_helper(c: Client) -> Any:
        return [
            await call(c, "reserve_paths", {"paths": ["src/auth/a.py"], "project": PROJECT}),
            await call(c, "check_paths", {"paths": ["src/auth/a.py", "README.md"]}),
            await call(c, "list_reservations", {"project": PROJECT}),
            await call(c, "release_reservation", {"reservation_id": r["id"]}),
        ]

    (refused, failure), (e1, checked), (e2, listed), (denied, _) = mcp_server(
        "helper", cwd=repo
    ).run(as_helper)
    assert refused and failure["error"]["code"] == "reservation_conflict"
    assert "bot" in failure["error"]["message"] and "auth refactor" in failure["error"]["message"]
    assert not e1 and [c["holder"] for c in checked["conflicts"]] == ["bot"]
    assert checked["conflicts"][0]["requested"] == ["src/auth/a.py"]
    assert not e2 and [x["id"] for x in listed["reservations"]] == [r["id"]]
    assert denied  # helper is not the holder

    async def done(c: Client) -> Any:
        return [
            await call(c, "renew_reservation", {"reservation_id": r["id"], "ttl_seconds": 600}),
            await call(c, "release_reservation", {"reservation_id": r["id"]}),
        ]

    (e3, renewed), (e4, released) = mcp_server("bot").run(done)
    assert not e3 and renewed["reservation"]["state"] == "held"
    assert not e4 and released["reservation"]["state"] == "released"


def test_no_project_and_no_repository_is_a_clear_tool_error(
    setup: Setup, mcp_server: Callable[..., McpServer], tmp_path: Path
) -> None:
    async def scenario(c: Client) -> Any:
        return await call(c, "check_paths", {"paths": ["a.py"]})

    err, body = mcp_server("bot", cwd=tmp_path).run(scenario)
    assert err and "project" in body["error"]["message"]
