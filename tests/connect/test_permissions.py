"""Permissions in a Turn (docs/connect.md "Cancelling, permissions, time limits"): a refusal
is said in the reply, and one that ended the Turn is an error, not a cancel; the agent
may read the files it was sent under the default policy (its Session's attachment folder
is given as a root at session/new, and a read permission strictly inside this Turn's
folder is allowed once), and nothing wider. Real Worker, real hub, an SDK agent."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

from conftest import AGENTS, Connected, agent_cmd, wait_for
from hubproc import HubProcess


@pytest.fixture
def hub(shared_hub: HubProcess) -> HubProcess:
    return shared_hub


TRICK = AGENTS / "trick_agent.py"
REFUSED = (
    "(@bot: the agent asked permission for run rm -rf build and the Worker refused it "
    "(policy: reject; start the Worker with --allow-permission allow_once to allow))"
)


def test_a_refusal_that_ends_the_turn_cancelled_is_an_error_receipt_naming_it(
    connected: Connected,
) -> None:
    connected.worker(agent_cmd(TRICK))
    e1 = connected.say("helper", "@bot permstop")  # a delegation
    reply = connected.wait_reply(e1["id"])
    assert reply["reply_kind"] == "error"
    assert reply["text"] == "I could not do it.\n\n" + REFUSED
    e2 = connected.say("alice", "@bot permstop")  # a person's question: a plain reply
    reply = connected.wait_reply(e2["id"])
    assert reply["reply_kind"] is None
    assert reply["text"] == "I could not do it.\n\n" + REFUSED

    def recorded() -> list[dict[str, Any]]:
        out = subprocess.run(
            [sys.executable, "-m", "agentpost", "connect", "status", "--workspace-dir",
             str(connected.tmp / "ws-bot"), "--json"],
            capture_output=True, text=True, timeout=60,
        ).stdout
        return [t for t in json.loads(out).get("turns", []) if t["trigger"] == e1["id"]]

    turn = wait_for(recorded)[0]  # the Turn records the refusal (connect status)
    assert turn["outcome"] == "permission_refused"
    assert turn["refused_permissions"] == ["run rm -rf build"]


def test_an_allowed_permission_is_no_refusal(connected: Connected) -> None:
    connected.worker(agent_cmd(TRICK), "--allow-permission", "allow_once")
    e1 = connected.say("helper", "@bot permstop")
    reply = connected.wait_reply(e1["id"])
    assert (reply["reply_kind"], reply["text"]) == ("result", "done it")


def test_a_stop_after_a_refusal_is_still_a_cancel(connected: Connected) -> None:
    w = connected.worker(agent_cmd(TRICK))
    e1 = connected.say("helper", "@bot permhang")
    wait_for(lambda: "permission 'run make'" in w.log() and "rejected" in w.log())
    connected.say("alice", "/stop")
    reply = connected.wait_reply(e1["id"])
    assert reply["reply_kind"] == "cancelled"
    assert reply["text"] == "waiting\n\n(@bot's Turn was cancelled)"


def _post_with_file(c: Connected, who: str, name: str, data: bytes, text: str) -> dict[str, Any]:
    with c.hub.client(c.setup.tokens[who]) as h:
        up = h.post(f"/v1/rooms/{c.setup.room}/media", files={"file": (name, data)}).json()
        r = h.post(
            f"/v1/rooms/{c.setup.room}/messages",
            json={"text": text, "attachments": [up["media"]["id"]]},
        )
    assert r.status_code == 201, r.text
    event: dict[str, Any] = r.json()["event"]
    return event


def test_attachments_are_readable_under_the_default_policy_and_nothing_wider(
    connected: Connected,
) -> None:
    w = connected.worker(agent_cmd(TRICK))
    ws = os.path.realpath(connected.tmp / "ws-bot")
    # helper's Session (room, helper) gets a file first; alice's Session must not see it.
    theirs = _post_with_file(connected, "helper", "theirs.txt", b"helper's", "@bot attach")
    connected.wait_reply(theirs["id"])
    mine = _post_with_file(connected, "alice", "in.txt", b"alice's", "@bot attach")
    text = connected.wait_reply(mine["id"])["text"]
    said, refusals = text.split("\n\n")  # the agent's JSON, then the refusals named
    report = json.loads(said)
    # Named as the agent titled them (redacted: a long id in a path looks like a key).
    assert refusals.startswith("(the Worker refused the agent permission for: Edit ")
    assert refusals.endswith("; Read /etc/hostname)") and refusals.count("; Read ") == 2

    folder = report["dirs"][0]
    assert report["dirs"] == report["roots"] == [folder]  # ACP field and claude's _meta
    assert os.path.dirname(folder) == os.path.join(ws, "files")
    assert [h.split("/")[0] for h in report["holds"]] == [mine["id"]]  # this Session's only
    assert report["holds"][0].endswith("-in.txt")
    assert report["inside"] == [True]
    assert report["read"] == ["opt-yes-v2"]  # a read of this Turn's file: allowed once
    assert report["read_by_title"] == ["opt-yes-v2"]  # as Gemini CLI asks
    assert report["edit"] == ["opt-no-v2"]  # only reads
    assert report["read_other"] == ["opt-no-v2"]  # another Session's file
    assert report["read_outside"] == "opt-no-v2"
    assert "a read of this Turn's attachments only" in w.log()
    # helper's own Turn was given a folder of its own, holding its file only.
    with connected.hub.client(connected.setup.tokens["alice"]) as h:
        events = h.get(f"/v1/rooms/{connected.setup.room}/events", params={"limit": 1000})
    first = next(e for e in events.json()["events"] if e["in_reply_to"] == theirs["id"])
    other = json.loads(first["text"].split("\n\n")[0])
    assert other["dirs"] != report["dirs"]
    assert [h.split("/")[0] for h in other["holds"]] == [theirs["id"]]
