"""The repository a command or an MCP server runs in (docs/reservations.md "Projects"): its
project name, the normalized `origin` URL (core/projects.py). Shared by the CLI and `mcp`."""

from __future__ import annotations

import subprocess
from pathlib import Path

from agentpost.core import projects


def origin_project(cwd: Path | None = None) -> str | None:
    """The project of the git repository at `cwd` (default: the working dir), or None when
    there is none or it has no `origin` remote."""
    try:
        done = subprocess.run(
            ["git", "remote", "get-url", "origin"],
            cwd=cwd,
            capture_output=True,
            text=True,
            check=False,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    url = done.stdout.strip() if done.returncode == 0 else ""
    return projects.from_remote(url) if url else None
