"""The CLI's member and admin commands beyond posting: rooms listed, archived and joined;
who am I; workspaces and members listed; a token reissued; media downloaded.

One hub per engine serves this module's tests, each in a workspace of its own; the test that
lists every workspace of the hub starts its own (`make_setup` on `hub`)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from clirun import agentpost, json_error
from hubproc import HubProcess, Setup, fresh_workspace, make_setup


@pytest.fixture
def setup(shared_setup: Setup) -> Setup:
    return shared_setup


def _json(p) -> dict:  # noqa: ANN001
    return json.loads(p.stdout)


def test_room_list_archive_and_participants(setup: Setup) -> None:
    hub, alice = setup.hub, setup.tokens["alice"]
    made = _json(agentpost(hub, "room", "create", "ops", "--json", token=alice))["room"]
    assert made["workspace"] == setup.workspace and made["participants"] == ["alice"]
    names = [
        r["name"] for r in _json(agentpost(hub, "room", "list", "--json", token=alice))["rooms"]
    ]
    assert sorted(names) == ["general", "ops"]
    assert _json(agentpost(hub, "room", "list", "--json", token=setup.tokens["carol"]))[
        "rooms"
    ] == [
        r
        for r in _json(agentpost(hub, "room", "list", "--json", token=alice))["rooms"]
        if r["name"] == "general"
    ]

    added = _json(agentpost(hub, "room", "add", "ops", "carol", "--json", token=alice))["room"]
    assert added["participants"] == ["alice", "carol"]
    carol_sees = _json(agentpost(hub, "room", "list", "--json", token=setup.tokens["carol"]))
    assert "ops" in [r["name"] for r in carol_sees["rooms"]]
    gone = _json(agentpost(hub, "room", "remove", "ops", "carol", "--json", token=alice))["room"]
    assert gone["participants"] == ["alice"]
    nobody = agentpost(hub, "room", "add", "ops", "nobody", "--json", token=alice, check=False)
    assert nobody.returncode == 1 and json_error(nobody)["code"] == "member_not_found"

    assert _json(agentpost(hub, "room", "archive", "ops", "--json", token=alice))["room"][
        "archived"
    ]
    refused = agentpost(hub, "post", "ops", "-t", "hi", "--json", token=alice, check=False)
    assert refused.returncode == 1 and json_error(refused)["code"] == "room_archived"
    listed = agentpost(hub, "room", "list", token=alice).stdout.splitlines()
    ops = dict(zip(listed[0].split("\t"), next(ln for ln in listed if "\tops\t" in ln).split("\t"), strict=True))
    assert ops["archived"] == "yes"
    agentpost(hub, "room", "unarchive", "ops", token=alice)
    agentpost(hub, "post", "ops", "-t", "hi", token=alice)


def test_a_softly_removed_member_leaves_the_participant_lists(setup: Setup) -> None:
    own = make_setup(setup.hub, ["alice", "carol"], ["bot"], workspace=fresh_workspace())
    hub, alice = own.hub, own.tokens["alice"]
    agentpost(hub, "admin", "member", "remove", own.workspace, "bot")  # soft: the row stays
    with hub.client(alice) as c:
        assert c.get(f"/v1/rooms/{own.room}").json()["room"]["participants"] == ["alice", "carol"]
    listed = _json(agentpost(hub, "room", "list", "--json", token=alice))["rooms"]
    assert listed[0]["participants"] == ["alice", "carol"]
    after = _json(agentpost(hub, "room", "remove", "general", "carol", "--json", token=alice))
    assert after["room"]["participants"] == ["alice"]


def test_removing_participants_says_what_a_person_would_not_guess(setup: Setup) -> None:
    own = make_setup(setup.hub, ["alice", "carol"], [], workspace=fresh_workspace())
    hub, alice, carol = own.hub, own.tokens["alice"], own.tokens["carol"]
    other = agentpost(hub, "room", "remove", "general", "carol", token=alice).stdout
    assert other.strip() == f"took carol out of general ({own.room}); still in it: alice"
    agentpost(hub, "room", "add", "general", "carol", token=alice)
    left = agentpost(hub, "room", "remove", "general", "alice", token=alice).stdout
    assert left.startswith(f"you left general ({own.room}): it is no longer in your `room list`")
    last = agentpost(hub, "room", "remove", own.room, "carol", token=carol).stdout
    assert "no participants are left" in last and "the admin can add members back" in last
    assert _json(agentpost(hub, "room", "list", "--json", token=carol))["rooms"] == []
    back = agentpost(hub, "room", "add", own.room, "carol", token=hub.admin_token)
    assert "general" in back.stdout  # as the last line said: the admin token adds them back


def test_whoami(setup: Setup) -> None:
    me = _json(agentpost(setup.hub, "whoami", "--json", token=setup.tokens["bot"]))
    assert me["member"]["name"] == "bot" and me["member"]["kind"] == "agent"
    assert me["member"]["owner"] == "alice" and me["workspace"]["name"] == setup.workspace
    human = agentpost(setup.hub, "whoami", token=setup.tokens["bot"]).stdout.splitlines()
    assert human[1].split("\t")[:4] == ["bot", "agent", "alice", setup.workspace]
    bad = agentpost(setup.hub, "whoami", "--json", token="ap_nope", check=False)
    assert bad.returncode == 1 and json_error(bad)["code"] == "unauthorized"


def test_workspaces_and_members_listed_removed_ones_with_status(hub: HubProcess) -> None:
    # Its own hub: the list below is every workspace of the hub.
    setup = make_setup(hub, ["alice", "carol"], ["bot", "helper"])
    agentpost(hub, "admin", "workspace", "create", "beta")
    names = [
        w["name"]
        for w in _json(agentpost(hub, "admin", "workspace", "list", "--json"))["workspaces"]
    ]
    assert sorted(names) == ["acme", "beta"]
    agentpost(hub, "admin", "member", "remove", "acme", "helper")
    listed = _json(agentpost(hub, "admin", "member", "list", "acme", "--json"))
    status = {m["name"]: m["status"] for m in listed["members"]}
    assert status == {"alice": "active", "bot": "active", "carol": "active", "helper": "removed"}
    assert "token" not in json.dumps(listed)
    missing = agentpost(hub, "admin", "member", "list", "nope", "--json", check=False)
    assert missing.returncode == 1 and json_error(missing)["code"] == "no_workspace"
    with hub.client(setup.tokens["alice"]) as c:  # a member token is not the admin's
        assert c.get("/v1/admin/workspaces/acme/members").status_code == 401


def test_a_reissued_token_replaces_the_old_one_at_once(setup: Setup) -> None:
    hub, old = setup.hub, setup.tokens["bot"]
    agentpost(hub, "inbox", token=old)  # the old token works (and is cached by the hub)
    ws = setup.workspace
    new = _json(agentpost(hub, "admin", "member", "token", ws, "bot", "--json"))
    assert new["member"]["name"] == "bot" and new["token"] != old
    stale = agentpost(hub, "inbox", "--json", token=old, check=False)
    assert stale.returncode == 1 and json_error(stale)["code"] == "unauthorized"
    assert _json(agentpost(hub, "whoami", "--json", token=new["token"]))["member"]["name"] == "bot"
    agentpost(hub, "admin", "member", "remove", ws, "carol")
    removed = agentpost(hub, "admin", "member", "token", ws, "carol", "--json", check=False)
    assert removed.returncode == 1 and json_error(removed)["code"] == "member_removed"
    unknown = agentpost(hub, "admin", "member", "token", ws, "zed", "--json", check=False)
    assert unknown.returncode == 1 and json_error(unknown)["code"] == "member_not_found"


def test_a_softly_removed_name_says_how_to_free_it(setup: Setup) -> None:
    hub, ws = setup.hub, setup.workspace
    agentpost(hub, "admin", "member", "remove", ws, "carol")
    again = agentpost(hub, "admin", "member", "add", ws, "carol", "--json", check=False)
    err = json_error(again)
    assert again.returncode == 1 and err["code"] == "member_exists"
    assert "only a hard removal frees the name" in err["message"] and "--hard" in err["message"]
    agentpost(hub, "admin", "member", "remove", ws, "carol", "--hard")
    back = _json(agentpost(hub, "admin", "member", "add", ws, "carol", "--json"))
    assert back["member"]["status"] == "active"
    live = agentpost(hub, "admin", "member", "add", ws, "alice", "--json", check=False)
    assert json_error(live)["message"] == f"member 'alice' exists in '{ws}'"


def test_media_get_writes_the_file_checked(setup: Setup, tmp_path: Path) -> None:
    hub, alice = setup.hub, setup.tokens["alice"]
    src = tmp_path / "report.txt"
    src.write_bytes(b"the report\n" * 1000)
    up = _json(agentpost(hub, "post", "general", "-f", str(src), "--json", token=alice))
    media_id = up["event"]["attachments"][0]["id"]
    out = tmp_path / "out"
    out.mkdir()
    got = _json(
        agentpost(hub, "media", "get", media_id, "-o", str(out / "r.txt"), "--json", token=alice)
    )
    assert (out / "r.txt").read_bytes() == src.read_bytes()
    assert got["sha256"] == hashlib.sha256(src.read_bytes()).hexdigest()
    again = agentpost(
        hub, "media", "get", media_id, "-o", str(out / "r.txt"), "--json", token=alice, check=False
    )
    assert again.returncode == 1 and json_error(again)["code"] == "file_exists"
    assert sorted(p.name for p in out.iterdir()) == ["r.txt"]  # no part file left
    agentpost(hub, "media", "get", media_id, "-o", str(out / "r.txt"), "--force", token=alice)
    piped = agentpost(hub, "media", "get", media_id, "-o", "-", token=alice)
    assert piped.stdout.encode() == src.read_bytes()
    outsider = agentpost(hub, "media", "get", "md_nothing", "--json", token=alice, check=False)
    assert outsider.returncode == 1 and json_error(outsider)["code"] in (
        "media_not_found",
        "not_found",
    )


def test_media_get_defaults_to_its_name_in_the_cwd(setup: Setup, tmp_path: Path) -> None:
    hub, alice = setup.hub, setup.tokens["alice"]
    src = tmp_path / "notes.md"
    src.write_text("# notes\n")
    up = _json(agentpost(hub, "post", "general", "-f", str(src), "--json", token=alice))
    media_id = up["event"]["attachments"][0]["id"]
    work = tmp_path / "work"
    work.mkdir()
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTPOST_")}
    env.update({"AGENTPOST_HUB": hub.url, "AGENTPOST_TOKEN": alice})
    p = subprocess.run(
        [sys.executable, "-m", "agentpost", "media", "get", media_id],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 0, p.stderr
    assert (work / "notes.md").read_text() == "# notes\n"


def test_thread_ensure_defaults_to_the_tokens_workspace(setup: Setup) -> None:
    t = _json(
        agentpost(setup.hub, "thread", "ensure", "home", "--json", token=setup.tokens["alice"])
    )
    assert (t["workspace"], t["owner"], t["created"]) == (setup.workspace, "alice", True)
