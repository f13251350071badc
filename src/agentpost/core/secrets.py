"""Well-known secrets in text: the per-room sensitive-data filter refuses a message that
carries one (docs/delegation.md), and the Worker redacts them (and anything token-like)
from an agent's stderr before it reaches a log or `connect status` (docs/connect.md)."""

from __future__ import annotations

import re

PATTERNS: dict[str, re.Pattern[str]] = {
    "private_key": re.compile(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"),
    "aws_access_key": re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    "github_token": re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{40,})\b"),
    "slack_token": re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}\b"),
    "openai_key": re.compile(r"\bsk-(?:proj-)?[A-Za-z0-9_-]{32,}\b"),
    "google_api_key": re.compile(r"\bAIza[0-9A-Za-z_-]{35}\b"),
    "stripe_key": re.compile(r"\b(?:sk|rk)_live_[0-9A-Za-z]{24,}\b"),
    "jwt": re.compile(r"\beyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\b"),
}

# What else looks like a credential in a log line: an agentpost token, a value after a
# key/token/secret/password name, a bearer header, a long run of key-like characters.
_TOKEN_LIKE = (
    re.compile(r"\bap_[A-Za-z0-9_-]{20,}"),
    re.compile(r"(?i)\b(bearer|basic|digest)\s+[A-Za-z0-9._~+/=-]{6,}"),
    re.compile(
        r"(?i)\b([a-z0-9_-]*(?:api[_-]?key|token|secret|passw(?:or)?d|cookie)[a-z0-9_-]*)"
        r"(['\"]?\s*[:=]\s*['\"]?|\s+(?=\S*\d))[^\s\"',;}]{4,}"
    ),
    re.compile(r"[A-Za-z0-9_+/=-]{32,}"),
)
# A password in a URL (`scheme://user:password@host`).
_URL_PASSWORD = re.compile(r"(://[^/\s:@]+:)[^@\s/]+@")
REDACTED = "[redacted]"


def findings(text: str) -> list[str]:
    """Names of the secret kinds found in `text` (empty when clean)."""
    return [name for name, pattern in PATTERNS.items() if pattern.search(text)]


def redact(text: str) -> str:
    """`text` with every well-known secret and token-like string replaced by `[redacted]`."""
    for pattern in PATTERNS.values():
        text = pattern.sub(REDACTED, text)
    text = _URL_PASSWORD.sub(lambda m: f"{m.group(1)}{REDACTED}@", text)
    text = _TOKEN_LIKE[0].sub(REDACTED, text)
    text = _TOKEN_LIKE[1].sub(lambda m: f"{m.group(1)} {REDACTED}", text)
    text = _TOKEN_LIKE[2].sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)
    return _TOKEN_LIKE[3].sub(_unless_path, text)


def _unless_path(m: re.Match[str]) -> str:
    """A long run of key-like characters is redacted unless it is a file path: one that
    starts at `/`, `./`, `../` or `~/`, or runs into a file's extension (`x/y.py`), of
    segments none of which is itself key-long. A log that names the agent's script must
    say which (`examples/echo_agent.py`, not `[redacted].py`)."""
    run, text, start, end = m.group(0), m.string, m.start(), m.end()
    rooted = run.startswith("/") or text[max(0, start - 2) : start] in ("./", "..", "~")
    extension = text[end : end + 1] == "."
    segments = [seg for seg in run.split("/") if seg]
    if "/" in run and (rooted or extension) and all(len(seg) < 32 for seg in segments):
        return run
    return REDACTED
