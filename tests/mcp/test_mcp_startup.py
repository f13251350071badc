"""`agentpost mcp` answers a client's opening before the `mcp` SDK is loaded (mcp/front.py,
docs/mcp.md "Startup"): `initialize` and `tools/list` come at once, equal to what the SDK
itself answers, and the SDK takes the session over for everything else."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.shared.message import SessionMessage
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from agentpost.client import AsyncHubClient
from agentpost.egress import EgressRoots
from agentpost.mcp import front
from agentpost.mcp.server import build_server
from agentpost.mcp.tools import Toolbox

# What the front must not load: each costs a large part of a second on a small machine.
HEAVY = ("mcp", "mcp_types", "pydantic", "httpx", "anyio", "agentpost.client", "agentpost.hub")
DEADLINE_S = 3.0  # the goal is 300 ms (bench/mcp_startup.py); this only catches a relapse


def _init(rid: int | str, version: str = "2025-06-18") -> dict[str, Any]:
    params = {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    return {"jsonrpc": "2.0", "id": rid, "method": "initialize", "params": params}


def test_the_mcp_command_loads_neither_the_sdk_nor_the_hub_client_to_start() -> None:
    probe = (
        "import sys\nfrom agentpost.cli.app import main\nimport agentpost.cli.mcp\n"
        "from agentpost.mcp import front\n"
        "front.Front().answer(sys.argv[1].encode())\n"
        "print(' '.join(sorted(sys.modules)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe, json.dumps(_init(1))],
        capture_output=True, text=True, check=True,
    ).stdout.split()
    eager = sorted(m for m in out if any(m == h or m.startswith(h + ".") for h in HEAVY))
    assert eager == [], f"agentpost mcp imports these before a tool needs them: {eager}"


def test_initialize_and_tools_list_are_answered_within_the_deadline() -> None:
    env = {**os.environ, "AGENTPOST_HUB": "http://127.0.0.1:9", "AGENTPOST_TOKEN": "ap_x"}
    t0 = time.monotonic()
    p = subprocess.Popen(
        [sys.executable, "-m", "agentpost", "mcp"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
    )
    assert p.stdin is not None and p.stdout is not None
    try:
        lines = [_init(1), {"jsonrpc": "2.0", "method": "notifications/initialized"}]
        lines.append({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        p.stdin.write(b"".join(json.dumps(m).encode() + b"\n" for m in lines))
        p.stdin.flush()
        first = json.loads(p.stdout.readline())
        answered_in = time.monotonic() - t0
        assert first["id"] == 1 and first["result"]["serverInfo"]["name"] == "agentpost"
        listed = json.loads(p.stdout.readline())
        assert listed["id"] == 2 and len(listed["result"]["tools"]) >= 12
        assert answered_in < DEADLINE_S, f"initialize took {answered_in:.2f} s"
        # the SDK takes over for the rest: a call is answered by it
        bad = {"name": "read_room", "arguments": {"room": "general", "limit": 0}}
        p.stdin.write(json.dumps({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": bad}).encode() + b"\n")
        p.stdin.flush()
        called = json.loads(p.stdout.readline())
        assert called["id"] == 3 and called["result"]["isError"] is True
        assert called["result"]["structuredContent"]["error"]["code"] == "invalid_arguments"
        p.stdin.close()
        assert p.stdout.read() == b"", "the replayed initialize's answer never reaches the client"
        assert p.wait(timeout=30) == 0
    finally:
        p.kill()
        p.wait()
        p.stdin.close()
        p.stdout.close()


async def _sdk_answers(frames: list[dict[str, Any]], answers: int) -> list[dict[str, Any]]:
    toolbox = Toolbox(AsyncHubClient("http://127.0.0.1:9", ""), EgressRoots([], 1))
    server = build_server(toolbox)
    to_server, server_in = anyio.create_memory_object_stream[Any](16)
    server_out, from_server = anyio.create_memory_object_stream[Any](16)
    out: list[dict[str, Any]] = []

    async def client() -> None:
        async with to_server, from_server:
            for m in frames:
                msg = types.jsonrpc_message_adapter.validate_python(m, by_name=False)
                await to_server.send(SessionMessage(msg))
            for _ in range(answers):
                got = await from_server.receive()
                out.append(json.loads(got.message.model_dump_json(by_alias=True, exclude_unset=True)))

    async with anyio.create_task_group() as tg:
        tg.start_soon(client)
        await server.run(server_in, server_out, server.create_initialization_options())
    return out


@pytest.mark.parametrize("version", [*HANDSHAKE_PROTOCOL_VERSIONS, "1999-01-01"])
def test_the_fronts_answers_equal_the_sdks(version: str) -> None:
    assert front.HANDSHAKE_VERSIONS == HANDSHAKE_PROTOCOL_VERSIONS
    frames = [
        _init(1, version),
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 3, "method": "ping"},
    ]
    sdk = anyio.run(_sdk_answers, frames, 3)
    f = front.Front()
    mine = [f.answer(json.dumps(m).encode()) for m in frames]
    assert mine[1] is None, "a notification is held for the SDK, not answered"
    assert [json.loads(m) for m in mine if m is not None] == sdk


@pytest.mark.parametrize(
    "frame",
    [
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},  # before initialize
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 5}},
        {"jsonrpc": "2.0", "id": 1, "method": "server/discover",
         "params": {"_meta": {front.MODERN_META_KEY: "2026-07-28"}}},
        {"jsonrpc": "2.0", "id": True, "method": "initialize"},
        {"jsonrpc": "1.0", "id": 1, "method": "initialize"},
    ],
)
def test_the_front_leaves_anything_unusual_to_the_sdk(frame: dict[str, Any]) -> None:
    assert front.Front().answer(json.dumps(frame).encode()) is None
    assert front.Front().answer(b"{not json") is None
