"""Fixtures: a real hub process on a free loopback port, on a real SQLite file."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from hubproc import HubProcess, Setup, make_setup  # noqa: E402


@pytest.fixture
def hub(tmp_path: Path) -> Iterator[HubProcess]:
    h = HubProcess(tmp_path / "hub", env={"AGENTPOST_SSE_KEEPALIVE": "0.5"}).start()
    try:
        yield h
    finally:
        h.stop()


@pytest.fixture
def setup(hub: HubProcess) -> Setup:
    """Workspace `acme`: humans alice, carol; agents bot, helper; room `general` with all."""
    return make_setup(hub, ["alice", "carol"], ["bot", "helper"])
