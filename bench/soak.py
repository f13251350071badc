"""Soak: a hub under a steady load for a long time, with retention on (issue 31,
docs/operations.md "Retention"). Posts (keyed) at `--rate` per second into `--rooms` rooms, an
upload every `--upload-every` posts, one SSE reader following every room, and the hub's sweep
expiring events after `--keep-events` and files after `--keep-media` seconds. Every
`--sample` seconds it records the hub's RSS, the database's size (with its WAL), the blob
store's size, the event count and the p50/p99 of the posts of that interval.

The verdict compares the second half of the run with itself: nothing may grow without
bound. RSS, the database and the blobs are fitted with a line over the second half (once
retention has reached its steady state); the growth it predicts per hour is reported, and
`flat` is true when each is under `--max-growth-pct` of its mean per hour (after
`--keep-events` the database holds a steady window of events: tombstones are small but not
nothing, so it grows by their size alone).

    .venv/bin/python bench/soak.py --duration 3600            # the hour of the issue
    .venv/bin/python bench/soak.py --duration 600 --rate 50   # a quick look

Prints one JSON report; `--out FILE` writes it too. Run it alone on the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import machine_info, new_secret, proc_status_kb, start_hub  # noqa: E402


def _size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.exists() else 0


def _slope_per_hour(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of (seconds, value), per hour."""
    if len(points) < 2:
        return 0.0
    xs = [p[0] for p in points]
    ys = [p[1] for p in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return (
        0.0
        if den == 0
        else sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / den * 3600
    )


def _traced_growth(snaps: Path, duration: float, top: int = 25) -> list[dict[str, object]]:
    """What grew between the snapshot nearest the middle of the run and the last one, by
    the lines that allocated it (bench/traced_hub.py)."""
    import tracemalloc

    files = sorted(snaps.glob("snap-*.pickle"))
    if len(files) < 2:
        return []
    mid = min(files, key=lambda f: abs(int(f.stem.split("-")[1]) - duration / 2))
    a = tracemalloc.Snapshot.load(str(mid))
    b = tracemalloc.Snapshot.load(str(files[-1]))
    out: list[dict[str, object]] = []
    for st in b.compare_to(a, "traceback")[:top]:
        out.append(
            {
                "size_diff_kb": round(st.size_diff / 1024, 1),
                "count_diff": st.count_diff,
                "size_kb": round(st.size / 1024, 1),
                "from": [f"{f.filename}:{f.lineno}" for f in st.traceback][-8:],
            }
        )
    return out


def _code_of(r: httpx.Response) -> str:
    try:
        return str(r.json()["error"]["code"])
    except (ValueError, KeyError, TypeError):
        return ""


class Load:
    """The posting loop, at a steady rate; latencies per interval."""

    def __init__(
        self, url: str, token: str, rooms: list[str], rate: float, upload_every: int
    ) -> None:
        self.url, self.token, self.rooms = url, token, rooms
        self.rate, self.upload_every = rate, upload_every
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.latencies: list[float] = []
        self.posted = self.uploads = self.errors = 0
        self.failures: list[tuple[float, str]] = []

    def take(self) -> list[float]:
        with self.lock:
            out, self.latencies = self.latencies, []
        return out

    def run(self) -> None:
        n = 0
        start = time.monotonic()
        with httpx.Client(
            base_url=self.url, headers={"Authorization": f"Bearer {self.token}"}, timeout=30
        ) as c:
            while not self.stop.is_set():
                room = self.rooms[n % len(self.rooms)]
                t0 = time.monotonic()
                try:
                    if self.upload_every and n % self.upload_every == 0:
                        data = os.urandom(20_000) + str(n).encode()
                        r = c.post(f"/v1/rooms/{room}/media", files={"file": (f"f{n}.bin", data)})
                        self.uploads += 1
                    else:
                        r = c.post(
                            f"/v1/rooms/{room}/messages",
                            json={"text": f"soak {n}"},
                            headers={"Idempotency-Key": f"soak-{n}"},
                        )
                    ok = r.status_code in (200, 201)
                    why = "" if ok else f"{r.status_code} {_code_of(r)}"
                except httpx.HTTPError as exc:
                    ok, why = False, type(exc).__name__
                with self.lock:
                    self.latencies.append(time.monotonic() - t0)
                    self.posted += 1
                    self.errors += 0 if ok else 1
                    if not ok:  # what each failure was, and when (seconds into the run)
                        self.failures.append((round(time.monotonic() - start, 1), why))
                n += 1
                wait = start + n / self.rate - time.monotonic()
                if wait > 0:
                    self.stop.wait(wait)


class Reader:
    """One SSE reader per room, resuming from where it stopped; counts what it saw."""

    def __init__(self, url: str, token: str, room: str) -> None:
        self.url, self.token, self.room = url, token, room
        self.seen = 0
        self.last = 0
        self.stop = threading.Event()

    def run(self) -> None:
        headers = {"Authorization": f"Bearer {self.token}", "Accept": "text/event-stream"}
        while not self.stop.is_set():
            try:
                with httpx.stream(
                    "GET",
                    f"{self.url}/v1/rooms/{self.room}/stream",
                    params={"after": self.last},
                    headers=headers,
                    timeout=httpx.Timeout(30, read=60),
                ) as r:
                    for line in r.iter_lines():
                        if self.stop.is_set():
                            return
                        if line.startswith("id:"):
                            self.last = int(line[3:].strip())
                            self.seen += 1
            except httpx.HTTPError:
                self.stop.wait(0.5)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--duration", type=float, default=3600)
    ap.add_argument("--rate", type=float, default=40.0, help="posts per second")
    ap.add_argument("--rooms", type=int, default=4)
    ap.add_argument("--upload-every", type=int, default=20)
    ap.add_argument("--keep-events", type=int, default=120, help="seconds")
    ap.add_argument("--keep-media", type=int, default=60, help="seconds")
    ap.add_argument("--key-ttl", type=int, default=300, help="seconds (the hub's default: a day)")
    ap.add_argument("--sample", type=float, default=30.0)
    ap.add_argument("--max-growth-pct", type=float, default=10.0)
    ap.add_argument("--db", default=None, help="postgresql://… (default: SQLite)")
    ap.add_argument("--out", default=None)
    ap.add_argument(
        "--tracemalloc",
        default=None,
        metavar="DIR",
        help="run the hub under tracemalloc (bench/traced_hub.py), snapshots in DIR; the "
        "report names the lines whose memory grew over the second half",
    )
    args = ap.parse_args()

    os.environ["AGENTPOST_SWEEP_INTERVAL"] = "5"
    os.environ["AGENTPOST_BLOB_FREE_GRACE"] = "10"
    admin = new_secret()
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "hub"
        # Key records live for their TTL (a day by default): a shorter one here reaches the
        # steady state within the run, as retention does.
        ttl = ["--key-ttl-seconds", str(args.key_ttl)]
        launcher = None
        if args.tracemalloc:
            os.environ["AGENTPOST_TRACE_DIR"] = str(Path(args.tracemalloc).resolve())
            os.environ.setdefault("AGENTPOST_TRACE_EVERY", str(args.sample))
            launcher = [str(Path(__file__).resolve().parent / "traced_hub.py")]
        hub = start_hub(data, None, admin, db_url=args.db, extra_args=ttl, launcher=launcher)
        try:
            a = {"Authorization": f"Bearer {admin}"}
            httpx.post(
                f"{hub.url}/v1/admin/workspaces", json={"name": "soak"}, headers=a
            ).raise_for_status()
            r = httpx.post(
                f"{hub.url}/v1/admin/workspaces/soak/members",
                json={"name": "alice", "kind": "human"},
                headers=a,
            )
            token = r.json()["token"]
            httpx.put(
                f"{hub.url}/v1/admin/workspaces/soak/retention",
                headers=a,
                json={"events_seconds": args.keep_events, "media_seconds": args.keep_media},
            ).raise_for_status()
            u = {"Authorization": f"Bearer {token}"}
            rooms = []
            for i in range(args.rooms):
                r = httpx.post(
                    f"{hub.url}/v1/workspaces/soak/rooms", json={"name": f"r{i}"}, headers=u
                )
                rooms.append(r.json()["room"]["id"])
            load = Load(hub.url, token, rooms, args.rate, args.upload_every)
            readers = [Reader(hub.url, token, room) for room in rooms]
            threads = [threading.Thread(target=load.run, daemon=True)]
            threads += [threading.Thread(target=x.run, daemon=True) for x in readers]
            for t in threads:
                t.start()
            samples = []
            t0 = time.monotonic()
            while time.monotonic() - t0 < args.duration:
                time.sleep(min(args.sample, args.duration - (time.monotonic() - t0)))
                lat = sorted(load.take())
                db = data / "hub.sqlite3"
                samples.append(
                    {
                        "t": round(time.monotonic() - t0, 1),
                        "rss_kb": proc_status_kb(hub.pid, "VmRSS"),
                        "db_bytes": _size(db) + _size(db.with_name("hub.sqlite3-wal"))
                        if args.db is None
                        else None,
                        "blob_bytes": _size(data / "blobs"),
                        "posted": load.posted,
                        "streamed": sum(x.seen for x in readers),
                        "errors": load.errors,
                        "p50_ms": round(lat[len(lat) // 2] * 1000, 1) if lat else None,
                        "p99_ms": round(lat[int(len(lat) * 0.99)] * 1000, 1) if lat else None,
                    }
                )
                print(json.dumps(samples[-1]), file=sys.stderr, flush=True)
            load.stop.set()
            for x in readers:
                x.stop.set()
            threads[0].join(30)
        finally:
            hub.stop()
    half = [s for s in samples if s["t"] >= args.duration / 2]
    verdict = {}
    for key in ("rss_kb", "db_bytes", "blob_bytes"):
        pts = [(s["t"], float(s[key])) for s in half if s[key] is not None]
        if not pts:
            continue
        mean = statistics.fmean(p[1] for p in pts)
        per_hour = _slope_per_hour(pts)
        verdict[key] = {
            "mean": round(mean),
            "growth_per_hour": round(per_hour),
            "growth_pct_per_hour": round(100 * per_hour / mean, 2) if mean else 0.0,
        }
    p99s = [s["p99_ms"] for s in half if s["p99_ms"] is not None]
    report = {
        "bench": "soak",
        "args": vars(args),
        "machine": machine_info(),
        "engine": "postgresql" if args.db else "sqlite",
        # hub/memory.py: the sweeper hands freed memory back to the system (off: "0").
        "malloc_trim": os.environ.get("AGENTPOST_MALLOC_TRIM", "1") != "0",
        "posted": load.posted,
        "uploads": load.uploads,
        "errors": load.errors,
        "failures": load.failures[:100],
        "streamed": sum(x.seen for x in readers),
        "second_half": verdict,
        "p99_ms_second_half": {
            "max": max(p99s, default=None),
            "median": statistics.median(p99s) if p99s else None,
        },
        "flat": all(v["growth_pct_per_hour"] < args.max_growth_pct for v in verdict.values()),
        "samples": samples,
    }
    if args.tracemalloc:
        report["tracemalloc_second_half"] = _traced_growth(Path(args.tracemalloc), args.duration)
    text = json.dumps(report, indent=1)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
