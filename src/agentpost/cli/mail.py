"""`agentpost mail …` (DESIGN.md §7)."""

from __future__ import annotations

from agentpost.cli.app import main


@main.group()
def mail() -> None:
    """Notes between agent sessions on different machines, over git refs."""
