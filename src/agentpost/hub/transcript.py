"""A room as a Markdown transcript (docs/api.md "Export"): a title, then one paragraph per
event, `**sender** (time, #seq): text`, with replies as links to the message they answer
and files as links to where the export keeps them. Events read as the events API serves
them: a redacted message "(message deleted)", an edited one "(edited)"; edits, reactions
and redactions are short lines of their own.

A message's text is written as it was sent, except `&`, `<` and `>`, which become entities:
no text turns into HTML when the transcript is rendered, and none can forge the export's
end line (core/export.py)."""

from __future__ import annotations

from agentpost.core.export import attachment_path
from agentpost.hub import kinds
from agentpost.hub.schemas import Event, ReceiptState, RoomOut

_ENTITIES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;"})
_BADGES = {"result": "returned", "error": "failed", "needs_input": "needs input"}


def escaped(text: str) -> str:
    return text.translate(_ENTITIES)


def when(created_at: str) -> str:
    """`2026-12-01T10:00:00.123Z` as `2026-12-01 10:00:00 UTC`."""
    day, _, rest = created_at.partition("T")
    return f"{day} {rest[:8]} UTC" if rest else created_at


def anchor(seq: int) -> str:
    return f"seq-{seq}"


def _ref(seq: int | None, event_id: str) -> str:
    """A link to an event of the room by its number; one not in the room by its id."""
    return f"[#{seq}](#{anchor(seq)})" if seq is not None else f"`{event_id}`"


def header(room: RoomOut, exported_at: str, by: str | None) -> str:
    who = f" by {by}" if by else " by the hub's operator"
    lines = [
        f"# {escaped(room.name)}",
        "",
        f"Room `{room.id}` of workspace `{room.workspace}`, exported {when(exported_at)}"
        f"{who}: every event up to #{room.last_seq}.",
        "",
        f"Participants: {escaped(', '.join(room.participants)) or '(none)'}."
        + (" The room is archived." if room.archived else ""),
        "",
        "---",
        "",
    ]
    return "\n".join(lines) + "\n"


def _text(text: str) -> str:
    """The text after `: ` on the event's line; several lines go below it as a quote."""
    lines = escaped(text).split("\n")
    if len(lines) == 1:
        return " " + lines[0]
    return "\n" + "\n".join("> " + line if line else ">" for line in lines)


def event(
    ev: Event,
    seqs: dict[str, int],
    gone: set[str],
    receipts: list[ReceiptState] | None,
) -> str:
    """One event as a paragraph (ending in a blank line). `seqs`: the numbers of the events
    it names, `gone`: ids of its files that are no longer served."""
    stamp = f"({when(ev.created_at)}, #{ev.seq})"
    head = f'<a id="{anchor(ev.seq)}"></a>**{ev.sender}** {stamp}'
    if ev.relates_to is not None:
        target = _ref(seqs.get(ev.relates_to), ev.relates_to)
        if ev.type == kinds.REACTION:
            emoji = escaped(str(ev.metadata.get("emoji", "")))
            verb = "took back" if ev.metadata.get("remove") else "reacted"
            return f"{head} *{verb} {emoji} on {target}*\n\n"
        if ev.type == kinds.REDACTION:
            return f"{head} *deleted {target}*\n\n"
        body = " *(deleted)*" if ev.redacted else _text(ev.text)
        return f"{head} *edited {target}:*{body}\n\n"
    if ev.sender_kind == "system":
        head += " *(hub notice)*"
    if ev.in_reply_to is not None:
        kind = ev.reply_kind
        head += f", replying to {_ref(seqs.get(ev.in_reply_to), ev.in_reply_to)}"
        if kind:
            head += f" ({_BADGES.get(kind, kind)})"
    if ev.redacted:  # by a redaction, or by the room's retention (docs/operations.md)
        gone = "expired under the room's retention" if "retention" in ev.metadata else "deleted"
        return f"{head}: *(message {gone})*\n\n"
    if ev.edited:
        head += " *(edited)*"
    out = head + ":" + (_text(ev.text) if ev.text else "")
    delegated = ev.metadata.get("delegated_to")
    if isinstance(delegated, list) and delegated:
        out += f" — delegates to {escaped(', '.join(map(str, delegated)))}"
    extra = []
    for a in ev.attachments:
        name = escaped(a.name)
        if a.id in gone:
            extra.append(f"- file {name} ({a.size} bytes): no longer served")
        else:
            extra.append(
                f"- file [{name}]({attachment_path(a.id, a.name)}) ({escaped(a.mime_type)}, "
                f"{a.size} bytes)"
            )
    if ev.reactions:
        marks = ", ".join(
            f"{escaped(r.emoji)} {r.count} ({escaped(', '.join(r.members))})" for r in ev.reactions
        )
        extra.append(f"- reactions: {marks}")
    if receipts:
        said = []
        for r in receipts:
            if r.state == "replied" and r.receipt_event is not None:
                badge = _BADGES.get(r.reply_kind or "", r.reply_kind or "replied")
                said.append(
                    f"{escaped(r.member)} {badge} in "
                    f"{_ref(seqs.get(r.receipt_event), r.receipt_event)}"
                )
            else:
                said.append(f"{escaped(r.member)} pending")
        extra.append(f"- reported back: {'; '.join(said)}")
    if extra:
        out += "\n\n" + "\n".join(extra)
    return out + "\n\n"


def footer(events: int, last_seq: int) -> str:
    noun = "event" if events == 1 else "events"
    return f"---\n\n*End of export: {events} {noun}, up to #{last_seq}.*\n\n"


def cut(message: str) -> str:
    return f"---\n\n**The export was cut short:** {escaped(message)}\n\n"
