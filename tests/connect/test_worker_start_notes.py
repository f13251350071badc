"""What a Worker says when it starts (issue 28): an agent with no owner and no
collaborators is answered by no one's messages, so its Worker says so at once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from conftest import REPO_ROOT, Connected, wait_for


def test_a_worker_for_an_ownerless_agent_says_it_answers_no_one(connected: Connected) -> None:
    ws = connected.setup.workspace
    with connected.hub.client(connected.hub.admin_token) as admin:
        r = admin.post(
            f"/v1/admin/workspaces/{ws}/members", json={"name": "stray", "kind": "agent"}
        )
        assert r.status_code == 201, r.text
        assert r.json()["member"]["owner"] is None
        connected.setup.tokens["stray"] = r.json()["token"]
    lonely = connected.worker(member="stray")
    wait_for(lambda: "answers no one" in lonely.log())
    assert "stray has no owner and no collaborators: this Worker answers no one" in lonely.log()
    assert "--owner PERSON" in lonely.log() and "--collaborator NAME" in lonely.log()

    lonely.stop()
    told = connected.worker(None, "--collaborator", "alice", member="stray", log_name="told")
    assert "answers no one" not in told.log()
    owned = connected.worker(log_name="owned")  # bot, owned by alice
    assert "answers no one" not in owned.log()


def test_log_goes_to_the_file_given_and_status_names_rooms(connected: Connected) -> None:
    log = connected.tmp / "logs" / "bot.log"
    w = connected.worker(None, "--log", str(log), wait_agent=False)
    wait_for(lambda: log.exists() and "agent started" in log.read_text())
    assert f"agentpost connect: logging to {log}" in w.log()  # stderr: that one line only
    assert "agent started" not in w.log()
    assert oct(log.stat().st_mode & 0o777) == "0o600"
    asked = connected.say("alice", "@bot hello")
    connected.wait_reply(asked["id"])
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTPOST_")}
    env |= {"AGENTPOST_HUB": connected.hub.url, "AGENTPOST_TOKEN": connected.setup.tokens["bot"]}
    ws = str(connected.tmp / "ws-bot")
    out = subprocess.run(
        [sys.executable, "-m", "agentpost", "connect", "status", "--workspace-dir", ws],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert f"general ({connected.setup.room})\talice" in out.stdout, out.stdout


def test_status_of_a_folder_no_worker_ran_in_is_an_error(connected: Connected) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTPOST_")}
    missing = str(connected.tmp / "never-ran")
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "agentpost",
            "connect",
            "status",
            "--workspace-dir",
            missing,
            "--json",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert out.returncode == 1
    assert json.loads(out.stdout)["error"]["code"] == "no_worker_folder"


def test_a_worker_started_with_ampersand_in_a_terminal_logs_to_its_folder(
    connected: Connected,
) -> None:
    """A real interactive bash on a pseudo-terminal, as a person types it: the Worker in
    the background says where it logs in one line, and its log lines go there."""
    import pty
    import select
    import shlex

    ws = connected.tmp / "ws-bg"
    repo = connected.tmp / "repo-bg"
    repo.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTPOST_")}
    env |= {
        "AGENTPOST_HUB": connected.hub.url,
        "AGENTPOST_TOKEN": connected.setup.tokens["bot"],
        "PS1": "$ ",
        "HOME": str(connected.tmp),
    }
    agent = f"{sys.executable} {REPO_ROOT / 'examples' / 'echo_agent.py'}"
    command = (
        f"{shlex.quote(sys.executable)} -m agentpost connect --agent {shlex.quote(agent)} "
        f"--repo {shlex.quote(str(repo))} --workspace-dir {shlex.quote(str(ws))} &\n"
    )
    pid, fd = pty.fork()
    if pid == 0:  # the child: an interactive shell with job control on the terminal
        os.execvpe("bash", ["bash", "--norc", "--noprofile", "-i"], env)
    seen = b""

    def read_for(condition: Callable[[], bool], timeout: float = 60) -> None:
        nonlocal seen
        deadline = time.monotonic() + timeout
        while not condition() and time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], 0.2)
            if ready:
                try:
                    seen += os.read(fd, 65536)
                except OSError:
                    break

    try:
        os.write(fd, command.encode())
        log = ws / "worker.log"
        read_for(lambda: log.exists() and "agent started" in log.read_text())
        assert "agent started" in log.read_text(), seen.decode(errors="replace")
        read_for(lambda: b"logging to" in seen, timeout=10)
        shown = seen.decode(errors="replace")
        assert f"agentpost connect: logging to {log}" in shown, shown
        assert "INFO" not in shown, shown  # nothing of the log reached the terminal
        os.write(fd, b"kill %1\n")
        read_for(lambda: not _running(ws), timeout=30)
        assert not _running(ws)
    finally:
        if _running(ws):  # a failed test: the Worker is not left behind
            status = json.loads((ws / "status.json").read_text())
            os.kill(int(status["pid"]), 9)
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        os.close(fd)


def _running(ws: Path) -> bool:
    from agentpost.connect.workspace import Workspace

    return Workspace(ws).locked_by_other()


def test_status_with_a_persons_token_says_to_use_the_agents(connected: Connected) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTPOST_")}
    env |= {"AGENTPOST_HUB": connected.hub.url, "AGENTPOST_TOKEN": connected.setup.tokens["alice"]}
    out = subprocess.run(
        [sys.executable, "-m", "agentpost", "connect", "status"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert out.returncode == 1
    assert "this token is alice's, a human" in out.stderr and "agent's token" in out.stderr
