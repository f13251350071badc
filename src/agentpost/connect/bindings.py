"""Bindings (docs/connect.md "Bindings"): `<worker_id>.<random>`, one per Session key, each
with its own export folder `<workspace>/export/<binding>/` (0700, made before use).
Owner bindings live 30 days after the room's last Turn, collaborator ones 24 h after that
sender's last Turn; each Turn renews the same binding and folder. A binding is a
destination, never a credential. Each Turn also gets its own `turn`, a nonce the prompt's
`_meta["ag2/delivery"]` carries and a request echoes: it says whose Turn the work is for
(docs/deliver.md "Whose work it is").
"""

from __future__ import annotations

import os
import secrets
import time
from pathlib import Path
from typing import Any

from agentpost.connect.ledger import Binding, IssuedTurn, Ledger
from agentpost.connect.sessions import SessionKey

OWNER_SECONDS = 30 * 86400
COLLABORATOR_SECONDS = 86400
DELIVERY_META = "ag2/delivery"  # where the Session's and each prompt's `_meta` carry it


def export_root(workspace: Path) -> Path:
    return workspace / "export"


def ensure_folder(path: Path) -> None:
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(path, 0o700)


def renew(
    ledger: Ledger, workspace: Path, worker_id: str, key: SessionKey, trigger: str
) -> tuple[Binding, IssuedTurn]:
    """The Session key's binding, renewed for a Turn now (made the first time), and the
    Turn's `turn` (128 random bits), honoured as long as the binding is from now; both are
    on disk when this returns, before the prompt that carries them goes out."""
    life = OWNER_SECONDS if key.owner_tier else COLLABORATOR_SECONDS
    found = ledger.binding_for(key.room, key.who)
    if found is None:
        name = f"{worker_id}.{secrets.token_hex(8)}"
        folder = export_root(workspace) / name
        found = Binding(name, key.room, key.who, key.owner_tier, str(folder), 0.0)
    ensure_folder(Path(found.export_dir))
    found.expires_at = time.time() + life
    turn = IssuedTurn(secrets.token_hex(16), found.binding, trigger, found.expires_at)
    ledger.save_binding(found, turn)
    return found, turn


def session_meta(b: Binding) -> dict[str, Any]:
    """`_meta["ag2/delivery"]` of the Session (`session/new`)."""
    expires = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(b.expires_at))
    return {DELIVERY_META: {"binding": b.binding, "export_dir": b.export_dir, "expires_at": expires}}


def turn_meta(b: Binding, turn: IssuedTurn) -> dict[str, Any]:
    """`_meta["ag2/delivery"]` of the Turn's prompt: the Session's, and the Turn's `turn`."""
    meta = session_meta(b)
    meta[DELIVERY_META]["turn"] = turn.turn
    return meta
