"""Deferred delivery through one Worker (issue 11 "Speed"); prints one JSON report.

N deliveries of 1 text + 2 small files, 16 in flight, from a real ACP agent
(bench/deliver_agent.py) through a real `agentpost connect` Worker with the ledger's fsync
on (synchronous FULL), against a real hub on SQLite. Baseline: the same 3 posts per
delivery made directly with keys by one client, 16 at once. Afterwards the room is counted:
every part must be there exactly once.

    .venv/bin/python bench/deliver_path.py [--deliveries 300] [--in-flight 16]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from agentpost.client import AsyncHubClient  # noqa: E402
from hubproc import HubProcess, make_setup, poll  # noqa: E402

TARGET_PARTS_PER_SECOND = 500
TARGET_OVERHEAD = 0.20


async def direct(url: str, token: str, room: str, n: int, c: int, folder: Path) -> dict:  # type: ignore[type-arg]
    sem = asyncio.Semaphore(c)
    lat: list[float] = []
    async with AsyncHubClient(url, token) as client:

        async def one(i: int) -> None:
            async with sem:
                t = time.perf_counter()
                for j in range(2):
                    p = folder / f"d-{i}-{j}.txt"
                    p.write_text(f"file {j} of direct {i}\n")
                    await client.upload(room, p, key=f"direct-{i}-{j}")
                await client.post_message(room, f"direct {i}", key=f"direct-{i}-t")
                lat.append(time.perf_counter() - t)

        t0 = time.perf_counter()
        await asyncio.gather(*(one(i) for i in range(n)))
        wall = time.perf_counter() - t0
    lat.sort()
    return {
        "parts_per_second": round(3 * n / wall, 1),
        "seconds": round(wall, 3),
        "p99_ms": round(lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1000, 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--deliveries", type=int, default=300)
    ap.add_argument("--in-flight", type=int, default=16)
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="agentpost-bench-deliver-"))
    hub = HubProcess(tmp / "hub").start()
    worker = None
    try:
        s = make_setup(hub, ["alice"], ["bot"])
        repo, ws = tmp / "repo", tmp / "ws"
        repo.mkdir()
        env = {**os.environ, "AGENTPOST_HUB": hub.url, "AGENTPOST_TOKEN": s.tokens["bot"]}
        log = open(tmp / "worker.log", "wb")  # noqa: SIM115
        agent = f"{sys.executable} {Path(__file__).parent / 'deliver_agent.py'}"
        worker = subprocess.Popen(
            [sys.executable, "-m", "agentpost", "connect", "--agent", agent,
             "--workspace-dir", str(ws), "--repo", str(repo)],
            env=env, stdout=log, stderr=log,
        )
        poll(lambda: "agent started" in (tmp / "worker.log").read_text(), timeout=60)
        with hub.client(s.tokens["alice"]) as c:
            asked = c.post(f"/v1/rooms/{s.room}/messages",
                           json={"text": f"@bot bench {a.deliveries} {a.in_flight}"}).json()["event"]

            def reply() -> dict | None:  # type: ignore[type-arg]
                evs = c.get(f"/v1/rooms/{s.room}/events", params={"limit": 1000}).json()["events"]
                found = [e for e in evs if e["in_reply_to"] == asked["id"]]
                return json.loads(found[0]["text"]) if found else None

            via_worker = poll(reply, timeout=1800, interval=0.5)
        folder = tmp / "direct"
        folder.mkdir()
        base = asyncio.run(direct(hub.url, s.tokens["bot"], s.room, a.deliveries, a.in_flight, folder))
        with hub.client(s.tokens["alice"]) as c:
            texts: list[str] = []
            media = 0
            after = 0
            while True:
                page = c.get(f"/v1/rooms/{s.room}/events", params={"after": after, "limit": 1000}).json()["events"]
                if not page:
                    break
                after = page[-1]["seq"]
                texts += [e["text"] for e in page if e["type"] == "message"]
                media += sum(1 for e in page if e["type"] == "media")
        run = via_worker["run"]
        delivered_texts = [t for t in texts if t.startswith(f"delivery {run} ")]
        overhead = base["parts_per_second"] / via_worker["parts_per_second"] - 1
        report = {
            "machine": {"cpus": os.cpu_count(), "note": "2 cores shared with other work: noisy"},
            "via_worker": via_worker,
            "direct_keyed_posts": base,
            "ledger_overhead": round(overhead, 3),
            "exactly_once": len(delivered_texts) == len(set(delivered_texts)) == a.deliveries
            and media == 4 * a.deliveries,
            "targets": {"parts_per_second": TARGET_PARTS_PER_SECOND, "overhead": TARGET_OVERHEAD},
            "met": via_worker["parts_per_second"] >= TARGET_PARTS_PER_SECOND and overhead <= TARGET_OVERHEAD,
        }
        print(json.dumps(report, indent=1))
    finally:
        if worker is not None:
            worker.terminate()
            worker.wait(30)
        hub.stop()


if __name__ == "__main__":
    main()
