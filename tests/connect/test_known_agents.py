"""`connect --agent claude|codex|gemini` (docs/connect.md "Real agents"): a known name is
expanded to its ACP adapter, and each missing need is named in one line, exit 1, before
anything starts. The adapters here are shell-script stand-ins on a PATH of the test's
own: these tests are about the check and the expansion, not the real agents
(tests/interop runs those)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from agentpost.connect import known_agents
from conftest import ECHO_AGENT, Connected
from hubproc import HubProcess


@pytest.fixture
def hub(shared_hub: HubProcess) -> HubProcess:
    return shared_hub


NODE_SCRIPT = "#!/usr/bin/env node\nconsole.log('never run here')\n"


def _bin(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(exist_ok=True)
    path = folder / name
    path.write_text(text)
    path.chmod(0o755)
    return path


def _fake_node(folder: Path, wants: str = "") -> Path:
    """A `node` that runs the example agent when its script is given `wants` (an adapter's
    flag, e.g. --acp) or anything when `wants` is empty: the expansion is what is tested."""
    check = f'[ "$2" = "{wants}" ] || {{ echo "fake node: wanted {wants}, got $*" >&2; exit 9; }}\n'
    return _bin(
        folder,
        "node",
        "#!/bin/sh\n" + (check if wants else "") + f'exec "{sys.executable}" "{ECHO_AGENT}"\n',
    )


def _refused(c: Connected, agent: str, env: dict[str, str]) -> list[str]:
    """Run `connect --agent AGENT` expecting a refusal at start; its `error CODE:` lines."""
    w = c.worker(agent, start=False, env=env)
    proc = subprocess.run(
        [sys.executable, "-m", "agentpost", "connect", *w.args],
        env={k: v for k, v in w.env.items() if k != "IS_SANDBOX"} | env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1, proc.stderr
    assert "agent started" not in proc.stderr
    assert not (c.tmp / "ws-bot").exists()  # nothing started: no folder, no lease, no agent
    return [line for line in proc.stderr.splitlines() if line.startswith("error ")]


def test_claude_not_installed_says_how_to_install_it(connected: Connected, tmp_path: Path) -> None:
    lines = _refused(connected, "claude", {"PATH": str(tmp_path / "empty")})
    assert lines == [
        "error agent_not_ready: claude-agent-acp (--agent claude) is not on PATH: install it with `npm install "
        "-g @agentclientprotocol/claude-agent-acp`, or set AGENTPOST_CLAUDE_ACP to its path"
    ]


def test_an_override_that_is_no_executable_is_named(connected: Connected, tmp_path: Path) -> None:
    lines = _refused(connected, "gemini", {"AGENTPOST_GEMINI": str(tmp_path / "nothing")})
    assert lines == [f"error agent_not_ready: AGENTPOST_GEMINI={tmp_path / 'nothing'} is not an executable file"]


def test_no_node_is_named_in_one_line(connected: Connected, tmp_path: Path) -> None:
    fake = tmp_path / "bin"
    _bin(fake, "gemini", NODE_SCRIPT)
    lines = _refused(connected, "gemini", {"PATH": str(fake)})
    assert len(lines) == 1
    assert lines[0].startswith("error agent_not_ready: node not found: gemini (--agent gemini) is a Node.js")


@pytest.mark.skipif(os.geteuid() != 0, reason="the check is about running as root")
def test_claude_as_root_without_is_sandbox_is_refused(connected: Connected, tmp_path: Path) -> None:
    fake = tmp_path / "bin"
    _bin(fake, "claude-agent-acp", NODE_SCRIPT)
    _fake_node(fake)
    lines = _refused(connected, "claude", {"PATH": f"{fake}:/usr/bin:/bin"})
    assert len(lines) == 1
    assert "set IS_SANDBOX=1" in lines[0]


def test_codex_without_bwrap_and_with_tmpdir_under_tmp_names_both(
    connected: Connected, tmp_path: Path
) -> None:
    fake = tmp_path / "bin"
    _bin(fake, "codex-acp", NODE_SCRIPT)
    _fake_node(fake)
    lines = _refused(connected, "codex", {"PATH": str(fake), "TMPDIR": "/tmp/"})
    assert len(lines) == 2
    assert lines[0].startswith("error agent_not_ready: bwrap not found on PATH: Codex's sandbox needs bubblewrap")
    assert lines[1].startswith("error agent_not_ready: TMPDIR=/tmp/: Codex's sandbox needs a TMPDIR of its own, not /tmp itself")


def test_codex_with_tmpdir_unset_is_told_to_set_one(connected: Connected, tmp_path: Path) -> None:
    fake = tmp_path / "bin"
    _bin(fake, "codex-acp", NODE_SCRIPT)
    _fake_node(fake)
    _bin(fake, "bwrap", "#!/bin/sh\nexit 0\n")
    env = {"PATH": str(fake)}
    w = connected.worker("codex", start=False)
    proc = subprocess.run(
        [sys.executable, "-m", "agentpost", "connect", *w.args],
        env={k: v for k, v in w.env.items() if k != "TMPDIR"} | env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error ")]
    assert errors == [
        "error agent_not_ready: TMPDIR is not set: Codex's sandbox needs a TMPDIR of its own, not /tmp itself "
        "(e.g. mkdir -p ~/.cache/tmp && export TMPDIR=~/.cache/tmp)"
    ]


def test_gemini_is_expanded_to_gemini_acp_and_answers(connected: Connected, tmp_path: Path) -> None:
    fake = tmp_path / "bin"
    _bin(fake, "gemini", NODE_SCRIPT)
    _fake_node(fake, wants="--acp")  # the stand-in runs only when given --acp
    w = connected.worker("gemini", env={"PATH": f"{fake}:/usr/bin:/bin"})
    assert f"({fake / 'gemini'} --acp)" in w.log()  # "agent started: … (argv)"
    e1 = connected.say("alice", "@bot hello")
    assert connected.wait_reply(e1["id"])["text"] == "echo: @bot hello"


def test_claude_with_an_override_path_and_is_sandbox_starts(
    connected: Connected, tmp_path: Path
) -> None:
    fake = tmp_path / "bin"
    adapter = _bin(tmp_path / "elsewhere", "my-claude-acp", NODE_SCRIPT)
    _fake_node(fake)
    w = connected.worker(
        "claude",
        env={"PATH": f"{fake}:/usr/bin:/bin", "IS_SANDBOX": "1", "AGENTPOST_CLAUDE_ACP": str(adapter)},
    )
    assert f"({adapter})" in w.log()
    e1 = connected.say("alice", "@bot hi")
    assert connected.wait_reply(e1["id"])["text"] == "echo: @bot hi"


def test_any_other_value_is_a_command_as_before(tmp_path: Path) -> None:
    found = known_agents.resolve(f"{sys.executable} -u x.py", {"PATH": ""}, 1000)
    assert found.known is None and found.problems == []
    assert found.argv == [sys.executable, "-u", "x.py"]
    missing = known_agents.resolve("claude-code --acp", {"PATH": str(tmp_path)}, 1000)
    assert missing.problems == ["agent command not found: claude-code"]


def test_claude_as_another_user_needs_no_is_sandbox(tmp_path: Path) -> None:
    adapter = _bin(tmp_path, "claude-agent-acp", "#!/bin/sh\n")  # no node needed for this one
    env = {"PATH": str(tmp_path)}
    assert known_agents.resolve("claude", env, 1000).problems == []
    assert "set IS_SANDBOX=1" in known_agents.resolve("claude", env, 0).problems[0]
    assert known_agents.resolve("claude", env | {"IS_SANDBOX": "1"}, 0).problems == []
    assert known_agents.resolve("claude", env, 1000).argv == [str(adapter)]


def test_the_maintained_adapters_are_named_and_a_legacy_one_still_runs(tmp_path: Path) -> None:
    """Both adapters moved to @agentclientprotocol (mid-2026); one found under the old
    @zed-industries name runs, with a note that it is no longer maintained."""
    assert known_agents.KNOWN["claude"].npm == "@agentclientprotocol/claude-agent-acp"
    assert known_agents.KNOWN["codex"].npm == "@agentclientprotocol/codex-acp"
    (tmp_path / "@zed-industries").mkdir()
    legacy = _bin(tmp_path / "@zed-industries" / "codex-acp", "codex-acp", "#!/bin/sh\n")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "codex-acp").symlink_to(legacy)
    env = {"PATH": str(bin_dir), "TMPDIR": str(tmp_path), "AGENTPOST_CODEX_ACP": ""}
    found = known_agents.resolve("codex", env, 1000)
    assert found.argv == [str(bin_dir / "codex-acp")]
    assert [n for n in found.notes if "@zed-industries/codex-acp, no longer maintained" in n]
    assert "npm install -g @agentclientprotocol/codex-acp" in found.notes[0]
    (tmp_path / "@agentclientprotocol").mkdir()
    current = _bin(tmp_path / "@agentclientprotocol" / "x", "claude-agent-acp", "#!/bin/sh\n")
    assert known_agents.resolve("claude", {"PATH": str(current.parent)}, 1000).notes == []
