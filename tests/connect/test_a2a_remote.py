"""`agentpost connect --a2a URL` (docs/architecture.md#a2a, docs/a2a.md "A2A agents as members"): a
real Worker whose agent is a remote A2A agent, here a real `a2a-sdk` 1.3 server
(agents/a2a_remote.py, which keeps no messageIds: a resend is a second task to it). Each
wake-up is one SendMessage whose messageId is the waking event's id; the task's end is the
reply, once, across a kill -9 of the Worker mid-task."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import AGENTS, Connected, wait_for
from hubproc import HubProcess
from workerproc import WorkerProcess

REMOTE = AGENTS / "a2a_remote.py"


@pytest.fixture
def hub(shared_hub: HubProcess) -> HubProcess:
    return shared_hub


class Remote:
    def __init__(self, tmp: Path, token: str | None = None) -> None:
        self.log = tmp / f"remote-{os.getpid()}-{id(self)}.jsonl"
        args = [sys.executable, str(REMOTE), "--port", "0", "--log", str(self.log)]
        if token:
            args += ["--token", token]
        self.proc = subprocess.Popen(
            args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line.startswith("A2A_REMOTE_URL "), line
        self.url = line.split()[1]

    def calls(self) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        return [json.loads(x) for x in self.log.read_text().splitlines() if x.strip()]

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


@pytest.fixture
def remotes(tmp_path: Path) -> Iterator[list[Remote]]:
    made: list[Remote] = []
    yield made
    for r in made:
        r.stop()


def remote(made: list[Remote], tmp: Path, token: str | None = None) -> Remote:
    r = Remote(tmp, token)
    made.append(r)
    return r


def a2a_worker(c: Connected, url: str, *extra: str) -> WorkerProcess:
    repo, ws = c.tmp / "repo-bot", c.tmp / "ws-bot"
    repo.mkdir(exist_ok=True)
    env = {**os.environ, "AGENTPOST_HUB": c.hub.url, "AGENTPOST_TOKEN": c.setup.tokens["bot"]}
    w = WorkerProcess(
        args=["--a2a", url, "--workspace-dir", str(ws), "--repo", str(repo), *extra],
        env=env,
        log_path=c.tmp / "worker-bot.log",
    )
    c.workers.append(w)
    return w.start()


def delegate(c: Connected, text: str) -> dict[str, Any]:
    """helper (an agent) delegates to bot: bot's reply is a receipt with a kind."""
    return c.say("helper", f"@bot {text}")


def test_a_wake_up_is_one_remote_task_named_by_the_event_and_its_result_the_reply(
    connected: Connected, remotes: list[Remote]
) -> None:
    r = remote(remotes, connected.tmp)
    a2a_worker(connected, r.url)
    e1 = connected.say("alice", "@bot hello there")
    reply = connected.wait_reply(e1["id"])
    # The bridge leaves its own agent's mention out of what it forwards (docs/a2a.md "Never
    # waking itself"): a remote that posts it in a room would wake this agent again.
    assert reply["text"] == "remote: alice in room general: hello there"
    assert [(x["message_id"], x["text"]) for x in r.calls()] == [
        (e1["id"], "alice in room general: hello there")
    ]
    e2 = connected.say("alice", "@bot again")  # the same Session: the remote's context
    connected.wait_reply(e2["id"])
    first, second = r.calls()
    assert second["message_id"] == e2["id"] and second["context_id"] == first["context_id"]


@pytest.mark.parametrize(
    ("text", "kind", "said"),
    [
        ("fail the build", "error", "remote failure: the build"),
        ("ask me", "needs_input", "which one?"),
        ("work it out", "result", "remote: helper in room general: work it out"),
    ],
)
def test_the_remote_tasks_end_is_the_receipts_kind(
    connected: Connected, remotes: list[Remote], text: str, kind: str, said: str
) -> None:
    a2a_worker(connected, remote(remotes, connected.tmp).url)
    e1 = delegate(connected, text)
    reply = connected.wait_reply(e1["id"])
    assert reply["reply_kind"] == kind
    assert said in reply["text"]


def test_files_go_both_ways(connected: Connected, remotes: list[Remote]) -> None:
    r = remote(remotes, connected.tmp)
    a2a_worker(connected, r.url)
    with connected.hub.client(connected.setup.tokens["alice"]) as h:
        up = h.post(f"/v1/rooms/{connected.setup.room}/media", files={"file": ("in.txt", b"abc")})
        sent = h.post(
            f"/v1/rooms/{connected.setup.room}/messages",
            json={"text": "@bot look", "attachments": [up.json()["media"]["id"]]},
        ).json()["event"]
    assert "got file in.txt (3 bytes)" in connected.wait_reply(sent["id"])["text"]
    asked = connected.say("alice", "@bot file report.txt")
    connected.wait_reply(asked["id"])
    made = wait_for(
        lambda: [
            e
            for e in connected.events()
            if e["type"] == "media" and e["attachments"][0]["name"] == "report.txt"
        ]
    )
    with connected.hub.client(connected.setup.tokens["alice"]) as h:
        got = h.get(f"/v1/media/{made[0]['attachments'][0]['id']}")
    assert got.content == b"made remotely: report.txt\n"


def test_a_stop_in_the_room_cancels_the_remote_task(
    connected: Connected, remotes: list[Remote]
) -> None:
    r = remote(remotes, connected.tmp)
    a2a_worker(connected, r.url)
    e1 = delegate(connected, "slow 60")
    wait_for(lambda: r.calls())
    connected.say("alice", "/stop")
    reply = connected.wait_reply(e1["id"], timeout=40)
    assert reply["reply_kind"] == "cancelled"


def test_a_worker_killed_mid_task_answers_once_after_the_restart(
    connected: Connected, remotes: list[Remote]
) -> None:
    r = remote(remotes, connected.tmp)
    w = a2a_worker(connected, r.url)
    e1 = connected.say("alice", "@bot slow 3")
    wait_for(lambda: r.calls())  # the remote has the task: the Worker is following it
    w.kill()  # SIGKILL
    assert connected.replies_to(e1["id"]) == []
    w.start()
    reply = connected.wait_reply(e1["id"], timeout=90)
    assert reply["text"] == "slow done 3"
    wait_for(lambda: connected.acked() >= 1)  # the Worker is done with the wake-up
    assert len(connected.replies_to(e1["id"])) == 1
    # The remote keeps no messageIds: it got the same message again, as docs/a2a.md says.
    assert {x["message_id"] for x in r.calls()} == {e1["id"]}
    assert len(r.calls()) >= 1


def test_a_remote_that_asks_for_a_token(
    connected: Connected, remotes: list[Remote], tmp_path: Path
) -> None:
    r = remote(remotes, connected.tmp, token="remote-secret")
    token_file = tmp_path / "remote.token"
    token_file.write_text("remote-secret\n")
    token_file.chmod(0o600)
    a2a_worker(connected, r.url, "--a2a-token-file", str(token_file))
    e1 = connected.say("alice", "@bot with a token")
    assert connected.wait_reply(e1["id"])["text"].startswith("remote: ")


def test_without_the_token_the_reply_says_the_remote_refused(
    connected: Connected, remotes: list[Remote]
) -> None:
    r = remote(remotes, connected.tmp, token="remote-secret")
    a2a_worker(connected, r.url)
    e1 = connected.say("alice", "@bot no token")
    text = connected.wait_reply(e1["id"])["text"]
    assert "401" in text, text
    assert r.calls() == []
