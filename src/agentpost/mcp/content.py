"""A tool result's content blocks beside its `structuredContent` (docs/mcp.md "Results").

`structuredContent` is always the whole result. The text block is for the model: for most
tools the same JSON (it is small), but events (`read_room`, `read_inbox`, `search`) are one
compact line each, their texts cut on a page of several, so a page of long messages stays
inside a client's inline limit. Each file of an event is also a `resource_link` to the hub's
media URL.
"""

from __future__ import annotations

import json
from typing import Any

CUT_CHARS = 1000  # an event's text in a page of several; a page of one shows it whole
_EVENT_PAGES = {"read_room": "events", "read_inbox": "items", "search": "hits"}


def _event_of(item: dict[str, Any]) -> dict[str, Any]:
    event = item.get("event", item)  # inbox items and search hits wrap the event
    return event if isinstance(event, dict) else {}


def _events(tool: str, outcome: dict[str, Any]) -> list[dict[str, Any]]:
    field = _EVENT_PAGES.get(tool)
    page = outcome.get(field) if field else None
    return [i for i in page if isinstance(i, dict)] if isinstance(page, list) else []


def _text(ev: dict[str, Any], cut: bool) -> str:
    text = str(ev.get("text") or "")
    if not (cut and len(text) > CUT_CHARS):
        return " ⏎ ".join(text.splitlines())
    after = max(int(ev.get("seq") or 1) - 1, 0)
    return (
        " ⏎ ".join(text[:CUT_CHARS].splitlines())
        + f" […cut: {len(text) - CUT_CHARS} more characters; read_room after={after} "
        "limit=1 shows it whole]"
    )


def _line(ev: dict[str, Any], cut: bool) -> str:
    head = f"#{ev.get('seq')} {ev.get('sender')} {ev.get('created_at')} {ev.get('id')}"
    if ev.get("in_reply_to"):
        head += f" reply to {ev['in_reply_to']}"
        if ev.get("reply_kind"):
            head += f" ({ev['reply_kind']})"
    line = f"{head}: {_text(ev, cut)}"
    for f in ev.get("attachments") or []:
        line += f" [file {f.get('name')}, {f.get('mime_type')}, {f.get('size')} bytes, {f.get('id')}]"
    return line


def text_of(tool: str, outcome: dict[str, Any]) -> str:
    """The text block of a successful result."""
    items = _events(tool, outcome)
    if tool not in _EVENT_PAGES:
        return json.dumps(outcome, ensure_ascii=False)
    cut = len(items) > 1
    lines: list[str] = []
    if tool == "read_room":
        lines.append(
            f"room {outcome.get('room')}: {len(items)} events, next_after {outcome.get('next_after')}"
        )
        lines += [_line(ev, cut) for ev in items]
    elif tool == "read_inbox":
        lines.append(f"inbox: {len(items)} wake-ups, cursor {outcome.get('cursor')}")
        for i in items:
            ev = _event_of(i)
            mark = " [delegation waiting for your receipt]" if i.get("delegation_waiting") else ""
            lines.append(f"cursor {i.get('cursor')} room {ev.get('room')}{mark} {_line(ev, cut)}")
    else:
        lines.append(f"search: {len(items)} hits, next_before {outcome.get('next_before')}")
        lines += [f"room {_event_of(h).get('room')} {_line(_event_of(h), cut)}" for h in items]
    if cut and any(len(str(_event_of(i).get("text") or "")) > CUT_CHARS for i in items):
        lines.append("(structuredContent holds every event whole.)")
    return "\n".join(lines)


def media_links(outcome: dict[str, Any], tool: str, hub: str) -> list[dict[str, Any]]:
    """A `resource_link` (uri, name, mimeType, size) per file of the result's events."""
    links = []
    for item in _events(tool, outcome):
        ev = _event_of(item)
        for f in ev.get("attachments") or []:
            links.append(
                {
                    "uri": f"{hub}/v1/media/{f['id']}",
                    "name": str(f["name"]),
                    "mime_type": str(f["mime_type"]),
                    "size": int(f["size"]),
                    "description": f"a file of event {ev.get('id')} in room {ev.get('room')}",
                }
            )
    return links
