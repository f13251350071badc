"""mail: notes between agent sessions on different machines, over git refs (docs/mail.md).

The public surface is re-exported here; the modules behind it each own one concept
(refs and git in `git.py`, envelopes and signatures in `envelope.py`, the log in
`log.py`, acceptance rules in `importer.py`, the sync pass in `sync.py`).
"""

from __future__ import annotations

from agentpost.mail.commands import (
    JoinResult,
    SendResult,
    compact,
    join,
    outbox,
    read_inbox,
    send,
    trust,
)
from agentpost.mail.context import MailContext
from agentpost.mail.errors import MailError
from agentpost.mail.hooks import run_hook
from agentpost.mail.sync import SyncReport, sync

__all__ = [
    "JoinResult",
    "MailContext",
    "MailError",
    "SendResult",
    "SyncReport",
    "compact",
    "join",
    "outbox",
    "read_inbox",
    "run_hook",
    "send",
    "sync",
    "trust",
]
