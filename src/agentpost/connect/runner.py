"""Running Turns (docs/connect.md "Turns"): a wake-up's Turn in its Session — its reply posted
once under the Turn key (looked up first, so a restarted Worker does not run it again), the
prompt with the trigger's files, the Turn timeout and `/stop`, and the recent Turns that
`connect status` shows.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from agentpost.client import AsyncHubClient, Event, HubError, HubRefused, InboxItem
from agentpost.connect import keys, replies, turns
from agentpost.connect.acp import (
    AGENT_META,
    EVENT_META,
    AgentBroken,
    AgentFailed,
    PromptLink,
    RequestFailed,
    SessionFailed,
)
from agentpost.connect.agent import AgentSupervisor
from agentpost.connect.bindings import DELIVERY_META
from agentpost.connect.crash import crash_point, fail_point
from agentpost.connect.egress import EgressRoots
from agentpost.connect.sessions import Admission, SessionKey
from agentpost.connect.workspace import Workspace, WorkspaceError

log = logging.getLogger("agentpost.connect.worker")

CANCEL_GRACE = 15.0  # how long a cancelled agent may take to stop; never above the time limit
HUB_MAX_TEXT = 65536
RECENT_TURNS = 20
# A wake-up is run only while the hub still keeps its reply key for a while (docs/connect.md
# "The reply"): past
# `ttl - margin` an earlier reply would no longer be found, and the Turn could run twice.
TTL_MARGIN_MAX = 3600.0
# How far after an expired wake-up the room is read for this agent's reply to it.
REPLY_PAGE = 500
REPLY_SCAN = 20_000

# A Turn's `_meta["ag2/delivery"]` (its Session key, its trigger's id): the binding, and the
# Turn's `turn` (docs/deliver.md "Whose work it is"); {} when the agent gets none.
SessionMeta = Callable[[SessionKey, str], dict[str, Any]]


def without_turn(meta: dict[str, Any]) -> dict[str, Any]:
    """A Turn's `_meta` as `session/new` gets it: the binding, never one Turn's `turn`."""
    delivery = meta.get(DELIVERY_META)
    if not isinstance(delivery, dict):
        return meta
    return {**meta, DELIVERY_META: {k: v for k, v in delivery.items() if k != "turn"}}


@dataclass
class RunningTurn:
    key: SessionKey
    trigger: Event
    session_id: str | None = None
    cancelled: bool = False
    cancel_event: asyncio.Event = field(default_factory=asyncio.Event)


@dataclass
class TurnSettings:
    worker_id: str
    member_id: str
    me: str
    turn_timeout: float
    agent_start_wait: float
    key_ttl_seconds: int = 86400

    def run_window(self) -> float:
        """Seconds after its event a wake-up may still be run (`ttl - margin`)."""
        return self.key_ttl_seconds - min(TTL_MARGIN_MAX, self.key_ttl_seconds / 10)


class TurnRunner:
    def __init__(
        self,
        settings: TurnSettings,
        client: AsyncHubClient,
        agent: AgentSupervisor,
        workspace: Workspace,
        egress: EgressRoots,
        admission: Admission,
        session_meta: SessionMeta,
        counters: dict[str, int],
        on_turn_end: Callable[[], None],
    ) -> None:
        self.settings = settings
        self.client = client
        self.agent = agent
        self.workspace = workspace
        self.egress = egress
        self.admission = admission
        self.session_meta = session_meta
        self.counters = counters
        self.on_turn_end = on_turn_end
        self.running: dict[str, RunningTurn] = {}
        self.recent: list[dict[str, Any]] = []
        self._room_names: dict[str, str] = {}

    async def turn(self, key: SessionKey, item: InboxItem) -> None:
        ev = item.event
        s = self.settings
        started = time.time()
        delegated = s.me in (ev.metadata.get("delegated_to") or [])
        if await self._answered_before(ev, delegated):
            return
        ended = await self._not_to_run(ev)
        if ended is not None and ended.outcome == turns.EXPIRED and await self._replied(ev):
            # Past the key lifetime the reply's key is forgotten, but the reply itself is in
            # the room: answered, not "not run" (that would be false).
            log.info("reply to %s is in the room (its key has expired); not running it", ev.id)
            return
        if ended is not None:
            log.warning("Turn %s not run: %s", ev.id, ended.outcome)
            await self._finish(ev, ended, delegated, started)
            return
        self.counters["turns"] += 1
        running = RunningTurn(key, ev)
        self.running[ev.id] = running
        try:
            result = await self._prompt(running)
        finally:
            self.running.pop(ev.id, None)
        await self._finish(ev, result, delegated, started)

    async def _answered_before(self, ev: Event, delegated: bool) -> bool:
        """The reply is in the room already: posted by this Worker before a restart, by
        another Worker of this agent, or under the worker-id key of an older Worker. A
        reply the hub refused counts too, once the notice in its place is posted (a Worker
        stopped between the two posts it now)."""
        s = self.settings
        for turn_key in (keys.turn_key(s.member_id, ev.id), keys.turn_key(s.worker_id, ev.id)):

            def state(turn_key: str = turn_key) -> Awaitable[Any]:
                return self.client.send_state(ev.room, turn_key)

            known = await replies.until_answered(f"send state of {ev.id}", state)
            if known is None:
                continue
            log.info("reply to %s was posted before (%s); not running it again",
                     ev.id, known.state)
            if known.state == "rejected" and turn_key == keys.turn_key(s.member_id, ev.id):
                err = known.response.get("error")
                err = err if isinstance(err, dict) else {}
                refusal = HubRefused(
                    str(err.get("code", "command_rejected")),
                    str(err.get("message", "")),
                    known.status,
                    err,
                )
                kind = "error" if delegated else None
                await replies.tell_refused(self.client, s.member_id, ev.room, ev.id, kind, refusal)
            self._forget_journal(ev.id)
            return True
        return False

    async def _replied(self, ev: Event) -> bool:
        """Whether this agent's reply to `ev` is among the room's events after it (read
        page by page, up to REPLY_SCAN events): what a wake-up older than the hub's key
        lifetime is asked, when its reply's key can no longer be looked up."""
        after = ev.seq
        for _ in range(REPLY_SCAN // REPLY_PAGE):

            def page(after: int = after) -> Awaitable[list[Event]]:
                return self.client.events(ev.room, after=after, limit=REPLY_PAGE)

            try:
                found = await replies.until_answered(f"the replies to {ev.id}", page)
            except HubRefused as exc:  # the room cannot be read now: say "not run" as before
                log.warning("the replies to %s cannot be read: %s", ev.id, exc)
                return False
            if not found:
                return False
            for e in found:
                mine = e.sender_id == self.settings.member_id if e.sender_id else (
                    e.sender == self.settings.me
                )
                if mine and e.in_reply_to == ev.id:
                    return True
            after = found[-1].seq
        return False

    def _forget_journal(self, trigger: str) -> None:
        try:
            self.workspace.clear_turn(trigger)
        except (OSError, WorkspaceError) as exc:
            log.warning("Turn journal of %s not removed: %s", trigger, exc)

    async def _not_to_run(self, ev: Event) -> turns.TurnResult | None:
        """A Turn that must not run (again): its wake-up is past the hub's key lifetime, or
        an earlier run posted part of its reply before it was interrupted."""
        s = self.settings
        age = _age_seconds(ev.created_at, self.client.hub_clock_skew())
        if age is not None and age > s.run_window():
            return turns.failed(
                turns.EXPIRED, f"{int(age)} s old, keys kept {s.key_ttl_seconds} s", None
            )
        try:
            journaled = self.workspace.read_turn(ev.id)
        except WorkspaceError as exc:  # fail closed: part of the reply may be in the room
            log.error("Turn journal of %s: %s; treating the Turn as interrupted", ev.id, exc)
            return turns.failed(turns.INTERRUPTED, "", None)
        if journaled is None:
            return None
        landed = 0
        for part_key in journaled:

            def state(part_key: str = part_key) -> Awaitable[Any]:
                return self.client.send_state(ev.room, part_key)

            found = await replies.until_answered(f"send state of a part of {ev.id}", state)
            if found is not None and found.state == "created":
                landed += 1
        if landed:
            return turns.failed(turns.INTERRUPTED, f"{landed} part(s) of it were posted", None)
        self._forget_journal(ev.id)  # nothing landed: run it as if for the first time
        return None

    async def _finish(
        self, ev: Event, result: turns.TurnResult, delegated: bool, started: float
    ) -> None:
        s = self.settings
        kind = turns.reply_kind(result, delegated)
        text = turns.reply_text(result, s.me)[:HUB_MAX_TEXT]

        def journal(part_keys: list[str]) -> bool:
            try:
                self.workspace.write_turn(ev.id, part_keys)
            except (OSError, WorkspaceError) as exc:
                log.error("Turn journal of %s not written (%s); its files are not sent",
                          ev.id, exc)
                return False
            return True

        posted = await replies.post_turn(
            self.client,
            s.member_id,
            ev.room,
            ev.id,
            text,
            result.links,
            self.egress,
            kind,
            journal,
            result.named,
        )
        crash_point("after_post")
        fail_point("after_post")
        self._forget_journal(ev.id)
        if result.outcome not in (turns.END_TURN, turns.NEEDS_INPUT):
            self.counters["errors"] += 1
        if posted.reply is not None:
            self.counters["replies"] += 1
        self._remember(ev, result, kind, posted, started)
        log.info(
            "Turn %s in %s from %s: %s, reply %s %s [%s]",
            ev.id,
            ev.room,
            ev.sender,
            result.outcome,
            posted.reply.event.id if posted.reply else "-",
            kind or "",
            " ".join(f"{k}={v}" for k, v in self.counters.items()),
        )

    async def failed_unexpectedly(self, item: InboxItem, exc: BaseException) -> None:
        """A bug of the Worker ended the Turn: the room is told
        (docs/architecture.md#no-turn-ends-in-silence), unless its reply had landed before the bug
        struck."""
        ev = item.event
        delegated = self.settings.me in (ev.metadata.get("delegated_to") or [])
        if await self._answered_before(ev, delegated):
            return
        result = turns.failed(turns.WORKER_ERROR, type(exc).__name__, None)
        await self._finish(ev, result, delegated, time.time())

    async def _prompt(self, running: RunningTurn) -> turns.TurnResult:
        ev = running.trigger
        fail_point("turn_start")
        try:
            conn = await self.agent.wait_ready(self.settings.agent_start_wait)
            delivery = self.session_meta(running.key, ev.id)
            folder = running.key.folder()
            session_id = await self.agent.session_for(
                conn, running.key, without_turn(delivery), [self.workspace.session_files_dir(folder)]
            )
            # The policy holds only while the agent asks: its asking mode, before each Turn.
            await self.agent.permissions.hold_mode(conn, session_id)
        except SessionFailed as exc:  # the agent runs, but would not open this Session
            return turns.failed(turns.SESSION_FAILED, str(exc), None)
        except AgentFailed as exc:
            return turns.failed(turns.AGENT_UNAVAILABLE, str(exc), None)
        running.session_id = session_id
        # What its deliveries serve (docs/architecture.md#cause).
        self.agent.triggers[session_id] = ev.id
        readable = self.workspace.turn_files_path(folder, ev.id)
        collector = turns.TurnCollector(session_id, readable=readable)
        self.agent.listen(session_id, collector.add, collector)
        try:
            links = await self._attachments(ev, folder)
            text = await self._prompt_text(ev)
            # Names the work (a remote A2A task's messageId, and its cause) and whom it is
            # for (an A2A bridge never forwards its own agent's mention: docs/a2a.md).
            # And its binding with the Turn's `turn`, which a delivery of this work echoes.
            named: dict[str, Any] = {EVENT_META: ev.id, AGENT_META: self.settings.me, **delivery}
            prompt = asyncio.ensure_future(conn.prompt(session_id, text, links, named))
            cancel_wait = asyncio.ensure_future(running.cancel_event.wait())
            try:
                done, _ = await asyncio.wait(
                    {prompt, cancel_wait},
                    timeout=self.settings.turn_timeout,
                    return_when=asyncio.FIRST_COMPLETED,
                )
                if prompt not in done:
                    await conn.cancel(session_id)
                    try:
                        grace = min(CANCEL_GRACE, self.settings.turn_timeout)
                        end = await asyncio.wait_for(asyncio.shield(prompt), grace)
                    except TimeoutError:
                        prompt.cancel()
                        outcome = turns.CANCELLED if running.cancelled else turns.TIMEOUT
                        return turns.failed(outcome, "the agent did not stop in time", collector)
                    if not running.cancelled:
                        return turns.failed(turns.TIMEOUT, "", collector)
                    return turns.ended(turns.CANCELLED, end.meta, collector, cancel_asked=True)
                end = prompt.result()
            finally:
                cancel_wait.cancel()
                if not prompt.done():
                    prompt.cancel()
            if running.cancelled and end.stop_reason == turns.END_TURN:
                return turns.ended(turns.CANCELLED, end.meta, collector, cancel_asked=True)
            return turns.ended(end.stop_reason, end.meta, collector, running.cancelled)
        except AgentBroken as exc:
            return turns.failed(turns.AGENT_BROKEN, str(exc), collector)
        except AgentFailed as exc:
            return turns.failed(turns.AGENT_CRASH, str(exc), collector)
        except RequestFailed as exc:
            return turns.failed(turns.ERROR, str(exc), collector)
        finally:
            self.agent.unlisten(session_id)

    async def _prompt_text(self, ev: Event) -> str:
        name = self._room_names.get(ev.room)
        if name is None:
            try:
                name = (await self.client.room(ev.room)).name
            except HubError:
                name = ev.room
            self._room_names[ev.room] = name
        return f"{ev.sender} in room {name}: {ev.text}"

    async def _attachments(self, ev: Event, session_folder: str) -> list[PromptLink]:
        """The trigger's files, saved in its Session's attachment folder (which the agent
        may read), as resource links."""
        links = []
        for a in ev.attachments:
            folder = self.workspace.turn_files_dir(session_folder, ev.id)
            dest = folder / attachment_file_name(a.id, a.name)
            try:
                if not dest.exists():
                    media_id, size = a.id, a.size

                    def fetch(
                        media_id: str = media_id, dest: Path = dest, size: int = size
                    ) -> Awaitable[int]:
                        return self.client.download(media_id, dest, size)

                    await replies.until_answered(f"media {a.id}", fetch)
            except HubRefused as exc:
                log.warning("attachment %s of %s not saved: %s", a.id, ev.id, exc)
                continue
            links.append(PromptLink(dest.resolve().as_uri(), a.name, a.mime_type))
        return links

    async def stop_turns(self, ev: Event) -> None:
        """`/stop` (or the cancel route) in a room: cancel the Turns running there."""
        if ev.sender_kind != "human":
            if await self.admission.key_for(ev.room, ev.sender, ev.sender_kind, ev.sender_id) is None:
                log.info("stop from %s ignored (not a person or collaborator)", ev.sender)
                return
        for running in list(self.running.values()):
            if running.trigger.room == ev.room and not running.cancelled:
                running.cancelled = True
                log.info("cancelling the Turn for %s on %s's stop", running.trigger.id, ev.sender)
                running.cancel_event.set()

    def _remember(
        self,
        ev: Event,
        result: turns.TurnResult,
        kind: str | None,
        posted: replies.Posted,
        started: float,
    ) -> None:
        self.recent.append(
            {
                "trigger": ev.id,
                "room": ev.room,
                "sender": ev.sender,
                "outcome": result.outcome,
                "reply_kind": kind,
                "reply_event": posted.reply.event.id if posted.reply else None,
                "files": posted.files,
                "refused_files": posted.refused,
                "refused_permissions": [what for what, _ in result.refused],
                "hub_refusal": posted.final_error.code if posted.final_error else None,
                "started_at": started,
                "ended_at": time.time(),
            }
        )
        del self.recent[:-RECENT_TURNS]
        self.on_turn_end()


def _age_seconds(created_at: str, skew: float = 0.0) -> float | None:
    """Seconds since an event's `created_at` (RFC 3339 UTC) by the hub's clock (`skew`:
    this machine's clock minus the hub's); None when it cannot be read."""
    try:
        made = datetime.fromisoformat(created_at.replace("Z", "+00:00"))
    except ValueError:
        return None
    return time.time() - skew - made.timestamp()


def attachment_file_name(media_id: str, name: str) -> str:
    """The saved file's name: the media id and the name's letters, digits, `.`, `-` and `_`
    (others become `_`), so its `file://` link needs no percent-encoding (Gemini CLI turns a
    link into a path without decoding it); the link's `name` keeps the name as given."""
    base = os.path.basename(name)
    slug = "".join(c if c.isascii() and (c.isalnum() or c in "._-") else "_" for c in base)
    return f"{media_id}-{slug.lstrip('.') or 'file'}"[:200]
