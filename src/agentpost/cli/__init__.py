"""The `agentpost` command: a thin layer over client, hub, mail (README.md).

Each command group lives in its own module and is registered here.
"""

from __future__ import annotations

from agentpost.cli.app import main

__all__ = ["main"]
