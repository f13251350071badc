"""Declaring `_ag2/deliver` (docs/deliver.md "Declaring", "Ledger"): the worker id under the
never-re-mint rule, and whether delivery is enabled — the hub's capabilities probe, the
ledger, a hub that keeps keys 24 h — with the one reason it is not.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentpost.connect import bindings
from agentpost.connect.ledger import Ledger, LedgerUnavailable
from agentpost.connect.workspace import LEDGER, Workspace, WorkspaceError

log = logging.getLogger("agentpost.connect.worker")

# Said when delivery is enabled: what the Worker checked (the log line at start, and status).
ENABLED_BECAUSE = (
    "the hub's keys echo and live 24 h, the ledger is locked, the workspace is never egress"
)


@dataclass
class Identity:
    """The worker id, the ledger when one exists, and why delivery cannot be enabled
    because of them (None when nothing stands in the way)."""

    worker_id: str
    ledger: Ledger | None
    problem: str | None


def worker_identity(workspace: Workspace) -> Identity:
    """Read (or on a first start mint) the worker id; never mint over an existing ledger."""
    ledger_path = workspace.root / LEDGER
    problem: str | None
    try:
        found = workspace.read_worker_id()
    except WorkspaceError as exc:
        found, problem = None, str(exc)
    else:
        problem = None if found else "worker-id is missing"
    if found is None and not ledger_path.exists():
        return Identity(workspace.worker_id(), None, None)  # first start: minted once
    ledger = Ledger(ledger_path)
    try:
        ledger.open()
        stored = ledger.worker_ids()
    except LedgerUnavailable as exc:
        stored, problem = set(), problem or f"the ledger cannot be read ({exc})"
    if found is not None:
        if stored - {found}:
            return Identity(found, ledger, "worker-id disagrees with the ledger's entries")
        return Identity(found, ledger, problem)
    if len(stored) != 1:
        raise WorkspaceError(
            f"{problem} and the ledger names {len(stored)} worker ids; "
            "restore worker-id or move deliveries.sqlite3 away"
        )
    # Turns keep their keys under the ledger's one worker id; delivery stays off.
    return Identity(
        next(iter(stored)), ledger, f"{problem}; a new one is never minted over an existing ledger"
    )


MIN_KEY_TTL = 86400


def key_ttl(caps: dict[str, Any]) -> int:
    """The hub's Idempotency-Key lifetime in seconds; the design's 24 h when the hub does
    not say (a value of the wrong shape is taken as "does not say", and logged)."""
    idem = caps.get("room_post_idempotency")
    ttl = idem.get("ttl_seconds") if isinstance(idem, dict) else None
    if isinstance(ttl, int) and not isinstance(ttl, bool) and ttl > 0:
        return ttl
    log.warning("the hub reports no usable key lifetime (%r); assuming %d s", ttl, MIN_KEY_TTL)
    return MIN_KEY_TTL


def probe_reason(caps: dict[str, Any]) -> str | None:
    """Why the hub's capabilities do not allow delivery, or None."""
    idem = caps.get("room_post_idempotency")
    if not isinstance(idem, dict) or idem.get("status_header") != "Idempotency-Status":
        return "the hub does not report room_post_idempotency"
    ttl = idem.get("ttl_seconds")
    # Deliveries are retried for 23 h under the same keys (docs/architecture.md#deferred-delivery):
    # a hub that forgets keys sooner could post a part twice, so delivery is not declared there.
    if not isinstance(ttl, int) or ttl < MIN_KEY_TTL:
        return f"the hub keeps Idempotency-Keys {ttl} s; deliveries need {MIN_KEY_TTL} s (24 h)"
    return None


def ledger_reason(ledger: Ledger, workspace: Path) -> str | None:
    """Open the ledger, make the export folder, apply retention; why it fails, or None."""
    try:
        ledger.open()
        bindings.ensure_folder(bindings.export_root(workspace))
        ledger.prune(time.time())
    except (LedgerUnavailable, OSError) as exc:
        return f"the ledger cannot be used ({exc})"
    return None
