"""`Deliveries` takes one request of a delivery id at a time (a resend waits for the
delivery it repeats), and keeps no lock once an id's last request is answered: a Worker
that runs for weeks does not grow one lock per delivery it ever saw."""

from __future__ import annotations

import asyncio
from typing import Any

from agentpost.connect.deliver import Deliveries


class Probe(Deliveries):
    def __init__(self) -> None:
        async def admitted(room: str, who: str) -> bool:
            return True

        super().__init__(None, "w" * 32, None, admitted, 0, False, "off")  # type: ignore[arg-type]
        self.inside: dict[str, int] = {}
        self.most = 0

    async def _decide(
        self,
        binding: str,
        did: str,
        parts: list[dict[str, Any]],
        session: str | None,
        turn: str | None,
    ) -> dict[str, Any]:
        self.inside[did] = self.inside.get(did, 0) + 1
        self.most = max(self.most, self.inside[did])
        await asyncio.sleep(0.001)
        self.inside[did] -= 1
        return {"status": "retry", "reason": "probe", "expires_at": None}


def request(did: str) -> dict[str, Any]:
    return {"binding": "w" * 32 + ".b", "id": did, "parts": [{"type": "text", "text": "t"}]}


def test_requests_of_one_id_run_one_at_a_time_and_leave_no_lock() -> None:
    d = Probe()

    async def run() -> None:
        same = [d.handle(request("same")) for _ in range(10)]
        others = [d.handle(request(f"id{i}")) for i in range(200)]
        await asyncio.gather(*same, *others)

    asyncio.run(run())
    assert d.most == 1  # never two requests of one id inside at once
    assert d._locks == {}
