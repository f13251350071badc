"""Durations said to people: `365 days`, not `31536000 s` (docs/cli.md "The contract",
rule 1). The hub keeps and answers seconds on the wire; its messages use these words."""

from __future__ import annotations

_UNITS = (("day", 86400), ("hour", 3600), ("minute", 60))


def in_words(seconds: int) -> str:
    """`seconds` in the largest unit that divides it: 31536000 → "365 days", 86400 →
    "1 day", 5400 → "90 minutes", 45 → "45 seconds"; 0 is "for ever" (retention's 0)."""
    if seconds == 0:
        return "for ever"
    for unit, size in _UNITS:
        if seconds % size == 0:
            n = seconds // size
            return f"{n} {unit}{'' if n == 1 else 's'}"
    return f"{seconds} second{'' if seconds == 1 else 's'}"
