"""One Worker per agent member (DESIGN.md §6 "One Worker", docs/connect.md): the Worker's
side of the hub's lease. It takes the lease before it starts its agent or reads its inbox,
waits as a standby while another Worker holds it (saying so once), renews it every few
seconds, names its fence on every inbox ack, and lets it go at stop.

A renewal the hub cannot answer is tried again: the lease may lapse meanwhile, but if no
other Worker took it the hub renews it under the same fence. Only a renewal refused as
`lease_lost` (another Worker took over) ends this Worker: nothing it does after that
would be acknowledged.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
from typing import Any

from agentpost.client import AsyncHubClient, HubError, HubRefused

log = logging.getLogger("agentpost.connect.worker")

LEASE_HELD = "lease_held"
LEASE_LOST = "lease_lost"
RENEWALS_PER_LEASE = 5  # renew five times per lease period (every 6 s of a 30 s lease)
STANDBY_POLL_MAX = 5.0


class LeaseLost(Exception):
    """Another Worker took this agent's lease: this one must stop working."""


class WorkerLease:
    def __init__(self, client: AsyncHubClient, worker_id: str) -> None:
        self.client = client
        self.worker_id = worker_id
        self.host = socket.gethostname()
        self.fence: int | None = None
        self.lease_seconds = 30.0
        self.state = "starting"  # starting | standby | held | lost | released
        self.holder: dict[str, Any] | None = None  # the other Worker, while standby
        self.since: str | None = None
        self.renewed_at: float | None = None
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

    async def take(self, takeover: bool, on_standby: Any = None) -> None:
        """Until this Worker holds the lease. While another holds it: standby (said once)."""
        told = False
        delay = 0.5
        while True:
            try:
                got = await self.client.take_lease(
                    self.worker_id, self.host, os.getpid(), takeover
                )
            except HubRefused as exc:
                if exc.code != LEASE_HELD:
                    raise
                holder = exc.body.get("holder")
                self.holder = holder if isinstance(holder, dict) else None
                self.state = "standby"
                if not told:
                    told = True
                    h = self.holder or {}
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
            self._held(lease)
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

    def _held(self, lease: dict[str, Any]) -> None:
        self.fence = int(lease["fence"])
        self.client.fence = self.fence  # every post names it (the hub refuses a stale one)
        self.lease_seconds = float(lease.get("lease_seconds", self.lease_seconds))
        self.since = lease.get("since")
        self.state = "held"
        self.holder = None
        self.renewed_at = time.time()

    async def keep(self) -> None:
        """Renew for ever; raise `LeaseLost` when another Worker took over."""
        assert self.fence is not None
        while True:
            await asyncio.sleep(self.lease_seconds / RENEWALS_PER_LEASE)
            try:
                self._held(await self.client.renew_lease(self.fence))
            except HubRefused as exc:
                if exc.code == LEASE_LOST:
                    self.state = "lost"
                    holder = exc.body.get("holder")
                    self.holder = holder if isinstance(holder, dict) else None
                    raise LeaseLost(exc.message) from exc
                log.warning("lease renewal refused: %s", exc)
            except HubError as exc:
                log.warning("lease renewal: the hub did not answer (%s)", exc)

    async def release(self) -> None:
        if self.fence is None or self.state != "held":
            return
        try:
            await asyncio.wait_for(self.client.release_lease(self.fence), 5.0)
            self.state = "released"
        except (HubError, TimeoutError) as exc:
            log.warning("lease not released (%s); it lapses by itself", exc)
