"""Running one post through the key rules, or straight when it has no key, and counting it
(hub/idempotency.py holds the rules). Messages, media and relations all come here."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

from agentpost.core.errors import AgentpostError, Code
from agentpost.hub import idempotency
from agentpost.hub.idempotency import Answer, Created
from agentpost.hub.state import Hub
from agentpost.store.batch import AsData
from agentpost.store.engine import Tx


async def submit(
    hub: Hub,
    route: str,
    member_id: str,
    key: str | None,
    fp: str | None,
    create: Callable[[Tx], Created],
    prepare: Callable[[], Awaitable[None]] | None = None,
    order: str = "",
    as_data: AsData | None = None,
) -> Answer:
    """The answer of one post: made now, or replayed for its key (`Answer.idempotency_status`)."""
    started = time.perf_counter()
    outcome = "error"
    try:
        if key is not None and fp is not None:
            ans = await hub.idempotency.run(member_id, key, fp, create, prepare, order, as_data)
        else:
            if prepare is not None:
                await prepare()
            made: Created = await hub.engine.write(create, order)
            ans = Answer(made.status, made.body, idempotency.CREATED)
        outcome = ans.idempotency_status if ans.status < 300 else "rejected"
        if ans.idempotency_status == idempotency.REPLAYED:
            hub.metrics.replays.inc()
        return ans
    except AgentpostError as exc:
        outcome = str(exc.code)
        if exc.code is Code.IDEMPOTENCY_CONFLICT:
            hub.metrics.conflicts.inc()
        raise
    finally:
        hub.metrics.count_post(route, outcome, time.perf_counter() - started)
