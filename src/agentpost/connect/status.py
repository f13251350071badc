"""`agentpost connect status`: what the Worker of a workspace folder writes down (every 2 s
and after each Turn) and reads back, and whether it is running now (it holds `worker.lock`
while it lives)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentpost.connect import declaring
from agentpost.connect.ledger import LedgerUnavailable
from agentpost.connect.workspace import Workspace

if TYPE_CHECKING:
    from agentpost.connect.worker import Worker


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


def worker_status(w: Worker) -> dict[str, Any]:
    """What a running Worker writes to its status file."""
    conn = w.agent.conn
    return {
        "worker_id": w.worker_id,
        "pid": os.getpid(),
        "member": w.me,
        "owner": w.owner,
        "hub": w.config.hub,
        "agent": {
            "command": w.config.agent_argv,
            "alive": conn is not None and conn.alive(),
            "pid": conn.pid if conn else None,
            "restarts": w.agent.restarts,
            "last_failure": w.agent.last_failure,
            "last_session_error": w.agent.last_session_error,
            "stderr_tail": conn.stderr_tail()[-2000:] if conn else "",
        },
        "sessions": [
            {"room": k.room, "who": k.who, "session_id": s} for k, s in w.agent.sessions.items()
        ],
        "collaborators": sorted(w.admission.collaborators) if w.admission else [],
        "inbox": w.cursor.status(),
        "running": [r.trigger.id for r in w.turns.running.values()] if w.turns else [],
        "turns": list(w.turns.recent) if w.turns else [],
        "delivery": delivery_status(w),
        "presence": dict(w.presence),
        "lease": w.lease.status() if w.lease is not None else None,
        "counters": dict(w.counters),
        "updated_at": time.time(),
    }


def delivery_status(w: Worker) -> dict[str, Any]:
    d = w.deliveries
    enabled = bool(d and d.enabled)
    # Why it is enabled, or the one reason it is not (docs/architecture.md#deferred-delivery).
    reason = declaring.ENABLED_BECAUSE if enabled else (d.reason if d else "not started yet")
    out: dict[str, Any] = {"enabled": enabled, "reason": reason}
    if w.ledger is not None:
        try:
            out["bindings"] = [
                {
                    "binding": b.binding,
                    "room": b.room,
                    "who": b.who,
                    "expires_at": b.expires_at,
                    "revoked": b.revoked,
                    "revoked_reason": b.revoked_reason,
                }
                for b in w.ledger.bindings()
            ]
            out["in_progress"] = [
                {
                    "id": e.id,
                    "binding": e.binding,
                    "room": e.room,
                    "parts": len(e.parts),
                    "posted": len([k for k in e.posted if k != "notice"]),
                    "first_seen": e.first_seen,
                }
                for e in w.ledger.in_progress()
            ]
            out["deliveries"] = w.ledger.recent()
            out["by_outcome"] = w.ledger.counts()
        except LedgerUnavailable as exc:
            out["ledger_error"] = str(exc)
    return out
