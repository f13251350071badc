"""The hub's URL paths as the client makes them (docs/api.md): every id or name put into a
path is one segment of unreserved characters (RFC 3986: letters, digits, `-`, `.`, `_`,
`~`), never `.` or `..`. Anything else (`/`, `?`, `#`, `%`, spaces, other scripts) could
name another route once the URL is parsed or decoded (`rm_…/archive?` posting turned into
archiving), so it is refused here, before any URL is made, whoever the caller is.
"""

from __future__ import annotations

import re
from urllib.parse import unquote

from agentpost.client.errors import HubRefused

INVALID_REQUEST = "invalid_request"
MAX_SEGMENT = 255

_SEGMENT = re.compile(rf"[A-Za-z0-9_.~-]{{1,{MAX_SEGMENT}}}")
_PATH = re.compile(r"(?:/[A-Za-z0-9_.~-]+)+")


def segment(value: str, what: str = "id") -> str:
    """`value` as one path segment, unchanged; `HubRefused` `invalid_request` otherwise."""
    if not isinstance(value, str) or not _SEGMENT.fullmatch(value) or value in (".", ".."):
        raise HubRefused(
            INVALID_REQUEST,
            f"{what} {str(value)[:80]!r} cannot be part of a hub URL (only letters, digits, "
            "`-`, `_`, `.`, `~`; not `.` or `..`): it names nothing on the hub; nothing was sent",
        )
    return value


def checked_path(path: str) -> str:
    """A whole request path: `/`-separated unreserved segments, none `.` or `..`, no query
    (parameters travel as `params=`). The last guard for a path built by any caller."""
    if not _PATH.fullmatch(path) or any(p in (".", "..") for p in path.split("/")):
        raise HubRefused(
            INVALID_REQUEST,
            f"the path {path[:120]!r} is not a plain hub route (only letters, digits, `-`, "
            "`_`, `.`, `~` between `/`; no `.` or `..`, no query); nothing was sent",
        )
    return path


def filename_of(disposition: str) -> str | None:
    """The file name of a Content-Disposition header (RFC 6266 `filename*` or `filename`),
    reduced to its last path part so it can never name a place outside the cwd."""
    _, params = _header_params(disposition)
    name = params.get("filename*") or params.get("filename")
    if not name:
        return None
    if name.lower().startswith("utf-8''"):
        name = unquote(name[7:])
    base = name.replace("\\", "/").rsplit("/", 1)[-1].strip()
    return None if base in ("", ".", "..") else base


def _header_params(header: str) -> tuple[str, dict[str, str]]:
    """`value; a=b; c="d"` → ("value", {"a": "b", "c": "d"})."""
    parts = [p.strip() for p in header.split(";")]
    params: dict[str, str] = {}
    for p in parts[1:]:
        key, _, value = p.partition("=")
        params[key.strip().lower()] = value.strip().strip('"')
    return parts[0], params
