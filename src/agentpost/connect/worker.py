"""The Worker (DESIGN.md §6): one agent member on the hub, one spawned ACP agent.

It follows the member's inbox (SSE, with long-poll fallback) from the cursor it
acknowledged, turns each wake-up into a Turn of the Session its sender maps to, posts the
reply under the Turn key, and acknowledges a wake-up only once its reply is posted (or it
is decided that it gets no Turn). Turns of one Session run one after another; Sessions
run side by side; the acknowledged cursor only passes wake-ups that are all done.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentpost.client import AsyncHubClient, Event, HubError, HubRefused, InboxItem
from agentpost.connect import bindings, keys, replies, turns
from agentpost.connect.acp import (
    AgentFailed,
    InvalidParams,
    MethodNotFound,
    PromptLink,
    RequestFailed,
)
from agentpost.connect.agent import AgentSupervisor
from agentpost.connect.deliver import BadRequest, Deliveries
from agentpost.connect.egress import EgressRoots
from agentpost.connect.ledger import Ledger, LedgerUnavailable
from agentpost.connect.permissions import PermissionPolicy
from agentpost.connect.sessions import Admission, SessionKey
from agentpost.connect.workspace import LEDGER, Workspace, WorkspaceError

log = logging.getLogger("agentpost.connect.worker")

CRASH_ENV = "AGENTPOST_CONNECT_CRASH_POINT"
STOP = "/stop"
CANCEL_GRACE = 15.0
MAX_REPLY_CHARS = 60000
RECENT_TURNS = 20
LONG_POLL = 20.0
# The Worker's heartbeat (DESIGN.md §12): it asks the hub how it sees this member this
# often. The request itself stamps the member as seen (its inbox stream does too), and the
# answer is what `connect status` shows as the Worker's presence.
HEARTBEAT_ENV = "AGENTPOST_CONNECT_HEARTBEAT"
HEARTBEAT = 20.0


@dataclass
class WorkerConfig:
    agent_argv: list[str]
    hub: str
    token: str
    workspace_dir: Path
    repo: Path
    collaborators: list[str] = field(default_factory=list)
    egress_roots: list[Path] = field(default_factory=list)
    allow_permissions: list[str] = field(default_factory=list)
    turn_timeout: float = 1800.0
    agent_start_wait: float = 60.0


def crash_point(name: str) -> None:
    """Tests: `AGENTPOST_CONNECT_CRASH_POINT=name` kills this Worker with SIGKILL there."""
    if os.environ.get(CRASH_ENV) == name:
        log.critical("crash point %s reached: SIGKILL", name)
        os.kill(os.getpid(), signal.SIGKILL)


@dataclass
class RunningTurn:
    key: SessionKey
    trigger: Event
    session_id: str | None = None
    cancelled: bool = False
    cancel_event: asyncio.Event = field(default_factory=asyncio.Event)


class Worker:
    def __init__(self, config: WorkerConfig, client: AsyncHubClient | None = None) -> None:
        self.config = config
        self.client = client or AsyncHubClient(config.hub, config.token)
        self.workspace = Workspace(config.workspace_dir)
        self.worker_id = ""
        self.me = ""
        self.workspace_name = ""
        self.owner: str | None = None
        self.admission: Admission | None = None
        self.egress: EgressRoots | None = None
        self.agent = AgentSupervisor(
            config.agent_argv,
            config.repo,
            PermissionPolicy(config.allow_permissions),
            ext=self._ext,
            client_meta=self._client_meta,
        )
        self.ledger: Ledger | None = None
        self.deliveries: Deliveries | None = None
        self.counters = {
            "wakeups": 0,
            "turns": 0,
            "replies": 0,
            "errors": 0,
            "no_turn": 0,
            "acks": 0,
        }
        self.acked = 0
        self._seen: set[int] = set()
        self._open: set[int] = set()
        self._max_seen = 0
        self._queues: dict[SessionKey, asyncio.Queue[InboxItem]] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._running: dict[str, RunningTurn] = {}
        self._told: set[tuple[str, str]] = set()
        self._recent: list[dict[str, Any]] = []
        self._room_names: dict[str, str] = {}
        self._ack_lock = asyncio.Lock()
        self._stop = asyncio.Event()
        self.presence: dict[str, Any] = {}

    # -- start and stop ---------------------------------------------------------------

    async def run(self) -> int:
        """Run until SIGTERM/SIGINT (0) or a refusal of this agent's token (1)."""
        self.workspace.prepare()
        self.workspace.lock()
        id_problem = self._worker_identity()
        me = await replies.until_answered("who am I", self.client.me)
        self.me = str(me["member"]["name"])
        self.owner = me["member"].get("owner")
        self.workspace_name = str(me["workspace"]["name"])
        self.acked = int(me.get("inbox_cursor", 0))
        if me["member"]["kind"] != "agent":
            log.error("%s is a %s, not an agent member", self.me, me["member"]["kind"])
            return 1
        caps = await replies.until_answered("capabilities", self.client.capabilities)
        max_upload = int(caps.get("max_upload_bytes", 25 * 1024 * 1024))
        self.egress = EgressRoots([self.config.repo, *self.config.egress_roots], max_upload)
        self.admission = Admission(
            self.me,
            self.owner,
            self.config.collaborators,
            self.workspace.root / "collaborators",
            self._owner_of,
        )
        self._declare(caps, max_upload, id_problem)
        assert self.deliveries is not None
        self._spawn(self.deliveries.finish_in_progress())
        log.info(
            "worker %s for agent %s (owner %s) in %s; inbox acknowledged up to %d",
            self.worker_id,
            self.me,
            self.owner,
            self.workspace_name,
            self.acked,
        )
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._stop.set)
        loop.add_signal_handler(signal.SIGHUP, self._reload)
        supervisor = asyncio.create_task(self.agent.run())
        follower = asyncio.create_task(self._follow())
        status = asyncio.create_task(self._status_loop())
        heartbeat = asyncio.create_task(self._heartbeat())
        stopper = asyncio.create_task(self._stop.wait())
        done, _ = await asyncio.wait({follower, stopper}, return_when=asyncio.FIRST_COMPLETED)
        code = 0
        if follower in done and follower.exception() is not None:
            exc = follower.exception()
            log.error("the Worker stops: %s", exc)
            code = 1
        for t in (follower, stopper, status, heartbeat, *self._tasks):
            t.cancel()
        await self.agent.stop()
        supervisor.cancel()
        await asyncio.gather(supervisor, *self._tasks, return_exceptions=True)
        self._write_status()
        await self.client.aclose()
        return code

    # -- deferred delivery: declaring (DESIGN.md §6 "Declaring", "Ledger") ------------

    def _worker_identity(self) -> str | None:
        """Set the worker id; a reason delivery cannot be enabled because of it, or None."""
        ledger_path = self.workspace.root / LEDGER
        problem: str | None
        try:
            found = self.workspace.read_worker_id()
        except WorkspaceError as exc:
            found, problem = None, str(exc)
        else:
            problem = None if found else "worker-id is missing"
        if found is None and not ledger_path.exists():
            self.worker_id = self.workspace.worker_id()  # first start: minted once
            return None
        ledger = Ledger(ledger_path)
        try:
            ledger.open()
            stored = ledger.worker_ids()
        except LedgerUnavailable as exc:
            stored, problem = set(), problem or f"the ledger cannot be read ({exc})"
        self.ledger = ledger
        if found is not None:
            self.worker_id = found
            if stored - {found}:
                return "worker-id disagrees with the ledger's entries"
            return problem
        if len(stored) == 1:  # Turns keep their keys; delivery stays off (never re-mint)
            self.worker_id = next(iter(stored))
        else:
            raise WorkspaceError(
                f"{problem} and the ledger names {len(stored)} worker ids; "
                "restore worker-id or move deliveries.sqlite3 away"
            )
        return f"{problem}; a new one is never minted over an existing ledger"

    def _declare(self, caps: dict[str, Any], max_upload: int, id_problem: str | None) -> None:
        reason = id_problem
        idem = caps.get("room_post_idempotency")
        export = bindings.export_root(self.workspace.root)
        if reason is None and not (
            isinstance(idem, dict) and idem.get("status_header") == "Idempotency-Status"
        ):
            reason = "the hub does not report room_post_idempotency"
        if reason is None:
            for root in [self.config.repo, *self.config.egress_roots]:
                real = Path(os.path.realpath(root))
                if real == Path(os.path.realpath(export)) or real in Path(
                    os.path.realpath(export)
                ).parents:
                    reason = f"Turn egress root {root} contains {export}"
                    break
        if reason is None:
            try:
                if self.ledger is None:
                    self.ledger = Ledger(self.workspace.root / LEDGER)
                self.ledger.open()
                bindings.ensure_folder(export)
                self.ledger.prune(time.time())
            except (LedgerUnavailable, OSError) as exc:
                reason = f"the ledger cannot be used ({exc})"
        enabled = reason is None
        self.deliveries = Deliveries(
            self.ledger,
            self.worker_id,
            self.client,
            self._still_admitted,
            max_upload,
            enabled,
            reason or "",
        )
        if enabled:
            log.info("delivery (_ag2/deliver): enabled (hub keys echo, ledger locked, roots apart)")
        else:
            log.warning("delivery (_ag2/deliver): not enabled: %s", reason)

    def _client_meta(self) -> dict[str, Any]:
        on = self.deliveries is not None and self.deliveries.enabled
        return {"ag2/deliver": True} if on else {}

    def _agent_delivers(self) -> bool:
        conn = self.agent.conn
        return (
            self.deliveries is not None
            and self.deliveries.enabled
            and conn is not None
            and conn.agent_meta.get("ag2/deliver") is True
        )

    async def _still_admitted(self, room: str, who: str) -> bool:
        """A collaborator binding's sender, re-checked at every delivery (§6)."""
        assert self.admission is not None
        return await self.admission.key_for(room, who, "agent") is not None

    async def _ext(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method != "ag2/deliver" or self.deliveries is None:
            log.info("agent asked for unknown extension _%s: method not found", method)
            raise MethodNotFound(method)
        try:
            return await self.deliveries.handle(params)
        except BadRequest as exc:
            raise InvalidParams(str(exc)) from exc

    def _reload(self) -> None:
        if self.admission is not None:
            self.admission.reload()

    async def _owner_of(self, name: str) -> str | None:
        try:
            m = await self.client.member(self.workspace_name, name)
        except HubError as exc:
            log.warning("cannot learn who owns %s: %s", name, exc)
            return None
        return m.owner if m.status == "active" else None

    # -- following the inbox ----------------------------------------------------------

    async def _follow(self) -> None:
        after: int | None = None
        delay = 0.5
        while True:
            try:
                async for item in self.client.inbox_stream(after):
                    after = item.cursor
                    await self._accept(item)
                    delay = 0.5
            except HubRefused as exc:
                if exc.status in (401, 403):
                    raise RuntimeError(f"the hub refuses this agent's token: {exc}") from exc
                log.warning("inbox stream refused: %s", exc)
            except HubError as exc:
                log.warning("inbox stream cut (%s); long-polling", exc)
            try:  # the fallback: one long poll, then the stream again
                page = await self.client.inbox(after=after, wait=LONG_POLL)
                for item in page.items:
                    after = item.cursor
                    await self._accept(item)
            except HubRefused as exc:
                if exc.status in (401, 403):
                    raise RuntimeError(f"the hub refuses this agent's token: {exc}") from exc
                await asyncio.sleep(delay)
            except HubError as exc:
                log.warning("inbox long poll failed (%s); retrying in %.1fs", exc, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 15.0)

    async def _accept(self, item: InboxItem) -> None:
        if item.cursor in self._seen or item.cursor <= self.acked:
            return
        self._seen.add(item.cursor)
        self._open.add(item.cursor)
        self._max_seen = max(self._max_seen, item.cursor)
        self.counters["wakeups"] += 1
        ev = item.event
        assert self.admission is not None
        if ev.sender == self.me:
            await self._done(item.cursor)
            return
        if ev.text == STOP or ev.text.startswith(STOP + " "):
            await self._stop_turns(ev)
            await self._done(item.cursor)
            return
        key = await self.admission.key_for(ev.room, ev.sender, ev.sender_kind)
        if key is None:
            self.counters["no_turn"] += 1
            self._spawn(self._tell_outsider(item))
            return
        queue = self._queues.get(key)
        if queue is None:
            queue = asyncio.Queue()
            self._queues[key] = queue
            self._spawn(self._session_loop(key, queue))
        queue.put_nowait(item)

    def _spawn(self, coro: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _done(self, cursor: int) -> None:
        """A wake-up is finished: acknowledge every cursor up to the first one still open."""
        self._open.discard(cursor)
        top = min(self._open) - 1 if self._open else self._max_seen
        if top <= self.acked:
            return
        async with self._ack_lock:
            if top <= self.acked:
                return
            try:
                self.acked = await replies.until_answered(
                    f"ack {top}", lambda: self.client.ack(top)
                )
                self.counters["acks"] += 1
            except HubRefused as exc:
                log.error("ack %d refused: %s", top, exc)

    # -- who gets no Turn -------------------------------------------------------------

    async def _tell_outsider(self, item: InboxItem) -> None:
        ev = item.event
        pair = (ev.room, ev.sender)
        try:
            if pair not in self._told:
                self._told.add(pair)
                text = (
                    f"@{self.me} answers only its owner"
                    + (f" ({self.owner})" if self.owner else "")
                    + " and listed collaborators."
                )
                await replies.until_answered(
                    f"notice to {ev.sender}",
                    lambda: self.client.post_message(
                        ev.room,
                        text,
                        key=keys.outsider_notice_key(self.worker_id, ev.room, ev.sender),
                        in_reply_to=ev.id,
                        metadata={"agentpost/notice": "not_admitted"},
                    ),
                )
            log.info("no Turn for %s in %s (not owner or collaborator)", ev.sender, ev.room)
        except HubRefused as exc:
            log.warning("notice to %s refused: %s", ev.sender, exc)
        finally:
            await self._done(item.cursor)

    # -- Turns ------------------------------------------------------------------------

    async def _session_loop(self, key: SessionKey, queue: asyncio.Queue[InboxItem]) -> None:
        while True:
            item = await queue.get()
            try:
                await self._turn(key, item)
            except asyncio.CancelledError:
                raise
            except Exception:  # one Turn's bug must not stop its Session; the wake-up stays
                log.exception("Turn for %s failed unexpectedly; it is left unacknowledged", key)
                continue
            await self._done(item.cursor)

    async def _turn(self, key: SessionKey, item: InboxItem) -> None:
        ev = item.event
        turn_key = keys.turn_key(self.worker_id, ev.id)
        known = await replies.until_answered(
            f"send state of {ev.id}", lambda: self.client.send_state(ev.room, turn_key)
        )
        if known is not None:
            log.info("reply to %s was posted before (%s); not running it again", ev.id, known.state)
            return
        started = time.time()
        self.counters["turns"] += 1
        running = RunningTurn(key, ev)
        self._running[ev.id] = running
        try:
            result = await self._prompt(running)
        finally:
            self._running.pop(ev.id, None)
        delegated = self.me in (ev.metadata.get("delegated_to") or [])
        kind = turns.reply_kind(result, delegated)
        text = turns.reply_text(result, self.me)[:MAX_REPLY_CHARS]
        posted = await replies.post_turn(
            self.client,
            self.worker_id,
            ev.room,
            ev.id,
            text,
            result.links,
            self.egress,
            kind,
        )
        crash_point("after_post")
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

    async def _prompt(self, running: RunningTurn) -> turns.TurnResult:
        ev = running.trigger
        try:
            conn = await self.agent.wait_ready(self.config.agent_start_wait)
            meta: dict[str, Any] = {}
            if self._agent_delivers() and self.ledger is not None:
                try:
                    b = bindings.renew(self.ledger, self.workspace.root, self.worker_id, running.key)
                    meta = bindings.session_meta(b)
                except (LedgerUnavailable, OSError) as exc:
                    log.error("binding for %s not renewed: %s", running.key.label(), exc)
            session_id = await self.agent.session_for(conn, running.key, meta)
        except AgentFailed as exc:
            return turns.failed(turns.AGENT_UNAVAILABLE, str(exc), None)
        running.session_id = session_id
        collector = turns.TurnCollector(session_id)
        self.agent.listen(session_id, collector.add)
        try:
            links = await self._attachments(ev)
            text = await self._prompt_text(ev)
            prompt = asyncio.ensure_future(conn.prompt(session_id, text, links))
            cancel_wait = asyncio.ensure_future(running.cancel_event.wait())
            try:
                done, _ = await asyncio.wait(
                    {prompt, cancel_wait},
                    timeout=self.config.turn_timeout,
                    return_when=asyncio.FIRST_COMPLETED,
                )
                if prompt not in done:
                    await conn.cancel(session_id)
                    try:
                        end = await asyncio.wait_for(asyncio.shield(prompt), CANCEL_GRACE)
                    except TimeoutError:
                        prompt.cancel()
                        outcome = turns.CANCELLED if running.cancelled else turns.TIMEOUT
                        return turns.failed(outcome, "the agent did not stop in time", collector)
                    if not running.cancelled:
                        return turns.failed(turns.TIMEOUT, "", collector)
                    return turns.ended(turns.CANCELLED, end.meta, collector)
                end = prompt.result()
            finally:
                cancel_wait.cancel()
                if not prompt.done():
                    prompt.cancel()
            if running.cancelled and end.stop_reason == turns.END_TURN:
                return turns.ended(turns.CANCELLED, end.meta, collector)
            return turns.ended(end.stop_reason, end.meta, collector)
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

    async def _attachments(self, ev: Event) -> list[PromptLink]:
        """The trigger's files, saved where the agent can read them, as resource links."""
        links = []
        for a in ev.attachments:
            folder = self.workspace.files_dir(ev.id)
            safe = os.path.basename(a.name) or a.id
            dest = folder / f"{a.id}-{safe}"
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

    async def _stop_turns(self, ev: Event) -> None:
        """`/stop` (or the cancel route) in a room: cancel the Turns running there."""
        if ev.sender_kind != "human":
            assert self.admission is not None
            if await self.admission.key_for(ev.room, ev.sender, ev.sender_kind) is None:
                log.info("stop from %s ignored (not a person or collaborator)", ev.sender)
                return
        for running in list(self._running.values()):
            if running.trigger.room == ev.room and not running.cancelled:
                running.cancelled = True
                log.info("cancelling the Turn for %s on %s's stop", running.trigger.id, ev.sender)
                running.cancel_event.set()

    # -- status -----------------------------------------------------------------------

    def _remember(
        self,
        ev: Event,
        result: turns.TurnResult,
        kind: str | None,
        posted: replies.Posted,
        started: float,
    ) -> None:
        self._recent.append(
            {
                "trigger": ev.id,
                "room": ev.room,
                "sender": ev.sender,
                "outcome": result.outcome,
                "reply_kind": kind,
                "reply_event": posted.reply.event.id if posted.reply else None,
                "files": posted.files,
                "refused_files": posted.refused,
                "hub_refusal": posted.final_error.code if posted.final_error else None,
                "started_at": started,
                "ended_at": time.time(),
            }
        )
        del self._recent[:-RECENT_TURNS]
        self._write_status()

    def status(self) -> dict[str, Any]:
        conn = self.agent.conn
        return {
            "worker_id": self.worker_id,
            "pid": os.getpid(),
            "member": self.me,
            "owner": self.owner,
            "hub": self.config.hub,
            "agent": {
                "command": self.config.agent_argv,
                "alive": conn is not None and conn.alive(),
                "pid": conn.pid if conn else None,
                "restarts": self.agent.restarts,
                "last_failure": self.agent.last_failure,
                "stderr_tail": conn.stderr_tail()[-2000:] if conn else "",
            },
            "sessions": [
                {"room": k.room, "who": k.who, "session_id": s}
                for k, s in self.agent.sessions.items()
            ],
            "collaborators": sorted(self.admission.collaborators) if self.admission else [],
            "inbox": {"acked": self.acked, "seen": self._max_seen, "open": sorted(self._open)},
            "running": [r.trigger.id for r in self._running.values()],
            "turns": list(self._recent),
            "delivery": self._delivery_status(),
            "presence": dict(self.presence),
            "counters": dict(self.counters),
            "updated_at": time.time(),
        }

    def _delivery_status(self) -> dict[str, Any]:
        d = self.deliveries
        out: dict[str, Any] = {"enabled": bool(d and d.enabled), "reason": d.reason if d else ""}
        if self.ledger is not None:
            try:
                out["bindings"] = [
                    {"binding": b.binding, "room": b.room, "who": b.who, "expires_at": b.expires_at}
                    for b in self.ledger.bindings()
                ]
                out["deliveries"] = self.ledger.recent()
                out["by_outcome"] = self.ledger.counts()
            except LedgerUnavailable as exc:
                out["ledger_error"] = str(exc)
        return out

    def _write_status(self) -> None:
        try:
            self.workspace.write_status(self.status())
        except OSError as exc:
            log.warning("cannot write the status file: %s", exc)

    async def _heartbeat(self) -> None:
        """Ask the hub, every `HEARTBEAT` seconds, how it sees this Worker's member."""
        every = float(os.environ.get(HEARTBEAT_ENV, HEARTBEAT))
        while True:
            try:
                seen = await self.client.member(self.workspace_name, self.me)
                self.presence = {
                    "online": seen.online,
                    "last_seen": seen.last_seen,
                    "checked_at": time.time(),
                }
            except HubError as exc:
                # Kept as it was: the status file says when it was last known, and why not now.
                self.presence = {**self.presence, "error": str(exc), "failed_at": time.time()}
                log.warning("heartbeat: the hub did not answer (%s)", exc)
            await asyncio.sleep(every)

    async def _status_loop(self) -> None:
        while True:
            self._write_status()
            await asyncio.sleep(2.0)


def run_worker(config: WorkerConfig, on_ready: Callable[[Worker], None] | None = None) -> int:
    worker = Worker(config)
    if on_ready is not None:
        on_ready(worker)
    return asyncio.run(worker.run())
