"""The post path under wrk load, in one run (issue 2 "Speed"); prints one JSON report.

Phases, each with the same wrk settings (server on one core, wrk on the other):
  echo          bench/echo_app.py: the bare Starlette + uvicorn ceiling
  keyed_1room   durable keyed posts, a fresh Idempotency-Key per request, one room
  keyed_100rooms  the same over 100 rooms (a random room per request)
  replay        first seeds N keys, then cycles over them with the same bodies
Afterwards every room is paged through the API: events must equal the 201-created answers
(no loss) with distinct texts and gap-free seqs (no dupes).

    /work/venv/bin/python bench/post_path.py [--duration 10] [--connections 64]
        [--db URL] [--profile DIR]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import benchlib
import pglib
from benchlib import WrkRun
from cpu import CpuMeter

TARGET_KEYED_RATIO = 0.6
TARGET_KEYED_P99_MS = 25.0
TARGET_REPLAY_RATIO = 0.8


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--duration", type=float, default=10.0, help="seconds per phase (10)")
    p.add_argument("--warmup", type=float, default=2.0, help="seconds of warm-up per server (2)")
    p.add_argument("--connections", type=int, default=64, help="wrk connections in all (64)")
    p.add_argument("--threads", type=int, default=1, help="threads per wrk (1: wrk has one core)")
    p.add_argument("--rooms", type=int, default=100, help="rooms of the many-rooms phase (100)")
    p.add_argument("--replay-keys", type=int, default=10000, help="keys seeded for replays")
    p.add_argument(
        "--db",
        default=None,
        help="postgresql://USER@HOST/DB: a fresh database bench_<pid> is created next to DB\n"
        "for the run and dropped after (default: SQLite in the hub's data dir)",
    )
    p.add_argument(
        "--processes",
        type=int,
        default=1,
        help="hub processes on the one --db (PostgreSQL), one wrk per hub, connections split",
    )
    p.add_argument(
        "--server-cpu",
        default="0",
        help="taskset -c for the hubs and the echo; '0/1' gives hub i the i-th spec ('' = none)",
    )
    p.add_argument("--wrk-cpu", default="1", help="taskset -c for wrk ('' = none)")
    p.add_argument("--data", type=Path, default=None, help="hub data dirs under DIR (default temp)")
    p.add_argument(
        "--profile",
        type=Path,
        default=None,
        help="py-spy record the hubs during keyed_1room and replay into DIR/<phase>[.hubN].txt;\n"
        "on PostgreSQL also sample pg_stat_activity during keyed_1room",
    )
    p.add_argument(
        "--launcher",
        type=Path,
        default=None,
        help="a script taking agentpost's CLI instead of `-m agentpost` (what-if runs)",
    )
    p.add_argument(
        "--baseline",
        type=Path,
        default=None,
        help="an earlier report: add this run's keyed req/s as a ratio of its own",
    )
    p.add_argument("--keep", action="store_true", help="keep the temp data dir")
    p.add_argument("--skip-echo", action="store_true", help="no echo phase (no ratios)")
    args = p.parse_args(argv)
    if args.processes < 1:
        p.error("--processes must be at least 1")
    if args.processes > 1 and not (args.db or "").startswith(("postgresql://", "postgres://")):
        p.error("--processes > 1 needs a shared database: --db postgresql://…")
    if args.connections < args.processes * args.threads:
        p.error("--connections must be at least --processes × --threads")
    if args.replay_keys < args.threads:
        p.error("--replay-keys must be at least --threads")
    return args


def phase_report(res: dict[str, Any], ceiling: float | None) -> dict[str, Any]:
    out = {
        "rps": res["rps"],
        "requests": res["requests"],
        "p50_ms": round(res["latency_ms"]["p50"], 2),
        "p99_ms": round(res["latency_ms"]["p99"], 2),
        "max_ms": round(res["latency_ms"]["max"], 2),
        "created": res["created"],
        "replayed": res["replayed"],
        "non_2xx": res["non_2xx"],
        "non_2xx_statuses": res["non_2xx_statuses"],
        "socket_errors": res["socket_errors"],
    }
    if ceiling:
        out["ratio_vs_echo"] = round(res["rps"] / ceiling, 3)
    return out


def py_spy(pid: int, out_dir: Path, phase: str, seconds: float) -> subprocess.Popen[bytes]:
    """Sample the hub (every thread, GIL idle or not) while it is under load, as collapsed
    stacks (`--format raw`) that `profile_top.py` ranks; py-spy shares wrk's core."""
    out_dir.mkdir(parents=True, exist_ok=True)
    spy = str(Path(sys.executable).with_name("py-spy"))
    cmd = [spy, "record", "--pid", str(pid), "--rate", "200", "--duration", str(int(seconds))]
    cmd += ["--format", "raw", "--output", str(out_dir / f"{phase}.txt"), "--idle"]
    return subprocess.Popen(
        benchlib.pinned("1", cmd), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )


def hub_cpus(spec: str, n: int) -> list[str | None]:
    """`--server-cpu` per hub: '0' pins every hub to core 0, '0/1' hub i to the i-th spec."""
    parts = [x or None for x in spec.split("/")] if spec else [None]
    return [parts[i % len(parts)] for i in range(n)]


def baseline_ratios(path: Path, phases: dict[str, Any]) -> dict[str, Any]:
    base = json.loads(path.read_text())
    out: dict[str, Any] = {
        "file": str(path),
        "db": base["settings"]["db"],
        "processes": base["settings"]["processes"],
    }
    for name in ("keyed_1room", "keyed_100rooms", "replay"):
        out[name] = round(phases[name]["rps"] / base["phases"][name]["rps"], 3)
    return out


def run(args: argparse.Namespace) -> dict[str, Any]:
    pg = (args.db or "").startswith(("postgresql://", "postgres://"))
    with ExitStack() as stack:
        if pg:
            db_url, db_name = stack.enter_context(pglib.fresh_database(args.db))
            report = run_hubs(args, db_url, db_name)
            report["settings"]["db"] = f"{pglib.with_dbname(args.db, db_name)} (fresh, dropped)"
            report["postgres"] = pglib.server_info(db_url)
        else:
            report = run_hubs(args, args.db, None)
    if args.baseline:
        report["vs_baseline"] = baseline_ratios(args.baseline, report["phases"])
    return report


def run_hubs(args: argparse.Namespace, db_url: str | None, db_name: str | None) -> dict[str, Any]:
    n = args.processes
    cpus = hub_cpus(args.server_cpu, n)
    wrk_cpu = args.wrk_cpu or None
    tmp = Path(tempfile.mkdtemp(prefix="agentpost-bench-"))
    base_dir = args.data or tmp
    run_id = f"{int(time.time())}"
    errors: list[str] = []
    phases: dict[str, Any] = {}
    cpu_use: dict[str, Any] = {}
    db_use: dict[str, Any] = {}
    conns = benchlib.split_connections(args.connections, n)

    def wrk(url: str, mode: str, token: str, rooms: list[str], prefix: str, **kw: Any) -> dict:
        """One wrk run (setup, seeding), as a one-instance run_parallel result."""
        settings = {"duration": args.duration, "connections": args.connections}
        settings |= {"threads": args.threads, "cpu": wrk_cpu, **kw}
        return benchlib.run_parallel([WrkRun(url, mode, token, rooms, prefix, **settings)])

    def load(mode: str, token: str, rooms: list[str], prefix: str, **kw: Any) -> dict:
        """One wrk per hub at once, the connections split; keys prefixed per instance."""
        settings = {"duration": args.duration, "threads": args.threads, "cpu": wrk_cpu, **kw}
        runs = [
            WrkRun(
                hub.url,
                mode,
                token,
                rooms,
                f"{prefix}-{run_id}" + (f".{i}" if mode == "unique" else ""),
                connections=c,
                **settings,
            )
            for i, (hub, c) in enumerate(zip(hubs, conns, strict=True))
        ]
        return benchlib.run_parallel(runs)

    # 1. the ceiling: one echo process on the first hub's core(s)
    ceiling = None
    if not args.skip_echo:
        echo = benchlib.start_echo(cpus[0], tmp)
        try:
            wrk(echo.url, "unique", "x", ["x"], "warm", duration=args.warmup)
            res = wrk(echo.url, "unique", "x", ["x"], "echo")
        finally:
            echo.stop()
        ceiling = res["rps"]
        phases["echo"] = phase_report(res, None)

    # 2.-4. the hubs: started one after the other (the first applies the migrations)
    admin = benchlib.new_secret()
    launcher = [str(args.launcher)] if args.launcher else None
    hubs: list[benchlib.Served] = []
    try:
        for i in range(n):
            hubs.append(
                benchlib.start_hub(
                    base_dir / f"hub{i}",
                    cpus[i],
                    admin,
                    db_url,
                    launcher=launcher,
                    blobs_dir=base_dir / "blobs" if n > 1 else None,
                )
            )
        pids = [h.pid for h in hubs]
        many = [f"r{i:03d}" for i in range(args.rooms)]
        setup = benchlib.setup_rooms(hubs[0].url, admin, ["one", "replay", *many])
        one, replay_room = setup.rooms["one"], setup.rooms["replay"]
        many_ids = [setup.rooms[name] for name in many]
        tok = setup.token

        def profiled(phase: str, fn: Any) -> dict:
            spies = []
            if args.profile:
                for i, pid in enumerate(pids):
                    out = f"{phase}.hub{i}" if n > 1 else phase
                    spies.append(py_spy(pid, args.profile, out, args.duration))
            activity = None
            if args.profile and db_name and phase == "keyed_1room":
                activity = pglib.ActivitySampler(db_url or "", db_name).__enter__()
            stats0 = pglib.db_stats(db_url or "", db_name) if db_name else None
            with CpuMeter(pids) as meter:
                res = fn()
            cpu_use[phase] = meter.report()
            if stats0 is not None:
                time.sleep(1.2)  # backends flush their counters about once a second
                stats1 = pglib.db_stats(db_url or "", db_name or "")
                db_use[phase] = {k: stats1[k] - stats0[k] for k in stats0}
            if activity is not None:
                activity.__exit__()
                cpu_use[phase]["pg_stat_activity"] = activity.report()
            for spy in spies:
                spy.wait(60)
            return res

        warm = load("unique", tok, [one], "warm", duration=args.warmup)
        k1 = profiled("keyed_1room", lambda: load("unique", tok, [one], "k1"))
        k100 = profiled("keyed_100rooms", lambda: load("unique", tok, many_ids, "k100"))
        seed_started = time.monotonic()
        seed = wrk(
            hubs[0].url,
            "seed",
            tok,
            [replay_room],
            f"rp-{run_id}",
            nkeys=args.replay_keys,
            duration=3600,
        )
        seed_s = time.monotonic() - seed_started
        rp = profiled(
            "replay", lambda: load("replay", tok, [replay_room], "rp", nkeys=args.replay_keys)
        )

        phases["keyed_1room"] = phase_report(k1, ceiling)
        phases["keyed_100rooms"] = phase_report(k100, ceiling)
        phases["replay"] = phase_report(rp, ceiling)
        phases["replay"]["seeded_keys"] = seed["created"]
        phases["replay"]["seed_seconds"] = round(seed_s, 1)
        if args.profile:
            for name in ("keyed_1room", "keyed_100rooms", "replay"):
                phases[name]["note"] = "measured under py-spy sampling"

        for name, res in (("warmup", warm), ("keyed_1room", k1), ("keyed_100rooms", k100)):
            if res["non_2xx"] or any(res["socket_errors"].values()):
                errors.append(f"{name}: {res['non_2xx']} non-2xx, {res['socket_errors']}")
            if res["replayed"]:
                errors.append(f"{name}: {res['replayed']} replays of keys meant to be unique")
        for name, res in (("seed", seed), ("replay", rp)):
            if res["non_2xx"] or any(res["socket_errors"].values()):
                errors.append(
                    f"{name}: {res['non_2xx']} non-2xx ({res['non_2xx_statuses']}),"
                    f" {res['socket_errors']}"
                )
        if rp["created"]:
            errors.append(f"replay: {rp['created']} keys created instead of replayed")
        if seed["created"] != args.replay_keys:
            errors.append(f"seed: {seed['created']} created of {args.replay_keys} keys")

        # 5. no loss, no dupes: every key sent through any hub is exactly one event, read
        # (and retried, as a client would) through the last hub
        checks = {}
        for name, ids, sent, created in (
            (
                "one_room",
                [one],
                benchlib.sent_keys_of(warm, [one]) | benchlib.sent_keys_of(k1, [one]),
                warm["created"] + k1["created"],
            ),
            ("many_rooms", many_ids, benchlib.sent_keys_of(k100, many_ids), k100["created"]),
            (
                "replay_room",
                [replay_room],
                benchlib.seeded_keys(f"rp-{run_id}", args.replay_keys, [replay_room]),
                seed["created"] + rp["created"],
            ),
        ):
            checks[name] = benchlib.verify_exactly_once(hubs[-1].url, tok, ids, sent, created)
            checks[name]["read_through"] = f"hub{n - 1}"
            if not checks[name]["ok"]:
                errors.append(f"verify {name}: {checks[name]}")
        peak_mb = [round(benchlib.proc_status_kb(pid, "VmHWM") / 1024, 1) for pid in pids]
        hub_log_tails = {
            f"hub{i}": hub.log_path.read_text(errors="replace").splitlines()[-6:]
            for i, hub in enumerate(hubs)
        }
    finally:
        for hub in hubs:
            hub.stop()
        if not args.keep and args.data is None:
            shutil.rmtree(tmp, ignore_errors=True)

    verdict = {}
    if ceiling:
        verdict = {
            "keyed_1room_ratio_ok": phases["keyed_1room"]["ratio_vs_echo"] >= TARGET_KEYED_RATIO,
            "keyed_100rooms_ratio_ok": phases["keyed_100rooms"]["ratio_vs_echo"]
            >= TARGET_KEYED_RATIO,
            "replay_ratio_ok": phases["replay"]["ratio_vs_echo"] >= TARGET_REPLAY_RATIO,
        }
    verdict["keyed_p99_ok"] = all(
        phases[p]["p99_ms"] <= TARGET_KEYED_P99_MS for p in ("keyed_1room", "keyed_100rooms")
    )
    verdict["no_errors"] = not errors
    return {
        "bench": "post_path",
        "settings": {
            "duration_s": args.duration,
            "connections": args.connections,
            "wrk_instances": n,
            "connections_per_wrk": conns,
            "wrk_threads": args.threads,
            "hub_cpus": cpus,
            "echo_cpu": cpus[0],
            "wrk_cpu": wrk_cpu,
            "postgres_cpu": "unpinned (the server's own processes float over all cores)"
            if db_name
            else None,
            "db": args.db or "sqlite (WAL, synchronous=FULL)",
            "processes": n,
            "rooms": args.rooms,
            "replay_keys": args.replay_keys,
            "launcher": str(args.launcher) if args.launcher else "python -m agentpost",
            "latency_merge": benchlib.LATENCY_MERGE if n > 1 else "one wrk",
        },
        "echo_ceiling_rps": ceiling,
        "phases": phases,
        "cpu_cores_used": cpu_use,
        "pg_stat_database": db_use or None,
        "targets": {
            "keyed_ratio": TARGET_KEYED_RATIO,
            "keyed_p99_ms": TARGET_KEYED_P99_MS,
            "replay_ratio": TARGET_REPLAY_RATIO,
        },
        "verdict": verdict,
        "verify": checks,
        "hub_peak_rss_mb": peak_mb,
        "errors": errors,
        "hub_log_tails": hub_log_tails,
        "machine": benchlib.machine_info(),
    }


def main(argv: list[str] | None = None) -> int:
    report = run(parse_args(argv))
    json.dump(report, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0 if not report["errors"] else 1


if __name__ == "__main__":
    sys.exit(main())
