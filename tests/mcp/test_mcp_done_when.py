"""docs/mcp.md's worked example, run as written, is issue 12's "Done when": the shell block
with the real CLI, the tool calls with the SDK's stdio client (both protocol eras), the
hooks printing a wake-up once, and the delegator's inbox holding one receipt."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcphelpers import McpServer

from hubproc import HubProcess

DOC = Path(__file__).resolve().parents[2] / "docs" / "mcp.md"
REPO = DOC.parents[1]
PLACEHOLDER = re.compile(r"^[A-Z][A-Z0-9]*$")


def block(name: str) -> str:
    """The fenced block right after `<!-- worked-example:NAME -->`."""
    text = DOC.read_text()
    m = re.search(rf"<!-- worked-example:{name} -->\n```[a-z]*\n(.*?)```", text, re.S)
    assert m, f"docs/mcp.md has no worked-example:{name} block"
    return m.group(1)


def expected(doc_json: str) -> Any:
    """A documented JSON value with `…` for left-out fields and `"ev_…"` for any id."""
    s = re.sub(r'"[a-z]+_…"', '"*"', doc_json)
    s = re.sub(r",\s*…", "", s)
    s = re.sub(r"…\s*,", "", s)
    return json.loads(s)


def match(want: Any, got: Any, binds: dict[str, Any], where: str = "$") -> None:
    if want == "*":
        return
    if isinstance(want, str) and PLACEHOLDER.match(want):
        if want in binds:
            assert got == binds[want], f"{where}: {got!r} is not {want} ({binds[want]!r})"
        else:
            binds[want] = got
        return
    if isinstance(want, dict):
        assert isinstance(got, dict), f"{where}: {got!r} is no object"
        for k, v in want.items():
            assert k in got, f"{where}: no {k!r} in {got!r}"
            match(v, got[k], binds, f"{where}.{k}")
        return
    if isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), f"{where}: {got!r} vs {want!r}"
        for i, (w, g) in enumerate(zip(want, got, strict=True)):
            match(w, g, binds, f"{where}[{i}]")
        return
    assert got == want, f"{where}: {got!r} != {want!r}"


def substituted(args: Any, binds: dict[str, Any]) -> Any:
    if isinstance(args, str):
        return binds.get(args, args)
    if isinstance(args, dict):
        return {k: substituted(v, binds) for k, v in args.items()}
    if isinstance(args, list):
        return [substituted(v, binds) for v in args]
    return args


def bash(hub: HubProcess, script: str, env: dict[str, str] | None = None) -> str:
    full = {
        **os.environ,
        "AGENTPOST_HUB": hub.url,
        "AGENTPOST_ADMIN_TOKEN": hub.admin_token,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        **(env or {}),
    }
    full.pop("AGENTPOST_TOKEN", None)
    p = subprocess.run(
        ["bash", "-c", "set -euo pipefail\n" + script],
        capture_output=True,
        text=True,
        env=full,
        cwd=REPO,
        timeout=120,
    )
    assert p.returncode == 0, p.stderr + p.stdout
    return p.stdout


def hook(hub: HubProcess, token: str, state: Path, event: str) -> str:
    env = {**os.environ, "AGENTPOST_HUB": hub.url, "AGENTPOST_TOKEN": token}
    env["XDG_STATE_HOME"] = str(state)
    p = subprocess.run(
        [sys.executable, "-m", "agentpost", "inbox", "hook", event],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert p.returncode == 0, p.stderr
    return p.stdout


def steps() -> list[tuple[str, dict[str, Any], Any]]:
    lines = [ln for ln in block("mcp").splitlines() if ln.strip()]
    out = []
    for call_line, result_line in zip(lines[::2], lines[1::2], strict=True):
        assert call_line.startswith("→ ") and result_line.startswith("← "), call_line
        tool, _, raw_args = call_line[2:].partition(" ")
        out.append((tool, json.loads(raw_args), expected(result_line[2:])))
    return out


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_the_worked_example_runs_as_written(hub: HubProcess, tmp_path: Path, mode: str) -> None:
    tokens = bash(hub, block("shell") + 'printf "%s\\n" "$TP" "$TW"\n').split()
    tp, tw = tokens[-2:]
    state = tmp_path / "hook-state"

    woken = hook(hub, tw, state, "session-start")
    assert "agentpost inbox: 1 new wake-up for writer" in woken
    assert "- in launch from planner" in woken
    assert "delegation: waits for your receipt" in woken
    assert hook(hub, tw, state, "session-start") == "", "a wake-up is printed once"

    async def scenario(c: Client) -> list[tuple[bool, Any]]:
        listed = {t.name for t in (await c.list_tools()).tools}
        assert {"read_inbox", "reply", "ack_inbox", "post_message"} <= listed
        binds: dict[str, Any] = {}
        results = []
        for tool, args, want in steps():
            res = await c.call_tool(tool, substituted(args, binds))
            assert not res.is_error, (tool, res.structured_content)
            match(want, res.structured_content, binds, tool)
            results.append((res.is_error, res.structured_content))
        return results

    server = McpServer(hub.url, tw, tmp_path / "mcp.log", mode=mode)
    results = server.run(scenario)
    assert results[1][1]["event"] == results[2][1]["event"], "the retry replayed the receipt"

    check = block("check")
    command = "\n".join(ln for ln in check.splitlines() if not ln.startswith("#"))
    documented = next(ln[2:] for ln in check.splitlines() if ln.startswith("# "))
    got = json.loads(bash(hub, command, env={"TP": tp}))
    match(expected(documented), got, {})
    receipts = [i for i in got["items"] if i["event"]["route"] == "receipt"]
    assert len(receipts) == 1, "the receipt woke the planner once"

    planner_hook = hook(hub, tp, state, "session-start")
    assert "agentpost inbox: 2 new wake-ups for planner" in planner_hook
    assert "- in launch from writer" in planner_hook
    assert hook(hub, tp, state, "prompt") == ""
