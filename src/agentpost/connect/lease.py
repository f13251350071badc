"""One Worker per agent member (docs/architecture.md#one-worker-per-agent, docs/connect.md): the
Worker's side of the hub's lease. It takes the lease before it starts its agent or reads its inbox,
waits as a standby while another Worker holds it (saying so once), renews it every few
seconds, names its fence on every inbox ack, and lets it go at stop.

A renewal the hub cannot answer is tried again until the lease would have lapsed on the
hub; then this Worker must assume that a standby took over and stops working at once
(`LeaseLost`): its agent is ended and it waits as a standby itself. A renewal refused as
`lease_lost` (another Worker took over) does the same.

A Worker restarted on the same workspace takes its own lease back at once, but only when
it names the fence it last held (kept in `<workspace>/lease-fence`) and that Worker is
shown dead: the file names its host, pid, process start time and boot, and the fence is
named only when no process of this host's boot has that pid and start time. The hub cannot
see our processes, so the proof is made here. A copy of the folder, on this host or any
other, started while its Worker lives, waits as a standby like any other Worker.

Each lease taken or renewed gives the agent's keeper a deadline, the time the request was
sent plus the lease's seconds less a margin (`on_renewed`): past it the keeper stops the
agent's processes, since a standby could hold the lease by then
(docs/architecture.md#fenced-by-time).
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import os
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentpost.client import AsyncHubClient, HubError, HubRefused
from agentpost.connect import keeper
from agentpost.connect.workspace import write_atomic

log = logging.getLogger("agentpost.connect.worker")

LEASE_HELD = "lease_held"
LEASE_LOST = "lease_lost"
RENEWALS_PER_LEASE = 5  # renew five times per lease period (every 6 s of a 30 s lease)
STANDBY_POLL_MAX = 5.0
FENCE_FILE = "lease-fence"
# The keeper stops the agent this long before the lease could lapse on the hub: a sixth of
# the lease by default (5 s of 30); the variable sets the seconds (tests use short leases).
FENCE_MARGIN_ENV = "AGENTPOST_CONNECT_FENCE_MARGIN"
BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


class LeaseLost(Exception):
    """Another Worker took this agent's lease, or may have (it lapsed while the hub could
    not be reached): this one must stop working at once."""


class NoLeases(Exception):
    """The hub has no Worker leases (an older hub): one Worker per agent cannot be kept."""


class WorkerLease:
    def __init__(
        self,
        client: AsyncHubClient,
        worker_id: str,
        workspace: Path,
        on_renewed: Callable[[float], None] | None = None,
    ) -> None:
        self.client = client
        self.worker_id = worker_id
        self._fence_file = workspace / FENCE_FILE
        self.on_renewed = on_renewed
        self.work_until: float | None = None  # monotonic: the keeper's deadline
        self._copy_told = False
        self.host = socket.gethostname()
        self.fence: int | None = None
        self.lease_seconds = 30.0
        self.state = "starting"  # starting | standby | held | lost | released
        self.holder: dict[str, Any] | None = None  # the other Worker, while standby
        self.since: str | None = None
        self.renewed_at: float | None = None
        self._renewed_mono = 0.0
        self.replaced: dict[str, Any] | None = None

    def status(self) -> dict[str, Any]:
        return {
            "state": self.state,
            "fence": self.fence,
            "host": self.host,
            "since": self.since,
            "lease_seconds": self.lease_seconds,
            "renewed_at": self.renewed_at,
            "holder": self.holder,
            "replaced": self.replaced,
        }

    def _last_fence(self) -> int | None:
        """The fence this folder's Worker last held, when that Worker is shown dead (a
        restart); None when it may live (this folder is a copy of a live Worker's), when
        it ran on another host, or when the file cannot tell (fail closed: a standby)."""
        try:
            record = json.loads(self._fence_file.read_text("utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            log.info("%s cannot be read (%s): this Worker waits for the lease like any other",
                     self._fence_file, exc)
            return None
        fence = record.get("fence") if isinstance(record, dict) else None
        if not isinstance(fence, int) or isinstance(fence, bool) or not 0 < fence < 2**62:
            return None
        if record.get("host") != self.host:
            return None
        if _may_live(record.get("pid"), record.get("start"), record.get("boot")):
            if not self._copy_told and record.get("pid") != os.getpid():
                self._copy_told = True
                log.warning(
                    "the Worker that last held this folder's lease (pid %s) still runs: this "
                    "is a copy of its folder, and waits as a standby like any other Worker",
                    record.get("pid"),
                )
            return None
        return fence

    def _record_fence(self) -> None:
        """Write who holds the lease (fence, host, pid, start time, boot) into the folder."""
        me = keeper.proc(os.getpid()) if keeper.supported() else None
        record = {
            "fence": self.fence,
            "host": self.host,
            "pid": os.getpid(),
            "start": me.start if me is not None else None,
            "boot": _boot_id(),
        }
        try:
            write_atomic(self._fence_file, json.dumps(record).encode())
        except OSError as exc:  # only costs a restart its fast path back to the lease
            log.warning("cannot record the lease's fence in %s: %s", self._fence_file, exc)

    async def take(self, takeover: bool, on_standby: Any = None) -> None:
        """Until this Worker holds the lease. While another holds it: standby (said once).
        `takeover` is asked only until the hub first answers: a Worker that later lost the
        lease waits like any standby."""
        told = False
        delay = 0.5
        while True:
            sent = time.monotonic()
            try:
                got = await self.client.take_lease(
                    self.worker_id, self.host, os.getpid(), takeover, self._last_fence()
                )
            except HubRefused as exc:
                if exc.status == 404 and exc.code in ("not_found", "method_not_allowed"):
                    raise NoLeases(
                        "this hub has no Worker leases (POST /v1/worker/lease: 404); "
                        "upgrade the hub: one Worker per agent cannot be kept without them"
                    ) from exc
                if exc.code != LEASE_HELD:
                    raise
                takeover = False
                holder = exc.body.get("holder")
                self.holder = holder if isinstance(holder, dict) else None
                self.state = "standby"
                if not told:
                    told = True
                    h = self.holder or {}
                    if h.get("pid") == 0:  # the hub's AG2 task queue (hub/leases.py)
                        log.warning(
                            "standby: an AG2 Worker polls /ag2 with this agent's token and "
                            "serves it (since %s); one lease serves an agent across profiles, "
                            "so this one takes over a lease lapse after that poller stops",
                            h.get("since"),
                        )
                        if on_standby is not None:
                            on_standby()
                        await asyncio.sleep(self._standby_poll())
                        continue
                    log.warning(
                        "standby: another Worker serves this agent (host %s, pid %s, since %s); "
                        "this one takes over when that lease lapses, or start it with "
                        "--takeover if that Worker is dead",
                        h.get("host"),
                        h.get("pid"),
                        h.get("since"),
                    )
                    if on_standby is not None:
                        on_standby()
                await asyncio.sleep(self._standby_poll())
                continue
            except HubError as exc:
                log.warning("lease: the hub did not answer (%s); retrying in %.1fs", exc, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 10.0)
                continue
            lease = got["lease"]
            self._held(lease, sent)
            self._record_fence()
            self.replaced = got.get("replaced")
            if self.replaced:
                log.warning(
                    "took over the lease from the Worker on host %s (pid %s, since %s)",
                    self.replaced.get("host"),
                    self.replaced.get("pid"),
                    self.replaced.get("since"),
                )
            log.info("lease held: fence %d, lapses %.0fs after the last renewal",
                     self.fence, self.lease_seconds)
            return

    def _standby_poll(self) -> float:
        return min(STANDBY_POLL_MAX, max(0.2, self.lease_seconds / RENEWALS_PER_LEASE))

    def _held(self, lease: dict[str, Any], sent: float) -> None:
        """Taken or renewed by a request sent at `sent` (monotonic): the hub counts the
        lapse from no earlier than that, so the keeper's deadline counts from it too."""
        self.fence = int(lease["fence"])
        self.client.fence = self.fence  # every post names it (the hub refuses a stale one)
        self.lease_seconds = float(lease.get("lease_seconds", self.lease_seconds))
        self.since = lease.get("since")
        self.state = "held"
        self.holder = None
        self.renewed_at = time.time()
        self._renewed_mono = time.monotonic()
        self.work_until = sent + self.lease_seconds - fence_margin(self.lease_seconds)
        if self.on_renewed is not None:
            self.on_renewed(self.work_until)

    async def keep(self) -> None:
        """Renew for ever; raise `LeaseLost` when another Worker took over, or when the
        lease lapsed on the hub while this Worker could not renew it (a standby may be
        running the same wake-ups by now: this Worker's agent must stop at once)."""
        assert self.fence is not None
        every = self.lease_seconds / RENEWALS_PER_LEASE
        while True:
            await asyncio.sleep(every)
            sent = time.monotonic()
            try:
                self._held(await self.client.renew_lease(self.fence), sent)
                continue
            except HubRefused as exc:
                if exc.code == LEASE_LOST:
                    self.lost(exc.message, exc.body.get("holder"))
                    raise LeaseLost(exc.message) from exc
                log.warning("lease renewal refused: %s", exc)
            except HubError as exc:
                log.warning("lease renewal: the hub did not answer (%s)", exc)
            # Lapsed on the hub by its count (it started no later than our request did).
            if time.monotonic() - self._renewed_mono >= self.lease_seconds - every / 2:
                why = (
                    f"the lease could not be renewed for {self.lease_seconds:.0f} s and has "
                    "lapsed; another Worker may be serving this agent now"
                )
                self.lost(why, None)
                raise LeaseLost(why)

    def lost(self, why: str, holder: Any) -> None:
        """Said by the hub (a refused renewal, ack or post) or by the clock: not ours."""
        if self.state != "lost":
            log.error("lease lost: %s; the agent is ended and this Worker waits as a standby",
                      why)
        self.state = "lost"
        self.holder = holder if isinstance(holder, dict) else None

    async def release(self) -> None:
        if self.fence is None or self.state != "held":
            return
        try:
            await asyncio.wait_for(self.client.release_lease(self.fence), 5.0)
            self.state = "released"
        except (HubError, TimeoutError) as exc:
            log.warning("lease not released (%s); it lapses by itself", exc)


@functools.cache  # read once: a bad value is said once, not at every renewal
def fence_margin(lease_seconds: float) -> float:
    """Seconds before the lease could lapse at which the keeper stops the agent."""
    default = lease_seconds / 6
    raw = os.environ.get(FENCE_MARGIN_ENV)
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if 0 <= value < lease_seconds:
        return value
    log.warning("%s=%r is not a number of seconds under the lease's %g; using %g",
                FENCE_MARGIN_ENV, raw, lease_seconds, default)
    return default


def _boot_id() -> str | None:
    try:
        return BOOT_ID.read_text("ascii").strip() or None
    except (OSError, UnicodeDecodeError):
        return None


def _may_live(pid: Any, start: Any, boot: Any) -> bool:
    """Whether the Worker recorded as (pid, start time, boot) may still run on this host:
    False only when shown dead (another boot, no such pid, or that pid started at another
    time); where /proc cannot tell (not Linux), a live pid counts as that Worker."""
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return True  # cannot tell
    if keeper.supported():
        current = _boot_id()
        if boot is not None and current is not None and boot != current:
            return False
        found = keeper.proc(pid)
        if found is None:
            return False
        return not isinstance(start, int) or found.start == start
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
