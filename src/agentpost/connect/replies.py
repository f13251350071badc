"""Posting what a Turn produced (docs/connect.md): files first (each a keyed media event from
an opened descriptor), a one-line notice naming refused files, then the reply text under
the Turn key. A retryable failure (hub down, 5xx, 409 running) is retried with the same
key until the hub answers; a final refusal is logged and ends the attempt.
"""

from __future__ import annotations

import asyncio
import logging
import mimetypes
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import BinaryIO, TypeVar

from agentpost.client import AsyncHubClient, HubError, HubRefused, PostResult
from agentpost.connect import keys
from agentpost.connect.egress import EgressRefused, EgressRoots

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


async def post_turn(
    client: AsyncHubClient,
    worker_id: str,
    room: str,
    trigger: str,
    text: str,
    links: list[tuple[str, str]],
    egress: EgressRoots | None,
    reply_kind: str | None,
    before_reply: Callable[[], None] = lambda: None,
) -> Posted:
    out = Posted()
    for index, (uri, name) in enumerate(links):
        if egress is None:
            out.refused.append(f"{name or uri}: files are not sent from this agent")
            continue
        try:
            opened = egress.open(uri)
        except EgressRefused as exc:
            out.refused.append(str(exc))
            log.warning("file refused for %s: %s", trigger, exc)
            continue
        mime = mimetypes.guess_type(opened.name)[0] or "application/octet-stream"
        key = keys.turn_file_key(worker_id, trigger, index)
        with os.fdopen(opened.fd, "rb") as f:

            def upload(
                f: BinaryIO = f, name: str = opened.name, mime: str = mime, key: str = key
            ) -> Awaitable[PostResult]:
                return client.upload_file(room, f, name, key=key, mime_type=mime)

            try:
                res = await until_answered(f"file {opened.name} for {trigger}", upload)
            except HubRefused as exc:
                out.refused.append(f"{opened.name}: the hub refused it ({exc.code})")
                continue
        out.files.append(res.event.id)
    if out.refused:
        notice = "Not sent: " + "; ".join(out.refused)
        try:
            await until_answered(
                f"notice for {trigger}",
                lambda: client.post_message(
                    room,
                    notice[:4000],
                    key=keys.turn_notice_key(worker_id, trigger),
                    metadata={"agentpost/notice": "egress_refused"},
                ),
            )
        except HubRefused as exc:
            log.error("notice for %s refused by the hub: %s", trigger, exc)
    if not text and not out.files:
        text = "(no reply)"
    if not text:
        text = f"({len(out.files)} file(s) above)"
    before_reply()
    try:
        out.reply = await until_answered(
            f"reply to {trigger}",
            lambda: client.post_message(
                room,
                text,
                key=keys.turn_key(worker_id, trigger),
                in_reply_to=trigger,
                reply_kind=reply_kind,
            ),
        )
    except HubRefused as exc:
        out.final_error = exc
        log.error("reply to %s refused by the hub: %s (%s)", trigger, exc.code, exc.message)
    return out
