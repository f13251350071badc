#!/usr/bin/env python3
"""The bench's ACP agent (SDK only): on `bench N C` it makes N deliveries of 1 text + 2
small files through the Worker, C in flight at once, and replies with the timings as JSON."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from pathlib import Path
from typing import Any

from acp import PROTOCOL_VERSION, run_agent, text_block, update_agent_message
from acp.schema import AgentCapabilities, InitializeResponse, NewSessionResponse, PromptResponse


class BenchAgent:
    def __init__(self) -> None:
        self.conn: Any = None
        self.delivery: dict[str, dict[str, Any]] = {}

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def initialize(self, protocol_version: int, **kwargs: Any) -> InitializeResponse:
        caps = AgentCapabilities(field_meta={"ag2/deliver": True})
        return InitializeResponse(protocol_version=PROTOCOL_VERSION, agent_capabilities=caps)

    async def new_session(self, cwd: str, **kwargs: Any) -> NewSessionResponse:
        sid = uuid.uuid4().hex
        self.delivery[sid] = kwargs.get("ag2/delivery") or {}
        return NewSessionResponse(session_id=sid)

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        return None

    async def prompt(self, prompt: list[Any], session_id: str, **kwargs: Any) -> PromptResponse:
        said = "".join(b.text for b in prompt if getattr(b, "type", "") == "text")
        words = [w for w in said.split(": ", 1)[-1].split() if not w.startswith("@")]
        n, c = int(words[1]), int(words[2])
        b = self.delivery[session_id]
        export = Path(b["export_dir"])
        run = uuid.uuid4().hex[:8]
        lat: list[float] = []
        bad: list[Any] = []
        sem = asyncio.Semaphore(c)

        # Every file is written before the clock starts (bench/deliver_path.py's direct posts do
        # the same): written inside `one`, the 2n writes ran in one burst while the first
        # deliveries' clocks ran, and their latency counted the agent's own disk work.
        reqs = []
        for i in range(n):
            files = []
            for j in range(2):
                p = export / f"{run}-{i}-{j}.txt"
                p.write_text(f"file {j} of delivery {i}\n")
                files.append({"type": "file", "path": str(p)})
            reqs.append({"sessionId": session_id, "binding": b["binding"], "id": f"{run}-{i}",
                         "parts": [*files, {"type": "text", "text": f"delivery {run} {i}"}]})

        async def one(i: int) -> None:
            req = reqs[i]
            async with sem:
                t = time.perf_counter()
                r = await self.conn.ext_method("ag2/deliver", req)
                lat.append(time.perf_counter() - t)
            if r.get("status") != "delivered":
                bad.append(r)

        t0 = time.perf_counter()
        await asyncio.gather(*(one(i) for i in range(n)))
        wall = time.perf_counter() - t0
        lat.sort()
        report = {
            "deliveries": n,
            "in_flight": c,
            "parts": 3 * n,
            "seconds": round(wall, 3),
            "parts_per_second": round(3 * n / wall, 1),
            "p50_ms": round(lat[len(lat) // 2] * 1000, 1),
            "p99_ms": round(lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1000, 1),
            "not_delivered": len(bad),
            "run": run,
        }
        upd = update_agent_message(text_block(json.dumps(report)))
        await self.conn.session_update(session_id=session_id, update=upd)
        return PromptResponse(stop_reason="end_turn")


if __name__ == "__main__":
    asyncio.run(run_agent(BenchAgent()))
