"""The `agentpost` command: a thin layer over client, hub, mail (DESIGN.md §1).

Each command group lives in its own module and is registered here.
"""

from __future__ import annotations

from agentpost.cli.app import main

__all__ = ["main"]
