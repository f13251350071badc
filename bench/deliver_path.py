"""Deferred delivery through one Worker (issue 11 "Speed"); prints one JSON report.

Deliveries of 1 text + 2 small files, 16 in flight, from a real ACP agent
(bench/deliver_agent.py) through a real `agentpost connect` Worker with the ledger's fsync
on (WAL, synchronous FULL), against a real hub on SQLite; and the same 3 posts per delivery
made directly with keys by one client, 16 at once. The two run side by side in each round
(order alternated), so the ratio is of one moment of this shared machine; the report gives
each round and the medians. Afterwards the room is counted: every part exactly once.

    .venv/bin/python bench/deliver_path.py [--deliveries 300] [--in-flight 16] [--rounds 3]
        [--profile DIR]   # py-spy on hub, Worker and agent in round 1 (costs throughput)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from agentpost.client import AsyncHubClient  # noqa: E402
from cpu import _busy, _proc_cpu  # noqa: E402
from hubproc import HubProcess, make_setup, poll  # noqa: E402

TARGET_PARTS_PER_SECOND = 500
TARGET_OVERHEAD = 0.20


class Meter:
    """CPU seconds of named processes and of the whole machine over one phase, from /proc."""

    def __init__(self, pids: dict[str, int]) -> None:
        self.pids = pids

    def _snap(self) -> tuple[float, float, dict[str, float]]:
        cpu = {n: (_proc_cpu(p) or ("", 0.0))[1] for n, p in self.pids.items()}
        return time.monotonic(), _busy()["cpu"], cpu

    def __enter__(self) -> Meter:
        self._a = self._snap()
        return self

    def __exit__(self, *exc: object) -> None:
        self._b = self._snap()

    def report(self, parts: int) -> dict[str, Any]:
        (t0, b0, c0), (t1, b1, c1) = self._a, self._b
        wall = max(t1 - t0, 1e-9)
        used = {n: c1[n] - c0[n] for n in self.pids}
        busy = (b1 - b0) / wall
        return {
            "cores_busy": round(busy, 2),
            "cores": {n: round(s / wall, 2) for n, s in used.items()},
            "other_cores": round(busy - sum(used.values()) / wall, 2),
            "cpu_us_per_part": {n: round(s * 1e6 / parts) for n, s in used.items()},
        }


def py_spy(pid: int, out: Path, seconds: float) -> subprocess.Popen[bytes]:
    spy = str(Path(sys.executable).with_name("py-spy"))
    return subprocess.Popen(
        [spy, "record", "--idle", "-f", "raw", "-r", "200", "-d", str(int(seconds) + 1),
         "-p", str(pid), "-o", str(out)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )


async def direct(url: str, token: str, room: str, n: int, c: int, folder: Path, tag: str) -> dict[str, Any]:
    sem = asyncio.Semaphore(c)
    lat: list[float] = []
    async with AsyncHubClient(url, token) as client:

        paths = []
        for i in range(n):  # written before the clock starts, as the agent does (deliver_agent.py)
            for j in range(2):
                p = folder / f"{tag}-{i}-{j}.txt"
                p.write_text(f"file {j} of direct {i}\n")
                paths.append(p)

        async def one(i: int) -> None:
            async with sem:
                t = time.perf_counter()
                for j in range(2):
                    await client.upload(room, paths[2 * i + j], key=f"{tag}-{i}-{j}")
                await client.post_message(room, f"direct {tag} {i}", key=f"{tag}-{i}-t")
                lat.append(time.perf_counter() - t)

        t0 = time.perf_counter()
        await asyncio.gather(*(one(i) for i in range(n)))
        wall = time.perf_counter() - t0
    lat.sort()
    return {
        "parts_per_second": round(3 * n / wall, 1),
        "seconds": round(wall, 3),
        "p50_ms": round(lat[len(lat) // 2] * 1000, 1),
        "p99_ms": round(lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1000, 1),
    }


def agent_pid(worker_pid: int) -> int:
    kids = Path(f"/proc/{worker_pid}/task/{worker_pid}/children").read_text().split()
    return int(kids[0])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--deliveries", type=int, default=300)
    ap.add_argument("--in-flight", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=100, help="deliveries of each kind first, not measured")
    ap.add_argument("--profile", type=Path, default=None)
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="agentpost-bench-deliver-"))
    hub = HubProcess(tmp / "hub").start()
    worker = None
    load_before = os.getloadavg()
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
        assert hub.proc is not None
        pids = {"hub": hub.proc.pid, "worker": worker.pid, "agent": agent_pid(worker.pid)}
        folder = tmp / "direct"
        folder.mkdir()
        if a.profile:
            a.profile.mkdir(parents=True, exist_ok=True)

        def via_worker(r: int, n: int) -> dict[str, Any]:
            spies = []
            if a.profile and r == 0:
                est = max(5.0, 3 * n / 60)
                spies = [py_spy(p, a.profile / f"worker_phase.{n}.txt", est) for n, p in pids.items()]
                time.sleep(1.0)
            with hub.client(s.tokens["alice"]) as c, Meter(pids) as m:
                asked = c.post(f"/v1/rooms/{s.room}/messages",
                               json={"text": f"@bot bench {n} {a.in_flight}"}).json()["event"]

                seen = [asked["seq"]]

                def reply() -> dict[str, Any] | None:
                    got = c.get(f"/v1/rooms/{s.room}/events", params={"after": seen[0], "limit": 1000})
                    page = got.json()["events"]
                    if page:
                        seen[0] = page[-1]["seq"]
                    found = [e for e in page if e["in_reply_to"] == asked["id"]]
                    return json.loads(found[0]["text"]) if found else None

                out: dict[str, Any] = poll(reply, timeout=1800, interval=1.0)  # the agent times itself
            for spy in spies:
                spy.wait()
            return {**out, "cpu": m.report(3 * n)}

        def via_direct(r: int, n: int) -> dict[str, Any]:
            with Meter({"hub": hub.proc.pid, "client": os.getpid()}) as m:  # type: ignore[union-attr]
                out = asyncio.run(direct(hub.url, s.tokens["bot"], s.room, n,
                                         a.in_flight, folder, f"direct{r}"))
            return {**out, "cpu": m.report(3 * n)}

        # Not measured: both paths once, so neither round 1 pays for a cold hub (its SQLite
        # pages, the Worker's session and connections); counted in the exactly-once check.
        warm = [via_worker(-1, a.warmup)["run"]] if a.warmup else []
        if a.warmup:
            via_direct(-1, a.warmup)
        rounds = []
        for r in range(a.rounds):
            if r % 2 == 0:
                w, d = via_worker(r, a.deliveries), via_direct(r, a.deliveries)
            else:
                d, w = via_direct(r, a.deliveries), via_worker(r, a.deliveries)
            rounds.append({
                "via_worker": w, "direct_keyed_posts": d,
                "ledger_overhead": round(d["parts_per_second"] / w["parts_per_second"] - 1, 3),
                "load_avg_1m": os.getloadavg()[0],
            })
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
        runs = warm + [r["via_worker"]["run"] for r in rounds]
        delivered = [t for t in texts if t.startswith("delivery ")]
        direct_texts = [t for t in texts if t.startswith("direct ")]
        n = a.deliveries * a.rounds + a.warmup
        exactly_once = (
            len(delivered) == len(set(delivered)) == n
            and {t.split()[1] for t in delivered} == set(runs)
            and len(direct_texts) == len(set(direct_texts)) == n
            and media == 4 * n
            and all(r["via_worker"]["not_delivered"] == 0 for r in rounds)
        )
        pps = statistics.median(r["via_worker"]["parts_per_second"] for r in rounds)
        overhead = statistics.median(r["ledger_overhead"] for r in rounds)
        report = {
            "machine": {
                "cpus": os.cpu_count(),
                "load_avg_before": [round(x, 2) for x in load_before],
                "load_avg_after": [round(x, 2) for x in os.getloadavg()],
                "note": "2 cores shared with other work: see cores_busy / other_cores per phase",
                "profiled": bool(a.profile),
            },
            "deliveries_per_round": a.deliveries,
            "warmup_deliveries": a.warmup,
            "in_flight": a.in_flight,
            "median": {
                "via_worker_parts_per_second": pps,
                "via_worker_p99_ms": statistics.median(r["via_worker"]["p99_ms"] for r in rounds),
                "direct_parts_per_second": statistics.median(
                    r["direct_keyed_posts"]["parts_per_second"] for r in rounds),
                "direct_p99_ms": statistics.median(r["direct_keyed_posts"]["p99_ms"] for r in rounds),
                "ledger_overhead": overhead,
            },
            "rounds": rounds,
            "exactly_once": exactly_once,
            "targets": {"parts_per_second": TARGET_PARTS_PER_SECOND, "overhead": TARGET_OVERHEAD},
            "met": pps >= TARGET_PARTS_PER_SECOND and overhead <= TARGET_OVERHEAD,
        }
        print(json.dumps(report, indent=1))
    finally:
        if worker is not None:
            worker.terminate()
            worker.wait(30)
        hub.stop()


if __name__ == "__main__":
    main()
