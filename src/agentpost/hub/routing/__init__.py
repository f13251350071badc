"""Who an event wakes (DESIGN.md §4). For now: the live members it @mentions.

The full rules (modes, router, receipts, gates) replace `targets` here, in this package.
"""

from __future__ import annotations

import re

from agentpost.store import members
from agentpost.store.engine import Db
from agentpost.store.models import Member

_MENTION = re.compile(r"(?<![\w@])@([a-z0-9][a-z0-9_-]{0,62})")


def mentioned_names(text: str) -> list[str]:
    """`@name` mentions in order of first appearance, without duplicates."""
    if "@" not in text:
        return []
    seen: dict[str, None] = {}
    for name in _MENTION.findall(text):
        seen.setdefault(name.rstrip("-_"), None)
    return list(seen)


def targets(db: Db, sender: Member, text: str) -> list[Member]:
    """Live members of the sender's workspace that the text mentions, sender excluded."""
    names = [n for n in mentioned_names(text) if n != sender.name]
    found = members.live_members_named(db, sender.workspace_id, names)
    order = {n: i for i, n in enumerate(names)}
    return sorted(found, key=lambda m: order[m.name])
