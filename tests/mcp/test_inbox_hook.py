"""`agentpost inbox hook session-start|prompt|stop`: a new wake-up is printed once, prompts
ask the hub at most every 30 s, the hub cursor moves only with --ack, and the hook always
exits 0 (docs/mcp.md)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hubproc import Setup


class Hook:
    def __init__(self, setup: Setup, state: Path, member: str = "bot") -> None:
        self.setup = setup
        self.state = state
        self.token: str | None = setup.tokens[member]
        self.hub = setup.hub.url
        self.env: dict[str, str] = {}

    def __call__(
        self,
        event: str,
        *extra: str,
        now: float | None = None,
        given: dict[str, object] | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """Run the hook; `given` is the JSON the client writes on its stdin (none: run by
        hand, stdin empty)."""
        env = {**os.environ, "AGENTPOST_HUB": self.hub, "XDG_STATE_HOME": str(self.state)}
        env.pop("AGENTPOST_TOKEN", None)
        env.pop("AGENTPOST_HOME", None)  # the state goes to XDG_STATE_HOME unless a test says
        env.update(self.env)
        if self.token is not None:
            env["AGENTPOST_TOKEN"] = self.token
        if now is not None:
            env["AGENTPOST_HOOK_NOW"] = str(now)
        p = subprocess.run(
            [sys.executable, "-m", "agentpost", "inbox", "hook", event, *extra],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
            **({"input": json.dumps(given)} if given is not None else {"stdin": subprocess.DEVNULL}),  # type: ignore[arg-type]
        )
        assert p.returncode == 0, p.stderr
        return p


@pytest.fixture
def hook(setup: Setup, tmp_path: Path) -> Hook:
    return Hook(setup, tmp_path / "state")


def _post(setup: Setup, sender: str, text: str) -> dict:
    with setup.hub.client(setup.tokens[sender]) as c:
        r = c.post(f"/v1/rooms/{setup.room}/messages", json={"text": text})
        assert r.status_code == 201, r.text
        ev: dict = r.json()["event"]
        return ev


def _hub_cursor(setup: Setup, member: str = "bot") -> int:
    with setup.hub.client(setup.tokens[member]) as c:
        return int(c.get("/v1/me").json()["inbox_cursor"])


def test_session_start_prints_a_new_wake_up_once_in_a_short_block(
    setup: Setup, hook: Hook
) -> None:
    ev = _post(setup, "alice", "@bot please look at the build\nit failed twice")
    shown = hook("session-start").stdout
    assert shown.startswith("agentpost inbox: 1 new wake-up for bot\n")
    assert f"- in general from alice (event {ev['id']}, cursor 1):\n" in shown
    assert "    @bot please look at the build\n" in shown
    assert "it failed twice" not in shown  # the first line only
    assert "delegation" not in shown  # a person asked; nothing waits for a receipt
    assert hook("session-start").stdout == "", "a wake-up is shown once"
    assert hook("prompt", now=time.time() + 3600).stdout == ""
    assert _hub_cursor(setup) == 0, "without --ack the hub cursor stays"


def test_silent_when_nothing_is_new(hook: Hook) -> None:
    for event in ("session-start", "prompt", "stop"):
        p = hook(event)
        assert (p.stdout, p.stderr) == ("", "")


def test_prompt_asks_the_hub_at_most_every_30_seconds(setup: Setup, hook: Hook) -> None:
    t0 = time.time()
    _post(setup, "alice", "@bot one")
    assert "@bot one" in hook("prompt", now=t0).stdout
    _post(setup, "alice", "@bot two")
    assert hook("prompt", now=t0 + 10).stdout == "", "throttled: the hub is not asked"
    assert hook("prompt", now=t0 + 29).stdout == ""
    later = hook("prompt", now=t0 + 31).stdout
    assert "@bot two" in later and "@bot one" not in later
    _post(setup, "alice", "@bot three")
    assert "@bot three" in hook("session-start", now=t0 + 32).stdout, "session-start: no throttle"


def test_ack_marks_what_was_shown_as_seen_on_the_hub(setup: Setup, hook: Hook) -> None:
    _post(setup, "alice", "@bot a")
    _post(setup, "alice", "@bot b")
    shown = hook("session-start", "--ack").stdout
    assert "2 new wake-ups for bot" in shown
    assert _hub_cursor(setup) == 2
    with setup.hub.client(setup.tokens["bot"]) as c:
        assert c.get("/v1/inbox").json()["items"] == []


def test_a_wake_up_acked_elsewhere_is_not_shown_again(setup: Setup, hook: Hook) -> None:
    _post(setup, "alice", "@bot handled by the MCP tools")
    with setup.hub.client(setup.tokens["bot"]) as c:
        assert c.post("/v1/inbox/ack", json={"cursor": 1}).status_code == 200
    assert hook("session-start").stdout == ""


def test_a_delegation_waiting_for_a_receipt_says_so(setup: Setup, hook: Hook) -> None:
    e1 = _post(setup, "helper", "@bot draft the notes")
    shown = hook("session-start").stdout
    assert "- in general from helper" in shown
    assert "delegation: waits for your receipt" in shown
    with setup.hub.client(setup.tokens["bot"]) as c:
        r = c.post(
            f"/v1/rooms/{setup.room}/messages",
            json={"text": "done", "in_reply_to": e1["id"], "reply_kind": "result"},
        )
        assert r.json()["event"]["route"] == "receipt"


def test_stop_prints_claude_codes_block_decision_with_the_wake_ups(
    setup: Setup, hook: Hook
) -> None:
    _post(setup, "alice", "@bot one more thing")
    out = hook("stop").stdout
    decision = json.loads(out)
    assert decision["decision"] == "block"
    assert "@bot one more thing" in decision["reason"]
    assert hook("stop").stdout == "", "shown once: a stop hook never loops"


def test_the_hook_always_exits_0_and_says_why_on_stderr(
    setup: Setup, hook: Hook, tmp_path: Path
) -> None:
    _post(setup, "alice", "@bot hi")
    hook.token = "ap_bad"
    bad = hook("session-start")
    assert bad.stdout == "" and "unauthorized" in bad.stderr
    hook.token = None
    none = hook("prompt")
    assert none.stdout == "" and "AGENTPOST_TOKEN is not set" in none.stderr
    missing = hook("prompt", "--token-file", str(tmp_path / "nope.token"))
    assert missing.stdout == "" and "cannot read the token file" in missing.stderr
    hook.token = setup.tokens["bot"]
    unknown = hook("bogus")
    assert unknown.stdout == "" and "unknown event" in unknown.stderr
    setup.hub.kill()
    down = hook("session-start")
    assert down.stdout == "" and "hub_unreachable" in down.stderr
    t0 = time.time() + 100  # past the pause that the failed session-start began
    assert "hub_unreachable" in hook("prompt", now=t0).stderr
    quiet = hook("prompt", now=t0 + 5)
    assert (quiet.stdout, quiet.stderr) == ("", ""), "a hub that is down is not asked each prompt"


def test_the_state_file_is_private_and_holds_no_token(setup: Setup, hook: Hook) -> None:
    _post(setup, "alice", "@bot x")
    hook("session-start")
    files = list((hook.state / "agentpost" / "inbox-hook").glob("*.json"))
    assert len(files) == 1
    assert stat.S_IMODE(files[0].stat().st_mode) == 0o600
    assert setup.tokens["bot"] not in files[0].read_text()
    assert setup.tokens["bot"] not in files[0].name


def test_the_state_is_kept_under_agentpost_home_when_it_is_set(
    setup: Setup, hook: Hook, tmp_path: Path
) -> None:
    _post(setup, "alice", "@bot x")
    home = tmp_path / "home"
    hook.env = {"AGENTPOST_HOME": str(home)}
    assert "@bot x" in hook("session-start").stdout
    assert len(list((home / "inbox-hook").glob("*.json"))) == 1
    assert not (hook.state / "agentpost").exists(), "nothing outside AGENTPOST_HOME"
    again = hook("session-start")
    assert "@bot x" not in again.stdout, "the state under AGENTPOST_HOME is the one read"


def test_the_token_can_come_from_a_file_instead_of_the_environment(
    setup: Setup, hook: Hook, tmp_path: Path
) -> None:
    _post(setup, "alice", "@bot from a file")
    token_file = tmp_path / "bot.token"
    token_file.write_text(setup.tokens["bot"] + "\n")
    token_file.chmod(0o600)
    hook.token = None
    assert "@bot from a file" in hook("session-start", "--token-file", str(token_file)).stdout
    token_file.chmod(0o640)
    refused = hook("prompt", "--token-file", str(token_file))
    assert refused.returncode == 0 and refused.stdout == ""
    assert refused.stderr.splitlines() == [
        f"agentpost inbox hook: the token file {token_file} is open to other users "
        f"(mode 0640); run `chmod 600 {token_file}`"
    ]


def _claude(event: str, session: str, **more: object) -> dict[str, object]:
    """What Claude Code writes on a hook's stdin."""
    return {
        "session_id": session,
        "transcript_path": f"/tmp/{session}.jsonl",
        "cwd": "/tmp",
        "hook_event_name": event,
        **more,
    }


def _context(p: subprocess.CompletedProcess[str], event: str) -> str:
    out = json.loads(p.stdout)
    assert out["hookSpecificOutput"]["hookEventName"] == event
    text: str = out["hookSpecificOutput"]["additionalContext"]
    return text


def test_every_new_session_is_shown_what_is_unacknowledged_and_each_session_once(
    setup: Setup, hook: Hook
) -> None:
    _post(setup, "alice", "@bot look at the build")
    a = hook("session-start", given=_claude("SessionStart", "A", source="startup"))
    assert "@bot look at the build" in _context(a, "SessionStart")
    # session A ends without handling it; within A a prompt is silent
    assert hook("prompt", now=time.time() + 3600, given=_claude("UserPromptSubmit", "A", prompt="hi")).stdout == ""
    b = hook("session-start", given=_claude("SessionStart", "B", source="startup"))
    assert "@bot look at the build" in _context(b, "SessionStart"), "a new session is shown it again"
    assert hook("session-start", given=_claude("SessionStart", "B", source="resume")).stdout == ""
    # a cleared or compacted context is shown it again: the model no longer has it
    again = hook("session-start", given=_claude("SessionStart", "B", source="compact"))
    assert "@bot look at the build" in _context(again, "SessionStart")
    with setup.hub.client(setup.tokens["bot"]) as c:
        assert c.post("/v1/inbox/ack", json={"cursor": 1}).status_code == 200
    assert hook("session-start", given=_claude("SessionStart", "C", source="startup")).stdout == ""
    _post(setup, "alice", "@bot one more")
    prompt = hook("prompt", given=_claude("UserPromptSubmit", "A", prompt="next"))
    shown = _context(prompt, "UserPromptSubmit")
    assert "@bot one more" in shown and "look at the build" not in shown


def test_stop_blocks_once_per_wake_up_and_never_loops(setup: Setup, hook: Hook) -> None:
    _post(setup, "alice", "@bot before you stop")
    first = json.loads(hook("stop", given=_claude("Stop", "S", stop_hook_active=False)).stdout)
    assert first["decision"] == "block" and "@bot before you stop" in first["reason"]
    assert hook("stop", given=_claude("Stop", "S", stop_hook_active=True)).stdout == ""
    # a continued stop whose state is gone (pruned, unreadable) does not block either
    assert hook("stop", given=_claude("Stop", "T", stop_hook_active=True)).stdout == ""
    assert "@bot before you stop" in json.loads(hook("stop", given=_claude("Stop", "U")).stdout)["reason"]


def test_gemini_clis_hook_events_get_its_json(setup: Setup, hook: Hook) -> None:
    _post(setup, "alice", "@bot from gemini")
    gemini = {"session_id": "G", "cwd": "/tmp", "timestamp": "2026-01-01T00:00:00Z"}
    start = hook("session-start", given={**gemini, "hook_event_name": "SessionStart", "source": "startup"})
    assert "@bot from gemini" in _context(start, "SessionStart")
    _post(setup, "alice", "@bot second")
    prompt = hook("prompt", now=time.time() + 3600, given={**gemini, "hook_event_name": "BeforeAgent", "prompt": "x"})
    assert "@bot second" in _context(prompt, "BeforeAgent")
    _post(setup, "alice", "@bot third")
    stop = json.loads(hook("stop", given={**gemini, "hook_event_name": "AfterAgent", "stop_hook_active": False}).stdout)
    assert stop["decision"] == "deny" and "@bot third" in stop["reason"]


def test_stdin_that_is_not_json_is_run_by_hand(setup: Setup, hook: Hook) -> None:
    _post(setup, "alice", "@bot plain")
    p = subprocess.run(
        [sys.executable, "-m", "agentpost", "inbox", "hook", "session-start"],
        input="not json", capture_output=True, text=True, timeout=60,
        env={**os.environ, "AGENTPOST_HUB": hook.hub, "XDG_STATE_HOME": str(hook.state),
             "AGENTPOST_TOKEN": setup.tokens["bot"]},
    )
    assert p.stdout.startswith("agentpost inbox: 1 new wake-up for bot\n"), p.stderr


def test_old_session_files_are_pruned_and_new_ones_are_private(setup: Setup, hook: Hook) -> None:
    _post(setup, "alice", "@bot x")
    hook("session-start", given=_claude("SessionStart", "old", source="startup"))
    folder = hook.state / "agentpost" / "inbox-hook"
    [old] = list(folder.glob("*.json"))
    assert stat.S_IMODE(old.stat().st_mode) == 0o600
    assert "old" not in old.name and setup.tokens["bot"] not in old.read_text()
    eight_days = time.time() - 8 * 24 * 3600
    for f in (old, old.with_suffix(".lock")):
        os.utime(f, (eight_days, eight_days))
    hook("session-start", given=_claude("SessionStart", "new", source="startup"))
    files = list(folder.glob("*.json"))
    assert len(files) == 1 and files[0] != old, "the unused session's state is removed"
    assert [p.name for p in folder.glob("*.lock")] == [files[0].with_suffix(".lock").name]
