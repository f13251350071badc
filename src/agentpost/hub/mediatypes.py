"""Media types of uploads (docs/api.md Media): what is accepted at upload, and how the
bytes are served back, so that a stored type can never break or script a download.

- At upload a part's `Content-Type` must be a media type as HTTP writes it (RFC 9110
  §8.3.1: `type/subtype` tokens, `; name=value` parameters, ASCII, at most 255 characters);
  anything else is refused (400 `invalid_request`, field `file`). No `Content-Type`:
  `application/octet-stream`. What is stored is the normalized form (lower-case type,
  subtype and parameter names, `; ` between parameters).
- A download is always an attachment, with `X-Content-Type-Options: nosniff` and a
  sandboxing CSP: an HTML, SVG, XML or script upload never runs in the hub's origin. A
  stored type that is not a valid media type (written before this check) is served as
  `application/octet-stream` instead of a header the server would refuse to send.
- File names lose their control characters at upload (each becomes `_`): they are shown
  in pages and terminals and sent back in `Content-Disposition`.
"""

from __future__ import annotations

import re

from agentpost.core.errors import Code, RequestError

DEFAULT = "application/octet-stream"
MAX_LENGTH = 255

_TOKEN = r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+"
_QUOTED = r'"(?:[\t !#-\[\]-~]|\\[\t -~])*"'
_PARAM = re.compile(rf"[ \t]*;[ \t]*({_TOKEN})=({_TOKEN}|{_QUOTED})")
_TYPE = re.compile(rf"({_TOKEN})/({_TOKEN})")

# Headers every media download carries (docs/api.md Media).
DOWNLOAD_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Content-Security-Policy": "default-src 'none'; sandbox",
}


def normalized(raw: str) -> str | None:
    """The normalized media type, or None when `raw` is not one."""
    text = raw.strip(" \t")
    if len(text) > MAX_LENGTH or not text.isascii():
        return None
    head = _TYPE.match(text)
    if head is None:
        return None
    out = [f"{head[1].lower()}/{head[2].lower()}"]
    pos = head.end()
    while pos < len(text):
        param = _PARAM.match(text, pos)
        if param is None:
            return None
        out.append(f"{param[1].lower()}={param[2]}")
        pos = param.end()
    return "; ".join(out)


def for_upload(raw: bytes | None) -> str:
    """The type to store for an uploaded part's `Content-Type` header value."""
    if raw is None:
        return DEFAULT
    found = normalized(raw.decode("latin-1"))
    if found is None:
        raise RequestError(
            Code.INVALID_REQUEST,
            "the file's Content-Type is not a media type (type/subtype, ASCII,"
            f" at most {MAX_LENGTH} characters, no control characters)",
            field="file",
        )
    return found


def for_download(stored: str) -> str:
    """The Content-Type to serve for a stored type: its normalized form, or the default
    when it is no media type at all."""
    return normalized(stored) or DEFAULT


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def safe_name(raw: str) -> str:
    """A file name without control characters (each replaced by `_`)."""
    return _CONTROL.sub("_", raw)
