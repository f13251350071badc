"""The per-room sensitive-data filter (docs/delegation.md): refuse a message or caption that
carries a well-known secret. Off by default; a refusal spends the key (422
`command_rejected`, reason `sensitive_data`), since sending it again won't change it. The
patterns live in `core/secrets.py` (the Worker redacts its agent's stderr with them too)."""

from __future__ import annotations

from agentpost.core.secrets import PATTERNS, findings

__all__ = ["PATTERNS", "findings"]
