"""Hub memory while one room grows to 1,000,000 events (issue 2 "Speed": RSS < 200 MB).

Every event is a real keyed post through the hub's HTTP API, driven by wrk (seed mode of
bench/wrk/post.lua: keys PREFIX-0 .. PREFIX-(N-1), each posted until it has its 201).
The hub's VmRSS is sampled throughout; afterwards the last pages are read and the room is
streamed over SSE from near the end and from the start, to show that reads page through
the store instead of loading the room. Prints one JSON report.

    /work/venv/bin/python bench/load_events.py [--events 1000000] [--connections 256]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

import benchlib
from benchlib import RssSampler, WrkRun

TARGET_RSS_MB = 200.0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--events", type=int, default=1_000_000, help="events to post (1,000,000)")
    p.add_argument("--connections", type=int, default=256, help="wrk connections (256)")
    p.add_argument("--threads", type=int, default=1, help="wrk threads (1)")
    p.add_argument("--db", default=None, help="passed to `agentpost serve --db`")
    p.add_argument("--server-cpu", default="0", help="taskset -c for the hub ('' = none)")
    p.add_argument("--wrk-cpu", default="1", help="taskset -c for wrk ('' = none)")
    p.add_argument("--data", type=Path, default=None, help="hub data dir (default: temp)")
    p.add_argument("--keep", action="store_true", help="keep the temp data dir")
    p.add_argument("--launcher", type=Path, default=None, help="as in post_path.py")
    p.add_argument("--pages", type=int, default=10, help="pages of 1000 read from the end")
    p.add_argument("--sse-events", type=int, default=20000, help="events read per SSE stream")
    return p.parse_args(argv)


def mb(kb: int) -> float:
    return round(kb / 1024, 1)


def read_sse(c: httpx.Client, room: str, after: int, count: int) -> dict[str, Any]:
    """Read `count` events from the room's stream resuming after seq `after`; then hang up."""
    started = time.monotonic()
    got = 0
    last = after
    headers = {"Last-Event-ID": str(after)}
    with c.stream("GET", f"/v1/rooms/{room}/stream", headers=headers, timeout=120) as r:
        r.raise_for_status()
        for line in r.iter_lines():
            if line.startswith("id: "):
                seq = int(line[4:])
                if seq != last + 1:
                    raise RuntimeError(f"SSE gap: {last} then {seq}")
                last = seq
                got += 1
                if got >= count:
                    break
    secs = time.monotonic() - started
    return {"from_seq": after + 1, "events": got, "seconds": round(secs, 2)}


def run(args: argparse.Namespace) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="agentpost-load-"))
    data_dir = args.data or tmp / "hub"
    admin = benchlib.new_secret()
    launcher = [str(args.launcher)] if args.launcher else None
    hub = benchlib.start_hub(data_dir, args.server_cpu or None, admin, args.db, launcher=launcher)
    errors: list[str] = []
    n = args.events
    try:
        setup = benchlib.setup_rooms(hub.url, admin, ["big"])
        room = setup.rooms["big"]
        idle_kb = benchlib.proc_status_kb(hub.pid, "VmRSS")
        with RssSampler(hub.pid, interval=0.5) as load_rss:
            started = time.monotonic()
            res = WrkRun(
                hub.url,
                "seed",
                setup.token,
                [room],
                f"big-{int(time.time())}",
                nkeys=n,
                duration=24 * 3600,
                connections=args.connections,
                threads=args.threads,
                cpu=args.wrk_cpu or None,
            ).run()
            load_s = time.monotonic() - started
        if res["created"] != n or res["non_2xx"] or any(res["socket_errors"].values()):
            errors.append(f"load: {res['created']} created of {n}, {res['non_2xx']} non-2xx")

        reads: dict[str, Any] = {}
        with (
            RssSampler(hub.pid, interval=0.1) as read_rss,
            httpx.Client(
                base_url=hub.url, timeout=60, headers={"Authorization": f"Bearer {setup.token}"}
            ) as c,
        ):
            # exactly N events: the N-th is the last one, and nothing comes after it
            last = c.get(f"/v1/rooms/{room}/events", params={"after": n - 1}).json()["events"]
            beyond = c.get(f"/v1/rooms/{room}/events", params={"after": n}).json()["events"]
            reads["last_seq"] = last[0]["seq"] if last else None
            reads["events_after_last"] = len(beyond)
            if reads["last_seq"] != n or beyond:
                errors.append(f"room has last seq {reads['last_seq']}, {len(beyond)} beyond {n}")
            t0 = time.monotonic()
            got = 0
            for i in range(args.pages):
                after = max(n - (i + 1) * 1000, 0)
                page = c.get(f"/v1/rooms/{room}/events", params={"after": after, "limit": 1000})
                got += len(page.json()["events"])
            reads["tail_pages"] = {
                "pages": args.pages,
                "events": got,
                "ms_per_page": round(1000 * (time.monotonic() - t0) / max(args.pages, 1), 1),
            }
            reads["sse_from_end"] = read_sse(c, room, max(n - args.sse_events, 0), args.sse_events)
            reads["sse_from_start"] = read_sse(c, room, 0, min(args.sse_events, n))
            # The stream above hung up far behind the end of the room: is the hub still
            # answering at once, or is it busy writing the rest of the room to no one?
            t0 = time.monotonic()
            c.get("/healthz").raise_for_status()
            reads["healthz_ms_after_sse_hangup"] = round(1000 * (time.monotonic() - t0), 1)
        peak_kb = benchlib.proc_status_kb(hub.pid, "VmHWM")
        final_kb = benchlib.proc_status_kb(hub.pid, "VmRSS")
    finally:
        hub.stop()

    db_files = sorted(data_dir.glob("hub.sqlite3*"))
    log_bytes = hub.log_path.stat().st_size
    db_mb = {p.name: round(p.stat().st_size / 2**20, 1) for p in db_files}
    if not args.keep:
        shutil.rmtree(tmp, ignore_errors=True)
    step = max(len(load_rss.samples) // 20, 1)
    return {
        "bench": "load_events",
        "settings": {
            "events": n,
            "connections": args.connections,
            "wrk_threads": args.threads,
            "db": args.db or "sqlite (WAL, synchronous=FULL)",
            "launcher": str(args.launcher) if args.launcher else "python -m agentpost",
        },
        "load": {
            "seconds": round(load_s, 1),
            "posts_per_s": round(n / load_s, 1),
            "created": res["created"],
            "non_2xx": res["non_2xx"],
            "p50_ms": round(res["latency_ms"]["p50"], 2),
            "p99_ms": round(res["latency_ms"]["p99"], 2),
        },
        "rss_mb": {
            "idle_before_load": mb(idle_kb),
            "max_during_load": mb(load_rss.max_kb),
            "max_during_reads": mb(read_rss.max_kb),
            "final": mb(final_kb),
            "peak_vmhwm": mb(peak_kb),
            "target": TARGET_RSS_MB,
            "ok": mb(peak_kb) < TARGET_RSS_MB,
            "samples_s_mb": [(t, mb(kb)) for t, kb in load_rss.samples[::step]],
        },
        "reads": reads,
        "db_mb": db_mb,
        "hub_log_bytes": log_bytes,
        "errors": errors,
        "machine": benchlib.machine_info(),
    }


def main(argv: list[str] | None = None) -> int:
    report = run(parse_args(argv))
    json.dump(report, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0 if not report["errors"] else 1


if __name__ == "__main__":
    sys.exit(main())
