"""`agentpost connect --agent "python3 examples/echo_agent.py" --repo ./work`: a relative
script is read where `connect` was started, not in `--repo` where the agent runs; a script
that is not there is a start error naming it; the Worker's log names the file as it is."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from clirun import ROOT, agentpost
from hubproc import HubProcess, Setup, poll, with_default_signals


def test_a_relative_script_is_read_where_connect_started(
    shared_setup: Setup, tmp_path: Path
) -> None:
    hub: HubProcess = shared_setup.hub
    work = tmp_path / "work"
    work.mkdir()
    log = tmp_path / "worker.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTPOST_")}
    env |= {"AGENTPOST_HUB": hub.url, "AGENTPOST_TOKEN": shared_setup.tokens["bot"]}
    argv = [sys.executable, "-m", "agentpost", "connect"]
    argv += ["--agent", f"{sys.executable} examples/echo_agent.py", "--repo", str(work)]
    argv += ["--workspace-dir", str(tmp_path / "worker"), "--log", str(log)]
    worker = subprocess.Popen(
        with_default_signals(argv), cwd=ROOT, env=env, stderr=subprocess.DEVNULL
    )
    try:
        with hub.client(shared_setup.tokens["alice"]) as c:
            r = c.post(f"/v1/rooms/{shared_setup.room}/messages", json={"text": "@bot hello"})
            assert r.status_code == 201, r.text

            def answered() -> bool:
                events = c.get(f"/v1/rooms/{shared_setup.room}/events").json()["events"]
                return any(e["sender"] == "bot" and "hello" in e["text"] for e in events)

            poll(answered, timeout=60, interval=0.2)
        said = log.read_text()
        script = str(ROOT / "examples" / "echo_agent.py")
        assert script in said and "[redacted]" not in said, said
        assert "agent stopped" not in said, said
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(30)


def test_a_script_that_is_not_there_is_a_start_error_naming_it(
    shared_setup: Setup, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    p = agentpost(
        shared_setup.hub,
        "connect",
        "--agent",
        "python3 examples/no_such_agent.py",
        "--repo",
        str(work),
        "--workspace-dir",
        str(tmp_path / "worker"),
        token=shared_setup.tokens["bot"],
        check=False,
    )
    assert p.returncode == 1, p.stderr
    lines = p.stderr.splitlines()
    assert len(lines) == 1 and "examples/no_such_agent.py" in lines[0], p.stderr
    assert lines[0].startswith("error agent_not_ready: "), p.stderr
    assert str(ROOT) in lines[0] and "agent started" not in p.stderr


def test_a_repo_that_is_not_there_is_named_with_what_repo_means(tmp_path: Path) -> None:
    # A command line that does not parse, as every command says it (docs/cli.md "The
    # contract", rules 1 and 4): the path given, and what --repo names.
    missing = tmp_path / "work"
    p = agentpost(
        None, "connect", "--agent", "true", "--repo", str(missing), token="ap_x", check=False
    )
    assert p.returncode == 2, p.stderr
    (line,) = p.stderr.splitlines()
    assert line.startswith(f"error usage_error: --repo {missing}: no such directory"), line
    assert "--repo names the agent's working directory" in line
    missing.write_text("")
    p = agentpost(
        None, "connect", "--agent", "true", "--repo", str(missing), token="ap_x", check=False
    )
    (line,) = p.stderr.splitlines()
    assert f"--repo {missing} is a file" in line and "working directory" in line


def test_every_start_problem_is_one_error_line_with_its_code(tmp_path: Path) -> None:
    p = agentpost(None, "connect", "--repo", str(tmp_path), "--turn-timeout", "0", check=False)
    assert p.returncode == 1, p.stderr  # a missing token is no command line problem: exit 1
    assert p.stderr.splitlines() == [
        "error not_configured: a token is required (--token-file, AGENTPOST_TOKEN_FILE or "
        "AGENTPOST_TOKEN)",
        "error usage_error: --agent is required (or --a2a URL for a remote A2A agent)",
        "error usage_error: --turn-timeout must be positive",
    ]
