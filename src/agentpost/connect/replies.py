"""Posting what a Turn produced (docs/connect.md): files first (each a keyed media event from
an opened descriptor), a one-line notice naming refused files, then the reply text under
the Turn key. A retryable failure (hub down, 5xx, 409 running) is retried with the same
key until the hub answers; a final refusal is logged and ends the attempt.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import mimetypes
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import BinaryIO, TypeVar

from agentpost.client import AsyncHubClient, HubError, HubRefused, PostResult
from agentpost.connect import keys
from agentpost.connect.crash import crash_point
from agentpost.connect.egress import PRIVATE, EgressRefused, EgressRoots

log = logging.getLogger("agentpost.connect.replies")

T = TypeVar("T")
RETRY_START = 0.25
RETRY_MAX = 10.0


@dataclass
class Posted:
    """What reached the room for one Turn."""

    reply: PostResult | None = None
    files: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    final_error: HubRefused | None = None


async def until_answered(what: str, call: Callable[[], Awaitable[T]]) -> T:
    """`call` again (same key) while the hub cannot answer; a `HubRefused` is raised."""
    delay = RETRY_START
    while True:
        try:
            return await call()
        except HubRefused:
            raise
        except HubError as exc:
            log.warning("%s: %s; retrying in %.2fs with the same key", what, exc, delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, RETRY_MAX)


def _sha256_of(fd: int) -> str:
    """The content hash of an opened file, read from its start (the descriptor egress
    judged is the one hashed and later uploaded)."""
    h = hashlib.sha256()
    offset = 0
    while True:
        chunk = os.pread(fd, 1024 * 1024, offset)
        if not chunk:
            return h.hexdigest()
        h.update(chunk)
        offset += len(chunk)


@dataclass
class _File:
    fd: int
    name: str
    key: str


async def _open_files(
    member_id: str,
    trigger: str,
    links: list[tuple[str, str]],
    egress: EgressRoots | None,
    refused: list[str],
    named: frozenset[str] = frozenset(),
) -> list[_File]:
    """Every file the reply names, opened and keyed by content; refusals are collected.
    The same content named twice is sent once. A link of `named` (written in the text, not
    a `resource_link`) to the Worker's own folder is skipped without a notice: agents repeat
    the links of the attachments they were given."""
    opened: list[_File] = []
    keyed: set[str] = set()
    for uri, name in links:
        if egress is None:
            if uri not in named:
                refused.append(f"{name or uri}: files are not sent from this agent")
            continue
        try:
            f = egress.open(uri)
        except EgressRefused as exc:
            log.warning("file refused for %s: %s", trigger, exc)
            if not (uri in named and exc.code == PRIVATE):
                refused.append(str(exc))
            continue
        try:
            digest = await asyncio.to_thread(_sha256_of, f.fd)
        except OSError as exc:
            os.close(f.fd)
            refused.append(f"{f.name}: cannot be read ({exc.strerror})")
            continue
        key = keys.turn_file_key(member_id, trigger, digest)
        if key in keyed:
            os.close(f.fd)
            continue
        keyed.add(key)
        opened.append(_File(f.fd, f.name, key))
    return opened


async def post_turn(
    client: AsyncHubClient,
    member_id: str,
    room: str,
    trigger: str,
    text: str,
    links: list[tuple[str, str]],
    egress: EgressRoots | None,
    reply_kind: str | None,
    journal: Callable[[list[str]], bool] = lambda keys: True,
    named: list[tuple[str, str]] | None = None,
) -> Posted:
    """Files, a notice naming refused files, then the text; `journal` is handed every key
    of the Turn before the first of several parts is posted (docs/connect.md "Turns"), so
    a Worker killed in between knows that something may have landed. A journal that
    cannot be written sends no files (fail closed): the text says they were not sent."""
    out = Posted()
    named = named or []
    files = await _open_files(
        member_id, trigger, [*links, *named], egress, out.refused, frozenset(u for u, _ in named)
    )
    try:
        several = [f.key for f in files]
        if out.refused:
            several.append(keys.turn_notice_key(member_id, trigger))
        if several and not journal([*several, keys.turn_key(member_id, trigger)]):
            out.refused.extend(f"{f.name}: the Turn journal could not be written" for f in files)
            for f in files:
                os.close(f.fd)
            files = []
        for f in files:
            mime = mimetypes.guess_type(f.name)[0] or "application/octet-stream"
            with os.fdopen(f.fd, "rb") as fh:
                f.fd = -1

                def upload(
                    fh: BinaryIO = fh, name: str = f.name, mime: str = mime, key: str = f.key
                ) -> Awaitable[PostResult]:
                    return client.upload_file(room, fh, name, key=key, mime_type=mime)

                try:
                    res = await until_answered(f"file {f.name} for {trigger}", upload)
                except HubRefused as exc:
                    out.refused.append(f"{f.name}: the hub refused it ({exc.code})")
                    continue
            out.files.append(res.event.id)
    finally:
        for f in files:
            if f.fd >= 0:
                os.close(f.fd)
    if out.files:
        crash_point("after_files")
    if out.refused:
        notice = "Not sent: " + "; ".join(out.refused)
        try:
            await until_answered(
                f"notice for {trigger}",
                lambda: client.post_message(
                    room,
                    notice[:4000],
                    key=keys.turn_notice_key(member_id, trigger),
                    metadata={"agentpost/notice": "egress_refused"},
                ),
            )
        except HubRefused as exc:
            log.error("notice for %s refused by the hub: %s", trigger, exc)
    if not text and not out.files:
        text = "(no reply)"
    if not text:
        text = f"({len(out.files)} file(s) above)"
    try:
        out.reply = await until_answered(
            f"reply to {trigger}",
            lambda: client.post_message(
                room,
                text,
                key=keys.turn_key(member_id, trigger),
                in_reply_to=trigger,
                reply_kind=reply_kind,
            ),
        )
    except HubRefused as exc:
        out.final_error = exc
        if exc.code == "idempotency_conflict":  # a reply landed under this key before
            log.warning("reply to %s: a reply was posted under its Turn key before", trigger)
            return out
        log.error("reply to %s refused by the hub: %s (%s)", trigger, exc.code, exc.message)
        crash_point("after_reply_refused")
        out.reply = await tell_refused(client, member_id, room, trigger, reply_kind, exc)
    return out


async def tell_refused(
    client: AsyncHubClient,
    member_id: str,
    room: str,
    trigger: str,
    reply_kind: str | None,
    refusal: HubRefused,
) -> PostResult | None:
    """The hub refused the reply (its sensitive-data filter, a size limit): say so in its
    place, without its text, so the asker is told and a delegator gets its receipt
    (docs/architecture.md#no-turn-ends-in-silence)."""
    reason = refusal.body.get("reason")
    why = f"{refusal.code}" + (f", {reason}" if isinstance(reason, str) else "")
    text = f"(the reply was not posted: the hub refused it ({why}): {refusal.message[:300]})"
    try:
        return await until_answered(
            f"refusal notice for {trigger}",
            lambda: client.post_message(
                room,
                text,
                key=keys.turn_refused_key(member_id, trigger),
                in_reply_to=trigger,
                reply_kind="error" if reply_kind is not None else None,
                metadata={"agentpost/notice": "reply_refused"},
            ),
        )
    except HubRefused as exc:  # the room itself refuses us (removed, archived): log it
        log.error("refusal notice for %s refused too: %s; nothing reached the room", trigger, exc)
        return None
