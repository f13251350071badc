"""`agentpost connect status`: what the Worker of a workspace folder wrote down (every 2 s
and after each Turn: `Worker.status` in connect/worker.py) read back, and whether it is
running now (it holds `worker.lock` while it lives)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentpost.connect.workspace import Workspace


def read_status(workspace_dir: Path) -> dict[str, Any]:
    ws = Workspace(workspace_dir)
    found = ws.read_status() or {}
    worker_id = found.get("worker_id") or ws.read_worker_id()
    return {
        **found,
        "worker_id": worker_id,
        "running": ws.locked_by_other(),
        "workspace_dir": str(workspace_dir),
    }
