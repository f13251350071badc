"""`_ag2/deliver` (docs/deliver.md "The request", "Rules"): every outcome of a delivery is
decided here, from the named constants below, rule by rule in the design's order.

(1) ledger first: a known id answers from the ledger, or continues under its stored worker
id and key; the same id under another binding is `conflict`. (2) another worker's binding
with no entry is `not_mine`. (3) this Worker's expired, revoked or unknown binding — or a
request not tied to a Turn that may use the binding (a `turn` issued with another binding;
without `turn`, another session's, or any once a second sender had a Turn), a sender the hub
says left the room or was removed (the binding is then revoked, durably), or a
collaborator no longer admitted (not listed, nor an agent the hub says has this agent's
owner) — is `rejected`. (4) the first-seen entry is written (and
fsync'd) before the first hub call; a failed write is `retry`. (5) parts are posted, files
first then text, each its own keyed event. (6) a final after some parts posted posts one
keyed notice line. (7) past 23 h an unfinished delivery is `expired`. An accepted delivery
runs to completion even if the agent disconnects.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import mimetypes
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

from agentpost.client import AsyncHubClient, HubError, HubRefused, HubUnavailable
from agentpost.connect import keys
from agentpost.connect.crash import crash_point
from agentpost.connect.egress import EgressRefused, EgressRoots
from agentpost.connect.lease import LEASE_LOST
from agentpost.connect.ledger import Binding, Entry, Ledger, LedgerUnavailable

log = logging.getLogger("agentpost.connect.deliver")

DELIVERED = "delivered"
RETRY = "retry"
FINAL = "final"
UNKNOWN = "unknown"
CONFLICT = "conflict"
REJECTED = "rejected"
EXPIRED = "expired"
NOT_MINE = "not_mine"

STOP_SECONDS = 23 * 3600
MAX_PARTS = 32
MAX_ID = 200
MAX_TURN = 200
MAX_TEXT = 65536  # the hub's limit on a message's text (characters)

Admitted = Callable[[str, str], Awaitable[bool]]
# Why the hub says a binding's sender can no longer be answered in its room (left it, was
# removed, or this agent is no longer there), or None; raises `HubError` when the hub
# cannot say now.
Standing = Callable[[str, str], Awaitable[str | None]]
# A post into the room refused with these statuses means this agent may not post there.
REVOKING_STATUSES = (403, 404)


def _iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def retry(reason: str, expires_at: str | None) -> dict[str, Any]:
    return {"status": RETRY, "reason": reason, "expires_at": expires_at}


def final(reason: str, data: dict[str, Any], expires_at: str | None) -> dict[str, Any]:
    return {"status": FINAL, "reason": reason, "data": data, "expires_at": expires_at}


def delivered(indices: list[int], event_ids: list[str], expires_at: str) -> dict[str, Any]:
    return {
        "status": DELIVERED,
        "delivered": indices,
        "event_ids": event_ids,
        "expires_at": expires_at,
    }


def echo_rule(senders: set[str]) -> str:
    """What the Worker says at start about requests without `turn` (docs/deliver.md "Whose
    work it is")."""
    if len(senders) > 1:
        return (
            f"a request must echo its Turn's turn ({len(senders)} senders have had Turns "
            "with this agent)"
        )
    who = f" (so far: {next(iter(senders))})" if senders else ""
    return f"a request without turn is honoured while one sender has had Turns{who}"


def _shape(parts: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """What a delivery posts, part by part: a resend that adds fields of its own (an
    attempt counter, `_meta`) is still the same delivery."""
    return [
        (p["type"], p["path"] if p["type"] == "file" else p["text"].strip()) for p in parts
    ]


class BadRequest(Exception):
    """The request does not have the shape of docs/deliver.md "The request" (answered -32602,
    nothing recorded)."""


def order(parts: list[dict[str, Any]]) -> list[int]:
    """Files first, then text, each group in request order."""
    files = [i for i, p in enumerate(parts) if p["type"] == "file"]
    return files + [i for i, p in enumerate(parts) if p["type"] == "text"]


def check(params: dict[str, Any]) -> tuple[str, str, list[dict[str, Any]]]:
    binding, did, parts = params.get("binding"), params.get("id"), params.get("parts")
    session, turn = params.get("sessionId"), params.get("turn")
    if session is not None and not isinstance(session, str):
        raise BadRequest("sessionId must be a string")
    if turn is not None and not (isinstance(turn, str) and 0 < len(turn) <= MAX_TURN):
        raise BadRequest(f"turn must be a string of 1 to {MAX_TURN} characters")
    if not isinstance(binding, str) or not binding:
        raise BadRequest("binding must be a non-empty string")
    if not isinstance(did, str) or not 0 < len(did) <= MAX_ID:
        raise BadRequest(f"id must be a string of 1 to {MAX_ID} characters")
    if not isinstance(parts, list) or not 0 < len(parts) <= MAX_PARTS:
        raise BadRequest(f"parts must be a list of 1 to {MAX_PARTS} parts")
    for i, p in enumerate(parts):
        ok = isinstance(p, dict) and (
            (p.get("type") == "file" and isinstance(p.get("path"), str) and p["path"])
            or (p.get("type") == "text" and isinstance(p.get("text"), str) and p["text"].strip())
        )
        if not ok:
            raise BadRequest(f"part {i} must be {{type: file, path}} or {{type: text, text}}")
    return binding, did, parts


class Deliveries:
    """The Worker's side of `_ag2/deliver`."""

    def __init__(
        self,
        ledger: Ledger | None,
        worker_id: str,
        client: AsyncHubClient,
        admitted: Admitted,
        max_upload: int,
        enabled: bool,
        reason: str,
        standing: Standing | None = None,
        binding_of: Callable[[str], str | None] = lambda session: None,
        trigger_of: Callable[[str], str | None] = lambda session: None,
    ) -> None:
        self.ledger = ledger
        self.worker_id = worker_id
        self.client = client
        self.admitted = admitted
        self.standing = standing
        self.binding_of = binding_of  # an ACP session id → the binding issued in it
        # An ACP session id → the event its latest Turn serves: a delivery's cause, which the
        # hub takes from the Worker's fenced post (docs/delegation.md "Cause").
        self.trigger_of = trigger_of
        self._causes: dict[str, str] = {}  # a delivery id in progress → its cause
        # Set when a keyed 2xx came back without the echo: cleared by the next probe.
        self.withdrawn = False
        self.max_upload = max_upload
        self.enabled = enabled
        self.reason = reason
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}  # id → its lock, its users
        # Senders of this run's Turns: counted even when the ledger could not record them.
        self.seen: set[str] = set()

    async def handle(self, params: dict[str, Any]) -> dict[str, Any]:
        """Answer one request. The caller runs this in a task that the agent going away
        never cancels (`connect/acp.py`): a delivery accepted runs to completion."""
        binding, did, parts = check(params)
        session, turn = params.get("sessionId"), params.get("turn")
        return await self._handle(
            binding,
            did,
            parts,
            session if isinstance(session, str) else None,
            turn if isinstance(turn, str) else None,
        )

    def senders(self) -> set[str]:
        """Everyone this agent has had a Turn for: the ledger's, and this run's."""
        return (self.ledger.senders() if self.ledger is not None else set()) | self.seen

    @contextlib.asynccontextmanager
    async def _one_at_a_time(self, did: str) -> AsyncIterator[None]:
        """One request of an id at a time (a resend waits for the delivery it repeats); the
        lock goes when its last user does, so a Worker running for weeks keeps none."""
        lock, users = self._locks.get(did) or (asyncio.Lock(), 0)
        self._locks[did] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[did]
            if users == 1:
                del self._locks[did]
            else:
                self._locks[did] = (lock, users - 1)

    async def _handle(
        self,
        binding: str,
        did: str,
        parts: list[dict[str, Any]],
        session: str | None,
        turn: str | None,
    ) -> dict[str, Any]:
        async with self._one_at_a_time(did):
            cause = self.trigger_of(session) if session is not None else None
            if cause is not None:
                self._causes[did] = cause
            try:
                result = await self._decide(binding, did, parts, session, turn)
            finally:
                self._causes.pop(did, None)
        log.info("delivery %s under %s: %s %s", did, binding, result["status"], result.get("reason", ""))
        return result

    async def _decide(
        self,
        binding: str,
        did: str,
        parts: list[dict[str, Any]],
        session: str | None,
        turn: str | None,
    ) -> dict[str, Any]:
        if self.ledger is None:
            return retry(f"delivery is not enabled: {self.reason}", None)
        try:
            entry = self.ledger.get(did)  # rule 1: the ledger first
        except LedgerUnavailable as exc:
            log.error("ledger unreadable: %s", exc)
            return retry("the delivery ledger cannot be read", None)
        if entry is not None:
            expires = _iso(entry.first_seen + STOP_SECONDS)
            if entry.binding != binding:
                return final(CONFLICT, {"binding": entry.binding}, expires)
            if _shape(entry.parts) != _shape(parts):  # the same id, other parts: no resend
                why = "this delivery id was used for other parts"
                return final(CONFLICT, {"binding": entry.binding, "why": why}, expires)
            if entry.result is not None:
                return entry.result
            return await self._post(entry)
        if not binding.startswith(self.worker_id + "."):  # rule 2
            return final(NOT_MINE, {"binding": binding}, None)
        now = time.time()
        expires = _iso(now + STOP_SECONDS)
        try:
            b = self.ledger.binding(binding)
        except LedgerUnavailable:
            return retry("the delivery ledger cannot be read", None)
        if b is not None and not b.revoked and b.expires_at >= now:
            # Rule 3, whose work it is: a binding is honoured only for a request tied to a
            # Turn that may use it (a collaborator's Turn steering the agent into the
            # owner's binding is `rejected`).
            try:
                untied = self._not_its_turn(b, did, session, turn, now)
            except LedgerUnavailable:
                return retry("the delivery ledger cannot be read", None)
            if untied is not None:
                return final(REJECTED, {"binding": binding, "why": untied}, expires)
        if b is None or b.revoked or b.expires_at < now:  # rule 3
            why = "unknown" if b is None else ("revoked" if b.revoked else "expired")
            if b is not None and b.revoked and b.revoked_reason:
                why += f": {b.revoked_reason}"
            return final(REJECTED, {"binding": binding, "why": f"binding {why}"}, expires)
        if self.standing is not None:
            # Asked first: its answer about the sender (still there, who owns it) is also
            # what the collaborator check below judges an agent collaborator by.
            try:
                gone = await self.standing(b.room, b.who)
            except HubError as exc:
                why = f"the hub could not say whether {b.who} is in the room ({exc.code})"
                return retry(why, expires)
            if gone is not None:
                if not self._revoke(binding, gone):
                    return retry("the delivery ledger cannot be written", expires)
                data = {"binding": binding, "why": f"binding revoked: {gone}"}
                return final(REJECTED, data, expires)
        if not b.owner_tier and not await self.admitted(b.room, b.who):
            return final(REJECTED, {"binding": binding, "why": "collaborator no longer listed"}, expires)
        if not self.enabled:
            return retry(f"delivery is paused: {self.reason}", expires)
        for i, part in enumerate(parts):  # never cut: a text the hub cannot take is refused
            size = len(part["text"].strip()) if part["type"] == "text" else 0
            if size > MAX_TEXT:
                why = f"text of {size:,} characters; the hub takes at most {MAX_TEXT:,}"
                return final(REJECTED, {"part": i, "why": why}, expires)
        entry = Entry(did, binding, b.room, self.worker_id, parts, first_seen=now)
        _crash("before_first_seen")
        try:
            await self.ledger.first_seen(entry)  # rule 4: written ahead, before any hub call
        except LedgerUnavailable as exc:
            log.error("first-seen write failed: %s", exc)
            return retry("the delivery ledger cannot be written", expires)
        _crash("after_first_seen")
        entry.posted = {}
        return await self._post(entry, Path(b.export_dir))

    def _not_its_turn(
        self, b: Binding, did: str, session: str | None, turn: str | None, now: float
    ) -> str | None:
        """Why this request cannot be tied to a Turn that may use binding `b`, or None
        (docs/deliver.md "Whose work it is").

        With `turn`: the Turn it names must have been issued with this binding, and not be
        past the binding's life at that Turn. Its session does not matter (work may outlive
        the agent process, and the Worker); its Turn's event becomes the delivery's cause.
        Without: the seed's rule, from the ACP session the binding was issued in, and only
        while no one but the binding's sender has ever had a Turn with this agent. An agent
        that looks a session up by binding would otherwise deliver a collaborator's words
        under the owner's binding, and the Worker could not tell; "ever", because what a
        collaborator asked can wait in the agent's memory for a later moment."""
        assert self.ledger is not None
        if turn is not None:
            issued = self.ledger.turn(turn)
            if issued is None:
                return "unknown turn"
            if issued.binding != b.binding:
                return "the turn was issued for another binding"
            if issued.expires_at < now:
                return "the turn expired"
            self._causes[did] = issued.trigger
            return None
        live = self.binding_of(session) if session is not None else None
        if live != b.binding:
            if session is None:
                return "the request names no sessionId"
            if live is None:  # an agent restart ends its sessions (nothing was sent)
                return (
                    "the session is not live (the agent restarted?); deliver from the "
                    "session of its next Turn, or echo the turn of the Turn this work is for"
                )
            return "the binding was not issued in this session"
        if self.senders() - {b.who}:
            return (
                "the request echoes no turn, and more than one sender has had Turns with "
                "this agent: echo the turn of the Turn this work is for"
            )
        return None

    async def _post(self, e: Entry, export_dir: Path | None = None) -> dict[str, Any]:
        assert self.ledger is not None
        expires = _iso(e.first_seen + STOP_SECONDS)
        indices = order(e.parts)
        if all(str(i) in e.posted for i in indices):
            # Every part is recorded posted (the result was not written: the ledger failed,
            # or the Worker stopped in between). The ledger knows the answer, at any age.
            return await self._delivered(e, indices, expires)
        if time.time() > e.first_seen + STOP_SECONDS:  # rule 7: keys live 24 h
            return await self._final(e, EXPIRED, {"why": "23 hours passed"}, expires)
        if export_dir is None:
            b = self.ledger.binding(e.binding)
            export_dir = Path(b.export_dir) if b else None
        for index in order(e.parts):
            if str(index) in e.posted:
                continue
            key = keys.part_key(e.worker_id, e.id, index)
            part = e.parts[index]
            try:
                event_id = await self._post_part(
                    e.room, part, key, export_dir, self._causes.get(e.id)
                )
            except EgressRefused as exc:
                return await self._final(e, REJECTED, {"part": index, "why": str(exc)}, expires)
            except HubRefused as exc:
                # Another Worker took this agent over (docs/architecture.md#one-worker-per-agent).
                if exc.code == LEASE_LOST:
                    return retry(f"this Worker lost the agent's lease (part {index})", expires)
                reason = CONFLICT if exc.code == "idempotency_conflict" else REJECTED
                if exc.status == 409 and exc.body.get("state") == "unknown":
                    reason = UNKNOWN
                data: dict[str, Any] = {"part": index, "hub": exc.code}
                if exc.status in REVOKING_STATUSES:  # this agent may not post there any more
                    gone = f"the hub refused a post into the room ({exc.code})"
                    if self._revoke(e.binding, gone):
                        data["why"] = f"binding revoked: {gone}"
                return await self._final(e, reason, data, expires)
            except HubError as exc:  # 409 running, 5xx, timeouts, no connection
                return retry(f"the hub could not take part {index} now ({exc.code})", expires)
            try:
                self.ledger.note_posted(e, str(index), event_id)
            except LedgerUnavailable:
                return retry("the delivery ledger cannot be written", expires)
            _crash(f"after_part_{index}")
        return await self._delivered(e, indices, expires)

    async def _delivered(self, e: Entry, indices: list[int], expires: str) -> dict[str, Any]:
        """Every part is in the room. The result is on disk (with the part records queued
        before it) before `delivered` is answered: once told, a resend and a restart give
        the same answer, whatever happens to the files or the room afterwards."""
        assert self.ledger is not None
        result = delivered(indices, [e.posted[str(i)] for i in indices], expires)
        try:
            await self.ledger.finish(e, result)
        except LedgerUnavailable:
            # Every part is in the room, but the ledger cannot say so: a resend posts
            # nothing again (recorded parts, or the hub's keys) and finishes.
            return retry("the delivery ledger cannot be written", expires)
        return result

    async def _post_part(
        self,
        room: str,
        part: dict[str, Any],
        key: str,
        export_dir: Path | None,
        cause: str | None = None,
    ) -> str:
        if part["type"] == "text":
            res = await self.client.post_message(room, part["text"].strip(), key=key, cause=cause)
        else:
            if export_dir is None:
                raise EgressRefused("the binding's export folder is gone")
            # A relative path names a file in the binding's export folder (docs/deliver.md).
            path = part["path"] if part["path"].startswith("/") else f"{export_dir}/{part['path']}"
            opened = EgressRoots([export_dir], self.max_upload).open_path(path)
            mime = mimetypes.guess_type(opened.name)[0] or "application/octet-stream"
            with os.fdopen(opened.fd, "rb") as f:
                res = await self.client.upload_file(
                    room, f, opened.name, key=key, mime_type=mime, cause=cause
                )
        if res.idempotency_status not in ("created", "replayed"):
            # It did post; answer it delivered, and declare no more until a probe succeeds.
            self.enabled, self.withdrawn = False, True
            self.reason = "the hub answered a keyed post without Idempotency-Status"
            log.error("%s: delivery declaration withdrawn until the next probe", self.reason)
        return res.event.id

    def _revoke(self, binding: str, why: str) -> bool:
        """Revoke a binding in the ledger; False when the ledger cannot be written."""
        assert self.ledger is not None
        try:
            self.ledger.revoke(binding, why)
        except LedgerUnavailable as exc:
            log.error("binding %s not revoked (%s): %s", binding, why, exc)
            return False
        log.warning("binding %s revoked: %s", binding, why)
        return True

    def probed(self, hub_keys_echo: bool) -> None:
        """A probe after the declaration was withdrawn: declare again when the hub reports
        its keys' echo (docs/architecture.md#deferred-delivery)."""
        if self.withdrawn and hub_keys_echo:
            self.enabled, self.withdrawn, self.reason = True, False, ""
            log.info("delivery (_ag2/deliver): enabled again (the probe found the hub's keys echo)")

    async def _final(
        self, e: Entry, reason: str, data: dict[str, Any], expires: str
    ) -> dict[str, Any]:
        """Rule 6: a final after some parts posted says so in the room, once (keyed)."""
        assert self.ledger is not None
        sent = [k for k in e.posted if k != "notice"]
        if sent and "notice" not in e.posted:
            what = "may not have been sent" if reason == UNKNOWN else "could not be sent"
            text = f"Part of a delivery {what} ({reason}); {len(sent)} of {len(e.parts)} parts are above."
            try:
                res = await self.client.post_message(
                    e.room, text, key=keys.part_key(e.worker_id, e.id, "notice"),
                    metadata={"agentpost/notice": "delivery_partial"},
                )
                self.ledger.note_posted(e, "notice", res.event.id)  # committed with the finish
            except (HubError, LedgerUnavailable) as exc:
                if isinstance(exc, HubUnavailable) or not isinstance(exc, HubRefused):
                    return retry("the notice for a partial delivery could not be posted", expires)
                log.error("notice for delivery %s refused: %s", e.id, exc)
        result = final(reason, data, expires)
        try:
            await self.ledger.finish(e, result)
        except LedgerUnavailable:
            return retry("the delivery ledger cannot be written", expires)
        return result

    async def finish_in_progress(self) -> None:
        """At start: entries left in progress finish under their stored worker id."""
        if self.ledger is None:
            return
        try:
            entries = self.ledger.in_progress()
        except LedgerUnavailable:
            return
        for e in entries:
            async with self._one_at_a_time(e.id):
                try:
                    result = await self._post(e)
                except LedgerUnavailable as exc:  # the next resend of this id retries it
                    log.error("delivery %s not resumed at start: %s", e.id, exc)
                    continue
            log.info("delivery %s resumed at start: %s", e.id, result["status"])


def _crash(name: str) -> None:
    crash_point(name)
