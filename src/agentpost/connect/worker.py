"""The Worker (docs/connect.md): one agent member on the hub, one spawned ACP agent.

It follows the member's inbox (`connect/inbox.py`), turns each wake-up into a Turn of the
Session its sender maps to (`connect/runner.py`), and answers the agent's `_ag2/deliver`
(`connect/deliver.py`, declared by `connect/declaring.py`). Turns of one Session run one
after another; Sessions run side by side.
"""

from __future__ import annotations

import asyncio
import dataclasses
import faulthandler
import importlib
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentpost.client import AsyncHubClient, HubError, HubRefused, InboxItem
from agentpost.connect import bindings, declaring, inbox, keys, replies
from agentpost.connect.acp import InvalidParams, MethodNotFound
from agentpost.connect.agent import AgentSupervisor
from agentpost.connect.crash import CRASH_ENV, crash_point
from agentpost.connect.deliver import BadRequest, Deliveries, echo_rule
from agentpost.connect.egress import EgressRoots
from agentpost.connect.lease import LEASE_LOST, NoLeases, WorkerLease
from agentpost.connect.ledger import Ledger, LedgerUnavailable
from agentpost.connect.permissions import PermissionPolicy
from agentpost.connect.runner import TurnRunner, TurnSettings
from agentpost.connect.sessions import Admission, Owned, SessionKey
from agentpost.connect.workspace import AGENT_GROUP, LEDGER, Workspace, data_home

__all__ = ["CRASH_ENV", "Worker", "WorkerConfig", "crash_point", "run_worker"]

log = logging.getLogger("agentpost.connect.worker")

STOP = "/stop"
# The Worker's heartbeat (docs/delivery.md): it asks the hub how it sees this member this
# often. The request itself stamps the member as seen (its inbox stream does too), and the
# answer is what `connect status` shows as the Worker's presence.
HEARTBEAT_ENV = "AGENTPOST_CONNECT_HEARTBEAT"
HEARTBEAT = 20.0
STOP_DELIVERIES_WAIT = 10.0  # seconds a stop waits for deliveries in flight
# A stop (SIGTERM, SIGINT) ends within this many seconds whatever it waits for (a hub that
# does not answer the lease's release, say): past it, or at a second stop signal, the Worker
# ends its agent's processes at once, prints the stacks of what still ran, and exits 1.
STOP_DEADLINE_ENV = "AGENTPOST_CONNECT_STOP_DEADLINE"
STOP_DEADLINE = 45.0
# The ledger's retention runs at start and then this often (docs/architecture.md#ledger), so a
# Worker that runs for weeks keeps within 30 days and 10,000 entries; the variable exists
# so a test can watch a live Worker prune without waiting an hour.
PRUNE_ENV = "AGENTPOST_CONNECT_PRUNE_EVERY"
PRUNE_EVERY = 3600.0
STANDING_SECONDS = 1.0


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
    agent_mode: str | None = None  # the agent's own mode, chosen by the person (--agent-mode)
    turn_timeout: float = 1800.0
    agent_start_wait: float = 60.0
    hub_timeout: float = 30.0
    # End another Worker's lease at once (docs/architecture.md#one-worker-per-agent).
    takeover: bool = False


class Worker:
    def __init__(self, config: WorkerConfig, client: AsyncHubClient | None = None) -> None:
        self.config = config
        self.client = client or AsyncHubClient(config.hub, config.token, config.hub_timeout)
        self.workspace = Workspace(config.workspace_dir)
        self.worker_id = ""
        self.member_id = ""
        self.lease: WorkerLease | None = None
        self.me = ""
        self.workspace_name = ""
        self.owner: str | None = None
        self.admission: Admission | None = None
        self.egress: EgressRoots | None = None
        self.agent = AgentSupervisor(
            config.agent_argv,
            config.repo,
            PermissionPolicy(config.allow_permissions, config.agent_mode),
            ext=self._ext,
            client_meta=self._client_meta,
            before_restart=self._probe,
            record=self.workspace.root / AGENT_GROUP,
        )
        self.ledger: Ledger | None = None
        self.deliveries: Deliveries | None = None
        self.turns: TurnRunner | None = None
        self.counters = {
            "wakeups": 0,
            "turns": 0,
            "replies": 0,
            "errors": 0,
            "no_turn": 0,
            "acks": 0,
        }
        self.cursor = inbox.InboxCursor(self.client, self.counters, self._fence, self._refused)
        self._lease_gone = asyncio.Event()
        self.standby_again = False  # the lease was lost: run again, as a standby
        self._queues: dict[SessionKey, asyncio.Queue[InboxItem]] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._delivering: set[asyncio.Task[Any]] = set()  # `_ag2/deliver` requests in flight
        self._told: set[tuple[str, str]] = set()
        self._stop = asyncio.Event()
        self.presence: dict[str, Any] = {}
        self._standings: dict[tuple[str, str], tuple[float, asyncio.Future[str | None]]] = {}

    # -- start and stop ---------------------------------------------------------------

    async def run(self) -> int:
        """Run until SIGTERM/SIGINT (0) or a refusal of this agent's token (1)."""
        self.workspace.prepare()
        self.workspace.lock()
        self.agent.processes.sweep()  # under the lock: no live Worker's agent is touched
        identity = declaring.worker_identity(self.workspace)
        self.worker_id, self.ledger = identity.worker_id, identity.ledger
        me = await replies.until_answered("who am I", self.client.me)
        self.me = str(me["member"]["name"])
        self.member_id = str(me["member"]["id"])
        self.owner = me["member"].get("owner")
        self.owner_id: str | None = me["member"].get("owner_id")
        self.workspace_name = str(me["workspace"]["name"])
        if me["member"]["kind"] != "agent":
            log.error(
                "%s is a %s, not an agent member: a Worker runs an agent; give it the "
                "agent's token",
                self.me,
                me["member"]["kind"],
            )
            return 1
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._stop_signal, loop)
        try:
            if not await self._take_lease():
                return await self._close(0)
        except NoLeases as exc:
            log.error("%s", exc)
            return await self._close(1)
        assert self.lease is not None
        # Renewed from now on, whatever the start below waits for
        # (docs/architecture.md#one-worker-per-agent).
        keeper = asyncio.create_task(self.lease.keep())
        # Read after the lease is ours: a Worker that was standby starts where the last
        # holder acknowledged, not where it stood when this one started.
        me = await replies.until_answered("who am I", self.client.me)
        self.cursor.acked = int(me.get("inbox_cursor", 0))
        caps = await replies.until_answered("capabilities", self.client.capabilities)
        max_upload = int(caps.get("max_upload_bytes", 25 * 1024 * 1024))
        # The workspace (attachments of every room, the ledger, bindings' export folders)
        # is never Turn egress, wherever it sits: judged on descriptors (docs/connect.md).
        # So is the data home (a hub's database and admin token, every Worker's folder).
        self.egress = EgressRoots(
            [self.config.repo, *self.config.egress_roots],
            max_upload,
            never=[self.workspace.root, data_home()],
        )
        self.admission = Admission(
            self.me,
            self.owner,
            self.config.collaborators,
            self.workspace.root / "collaborators",
            self._owner_of,
            owner_id=self.owner_id,
            refresh=self._owner_now,
        )
        self.turns = TurnRunner(
            TurnSettings(
                self.worker_id,
                self.member_id,
                self.me,
                self.config.turn_timeout,
                self.config.agent_start_wait,
                declaring.key_ttl(caps),
            ),
            self.client,
            self.agent,
            self.workspace,
            self.egress,
            self.admission,
            self._session_meta,
            self.counters,
            self._write_status,
        )
        self._declare(caps, max_upload, identity.problem)
        assert self.deliveries is not None
        self._spawn(self.deliveries.finish_in_progress())
        log.info(
            "worker %s for agent %s (owner %s) in %s; inbox acknowledged up to %d",
            self.worker_id,
            self.me,
            self.owner,
            self.workspace_name,
            self.cursor.acked,
        )
        if self.owner is None and not self.admission.collaborators:
            log.warning(
                "%s has no owner and no collaborators: this Worker answers no one. Give the "
                "agent an owner (agentpost admin member add WORKSPACE %s --kind agent --owner "
                "PERSON) or name who it answers with --collaborator NAME",
                self.me,
                self.me,
            )
        loop.add_signal_handler(signal.SIGHUP, self._reload)
        supervisor = asyncio.create_task(self.agent.run())
        follower = asyncio.create_task(inbox.follow(self.client, self._accept))
        status_task = asyncio.create_task(self._status_loop())
        heartbeat = asyncio.create_task(self._heartbeat())
        stopper = asyncio.create_task(self._stop.wait())
        lease_gone = asyncio.create_task(self._lease_gone.wait())
        done, _ = await asyncio.wait(
            {follower, stopper, keeper, lease_gone, supervisor},
            return_when=asyncio.FIRST_COMPLETED,
        )
        code = 0
        if follower in done and follower.exception() is not None:
            log.error("the Worker stops: %s", follower.exception())
            code = 1
        if supervisor in done and supervisor.exception() is not None:
            # An agent that cannot be run at all (it refuses our ACP version): one line, no
            # retry loop (docs/architecture.md#agent-modes).
            log.error("the Worker stops: %s", supervisor.exception())
            code = 1
        if lease_gone in done or (keeper in done and keeper.exception() is not None):
            # Another Worker serves this agent now: no more work here, not one tool call.
            self.agent.halt("this Worker lost the agent's lease")
            self.standby_again = not self._stop.is_set()
        for t in (follower, stopper, keeper, lease_gone, status_task, heartbeat, *self._tasks):
            t.cancel()
        await self.agent.stop()
        supervisor.cancel()
        await asyncio.gather(supervisor, *self._tasks, return_exceptions=True)
        if self._delivering:  # accepted deliveries finish (or, past this, resume at start)
            _, late = await asyncio.wait(set(self._delivering), timeout=STOP_DELIVERIES_WAIT)
            if late:
                log.warning("%d deliveries still running at stop; they resume at the next start",
                            len(late))
        return await self._close(code)

    def _stop_signal(self, loop: asyncio.AbstractEventLoop) -> None:
        """SIGTERM or SIGINT: a graceful stop, bounded; a second one: the end, now."""
        if self._stop.is_set():
            self._stop_now("a second stop signal", loop)
            return
        self._stop.set()
        deadline = _seconds(STOP_DEADLINE_ENV, STOP_DEADLINE)
        why = f"the stop took more than {deadline:g}s"
        timer = threading.Timer(deadline, self._stop_now, (why, loop))
        timer.daemon = True  # gone with the Worker when the stop ends in time
        timer.start()

    def _stop_now(self, why: str, loop: asyncio.AbstractEventLoop) -> None:
        """End the agent's whole group and this process at once (from any thread), after
        saying what was still running."""
        log.error("%s: ending now, the agent's processes with it; what still ran:", why)
        try:
            faulthandler.dump_traceback(sys.stderr, all_threads=True)
            for task in asyncio.all_tasks(loop):
                task.print_stack(limit=8, file=sys.stderr)
        except Exception as exc:  # the end must not wait on a report of it
            log.error("could not list what still ran: %r", exc)
        self.agent.kill_now()
        sys.stderr.flush()
        os._exit(1)

    async def _close(self, code: int) -> int:
        if self.lease is not None:
            await self.lease.release()  # a standby takes over at once
        self._write_status()
        if self.ledger is not None:
            self.ledger.close()  # commits what is queued (parts recorded without waiting)
        await self.client.aclose()
        self.workspace.unlock()
        return code

    async def _take_lease(self) -> bool:
        """Hold this agent's lease before anything else runs
        (docs/architecture.md#one-worker-per-agent); False when the Worker was stopped while it
        waited as a standby."""
        # Each renewal moves the keeper's deadline (docs/architecture.md#fenced-by-time).
        self.lease = WorkerLease(
            self.client, self.worker_id, self.workspace.root, self.agent.processes.fence
        )
        taking = asyncio.ensure_future(self.lease.take(self.config.takeover, self._write_status))
        stopper = asyncio.ensure_future(self._stop.wait())
        await asyncio.wait({taking, stopper}, return_when=asyncio.FIRST_COMPLETED)
        stopper.cancel()
        if not taking.done():
            taking.cancel()
            await asyncio.gather(taking, return_exceptions=True)
            return False
        taking.result()  # a refusal other than "held" (not an agent) ends the Worker
        return True

    def _fence(self) -> int | None:
        return self.lease.fence if self.lease is not None else None

    def _refused(self, exc: HubRefused) -> None:
        """An ack refused as `lease_lost`: stop at once, not at the next renewal."""
        if exc.code == LEASE_LOST and self.lease is not None:
            self.lease.lost(exc.message, exc.body.get("holder"))
            self._lease_gone.set()

    # -- deferred delivery: declaring (docs/deliver.md "Declaring", "Ledger") ------------

    def _declare(self, caps: dict[str, Any], max_upload: int, id_problem: str | None) -> None:
        root = self.workspace.root
        reason = id_problem or declaring.probe_reason(caps)
        if reason is None:
            if self.ledger is None:
                self.ledger = Ledger(root / LEDGER)
            reason = declaring.ledger_reason(self.ledger, root)
        enabled = reason is None
        self.deliveries = Deliveries(
            self.ledger,
            self.worker_id,
            self.client,
            self._still_admitted,
            max_upload,
            enabled,
            reason or "",
            self._standing,
            self._binding_of,
            self.agent.triggers.get,
        )
        if enabled:
            log.info("delivery (_ag2/deliver): enabled (%s)", declaring.ENABLED_BECAUSE)
            try:
                log.info("delivery (_ag2/deliver): %s", echo_rule(self.deliveries.senders()))
            except LedgerUnavailable as exc:
                log.error("delivery (_ag2/deliver): senders cannot be read: %s", exc)
        else:
            log.warning("delivery (_ag2/deliver): not enabled: %s", reason)

    async def _probe(self) -> None:
        """The capabilities probe again, on every restart of the listener (docs/deliver.md
        "Declaring"): a declaration withdrawn for a missing echo comes back when the hub reports
        it."""
        if self.deliveries is None or not self.deliveries.withdrawn:
            return
        try:
            caps = await self.client.capabilities()
        except HubError as exc:
            log.warning("capabilities probe failed (%s); delivery stays withdrawn", exc)
            return
        self.deliveries.probed(declaring.probe_reason(caps) is None)

    async def _standing(self, room: str, who: str) -> str | None:
        """Why the hub says `who` can no longer be answered in `room`, or None (docs/deliver.md
        "Declaring": revoked when the hub reports the sender left the room or was removed).
        Deliveries side by side share one question; a "still there" answer serves for
        STANDING_SECONDS (a removal is seen that much later at most: a delivery already on
        its way races a removal anyway). A failed question is asked again next time."""
        now = time.monotonic()
        asked = self._standings.get((room, who))
        if asked is None or (
            asked[1].done()
            and (
                asked[1].cancelled()
                or asked[1].exception() is not None
                or now - asked[0] > STANDING_SECONDS
            )
        ):
            asked = (now, asyncio.ensure_future(self._ask_standing(room, who)))
            self._standings[(room, who)] = asked
        return await asyncio.shield(asked[1])

    async def _ask_standing(self, room: str, who: str) -> str | None:
        # Both asked at once: they are independent, and this runs before new deliveries.
        found, member = await asyncio.gather(
            self.client.room(room),
            self.client.member(self.workspace_name, who),
            return_exceptions=True,
        )
        if isinstance(found, BaseException):
            if isinstance(found, HubRefused) and found.status in (403, 404):
                return f"{self.me} is no longer in the room ({found.code})"
            raise found
        # Removed first: a removed member is no participant either (the hub leaves removed
        # members out of every participant list), and "was removed" is the truer word.
        if isinstance(member, BaseException):
            if isinstance(member, HubRefused) and member.status == 404:
                return f"{who} was removed ({member.code})"
            if who not in found.participants:
                return f"{who} left the room"
            raise member
        if self.admission is not None:  # an agent collaborator's owner, as the hub says now
            owner_id = member.owner_id if member.status == "active" else None
            self.admission.learned_owner(who, Owned(member.id, owner_id))
        if member.status != "active":
            return f"{who} was removed"
        if who not in found.participants:
            return f"{who} left the room"
        return None

    def _binding_of(self, session_id: str) -> str | None:
        """The binding issued in this live ACP session (usable only from it, docs/deliver.md "The
        request")."""
        return self.agent.bindings.get(session_id)

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

    def _session_meta(self, key: SessionKey, trigger: str) -> dict[str, Any]:
        """The Turn's `_meta["ag2/delivery"]`: its Session's binding, renewed for this Turn,
        and the Turn's `turn`. Its sender is counted first, whatever happens after
        (docs/deliver.md "Whose work it is")."""
        delivers = self._agent_delivers()
        d = self.deliveries
        if d is not None and key.who not in d.seen:
            try:
                known = d.senders()
            except LedgerUnavailable:
                known = set(d.seen)
            d.seen.add(key.who)
            if known and key.who not in known:
                log.warning(
                    "delivery (_ag2/deliver): %s had a Turn, so more than one sender has: from now "
                    "on a request must echo its Turn's turn",
                    key.who,
                )
            if not delivers and self.ledger is not None:  # no binding records it below
                try:
                    self.ledger.note_sender(key.who)
                except LedgerUnavailable as exc:
                    log.error("sender %s not recorded in the ledger: %s", key.who, exc)
        if not delivers or self.ledger is None:
            return {}
        try:
            b, turn = bindings.renew(self.ledger, self.workspace.root, self.worker_id, key, trigger)
        except (LedgerUnavailable, OSError) as exc:
            log.error("binding for %s not renewed: %s", key.label(), exc)
            return {}
        return bindings.turn_meta(b, turn)

    async def _still_admitted(self, room: str, who: str) -> bool:
        """A collaborator binding's sender, re-checked at every delivery (docs/deliver.md
        "Declaring"): listed, or an agent of this agent's owner by what the standing check just
        heard from the hub (an owner that changed since the Turn is seen here, not 60 s later)."""
        assert self.admission is not None
        return await self.admission.key_for(room, who, "agent") is not None

    async def _ext(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method != "ag2/deliver" or self.deliveries is None:
            log.info("agent asked for unknown extension _%s: method not found", method)
            raise MethodNotFound(method)
        task = asyncio.current_task()
        if task is not None:  # a stop lets it finish before the ledger closes
            self._delivering.add(task)
        try:
            return await self.deliveries.handle(params)
        except BadRequest as exc:
            raise InvalidParams(str(exc)) from exc
        finally:
            if task is not None:
                self._delivering.discard(task)

    def _reload(self) -> None:
        if self.admission is not None:
            self.admission.reload()

    async def _owner_of(self, name: str) -> Owned:
        try:
            m = await self.client.member(self.workspace_name, name)
        except HubError as exc:
            log.warning("cannot learn who owns %s: %s", name, exc)
            return Owned(None, None)
        return Owned(m.id, m.owner_id if m.status == "active" else None)

    async def _owner_now(self) -> tuple[str | None, str | None]:
        """This agent's owner as the hub says now (docs/architecture.md#identity: by member id);
        the one known before when the hub cannot say."""
        try:
            me = await self.client.me()
        except HubError as exc:
            log.warning("cannot learn who owns %s now: %s", self.me, exc)
            return self.owner, self.owner_id
        self.owner, self.owner_id = me["member"].get("owner"), me["member"].get("owner_id")
        return self.owner, self.owner_id

    # -- wake-ups -----------------------------------------------------------------------

    async def _accept(self, item: InboxItem) -> None:
        if not self.cursor.take(item.cursor):
            return
        self.counters["wakeups"] += 1
        ev = item.event
        assert self.admission is not None and self.turns is not None
        if ev.sender == self.me:
            await self.cursor.done(item.cursor)
            return
        if ev.text == STOP or ev.text.startswith(STOP + " "):
            await self.turns.stop_turns(ev)
            await self.cursor.done(item.cursor)
            return
        key = await self.admission.key_for(ev.room, ev.sender, ev.sender_kind, ev.sender_id)
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
                        key=keys.outsider_notice_key(self.member_id, ev.room, ev.sender),
                        in_reply_to=ev.id,
                        metadata={"agentpost/notice": "not_admitted"},
                    ),
                )
            log.info("no Turn for %s in %s (not owner or collaborator)", ev.sender, ev.room)
        except HubRefused as exc:
            log.warning("notice to %s refused: %s", ev.sender, exc)
        finally:
            await self.cursor.done(item.cursor)

    async def _session_loop(self, key: SessionKey, queue: asyncio.Queue[InboxItem]) -> None:
        assert self.turns is not None
        while True:
            item = await queue.get()
            try:
                await self.turns.turn(key, item)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # one Turn's bug must not stop its Session
                log.exception("Turn for %s failed unexpectedly; the room is told", key)
                try:
                    await self.turns.failed_unexpectedly(item, exc)
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.exception("the failed Turn's notice could not be posted either; the "
                                  "wake-up %s is acknowledged without a reply", item.event.id)
            await self.cursor.done(item.cursor)

    # -- status -----------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        """What a running Worker writes to its status file."""
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
                "last_session_error": self.agent.last_session_error,
                "stderr_tail": conn.stderr_tail()[-2000:] if conn else "",
            },
            "sessions": [
                {"room": k.room, "who": k.who, "session_id": s} for k, s in self.agent.sessions.items()
            ],
            "collaborators": sorted(self.admission.collaborators) if self.admission else [],
            "inbox": self.cursor.status(),
            "running": [r.trigger.id for r in self.turns.running.values()] if self.turns else [],
            "turns": list(self.turns.recent) if self.turns else [],
            "delivery": self._delivery_status(),
            "presence": dict(self.presence),
            "lease": self.lease.status() if self.lease is not None else None,
            "counters": dict(self.counters),
            "updated_at": time.time(),
        }


    def _delivery_status(self) -> dict[str, Any]:
        d = self.deliveries
        enabled = bool(d and d.enabled)
        # Why it is enabled, or the one reason it is not (docs/architecture.md#deferred-delivery).
        reason = declaring.ENABLED_BECAUSE if enabled else (d.reason if d else "not started yet")
        out: dict[str, Any] = {"enabled": enabled, "reason": reason}
        if self.ledger is not None:
            try:
                out["bindings"] = [
                    {
                        "binding": b.binding,
                        "room": b.room,
                        "who": b.who,
                        "expires_at": b.expires_at,
                        "revoked": b.revoked,
                        "revoked_reason": b.revoked_reason,
                    }
                    for b in self.ledger.bindings()
                ]
                out["in_progress"] = [
                    {
                        "id": e.id,
                        "binding": e.binding,
                        "room": e.room,
                        "parts": len(e.parts),
                        "posted": len([k for k in e.posted if k != "notice"]),
                        "first_seen": e.first_seen,
                    }
                    for e in self.ledger.in_progress()
                ]
                out["deliveries"] = self.ledger.recent()
                out["by_outcome"] = self.ledger.counts()
            except LedgerUnavailable as exc:
                out["ledger_error"] = str(exc)
        return out

    def _write_status(self, status: dict[str, Any] | None = None) -> None:
        try:
            self.workspace.write_status(self.status() if status is None else status)
        except OSError as exc:
            log.warning("cannot write the status file: %s", exc)

    async def _write_status_off_loop(self) -> None:
        """The status file, read on the loop (the ledger's connection is the loop's) and
        written (two fsyncs) in a thread, so deliveries in flight never wait on the disk."""
        await asyncio.to_thread(self._write_status, self.status())

    async def _heartbeat(self) -> None:
        """Ask the hub, every `HEARTBEAT` seconds, how it sees this Worker's member."""
        every = _seconds(HEARTBEAT_ENV, HEARTBEAT)
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
        pruned = time.monotonic()  # _declare applied retention at start
        every = _seconds(PRUNE_ENV, PRUNE_EVERY)
        while True:
            await self._write_status_off_loop()
            if time.monotonic() - pruned > every:
                pruned = time.monotonic()
                self._prune()
            await asyncio.sleep(2.0)

    def _prune(self) -> None:
        """The ledger's retention (docs/architecture.md#ledger), also for a Worker that runs for
        weeks."""
        if self.ledger is None or self.deliveries is None or not self.deliveries.enabled:
            return
        try:
            gone = self.ledger.prune(time.time())
        except LedgerUnavailable as exc:
            log.error("ledger retention not applied: %s", exc)
            return
        if gone:
            log.info("ledger retention: %d finished entries dropped", gone)


def _seconds(name: str, default: float) -> float:
    """A positive number of seconds from the environment, else `default` (said in the log)."""
    raw = os.environ.get(name)
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = 0.0
    if value > 0:
        return value
    log.warning("%s=%r is not a positive number of seconds; using %s", name, raw, default)
    return default


def run_worker(config: WorkerConfig, on_ready: Callable[[Worker], None] | None = None) -> int:
    try:  # installed with the hub (uvicorn[standard]); its loop costs less per wake-up
        uvloop: Any = importlib.import_module("uvloop")
    except ImportError:
        uvloop = None
    run: Callable[[Any], int] = getattr(uvloop, "run", asyncio.run)  # no `run` before uvloop 0.18
    return run(_serve(config, on_ready))


async def _serve(config: WorkerConfig, on_ready: Callable[[Worker], None] | None) -> int:
    """Workers one after another: a Worker that lost its lease ended its agent and runs again as a
    standby (docs/architecture.md#one-worker-per-agent); `--takeover` is for the first one only."""
    while True:
        worker = Worker(config)
        if on_ready is not None:
            on_ready(worker)
        code = await worker.run()
        if not worker.standby_again:
            return code
        config = dataclasses.replace(config, takeover=False)
