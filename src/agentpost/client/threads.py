"""Threads in the client (docs/threads.md): ensure, archive, send with a key, send state.

A thread send ends in a `ThreadSend` or raises a `HubError` whose `code` is one of docs/threads.md
"Codes" (`SEND_CODES`): final ones (`HubRefused`, sending the same command again never helps) and
retryable ones (`HubUnreachable`, `HubUnavailable`: the same command later is safe, since a
key never sends twice). The hub's own codes are translated here, in `_final`/`_translated`.

The outcome of a post that got no answer is learned from the hub's record of the key (send
state): a cut connection after the hub committed still ends in `delivery: delivered`.
"""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass

import httpx
import msgspec

from agentpost.client.calls import HubCalls
from agentpost.client.errors import (
    HubError,
    HubRefused,
    HubUnavailable,
    HubUnreachable,
    NotConfigured,
)
from agentpost.client.models import Room, SendState, Thread, ThreadSend
from agentpost.client.paths import segment
from agentpost.core.thread_key import ACTING_FOR_ENV, InvalidKey, check_key, command_id

THREAD_KIND = "thread"
SENT = "sent"
REPLAYED = "replayed"
DELIVERED = "delivered"

IDEMPOTENCY_CONFLICT = "idempotency_conflict"
COMMAND_REJECTED = "command_rejected"
THREAD_NOT_FOUND = "thread_not_found"
THREAD_NOT_SENDABLE = "thread_not_sendable"
INVALID_REQUEST = "invalid_request"
PERMISSION_DENIED = "permission_denied"
HUB_UNREACHABLE = "hub_unreachable"
REQUEST_FAILED = "request_failed"
NOT_CONFIGURED = "not_configured"
HUB_ERROR = "hub_error"

SPENT = "spent"
UNUSED = "unused"
SAFE = "unused, or spent by the first send, which sending again reports"


@dataclass(frozen=True)
class SendCode:
    """One failure of a thread send: what it means, and what the key is afterwards."""

    code: str
    meaning: str
    retryable: bool
    key: str


SEND_CODES: tuple[SendCode, ...] = (
    SendCode(IDEMPOTENCY_CONFLICT, "the key already sent another message", False, SPENT),
    SendCode(COMMAND_REJECTED, "the hub refused the message for its content", False, SPENT),
    SendCode(THREAD_NOT_FOUND, "no such thread, or the id is a channel", False, UNUSED),
    SendCode(THREAD_NOT_SENDABLE, "the thread is archived", False, UNUSED),
    SendCode(INVALID_REQUEST, "the command line, the key or the message is invalid", False, UNUSED),
    SendCode(
        PERMISSION_DENIED, "the token is unknown, removed or not a participant", False, UNUSED
    ),
    SendCode(NOT_CONFIGURED, "no member token, or a hub URL that is no URL", False, UNUSED),
    SendCode(HUB_UNREACHABLE, "no connection to the hub; nothing was sent", True, UNUSED),
    SendCode(REQUEST_FAILED, "the connection broke before the answer; outcome unknown", True, SAFE),
    SendCode(HUB_ERROR, "the hub failed (5xx) or is still busy with this key", True, SAFE),
)


_FINAL = {c.code for c in SEND_CODES if not c.retryable}
# Refusals about the thread, not the message: a key delivered before still counts (docs/threads.md
# "Codes").
_LEARNABLE = {THREAD_NOT_FOUND, THREAD_NOT_SENDABLE, PERMISSION_DENIED}


def _connected(exc: HubUnreachable) -> bool:
    """False when the request never reached the hub (no connection): nothing was sent."""
    return not isinstance(exc.__cause__, httpx.ConnectError | httpx.ConnectTimeout)


def _final(exc: HubRefused) -> HubRefused:
    """A hub refusal as a final code of docs/threads.md "Codes"; a refusal not about the
    thread or the credential is about the request (`invalid_request`), and never spends the
    key (docs/architecture.md#one-key-one-event)."""
    if exc.code in _FINAL:
        code = exc.code
    elif exc.code == "room_not_found":
        code = THREAD_NOT_FOUND
    elif exc.code == "room_archived":
        code = THREAD_NOT_SENDABLE
    elif exc.status in (401, 403):
        code = PERMISSION_DENIED
    else:
        code = INVALID_REQUEST
    message = exc.message if code == exc.code else f"{exc.message} (hub: {exc.code})"
    return HubRefused(code, message, exc.status, exc.body)


def _translated(exc: HubError) -> HubError:
    if isinstance(exc, HubRefused):
        return _final(exc)
    if isinstance(exc, HubUnreachable):
        if not _connected(exc):
            return exc
        return HubUnavailable(REQUEST_FAILED, f"{exc.message}; send the same command again")
    return HubUnavailable(HUB_ERROR, f"{exc.message} (hub: {exc.code})", exc.status, exc.body)


async def ensure_thread(
    c: HubCalls, workspace: str, name: str, owner: str | None = None
) -> Thread:
    body = {"name": name} if owner is None else {"name": name, "owner": owner}
    resp = await c.request(
        "POST", f"/v1/workspaces/{segment(workspace, 'workspace')}/threads/ensure", json=body
    )
    return msgspec.convert(resp.json(), Thread)


async def _thread_room(c: HubCalls, thread: str) -> Room:
    """The thread by id (or by the name of a room you take part in); a channel is no thread."""
    room = await c.room(await c.resolve_room(thread))
    if room.kind != THREAD_KIND:
        raise HubRefused(THREAD_NOT_FOUND, f"{room.id} is a {room.kind}, not a thread")
    return room


async def set_thread_archived(c: HubCalls, thread: str, archived: bool) -> Room:
    try:
        room = await _thread_room(c, thread)
    except HubRefused as exc:
        raise _final(exc) from exc
    return await c.set_archived(room.id, archived)


async def send_state(c: HubCalls, room_id: str, key: str) -> SendState | None:
    """What the hub recorded for `key` (the Idempotency-Key as sent) in the room; None when
    nothing is (the key is unused)."""
    try:
        resp = await c.request(
            "GET", f"/v1/rooms/{segment(room_id, 'room id')}/sends", params={"key": key}
        )
    except HubRefused as exc:
        if exc.code == "send_not_found":
            return None
        raise
    return msgspec.convert(resp.json()["send"], SendState)


def _from_record(state: SendState, thread_id: str, text: str, cmd: str) -> ThreadSend:
    """The outcome the hub recorded for the command, held against the message we mean to
    send: the hub stores text trimmed, and what is stored is what is compared
    (docs/threads.md "Sending once")."""
    if state.state != "created" or state.event is None:
        raise HubRefused(COMMAND_REJECTED, "the hub refused the message for this key; it is spent")
    ev = state.event
    if ev.type != "message" or ev.text != text.strip():
        raise HubRefused(
            IDEMPOTENCY_CONFLICT,
            "this key already sent another message to the thread; nothing was sent",
        )
    return ThreadSend(thread_id=thread_id, message_id=ev.id, command_id=cmd, delivery=DELIVERED)


async def _learned(
    c: HubCalls, refused: HubRefused, thread_id: str, text: str, cmd: str
) -> ThreadSend | None:
    """After a refusal about the thread (or the sender's place in it): the delivery the hub
    recorded for `cmd` before, if any and if it can be learned now."""
    if refused.code not in _LEARNABLE or refused.status in (None, 401):
        return None
    try:
        state = await send_state(c, thread_id, cmd)
    except HubError:
        return None
    return None if state is None else _from_record(state, thread_id, text, cmd)


async def thread_send(
    c: HubCalls,
    thread: str,
    text: str,
    key: str | None = None,
    acting_for: str | None = None,
) -> ThreadSend:
    """Send `text` to the thread once per `key` (a random key when None): the same command
    again reports the first delivery, in any process, after any crash."""
    key = secrets.token_hex(16) if key is None else key
    try:
        check_key(key)
    except InvalidKey as exc:
        raise HubRefused(INVALID_REQUEST, str(exc)) from None
    if not text.strip():
        raise HubRefused(INVALID_REQUEST, "the message is empty")
    if not c.has_token:
        raise NotConfigured("no member token to send with: set AGENTPOST_TOKEN (or --token)")
    if acting_for is None:
        acting_for = os.environ.get(ACTING_FOR_ENV, "")
    try:
        sender = str((await c.me())["member"]["name"])
        thread_id = await c.resolve_room(thread)
    except HubError as exc:
        raise _translated(exc) from exc
    cmd = command_id(key, thread_id, sender, acting_for)
    try:
        await _thread_room(c, thread_id)
    except HubRefused as exc:
        known = await _learned(c, _final(exc), thread_id, text, cmd)
        if known is not None:
            return known
        raise _final(exc) from exc
    except HubError as exc:
        raise _translated(exc) from exc
    return await _post(c, thread_id, text, cmd)


async def _post(c: HubCalls, thread_id: str, text: str, cmd: str) -> ThreadSend:
    for attempt in range(2):
        try:
            res = await c.post_message(thread_id, text, key=cmd)
        except HubRefused as exc:
            known = await _learned(c, _final(exc), thread_id, text, cmd)
            if known is not None:
                return known
            raise _final(exc) from exc
        except HubError as exc:
            if isinstance(exc, HubUnreachable) and not _connected(exc):
                raise  # never reached the hub: nothing was sent
            if exc.code == "idempotency_in_flight":
                raise _translated(exc) from exc  # the first send of this key is still running
            # No answer, or a 5xx that a proxy may have put over a commit: ask the record.
            try:
                state = await send_state(c, thread_id, cmd)
            except HubError:
                raise _translated(exc) from exc  # unknown: the same command later reports it
            if state is not None:
                return _from_record(state, thread_id, text, cmd)
            if attempt == 0:
                continue  # the hub answers and holds nothing for the key: send once more
            raise _translated(exc) from exc
        delivery = SENT if res.idempotency_status == "created" else REPLAYED
        return ThreadSend(
            thread_id=thread_id, message_id=res.event.id, command_id=cmd, delivery=delivery
        )
    raise AssertionError("unreachable: the loop returns or raises")
