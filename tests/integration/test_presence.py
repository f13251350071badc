"""Presence (docs/presence.md): who is in the workspace and who is online, kept in memory on
each hub process and flushed to the store every few seconds; an open stream keeps its
member online; "last seen" survives a restart, and a kill -9 loses at most a few seconds.
Humans alice, carol; agents bot, helper (owner alice).

The tests on the default hub share one per engine, each in a workspace of its own (the docs
block's `acme` is the only one of that name on it); the tests that set presence flags, restart
a hub or run two on one database start their own (`make_hub`)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from clirun import agentpost, run_doc_block
from hubproc import HubProcess, fresh_workspace, make_setup, poll

ROOT = Path(__file__).resolve().parents[2]
FAST = {"AGENTPOST_PRESENCE_FLUSH": "0.2"}


def seen_at(text: str | None) -> float | None:
    return None if text is None else datetime.fromisoformat(text).timestamp()


def members(hub: HubProcess, token: str, ws: str = "acme") -> dict[str, dict[str, Any]]:
    with hub.client(token) as c:
        r = c.get(f"/v1/workspaces/{ws}/members")
    assert r.status_code == 200, r.text
    assert r.json()["workspace"] == ws
    return {m["name"]: m for m in r.json()["members"]}


def touch(hub: HubProcess, token: str) -> float:
    """One authenticated request; the time it was answered."""
    with hub.client(token) as c:
        assert c.get("/v1/me").status_code == 200
    return time.time()


def test_members_show_kind_owner_status_and_who_is_online(
    make_hub: Callable[..., HubProcess],
) -> None:
    hub = make_hub(env=FAST)
    s = make_setup(hub, ["alice", "carol"], ["bot", "helper"])
    with hub.client(hub.admin_token) as admin:
        assert admin.delete("/v1/admin/workspaces/acme/members/helper").status_code == 200
    touch(hub, s.tokens["bot"])
    listed = members(hub, s.tokens["carol"])  # carol is seen by asking
    assert list(listed) == ["alice", "bot", "carol", "helper"]
    assert {n: (m["kind"], m["owner"], m["status"]) for n, m in listed.items()} == {
        "alice": ("human", None, "active"),
        "bot": ("agent", "alice", "active"),
        "carol": ("human", None, "active"),
        "helper": ("agent", "alice", "removed"),
    }
    # alice created the room, bot asked /v1/me, carol asked for the list; helper never came.
    assert {n: m["online"] for n, m in listed.items()} == {
        "alice": True,
        "bot": True,
        "carol": True,
        "helper": False,
    }
    assert listed["helper"]["last_seen"] is None
    now = time.time()
    for name in ("alice", "bot", "carol"):
        assert now - 30 < seen_at(listed[name]["last_seen"]) <= now + 1  # type: ignore[operator]
    # One member by name carries the same presence.
    with hub.client(s.tokens["carol"]) as c:
        one = c.get("/v1/workspaces/acme/members/bot").json()["member"]
    assert one["online"] is True and one["owner"] == "alice"


def test_only_members_of_the_workspace_may_list_it(shared_hub: HubProcess) -> None:
    hub = shared_hub
    s = make_setup(hub, ["alice"], ["bot"], workspace=fresh_workspace())
    other = make_setup(hub, ["olga"], [], workspace=fresh_workspace())
    with hub.client(other.tokens["olga"]) as c:
        for ws in (s.workspace, "nowhere"):  # the same answer, whether it exists or not
            r = c.get(f"/v1/workspaces/{ws}/members")
            assert r.status_code == 404
            assert r.json()["error"]["code"] == "no_workspace"
    assert httpx.get(f"{hub.url}/v1/workspaces/{s.workspace}/members").status_code == 401
    with hub.client(hub.admin_token) as admin:
        r = admin.delete(f"/v1/admin/workspaces/{s.workspace}/members/bot")
        assert r.status_code == 200
    with hub.client(s.tokens["bot"]) as c:
        r = c.get(f"/v1/workspaces/{s.workspace}/members")
    assert r.status_code == 403 and r.json()["error"]["code"] == "agent_removed"


def test_an_open_stream_keeps_its_member_online(make_hub: Callable[..., HubProcess]) -> None:
    hub = make_hub(env={**FAST, "AGENTPOST_PRESENCE_ONLINE": "3"})
    s = make_setup(hub, ["alice", "carol"], ["bot"])
    with httpx.Client(base_url=hub.url, timeout=30) as c:
        headers = {"Authorization": f"Bearer {s.tokens['bot']}"}
        with c.stream("GET", "/v1/inbox/stream", headers=headers) as stream:
            lines = stream.iter_lines()  # held: a dropped iterator closes the stream
            assert next(lines) == ": stream open"
            touch(hub, s.tokens["carol"])  # seen once, after bot's last request
            # carol drops out of the 3 s window; bot, streaming, never does.
            listed = poll(
                lambda: (m := members(hub, s.tokens["alice"]))
                and not m["carol"]["online"]
                and m,
                timeout=15,
                interval=0.2,
            )
            assert listed["bot"]["online"] is True
        # Closed, the stream no longer vouches for bot.
        poll(lambda: not members(hub, s.tokens["alice"])["bot"]["online"], 15, 0.2)


def test_last_seen_survives_a_clean_restart_with_the_last_stamp(
    make_hub: Callable[..., HubProcess], engine: str | None
) -> None:
    # Flushes never come due in this test: only the stop's own flush can store the stamp.
    env = {"AGENTPOST_PRESENCE_FLUSH": "3600", "AGENTPOST_ADMIN_TOKEN": "adm"}
    hub = make_hub(env=env)
    s = make_setup(hub, ["alice", "carol"], ["bot"])
    last = touch(hub, s.tokens["bot"])
    hub.stop()
    again = make_hub(env=env) if engine else HubProcess(
        hub.data_dir, env=env, db_url=engine
    ).start()
    try:
        bot = members(again, s.tokens["alice"])["bot"]
        assert abs(seen_at(bot["last_seen"]) - last) < 1.0  # type: ignore[operator]
    finally:
        again.stop()


def test_kill_9_loses_at_most_the_last_few_seconds(
    make_hub: Callable[..., HubProcess], engine: str | None
) -> None:
    env = {"AGENTPOST_PRESENCE_FLUSH": "1", "AGENTPOST_ADMIN_TOKEN": "adm"}
    hub = make_hub(env=env)
    s = make_setup(hub, ["alice"], ["bot"])
    first = touch(hub, s.tokens["bot"])
    last = first
    while last - first < 2.5:  # bot keeps coming for longer than a flush interval
        last = touch(hub, s.tokens["bot"])
    hub.kill()  # SIGKILL: no last flush
    again = make_hub(env=env) if engine else HubProcess(
        hub.data_dir, env=env, db_url=engine
    ).start()
    try:
        bot = members(again, s.tokens["alice"])["bot"]
        stored = seen_at(bot["last_seen"])
        assert stored is not None
        assert first < stored <= last + 0.5
        assert last - stored < 3.0, f"lost {last - stored:.1f} s of presence"
    finally:
        again.stop()


@pytest.fixture
def pair(engine: str | None, make_hub: Callable[..., HubProcess]) -> tuple[HubProcess, HubProcess]:
    if engine is None:
        pytest.skip("several hub processes share a database on PostgreSQL only")
    env = {**FAST, "AGENTPOST_ADMIN_TOKEN": "admin-of-both"}
    return make_hub("a", env=env), make_hub("b", env=env)


def test_two_processes_meet_in_the_store_and_show_the_newest(
    pair: tuple[HubProcess, HubProcess],
) -> None:
    a, b = pair
    s = make_setup(a, ["alice"], ["bot"])
    touch(a, s.tokens["bot"])
    # bot was seen on a only: b learns it from the store.
    poll(lambda: members(b, s.tokens["alice"])["bot"]["online"], 10, 0.1)
    on_a = seen_at(members(a, s.tokens["alice"])["bot"]["last_seen"])
    time.sleep(0.05)  # a later request, by the clock both processes read
    later = touch(b, s.tokens["bot"])
    newest = seen_at(members(b, s.tokens["alice"])["bot"]["last_seen"])
    assert newest is not None and on_a is not None and on_a < newest <= later
    # a shows b's newer stamp once b flushed it, never its own older one.
    poll(lambda: seen_at(members(a, s.tokens["alice"])["bot"]["last_seen"]) == newest, 10, 0.1)


def test_agentpost_members_defaults_to_the_tokens_workspace(shared_hub: HubProcess) -> None:
    hub = shared_hub
    s = make_setup(hub, ["alice", "carol"], ["bot"], workspace=fresh_workspace())
    other = make_setup(hub, ["olga"], [], workspace=fresh_workspace()).workspace
    p = agentpost(hub, "members", "--json", token=s.tokens["alice"])
    out = json.loads(p.stdout)
    assert out["workspace"] == s.workspace
    assert [(m["name"], m["kind"], m["owner"], m["online"]) for m in out["members"]] == [
        ("alice", "human", None, True),
        ("bot", "agent", "alice", False),
        ("carol", "human", None, False),
    ]
    # For people: one line per member, tab-separated when piped.
    lines = agentpost(hub, "members", token=s.tokens["alice"]).stdout.splitlines()
    assert lines[0].split("\t") == ["name", "kind", "owner", "status", "online", "last seen"]
    assert lines[2].split("\t") == ["bot", "agent", "alice", "active", "no", "never"]
    # Another workspace: a plain refusal, exit 1.
    p = agentpost(hub, "members", "--workspace", other, "--json", token=s.tokens["alice"],
                  check=False)
    assert p.returncode == 1 and json.loads(p.stdout)["error"]["code"] == "no_workspace"


def test_docs_presence_md_runs_as_written(shared_hub: HubProcess) -> None:
    p = run_doc_block(ROOT / "docs" / "presence.md", shared_hub)
    last = json.loads(p.stdout.strip().splitlines()[-1])
    assert {m["name"]: (m["online"], m["last_seen"] is None) for m in last["members"]} == {
        "bot": (True, False),
        "carol": (False, True),
        "hana": (True, False),
    }
    assert "\tnever" in p.stdout
