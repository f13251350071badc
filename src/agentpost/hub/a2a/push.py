"""A2A push notifications that can be trusted (docs/a2a.md, docs/architecture.md#a2a): a
receipt's transaction writes one notification per push config of its task into a durable
outbox (store/a2a.py); this sender posts each as `{"task": <Task now>}` (a StreamResponse)
until a 2xx answers it, with backoff between attempts, until it expires. Every attempt of
one notification carries the same `X-Agentpost-Notification-Id`, so a receiver that keeps
the ids it has seen acts once; `X-Agentpost-Signature` is an HMAC-SHA256 of
`<id>.<t>.<body>` keyed by the config's signing secret (returned once when the config was
set, never sent). Each connection goes only to an address targets.py judged. Sends run side
by side with a timeout each, so a dead endpoint never holds up another."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import time
from functools import partial
from typing import Any

import httpx
import msgspec

from agentpost.core.clock import now_ms
from agentpost.core.errors import AgentpostError
from agentpost.hub.a2a import targets, tasks, wire
from agentpost.hub.notify import wait
from agentpost.hub.state import Hub
from agentpost.store import a2a, members
from agentpost.store.a2a import Due, PushConfig
from agentpost.store.engine import Db, Tx

LEASE_MS = 15_000  # a sender's hold on a notification while it posts it (> the timeout)
TIMEOUT_SECONDS = 10.0
BACKOFF_SECONDS = (1, 2, 5, 10, 30, 60, 120, 300)
BATCH = 32
IDLE_SECONDS = 1.0  # the longest the sender waits before it reads the outbox again
# Sends at once: never more than the push client's connections, so no send waits for a
# pool slot (a pool timeout would be a failure that is no endpoint's doing).
MAX_IN_FLIGHT = 64
ID_HEADER = "X-Agentpost-Notification-Id"
SIGNATURE_HEADER = "X-Agentpost-Signature"
TOKEN_HEADER = "X-A2A-Notification-Token"

log = logging.getLogger("agentpost.hub.a2a.push")


def signature(secret: str, notification_id: str, at: int, body: bytes) -> str:
    """The `X-Agentpost-Signature` value: `t=<unix seconds>,v1=<hex HMAC-SHA256>` of
    `<id>.<t>.<body>` keyed by the config's signing secret (docs/a2a.md shows the check)."""
    signed = f"{notification_id}.{at}.".encode() + body
    return f"t={at},v1=" + hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()


async def run(hub: Hub) -> None:
    """Send what is due, for as long as the hub runs. Each send is a task of its own: the
    loop takes more due notifications while slow ones are still posting (each holds its
    row by a lease longer than its timeout, so no other sender takes it meanwhile)."""
    inflight: set[asyncio.Task[None]] = set()
    # Push's own client (not the router's): its pool holds every send at once.
    limits = httpx.Limits(max_connections=MAX_IN_FLIGHT, max_keepalive_connections=16)
    allow = targets.allow_list(hub.config.push_allow)
    client = httpx.AsyncClient(
        transport=targets.CheckedTransport(allow, limits),
        timeout=TIMEOUT_SECONDS,
        trust_env=False,
    )
    try:
        while not hub.notifier.closed:
            woken = hub.notifier.event(tasks.PUSH_KEY)
            room = MAX_IN_FLIGHT - len(inflight)
            pause = IDLE_SECONDS
            try:
                due: list[Due] = []
                soonest = await hub.engine.read(a2a.next_due)
                now = now_ms()
                if room > 0 and soonest is not None and soonest <= now:
                    due = await hub.engine.write(partial(_take, limit=min(BATCH, room)))
                elif soonest is not None:  # sleep until it is due, so backoff is as said
                    pause = min(IDLE_SECONDS, max(soonest - now, 1) / 1000)
                for d in due:
                    sending = asyncio.create_task(_send_logged(hub, client, d))
                    inflight.add(sending)
                    sending.add_done_callback(inflight.discard)
                if due:
                    continue
            except AgentpostError as exc:
                log.warning("push outbox not read (%s); trying again", exc.message)
            except Exception:
                log.exception("push sender failed; trying again")
            await wait(woken, pause)
    finally:
        for sending in inflight:
            sending.cancel()
        await client.aclose()


def _take(tx: Tx, limit: int) -> list[Due]:
    return a2a.take_due(tx, now_ms(), LEASE_MS, limit)


def _task(db: Db, cfg: PushConfig) -> dict[str, Any] | None:
    """The task as its caller may see it now; None when it may not (removed, left)."""
    caller = members.member_by_id(db, cfg.member_id)
    if caller is None or caller.status != "active":
        return None
    agent = tasks.agent_of(db, cfg.task_id)
    if agent is None:
        return None
    try:
        return tasks.task(db, caller, agent, cfg.task_id, cfg.base_url)
    except wire.RpcError:
        return None  # the caller left the room: it may no longer see the task


async def _send_logged(hub: Hub, client: httpx.AsyncClient, due: Due) -> None:
    try:
        await _send(hub, client, due)
    except Exception:  # its lease runs out and it is sent again: never lost
        log.exception("push %s not settled; it is due again when its lease ends", due.id)


async def _send(hub: Hub, client: httpx.AsyncClient, due: Due) -> None:
    cfg, now = due.config, now_ms()
    if now > due.expires_at:
        log.warning("push %s to %s expired after %d attempts", due.id, cfg.url, due.attempts)
        await hub.engine.write(lambda tx: a2a.sent(tx, due.id))
        return
    task = await hub.engine.read(lambda db: _task(db, cfg))
    if task is None:
        log.info("push %s dropped: its task is no longer the caller's to see", due.id)
        await hub.engine.write(lambda tx: a2a.sent(tx, due.id))
        return
    body = msgspec.json.encode({"task": task})
    headers = {"content-type": "application/json", ID_HEADER: due.id}
    if cfg.token:  # the receiver's own check value, sent back as A2A says
        headers[TOKEN_HEADER] = cfg.token
    if cfg.secret:  # a config set before signing secrets existed goes unsigned
        headers[SIGNATURE_HEADER] = signature(cfg.secret, due.id, int(time.time()), body)
    if cfg.auth_scheme:
        headers["Authorization"] = f"{cfg.auth_scheme} {cfg.auth_credentials}".strip()
    error = ""
    try:  # one attempt; whatever goes wrong is retried
        r = await client.post(cfg.url, content=body, headers=headers)
        if not 200 <= r.status_code < 300:
            error = f"HTTP {r.status_code}"
    except targets.TargetRefused as exc:  # the name points inward now: said, and retried
        error = f"{exc.reason}: {exc.message}"
        log.warning("push %s to %s refused: %s", due.id, cfg.url, exc.message)
    except Exception as exc:  # noqa: BLE001 - any failure to deliver is retried
        error = f"{type(exc).__name__}: {exc}"
    if not error:
        await hub.engine.write(lambda tx: a2a.sent(tx, due.id))
        return
    attempts = due.attempts + 1
    wait_s = BACKOFF_SECONDS[min(attempts, len(BACKOFF_SECONDS)) - 1]
    log.info(
        "push %s to %s failed (%s); attempt %d, next in %d s",
        due.id,
        cfg.url,
        error,
        attempts,
        wait_s,
    )
    await hub.engine.write(
        lambda tx: a2a.failed(tx, due.id, attempts, now_ms() + wait_s * 1000, error)
    )
    hub.notifier.notify(tasks.PUSH_KEY)  # the loop times its next look by the new due time
