"""Fixtures for the real agents: their npm packages (tests/interop/node), one SQLite hub per
module, a workspace per test, and the fake model servers the agents are pointed at."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from agentrun import Room, node_bin
from fakes import FAKES
from fakes.anthropic import FakeAnthropic
from fakes.base import FakeServer
from mcpclients import McpClient, configure
from scripts import delay_for, script_for

from hubproc import HubProcess, fresh_workspace, make_setup


@pytest.fixture(scope="session")
def agents_bin() -> Path:
    return node_bin()


@pytest.fixture(scope="module")
def interop_hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HubProcess]:
    """The agent side is under test here, not the engines: one SQLite hub per module."""
    hub = HubProcess(tmp_path_factory.mktemp("interop-hub"), env={"AGENTPOST_SSE_KEEPALIVE": "0.5"})
    hub.start()
    yield hub
    hub.stop()


@pytest.fixture
def room(interop_hub: HubProcess, tmp_path: Path) -> Iterator[Room]:
    s = make_setup(interop_hub, ["alice", "carol"], ["bot", "helper"], workspace=fresh_workspace())
    r = Room(s, tmp_path)
    yield r
    for w in r.workers:
        w.stop()


def _serve(fake: FakeServer) -> Iterator[FakeServer]:
    fake.start()
    yield fake
    fake.stop()


@pytest.fixture
def anthropic() -> Iterator[FakeServer]:
    yield from _serve(FakeAnthropic(script_for("claude"), delay_for))


@pytest.fixture(params=["claude", "codex", "gemini"])
def mcp_client(request: pytest.FixtureRequest, room: Room, agents_bin: Path) -> Iterator[McpClient]:
    """Each real MCP client, configured as docs/mcp.md says to run `agentpost mcp` as bot,
    and pointed at a fake of its vendor's model API."""
    vendor = request.param
    fake = FAKES[vendor](script_for(vendor), delay_for).start()
    yield configure(vendor, fake, room.tmp / "home", agents_bin, room.hub.url, room.token_file())
    fake.stop()
