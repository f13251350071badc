"""The real `agentpost` CLI against a real hub process: the README walk-through.

One hub per engine serves this module's tests, each in a workspace of its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from hubproc import HubProcess, fresh_workspace


@pytest.fixture
def hub(shared_hub: HubProcess) -> HubProcess:
    return shared_hub


def run(
    hub: HubProcess,
    *args: str,
    token: str | None = None,
    env: dict | None = None,
    check: bool = True,
) -> subprocess.CompletedProcess[str]:
    full_env = {
        **os.environ,
        "AGENTPOST_HUB": hub.url,
        "AGENTPOST_ADMIN_TOKEN": hub.admin_token,
        **(env or {}),
    }
    full_env.pop("AGENTPOST_TOKEN", None)
    if token:
        full_env["AGENTPOST_TOKEN"] = token
    p = subprocess.run(
        [sys.executable, "-m", "agentpost", *args],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=60,
    )
    if check:
        assert p.returncode == 0, p.stderr + p.stdout
    return p


def test_walkthrough_with_the_cli(hub: HubProcess, tmp_path) -> None:  # noqa: ANN001
    ws = fresh_workspace()
    run(hub, "admin", "workspace", "create", ws, "--json")
    alice = json.loads(run(hub, "admin", "member", "add", ws, "alice", "--json").stdout)["token"]
    run(
        hub,
        "admin",
        "member",
        "add",
        ws,
        "bot",
        "--kind",
        "agent",
        "--owner",
        "alice",
        "--json",
    )
    room = json.loads(
        run(
            hub, "room", "create", "general", "-w", ws, "-p", "bot", "--json", token=alice
        ).stdout
    )["room"]
    assert room["participants"] == ["alice", "bot"]
    a = json.loads(
        run(hub, "post", "general", "--text", "hi @bot", "-k", "k1", "--json", token=alice).stdout
    )
    b = json.loads(
        run(hub, "post", room["id"], "--text", "hi @bot", "-k", "k1", "--json", token=alice).stdout
    )
    assert (a["idempotency_status"], b["idempotency_status"]) == ("created", "replayed")
    assert a["event"]["id"] == b["event"]["id"]
    f = tmp_path / "notes.txt"
    f.write_text("file body")
    up = json.loads(
        run(hub, "post", "general", "-f", str(f), "-t", "notes", "--json", token=alice).stdout
    )
    assert up["media"]["name"] == "notes.txt"
    lines = run(hub, "tail", "general", "--json", token=alice).stdout.splitlines()
    assert [json.loads(x)["text"] for x in lines] == ["hi @bot", "notes"]
    human = run(hub, "tail", "general", token=alice).stdout
    assert "hi @bot" in human and "[notes.txt 9B]" in human


def test_cli_errors_are_json_with_exit_codes(hub: HubProcess) -> None:
    ws = fresh_workspace()
    run(hub, "admin", "workspace", "create", ws)
    alice = json.loads(run(hub, "admin", "member", "add", ws, "alice", "--json").stdout)["token"]
    run(hub, "room", "create", "general", "-w", ws, token=alice)
    run(hub, "post", "general", "-t", "one", "-k", "k", token=alice)
    p = run(hub, "post", "general", "-t", "two", "-k", "k", "--json", token=alice, check=False)
    assert p.returncode == 1
    assert json.loads(p.stdout)["error"] == {
        "code": "idempotency_conflict",
        "message": json.loads(p.stdout)["error"]["message"],
        "retryable": False,
    }
    down = run(
        hub,
        "post",
        "general",
        "-t",
        "x",
        "--json",
        token=alice,
        check=False,
        env={"AGENTPOST_HUB": "http://127.0.0.1:9"},
    )
    assert down.returncode == 3
    assert json.loads(down.stdout)["error"]["code"] == "hub_unreachable"
    dup = run(hub, "admin", "workspace", "create", ws, "--json", check=False)
    assert dup.returncode == 1 and json.loads(dup.stdout)["error"]["code"] == "workspace_exists"


def test_capabilities_command(hub: HubProcess) -> None:
    caps = json.loads(run(hub, "capabilities", "--json").stdout)
    assert caps["room_post_idempotency"]["header"] == "Idempotency-Key"
