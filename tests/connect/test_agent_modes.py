"""The agent's own modes never bypass the Worker (docs/architecture.md#agent-modes, docs/connect.md "Modes,
notices, authentication"): a session the adapter opens in a mode where it decides alone is
put in the one where it asks, before the first prompt, unless `--agent-mode` chose
otherwise; an adapter's warnings are logged, never reply text; `authenticate` is called
with the method the environment provides; an agent that refuses ACP v1 stops the Worker
at start in one line. Real Worker, real hub, a hand-written agent (agents/mode_agent.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import AGENTS, Connected, agent_cmd
from hubproc import HubProcess

MODE_AGENT = agent_cmd(AGENTS / "mode_agent.py")


@pytest.fixture
def hub(shared_hub: HubProcess) -> HubProcess:
    return shared_hub


def _calls(path: Path) -> list[str]:
    return [json.loads(line)["method"] for line in path.read_text().splitlines()]


def test_a_session_opened_in_auto_is_put_in_the_asking_mode_before_its_first_prompt(
    connected: Connected,
) -> None:
    calls = connected.tmp / "calls.jsonl"
    w = connected.worker(MODE_AGENT, env={"MODE_AGENT_CALLS": str(calls)})
    e1 = connected.say("alice", "@bot hello")
    assert connected.wait_reply(e1["id"])["text"].startswith("mode: default")
    e2 = connected.say("alice", "@bot again")
    assert connected.wait_reply(e2["id"])["text"].startswith("mode: default")
    methods = _calls(calls)
    assert methods.index("session/set_mode") < methods.index("session/prompt")
    assert methods.count("session/set_mode") == 1  # the session stayed in it
    assert "in mode default (the agent opened it in auto), in which it asks" in w.log()


def test_the_agents_own_mode_chosen_with_agent_mode_is_kept(connected: Connected) -> None:
    calls = connected.tmp / "calls.jsonl"
    w = connected.worker(MODE_AGENT, "--agent-mode", "auto", env={"MODE_AGENT_CALLS": str(calls)})
    e1 = connected.say("alice", "@bot hello")
    assert connected.wait_reply(e1["id"])["text"].startswith("mode: auto")
    assert "session/set_mode" not in _calls(calls)
    assert "in mode auto, chosen with --agent-mode" in w.log()


def test_an_agent_with_no_asking_mode_gets_no_prompt(connected: Connected) -> None:
    calls = connected.tmp / "calls.jsonl"
    connected.worker(MODE_AGENT, env={"MODE_AGENT_CALLS": str(calls),
                                      "MODE_AGENT_MODES": "auto,acceptEdits"})
    e1 = connected.say("alice", "@bot hello")
    reply = connected.wait_reply(e1["id"])
    assert "acts without asking" in reply["text"] and "--agent-mode" in reply["text"]
    assert "session/prompt" not in _calls(calls)


def test_an_adapters_warnings_are_logged_never_reply_text(connected: Connected) -> None:
    """A `notice`, and Claude Code's warning sent as text to clients without notices, stay
    out of the reply; the text of another message starts a paragraph of its own."""
    w = connected.worker(MODE_AGENT)
    e1 = connected.say("alice", "@bot hello")
    assert connected.wait_reply(e1["id"])["text"] == "mode: default\n\nsecond message"
    assert "agent notice in" in w.log() and "Model metadata for `gw-model` not found" in w.log()
    assert "We're changing auto mode" in w.log()
    init = [line for line in w.log().splitlines() if "notices" in line]
    assert init == [] or all("error" not in line.lower() for line in init)


def test_the_worker_declares_it_takes_notices(connected: Connected) -> None:
    calls = connected.tmp / "calls.jsonl"
    connected.worker(MODE_AGENT, env={"MODE_AGENT_CALLS": str(calls)})
    first = json.loads(calls.read_text().splitlines()[0])
    assert first["method"] == "initialize"
    assert first["params"]["clientCapabilities"]["session"]["notices"] == {}


def test_authenticate_is_called_with_the_method_the_environment_provides(
    connected: Connected,
) -> None:
    calls = connected.tmp / "calls.jsonl"
    w = connected.worker(MODE_AGENT, env={"MODE_AGENT_AUTH": "1", "OPENAI_API_KEY": "sk-test-x",
                                          "MODE_AGENT_CALLS": str(calls)})
    e1 = connected.say("alice", "@bot hello")
    assert connected.wait_reply(e1["id"])["text"].startswith("mode: default")
    said = [line for line in w.log().splitlines() if "requires authentication" in line]
    assert len(said) == 1 and "authenticated with api-key (OPENAI_API_KEY set)" in said[0]
    assert "sk-test-x" not in w.log()
    auth = [json.loads(line) for line in calls.read_text().splitlines()
            if json.loads(line)["method"] == "authenticate"]
    assert [a["params"]["methodId"] for a in auth] == ["api-key"]


def test_no_key_in_the_environment_is_said_and_the_session_fails(connected: Connected) -> None:
    env = {"MODE_AGENT_AUTH": "1", "OPENAI_API_KEY": "", "CODEX_API_KEY": ""}
    w = connected.worker(MODE_AGENT, env=env)
    e1 = connected.say("alice", "@bot hello")
    reply = connected.wait_reply(e1["id"])
    assert "auth_required" in reply["text"] and "refused to open a session" in reply["text"]
    assert "not calling authenticate: none of the agent's auth methods (chat-gpt, api-key)" in w.log()


def test_an_agent_that_refuses_acp_v1_stops_the_worker_at_start_in_one_line(
    connected: Connected,
) -> None:
    w = connected.worker(MODE_AGENT, env={"MODE_AGENT_PROTOCOL": "2"}, wait_agent=False)
    assert w.proc is not None
    assert w.proc.wait(timeout=30) == 1
    stops = [line for line in w.log().splitlines() if "the Worker stops" in line]
    assert len(stops) == 1, w.log()
    assert "refuses ACP protocol version 1" in stops[0]
    assert "Unsupported protocol version" in w.log()  # the agent's own words, in the log
    assert w.log().count("initialize refused by the agent") == 1  # no retry loop
