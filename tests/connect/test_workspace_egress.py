"""The Worker's workspace is never egress (docs/architecture.md#egress, docs/connect.md "Files that
may leave"), whatever the layout: with the workspace inside the repo (the layout the docs once
showed), a Turn cannot send a file someone shared with the agent in another conversation,
nor the Worker's own files, however the path is spelled; delivery stays enabled."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import AGENTS, Connected, agent_cmd, wait_for
from hubproc import HubProcess


@pytest.fixture
def hub(shared_hub: HubProcess) -> HubProcess:
    return shared_hub


TRICK = AGENTS / "trick_agent.py"


def test_a_workspace_inside_the_repo_sends_nothing_of_its_own(
    connected: Connected, tmp_path: Path
) -> None:
    c = connected
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "public.txt").write_text("fine to share\n")
    ws = repo / "ws-bot"
    w = c.worker(agent_cmd(TRICK), "--collaborator", "carol", repo=repo, workspace=ws)
    assert "delivery (_ag2/deliver): enabled" in w.log()
    # alice shares a private file with the agent: the Worker saves it under its workspace.
    with c.hub.client(c.setup.tokens["alice"]) as h:
        files = {"file": ("secret-plan.txt", b"alice's private plan", "text/plain")}
        r = h.post(f"/v1/rooms/{c.setup.room}/media", files=files, data={"text": "@bot keep"})
        assert r.status_code == 201, r.text
        shared = r.json()["event"]["id"]
    c.wait_reply(shared)
    saved = wait_for(lambda: list((ws / "files").glob(f"session-*/{shared}/*secret-plan.txt")))[0]
    targets = [
        saved,
        ws / "status.json",
        ws / "worker-id",
        ws / "deliveries.sqlite3",
    ]
    for target in targets:
        e = c.say("carol", f"@bot link {target.as_uri()}")
        c.wait_reply(e["id"])
    e = c.say("alice", f"@bot link {(repo / 'public.txt').as_uri()}")
    c.wait_reply(e["id"])
    media = [x for x in c.events() if x["type"] == "media" and x["sender"] == "bot"]
    assert [m["attachments"][0]["name"] for m in media] == ["public.txt"]
    refusals = [x["text"] for x in c.events() if x["text"].startswith("Not sent:")]
    assert len(refusals) == len(targets)
    assert all("the Worker's private folder" in t for t in refusals)


def test_an_egress_root_inside_the_workspace_or_over_the_data_home_sends_none_of_them(
    connected: Connected, tmp_path: Path
) -> None:
    """`--egress-root <workspace>/files` is private all through (its folders above are
    judged too); a root around the data home ($AGENTPOST_HOME: a hub's admin token and
    database, every Worker's folder) sends nothing from it, and still sends the rest."""
    c = connected
    repo = tmp_path / "repo"
    repo.mkdir()
    home = repo / "home"
    (home / "hubdata").mkdir(parents=True)
    (home / "hubdata" / "admin.token").write_text("not for any room\n")
    (repo / "public.txt").write_text("fine\n")
    ws = tmp_path / "ws-bot"
    (ws / "files").mkdir(parents=True)
    (ws / "files" / "kept.txt").write_text("shared with the agent elsewhere\n")
    c.worker(
        agent_cmd(TRICK),
        "--collaborator", "carol", "--egress-root", str(ws / "files"),
        repo=repo, workspace=ws, env={"AGENTPOST_HOME": str(home)},
    )
    for target in (ws / "files" / "kept.txt", home / "hubdata" / "admin.token"):
        e = c.say("carol", f"@bot link {target.as_uri()}")
        c.wait_reply(e["id"])
    e = c.say("alice", f"@bot link {(repo / 'public.txt').as_uri()}")
    c.wait_reply(e["id"])
    media = [x for x in c.events() if x["type"] == "media" and x["sender"] == "bot"]
    assert [m["attachments"][0]["name"] for m in media] == ["public.txt"]
    refusals = [x["text"] for x in c.events() if x["text"].startswith("Not sent:")]
    assert len(refusals) == 2 and all("private folder" in t for t in refusals)
