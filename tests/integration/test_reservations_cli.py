"""`agentpost reserve`, `reservations`, `release` and the git guard (docs/reservations.md),
through the real command against a real hub, on both engines: a conflict names the holder
and exits 1 (docs/cli.md's error contract), the project defaults to the repository's
normalized origin, and in a real git repository the guard refuses a commit touching a path
another member holds exclusively and lets a non-conflicting one through."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from clirun import agentpost, json_error
from hubproc import Setup

PROJECT = "github.com/acme/app"


def _repo(tmp: Path) -> Path:
    repo = tmp / "app"
    repo.mkdir()
    for args in (
        ["init", "-q", "-b", "main"],
        ["config", "user.email", "bot@example.org"],
        ["config", "user.name", "bot"],
        ["remote", "add", "origin", "git@github.com:acme/app.git"],
    ):
        subprocess.run(["git", *args], cwd=repo, check=True)
    return repo


def _env(s: Setup, name: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTPOST_")}
    env.update(AGENTPOST_HUB=s.hub.url, AGENTPOST_TOKEN=s.tokens[name])
    return env


def _run(repo: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=repo, env=env, capture_output=True, text=True, timeout=60)


def test_reserve_conflict_list_and_release(shared_setup: Setup) -> None:
    s = shared_setup
    hub, bot, helper = s.hub, s.tokens["bot"], s.tokens["helper"]
    p = agentpost(
        hub, "reserve", "src/auth/**", "--project", PROJECT, "--reason", "auth refactor",
        "--ttl", "30m", "--room", "general", "--json", token=bot,
    )  # fmt: skip
    got = json.loads(p.stdout)["reservation"]
    assert got["holder"] == "bot" and got["exclusive"] is True and got["room"] == s.room
    p = agentpost(hub, "reserve", "src/auth/x.py", "--project", PROJECT, token=helper, check=False)
    assert p.returncode == 1
    assert "bot" in p.stderr and "auth refactor" in p.stderr and "src/auth/**" in p.stderr
    p = agentpost(
        hub, "reserve", "src/auth/x.py", "--project", PROJECT, "--json", token=helper, check=False
    )
    err = json_error(p)
    assert err["code"] == "reservation_conflict" and err["conflicts"][0]["holder"] == "bot"
    listed = agentpost(hub, "reservations", "--project", PROJECT, "--json", token=helper)
    assert [r["id"] for r in json.loads(listed.stdout)["reservations"]] == [got["id"]]
    plain = agentpost(hub, "reservations", token=helper).stdout
    assert "bot" in plain and "src/auth/**" in plain
    p = agentpost(hub, "release", got["id"], "--json", token=helper, check=False)
    assert p.returncode == 1 and json_error(p)["code"] == "forbidden"
    p = agentpost(hub, "release", got["id"], token=bot)
    assert "released" in p.stdout
    p = agentpost(hub, "reserve", "x", "--ttl", "9d", "--project", PROJECT, token=bot, check=False)
    assert p.returncode == 2


def test_the_guard_refuses_a_conflicting_commit_and_lets_others_through(
    shared_setup: Setup, tmp_path: Path
) -> None:
    s = shared_setup
    repo = _repo(tmp_path)
    mine = _env(s, "bot")
    # The project is the origin's normalized URL: the helper's reservation in another
    # clone, named by URL, is the same project.
    p = _run(repo, _env(s, "helper"), sys.executable, "-m", "agentpost", "reserve", "api/**",
             "--reason", "new endpoint", "--json")  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["reservation"]["project"] == PROJECT
    p = _run(repo, mine, sys.executable, "-m", "agentpost", "guard", "install")
    assert p.returncode == 0, p.stderr
    hook = (repo / ".git" / "hooks" / "pre-commit").read_text()
    assert s.tokens["bot"] not in hook and "AGENTPOST_GUARD=off" in hook
    (repo / "api").mkdir()
    (repo / "api" / "v1.py").write_text("x = 1\n")
    (repo / "README.md").write_text("hello\n")
    _run(repo, mine, "git", "add", "README.md")
    p = _run(repo, mine, "git", "commit", "-q", "-m", "readme")
    assert p.returncode == 0, p.stderr + p.stdout
    _run(repo, mine, "git", "add", "api/v1.py")
    p = _run(repo, mine, "git", "commit", "-q", "-m", "api")
    assert p.returncode != 0
    assert "helper" in p.stderr and "new endpoint" in p.stderr and "api/v1.py" in p.stderr
    assert _run(repo, mine, "git", "log", "--format=%s").stdout.split() == ["readme"]
    # An edit hook asks the same about a path as it has it: absolute, or from a subfolder.
    check = [sys.executable, "-m", "agentpost", "guard", "check"]
    p = _run(repo, mine, *check, str(repo / "api" / "v1.py"))
    assert p.returncode == 1 and "helper" in p.stderr
    p = subprocess.run([*check, "v1.py"], cwd=repo / "api", env=mine, capture_output=True,
                       text=True, timeout=60)  # fmt: skip
    assert p.returncode == 1 and "api/v1.py" in p.stderr
    assert _run(repo, mine, *check, "README.md").returncode == 0
    # The documented override lets this one through.
    p = _run(repo, {**mine, "AGENTPOST_GUARD": "off"}, "git", "commit", "-q", "-m", "api")
    assert p.returncode == 0, p.stderr


def test_the_guard_refuses_a_push_whose_commits_touch_a_held_path(
    shared_setup: Setup, tmp_path: Path
) -> None:
    s = shared_setup
    repo = _repo(tmp_path)
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    mine = _env(s, "bot")
    _run(repo, mine, "git", "remote", "set-url", "--push", "origin", str(remote))
    p = _run(repo, mine, sys.executable, "-m", "agentpost", "guard", "install")
    assert p.returncode == 0, p.stderr
    (repo / "a.txt").write_text("a\n")
    _run(repo, mine, "git", "add", "a.txt")
    assert _run(repo, mine, "git", "commit", "-qm", "a").returncode == 0
    assert _run(repo, mine, "git", "push", "-q", "origin", "main").returncode == 0
    # helper reserves lib/ after bot committed to it with the guard off.
    (repo / "lib").mkdir()
    (repo / "lib" / "x.py").write_text("x\n")
    _run(repo, mine, "git", "add", "lib/x.py")
    p = _run(repo, {**mine, "AGENTPOST_GUARD": "off"}, "git", "commit", "-qm", "lib")
    assert p.returncode == 0, p.stderr
    p = _run(repo, _env(s, "helper"), sys.executable, "-m", "agentpost", "reserve", "lib/**",
             "--reason", "lib rewrite")  # fmt: skip
    assert p.returncode == 0, p.stderr
    p = _run(repo, mine, "git", "push", "-q", "origin", "main")
    assert p.returncode != 0 and "helper" in p.stderr and "lib/x.py" in p.stderr


def test_an_agents_edit_hook_is_told_before_it_writes_a_held_file(
    shared_setup: Setup, tmp_path: Path
) -> None:
    """`agentpost guard edit-hook` as Claude Code's (and Codex's) PreToolUse hook and Gemini
    CLI's BeforeTool hook: the event on stdin names the file the tool is about to write; a
    file another member holds exclusively gets the client's deny decision naming holder and
    reason, any other file nothing (the edit goes on)."""
    s = shared_setup
    repo = _repo(tmp_path)
    agentpost(
        s.hub, "reserve", "src/auth/**", "--project", PROJECT, "--reason", "auth refactor",
        token=s.tokens["bot"],
    )  # fmt: skip
    env = _env(s, "helper")

    def hook(event: dict[str, object]) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "agentpost", "guard", "edit-hook"],
            input=json.dumps(event), cwd=tmp_path, env=env,
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip

    claude = {
        "hook_event_name": "PreToolUse",
        "tool_name": "Edit",
        "cwd": str(repo),
        "tool_input": {"file_path": str(repo / "src/auth/login.py"), "old_string": "a"},
    }
    p = hook(claude)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)["hookSpecificOutput"]
    assert out["hookEventName"] == "PreToolUse" and out["permissionDecision"] == "deny"
    assert "bot" in out["permissionDecisionReason"]
    assert "auth refactor" in out["permissionDecisionReason"]
    gemini = {
        "hook_event_name": "BeforeTool",
        "tool_name": "write_file",
        "cwd": str(repo),
        "tool_input": {"file_path": "src/auth/token.py", "content": "x"},  # relative to cwd
    }
    p = hook(gemini)
    denied = json.loads(p.stdout)
    assert denied["decision"] == "deny" and "bot" in denied["reason"]
    free = {**claude, "tool_input": {"file_path": str(repo / "README.md")}}
    p = hook(free)
    assert (p.returncode, p.stdout) == (0, "")
    # The holder itself is never stopped, nor a tool that writes no file.
    assert hook({**claude, "tool_input": {"command": "ls"}}).stdout == ""
    p = subprocess.run(
        [sys.executable, "-m", "agentpost", "guard", "edit-hook"],
        input=json.dumps(claude), cwd=tmp_path, env=_env(s, "bot"),
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert (p.returncode, p.stdout) == (0, "")
