"""Helpers: `agentpost mcp` driven by the `mcp` SDK's own stdio client against a real hub process.

The `mcp_server` fixture (import it into a test module) gives `make(member)` → `McpServer`; `server.run(scenario)` starts `agentpost mcp` as a
subprocess (a fresh MCP session: a new server session id), runs the async `scenario(client)`
and closes it. `call(client, tool, args)` returns (is_error, structured body).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

import hubproc
from forkserver import ForkServer
from hubproc import Setup

FORKRUN = Path(__file__).resolve().parents[1] / "forkrun.py"

T = TypeVar("T")


@dataclass
class McpServer:
    hub_url: str
    token: str | None
    log: Path
    roots: list[Path] = field(default_factory=list)
    mode: str = "legacy"  # the initialize handshake, as Claude Code, Codex and Gemini CLI open
    extra_args: list[str] = field(default_factory=list)
    cwd: Path | None = None  # the server's working directory (relative paths start there)

    def params(self) -> StdioServerParameters:
        env = {"AGENTPOST_HUB": self.hub_url}
        if "PYTHONPATH" in os.environ:  # the SDK passes a short list only: run the code under test
            env["PYTHONPATH"] = os.environ["PYTHONPATH"]
        if self.token is not None:
            env["AGENTPOST_TOKEN"] = self.token
        args = ["-m", "agentpost", "mcp", *self.extra_args]
        for r in self.roots:
            args += ["--allow-root", str(r)]
        server = ForkServer.get() if hubproc.FORK_SERVER else None
        if server is not None and server.fits(env):
            # Forked by the fork server through a launcher the SDK spawns (tests/forkrun.py):
            # the server process reads and writes the SDK's own pipes.
            args = ["-I", "-S", str(FORKRUN), server.path, *args]
        return StdioServerParameters(command=sys.executable, args=args, env=env, cwd=self.cwd)

    def run(self, scenario: Callable[[Client], Awaitable[T]]) -> T:
        async def main() -> T:
            with open(self.log, "a") as errlog:
                transport = stdio_client(self.params(), errlog=errlog)
                async with Client(transport, mode=self.mode, read_timeout_seconds=90) as client:  # type: ignore[arg-type]
                    return await scenario(client)

        return anyio.run(main)


async def call(client: Client, tool: str, args: dict[str, Any] | None = None) -> tuple[bool, Any]:
    result = await client.call_tool(tool, args or {})
    return result.is_error, result.structured_content


def events_of(
    setup: Setup, room: str | None = None, token_of: str = "alice"
) -> list[dict[str, Any]]:
    with setup.hub.client(setup.tokens[token_of]) as c:
        r = c.get(f"/v1/rooms/{room or setup.room}/events", params={"limit": 1000})
        assert r.status_code == 200, r.text
        events: list[dict[str, Any]] = r.json()["events"]
        return events


@pytest.fixture
def mcp_server(setup: Setup, tmp_path: Path) -> Callable[..., McpServer]:
    def make(member: str | None = "bot", **kw: Any) -> McpServer:
        token = setup.tokens[member] if member is not None else None
        return McpServer(setup.hub.url, token, tmp_path / "mcp-stderr.log", **kw)

    return make
