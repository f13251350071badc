"""Claude Code, Codex and Gemini CLI through `agentpost connect`, each the real package from
npm (tests/interop/node) talking to a fake of its vendor's model API that the test scripts
(scripts.py): one reply per wake-up, permissions by kind both ways, an attachment read under
the default policy, `/stop`, and kill -9 of the Worker."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from agentrun import Room, agent_env
from fakes import FAKES
from fakes.base import FakeServer
from fakes.gemini import FakeGemini
from scripts import delay_for, script_for

from hubproc import poll

COMMANDS = {"claude": "claude", "codex": "codex", "gemini": "gemini"}  # connect --agent NAME


@dataclass
class Agent:
    vendor: str
    model: FakeServer
    env: dict[str, str]
    command: str

    def tool_outputs(self) -> list[str]:
        """Every tool result the agent sent back to its model, in order."""
        from fakes import anthropic, gemini, openai

        convert = {"claude": anthropic.conversation, "codex": openai.conversation,
                   "gemini": gemini.conversation}[self.vendor]
        out: list[str] = []
        for rec in self.model.conversations():
            if isinstance(rec.body, dict):
                out += convert(rec.body).tool_results
        return out


@pytest.fixture(params=["claude", "codex", "gemini"])
def agent(request: pytest.FixtureRequest, room: Room, agents_bin: Path) -> Iterator[Agent]:
    vendor = request.param
    fake = FAKES[vendor](script_for(vendor), delay_for).start()
    env = agent_env(vendor, fake.url, room.tmp / "home", agents_bin)
    yield Agent(vendor, fake, env, COMMANDS[vendor])
    fake.stop()


def test_each_wake_up_gets_one_reply(room: Room, agent: Agent) -> None:
    room.worker(agent.command, agent.env)
    first = room.say("alice", "@bot fake:say first answer")
    second = room.say("alice", "@bot fake:say second answer")
    assert room.wait_reply(first["id"])["text"] == "first answer"
    assert room.wait_reply(second["id"])["text"] == "second answer"
    third = room.say("alice", "@bot fake:say third answer")
    room.wait_reply(third["id"])
    # The third reply came after the first two were acknowledged: still one each.
    for ev in (first, second, third):
        assert len(room.replies_to(ev["id"])) == 1


# A command that writes a file: no agent counts it as read-only (Claude Code runs `printf`
# alone unasked, even in its asking mode).
RUN = "printf '{0}-marker-%d' 42 | tee {1}"


def test_a_permission_is_refused_by_default(room: Room, agent: Agent) -> None:
    """Whatever mode the adapter opens its sessions in (claude-agent-acp `auto`, codex-acp
    `agent`), the Worker puts them in the one where the agent asks: refused, nothing runs."""
    w = room.worker(agent.command, agent.env)
    marker = room.tmp / "ran-refused.txt"
    ev = room.say("alice", "@bot fake:run " + RUN.format("refused", marker))
    reply = room.wait_reply(ev["id"])
    assert "refused-marker-42" not in reply["text"]
    assert not any("refused-marker-42" in out for out in agent.tool_outputs())
    assert "permission" in reply["text"].lower(), reply["text"]
    assert not marker.exists()
    if agent.vendor != "gemini":  # Gemini CLI opens sessions asking, and names no mode
        assert re.search(r"session \S+ in mode (default|read-only)\b", w.log()), w.log()


def test_a_write_is_refused_by_default(room: Room, agent: Agent) -> None:
    room.worker(agent.command, agent.env)
    target = room.tmp / "repo-bot" / "written.txt"
    ev = room.say("alice", f"@bot fake:write {target} not-allowed")
    room.wait_reply(ev["id"])
    assert not target.exists()


def test_a_permission_is_allowed_by_kind(room: Room, agent: Agent) -> None:
    room.worker(agent.command, agent.env, "--allow-permission", "allow_once")
    marker = room.tmp / "ran-allowed.txt"
    ev = room.say("alice", "@bot fake:run " + RUN.format("allowed", marker))
    reply = room.wait_reply(ev["id"])
    assert "allowed-marker-42" in reply["text"], reply["text"]
    assert marker.read_text() == "allowed-marker-42"
    # The text before and after the tool call are two paragraphs, not glued together.
    assert reply["text"].startswith("Let me do that.\n\nfake-model: tool done"), reply["text"]


def test_a_write_is_allowed_by_kind(room: Room, agent: Agent) -> None:
    room.worker(agent.command, agent.env, "--allow-permission", "allow_once")
    target = room.tmp / "repo-bot" / "written.txt"
    ev = room.say("alice", f"@bot fake:write {target} allowed-text")
    reply = room.wait_reply(ev["id"])
    assert target.read_text() == "allowed-text", reply["text"]


def test_an_attachment_is_read_under_the_default_policy(room: Room, agent: Agent) -> None:
    room.worker(agent.command, agent.env)
    ev = room.upload("alice", "brief.txt", b"the brief says: ship on friday\n",
                     "@bot fake:read-attachment")
    reply = room.wait_reply(ev["id"])
    assert "ship on friday" in reply["text"], reply["text"]


def test_a_file_named_in_the_reply_is_sent_back(room: Room, agent: Agent) -> None:
    repo = room.tmp / "repo-bot"
    repo.mkdir(exist_ok=True)
    (repo / "report.txt").write_text("quarterly numbers: all green\n")
    room.worker(agent.command, agent.env)
    uri = (repo / "report.txt").as_uri()
    ev = room.say("alice", f"@bot fake:say Here is the report: {uri}")
    reply = room.wait_reply(ev["id"])
    assert reply["text"].startswith("Here is the report: file://")
    # The file goes first (docs/connect.md "The reply"), as a media event of bot's.
    media = [e for e in room.events() if e["type"] == "media" and e["seq"] < reply["seq"]]
    assert [(m["sender"], m["attachments"][0]["name"]) for m in media] == [("bot", "report.txt")]
    # Nothing from outside the egress roots: the agent naming /etc/passwd sends nothing.
    ev2 = room.say("alice", "@bot fake:say and this one: file:///etc/passwd")
    room.wait_reply(ev2["id"])
    notice = poll(lambda: [e for e in room.events() if e["seq"] > ev2["seq"]
                           and "Not sent" in e["text"] and "passwd" in e["text"]], timeout=30)
    assert notice[0]["sender"] == "bot"
    assert [e for e in room.events() if e["type"] == "media"] == media


def test_stop_cancels_a_running_turn(room: Room, agent: Agent) -> None:
    w = room.worker(agent.command, agent.env)
    ev = room.say("alice", "@bot fake:slow 60")
    poll(lambda: "Turn for" in w.log() or len(agent.model.conversations()) > 0, timeout=60)
    poll(lambda: any("fake:slow" in str(r.body) for r in agent.model.conversations()), timeout=60)
    room.say("alice", "/stop")
    reply = room.wait_reply(ev["id"], timeout=60)
    assert "slow answer" not in reply["text"]
    assert "cancel" in reply["text"].lower(), reply["text"]


def test_kill_9_of_the_worker_ends_the_agent_and_the_restart_answers_once(
    room: Room, agent: Agent
) -> None:
    w = room.worker(agent.command, agent.env)
    ev = room.say("alice", "@bot fake:slow 4")
    poll(lambda: any("fake:slow" in str(r.body) for r in agent.model.conversations()), timeout=60)
    group = int(re.findall(r"agent started: .*process group (\d+)", w.log())[-1])
    w.kill()

    def group_gone() -> bool:
        try:
            os.killpg(group, 0)
        except ProcessLookupError:
            return True
        return False

    poll(group_gone, timeout=20)
    assert room.replies_to(ev["id"]) == []
    w.start()
    reply = room.wait_reply(ev["id"])
    assert reply["text"] == "fake-model: slow answer"
    later = room.say("alice", "@bot fake:say after the restart")
    room.wait_reply(later["id"])
    assert len(room.replies_to(ev["id"])) == 1


def test_a_session_the_agent_refuses_is_said_in_the_room(room: Room, agents_bin: Path) -> None:
    """Gemini CLI without a key refuses session/new (-32000 auth_required): the room is told
    it was a session failure, not that the agent could not be started."""
    fake = FakeGemini(script_for("gemini"), delay_for).start()
    try:
        env = agent_env("gemini", fake.url, room.tmp / "home", agents_bin)
        env.pop("GEMINI_API_KEY")
        w = room.worker("gemini", env)
        ev = room.say("alice", "@bot fake:say hello")
        reply = room.wait_reply(ev["id"])
        assert "refused to open a session" in reply["text"], reply["text"]
        assert "auth_required" in reply["text"]
        assert "could not be started" not in reply["text"]
        assert "refused to open a session" in w.log()
    finally:
        fake.stop()


def _codex(room: Room, agents_bin: Path, config: Callable[[str], str]) -> tuple[FakeServer, dict[str, str]]:
    """Codex against the fake OpenAI, its config.toml changed by `config`."""
    fake = FAKES["codex"](script_for("codex"), delay_for).start()
    env = agent_env("codex", fake.url, room.tmp / "home", agents_bin)
    toml = Path(env["CODEX_HOME"]) / "config.toml"
    toml.write_text(config(toml.read_text()))
    return fake, env


def test_codex_warnings_are_notices_never_reply_text(room: Room, agents_bin: Path) -> None:
    """A gateway's model Codex has no metadata for: codex-acp warns ("Model metadata for …
    not found"); the Worker declares it takes notices, logs the warning, and the reply is the
    model's words alone."""
    fake, env = _codex(room, agents_bin, lambda t: t.replace('model = "gpt-5.5"', 'model = "gw-model-x"'))
    try:
        w = room.worker("codex", env)
        ev = room.say("alice", "@bot fake:say just the answer")
        assert room.wait_reply(ev["id"])["text"] == "just the answer"
        assert re.search(r"agent notice in \S+: warning — Model metadata for .gw-model-x. not found",
                         w.log()), w.log()
    finally:
        fake.stop()


def test_codex_with_only_openai_api_key_authenticates(room: Room, agents_bin: Path) -> None:
    """A provider that needs an OpenAI login: codex-acp answers session/new auth_required;
    the Worker calls authenticate with its `api-key` method (OPENAI_API_KEY is set) and
    says so in one line."""
    fake, env = _codex(room, agents_bin, lambda t: t.replace(
        'env_key = "OPENAI_API_KEY"\n', "requires_openai_auth = true\n"))
    try:
        w = room.worker("codex", env)
        ev = room.say("alice", "@bot fake:say signed in")
        assert room.wait_reply(ev["id"])["text"] == "signed in"
        said = [line for line in w.log().splitlines() if "requires authentication" in line]
        assert len(said) == 1 and "authenticated with api-key (OPENAI_API_KEY set)" in said[0], w.log()
        assert env["OPENAI_API_KEY"] not in w.log()
    finally:
        fake.stop()


def test_claude_speaking_only_acp_v2_stops_the_worker_at_start(room: Room, agents_bin: Path) -> None:
    fake = FAKES["claude"](script_for("claude"), delay_for).start()
    try:
        env = agent_env("claude", fake.url, room.tmp / "home", agents_bin)
        w = room.worker("claude", {**env, "CLAUDE_AGENT_ACP_PROTOCOL": "v2"}, start=False)
        w.start(wait_agent=False)
        assert w.proc is not None
        assert w.proc.wait(timeout=60) == 1
        stops = [line for line in w.log().splitlines() if "the Worker stops" in line]
        assert len(stops) == 1, w.log()
        assert "refuses ACP protocol version 1" in stops[0]
        assert "set CLAUDE_AGENT_ACP_PROTOCOL=v1 (or unset it)" in stops[0]
        assert "Unsupported protocol version" in w.log()  # the agent's own message
    finally:
        fake.stop()
