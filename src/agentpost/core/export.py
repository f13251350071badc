"""What the hub and the CLI agree on about an export (docs/api.md "Export"): the format
names, the header and end lines, how a file of a room is named on disk, and how a reader
tells a whole export from one cut short.

An export ends with one last line that says how it ended: `{"end": …}` when every event up
to the header's `last_seq` was written, `{"error": …}` when the hub had to stop (the member
removed meanwhile). In Markdown that line is an HTML comment holding the same JSON, which a
message's text can never forge: the transcript writes every `<` of a text as `&lt;`.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

import msgspec

ROOM = "agentpost-room"
WORKSPACE = "agentpost-workspace"
VERSION = 1

JSONL = "jsonl"
MARKDOWN = "md"
FORMATS = (JSONL, MARKDOWN)
PATHS = "paths"
EMBED = "embed"
FILE_MODES = (PATHS, EMBED)

FILES_DIR = "files"
MD_MARK = "<!-- agentpost-export "
MD_MARK_END = " -->"
MEDIA_TYPES = {JSONL: "application/x-ndjson", MARKDOWN: "text/markdown; charset=utf-8"}
EMBED_FACTOR = 4  # files=embed: a room's files may total this many times the upload cap

_UNSAFE = re.compile(r"[^\w.-]")
_MAX_NAME_BYTES = 150  # with `md_…-` in front, well under a file system's 255 bytes
_FILE_PATH = re.compile(r"files/[\w.-]+")


def safe_file_name(raw: str, fallback: str = "file") -> str:
    """`raw` as one file name in any directory: letters, digits, `_`, `.` and `-` only
    (anything else, `/` and control characters included, becomes `_`), no leading dot,
    at most 150 UTF-8 bytes; `fallback` when nothing is left."""
    name = _UNSAFE.sub("_", unicodedata.normalize("NFC", raw)).lstrip(".")
    while len(name.encode()) > _MAX_NAME_BYTES:
        name = name[:-1]
    return name or fallback


def attachment_path(media_id: str, name: str) -> str:
    """Where an export keeps a file, relative to the export: `files/<media id>-<name>`."""
    return f"{FILES_DIR}/{safe_file_name(media_id, 'media')}-{safe_file_name(name)}"


def is_attachment_path(path: str) -> bool:
    """A path an export may name for a file: one name under `files/`, never `..`."""
    return bool(_FILE_PATH.fullmatch(path)) and not path.startswith(f"{FILES_DIR}/.")


def room_file_name(room_name: str, fmt: str) -> str:
    """The export file of a room: `<room name>.jsonl` or `.md`."""
    return f"{safe_file_name(room_name, 'room')}.{fmt}"


def end_line(fmt: str, last: dict[str, Any]) -> bytes:
    """The export's last line (`{"end": …}` or `{"error": …}`) in `fmt`, newline included."""
    body = msgspec.json.encode(last)
    if fmt == MARKDOWN:
        return MD_MARK.encode() + body + MD_MARK_END.encode() + b"\n"
    return body + b"\n"


def parse_end(fmt: str, line: bytes) -> dict[str, Any] | None:
    """The `end` or `error` object of an export's last line; None for any other line (an
    export cut short ends with an event, or in the middle of one)."""
    text = line.strip()
    if fmt == MARKDOWN:
        mark, tail = MD_MARK.encode(), MD_MARK_END.encode()
        if not (text.startswith(mark) and text.endswith(tail)):
            return None
        text = text[len(mark) : -len(tail)]
    try:
        found = msgspec.json.decode(text)
    except msgspec.DecodeError:
        return None
    if isinstance(found, dict) and (found.get("end") == ROOM or "error" in found):
        return found
    return None
