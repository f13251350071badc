"""Two hub builds side by side, in alternated rounds (issue 14): one JSON report.

On a shared, noisy machine a single run says little; two builds measured in the same
minutes, round after round, say which one is faster. Both hubs run at once (each on
`--server-cpu`, SQLite in its own data dir), wrk on `--wrk-cpu`; each round loads one hub
then the other (the order flips every round) with fresh keys in one room, then with
replays of seeded keys. Per round and hub: req/s, p99 and the hub's CPU per request (from
/proc: user + system time of every thread; this VM has no hardware counters for `perf stat
-e instructions`, and callgrind is too slow to load a hub). Medians at the end; every round
must answer only 2xx.

    .venv/bin/python bench/ab.py --a-src /tmp/base/src [--b-src src] [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import benchlib
import pglib
from benchlib import WrkRun


def launcher(src: Path, tmp: Path, name: str) -> list[str]:
    """A script running `agentpost` from `src` (a checkout's src/ dir) with its CLI."""
    script = tmp / f"launch_{name}.py"
    script.write_text(
        f"import sys\nsys.path.insert(0, {str(src.resolve())!r})\n"
        "from agentpost.cli import main\nmain()\n"
    )
    return [str(script)]


def cpu_seconds(pid: int) -> float:
    """User + system CPU of every thread of `pid` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def one_round(hub: benchlib.Served, run: WrkRun) -> dict[str, Any]:
    cpu0 = cpu_seconds(hub.pid)
    res = benchlib.run_parallel([run])
    cpu1 = cpu_seconds(hub.pid)
    n = max(res["requests"], 1)
    return {
        "rps": res["rps"],
        "p50_ms": round(res["latency_ms"]["p50"], 2),
        "p99_ms": round(res["latency_ms"]["p99"], 2),
        "cpu_us_per_req": round((cpu1 - cpu0) * 1e6 / n, 1),
        "non_2xx": res["non_2xx"],
        "socket_errors": sum(res["socket_errors"].values()),
    }


def median_of(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    keys = ("rps", "p50_ms", "p99_ms", "cpu_us_per_req")
    out: dict[str, Any] = {}
    for k in keys:
        vals = [r[k] for r in rounds if r[k] is not None]
        out[k] = round(statistics.median(vals), 2) if vals else None
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--a-src", type=Path, required=True, help="src/ of build A (the baseline)")
    p.add_argument("--b-src", type=Path, default=benchlib.BENCH.parent / "src", help="build B")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--duration", type=float, default=5.0, help="seconds per round and phase")
    p.add_argument("--connections", type=int, default=64)
    p.add_argument("--replay-keys", type=int, default=2000)
    p.add_argument("--server-cpu", default="0")
    p.add_argument("--wrk-cpu", default="1")
    p.add_argument("--phases", default="keyed,replay", help="keyed,replay (comma-separated)")
    p.add_argument(
        "--db", default=None, help="postgresql://…/DB: each hub gets a fresh database next to DB"
    )
    args = p.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="agentpost-ab-"))
    token = benchlib.new_secret()
    hubs: dict[str, benchlib.Served] = {}
    report: dict[str, Any] = {"machine": benchlib.machine_info(), "rounds": []}
    report["settings"] = {k: str(v) for k, v in vars(args).items()}
    report["uptime_start"] = Path("/proc/loadavg").read_text().strip()
    phases = args.phases.split(",")
    failed = False
    stack = ExitStack()
    try:
        setups = {}
        for name, src in (("A", args.a_src), ("B", args.b_src)):
            db_url = None
            if args.db:
                db_url, _db = stack.enter_context(pglib.fresh_database(args.db, f"_{name}"))
            hubs[name] = benchlib.start_hub(
                tmp / name,
                args.server_cpu or None,
                token,
                db_url=db_url,
                launcher=launcher(src, tmp, name),
            )
            setups[name] = benchlib.setup_rooms(hubs[name].url, token, ["r0"])
            if "replay" in phases:
                s = setups[name]
                seed = WrkRun(
                    hubs[name].url, "seed", s.token, list(s.rooms.values()), f"seed{name}",
                    nkeys=args.replay_keys, duration=60, connections=args.connections,
                    cpu=args.wrk_cpu or None,
                )
                benchlib.run_parallel([seed])
        # warm both up
        for name in ("A", "B"):
            s = setups[name]
            warm = WrkRun(
                hubs[name].url, "unique", s.token, list(s.rooms.values()), f"warm{name}",
                duration=2, connections=args.connections, cpu=args.wrk_cpu or None,
            )
            benchlib.run_parallel([warm])
        for i in range(args.rounds):
            order = ("A", "B") if i % 2 == 0 else ("B", "A")
            row: dict[str, Any] = {}
            for phase in phases:
                for name in order:
                    s = setups[name]
                    mode = "unique" if phase == "keyed" else "replay"
                    prefix = f"k{name}{i}" if mode == "unique" else f"seed{name}"
                    run = WrkRun(
                        hubs[name].url, mode, s.token, list(s.rooms.values()), prefix,
                        nkeys=args.replay_keys, duration=args.duration,
                        connections=args.connections, cpu=args.wrk_cpu or None,
                    )
                    r = one_round(hubs[name], run)
                    failed = failed or r["non_2xx"] > 0 or r["socket_errors"] > 0
                    row[f"{phase}_{name}"] = r
            report["rounds"].append(row)
            print(json.dumps({"round": i, **row}), file=sys.stderr, flush=True)
        report["median"] = {}
        for phase in phases:
            a = median_of([r[f"{phase}_A"] for r in report["rounds"]])
            b = median_of([r[f"{phase}_B"] for r in report["rounds"]])
            ratios = [
                r[f"{phase}_B"]["rps"] / r[f"{phase}_A"]["rps"] for r in report["rounds"]
            ]
            report["median"][phase] = {
                "A": a, "B": b, "B_over_A_rps": round(statistics.median(ratios), 3)
            }
    finally:
        for hub in hubs.values():
            hub.stop()
        stack.close()
        report["uptime_end"] = Path("/proc/loadavg").read_text().strip()
        shutil.rmtree(tmp, ignore_errors=True)
    report["ok"] = not failed
    print(json.dumps(report, indent=2))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
