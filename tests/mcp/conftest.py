"""Fixtures for the MCP tests: `agentpost mcp` processes acting as a member of the `setup`
workspace (tests/conftest.py) on a real hub; helpers in mcphelpers.py."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from mcphelpers import McpServer  # noqa: E402

from hubproc import Setup  # noqa: E402


@pytest.fixture
def mcp_server(setup: Setup, tmp_path: Path) -> Callable[..., McpServer]:
    def make(member: str | None = "bot", **kw: Any) -> McpServer:
        token = setup.tokens[member] if member is not None else None
        return McpServer(setup.hub.url, token, tmp_path / "mcp-stderr.log", **kw)

    return make
