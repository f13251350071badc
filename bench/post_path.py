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
from pathlib import Path
from typing import Any

import benchlib
from benchlib import WrkRun

TARGET_KEYED_RATIO = 0.6
TARGET_KEYED_P99_MS = 25.0
TARGET_REPLAY_RATIO = 0.8


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--duration", type=float, default=10.0, help="seconds per phase (10)")
    p.add_argument("--warmup", type=float, default=2.0, help="seconds of warm-up per server (2)")
    p.add_argument("--connections", type=int, default=64, help="wrk connections (64)")
    p.add_argument("--threads", type=int, default=1, help="wrk threads (1: wrk has one core)")
    p.add_argument("--rooms", type=int, default=100, help="rooms of the many-rooms phase (100)")
    p.add_argument("--replay-keys", type=int, default=10000, help="keys seeded for replays")
    p.add_argument("--db", default=None, help="passed to `agentpost serve --db` (default SQLite)")
    p.add_argument(
        "--processes",
        type=int,
        default=1,
        help="hub processes; more than 1 needs a shared database (PostgreSQL, not yet)",
    )
    p.add_argument("--server-cpu", default="0", help="taskset -c for the server ('' = none)")
    p.add_argument("--wrk-cpu", default="1", help="taskset -c for wrk ('' = none)")
    p.add_argument("--data", type=Path, default=None, help="hub data dir (default: a temp dir)")
    p.add_argument(
        "--profile",
        type=Path,
        default=None,
        help="py-spy record the hub during keyed_1room and replay into DIR/<phase>.txt",
    )
    p.add_argument(
        "--launcher",
        type=Path,
        default=None,
        help="a script taking agentpost's CLI instead of `-m agentpost` (what-if runs)",
    )
    p.add_argument("--keep", action="store_true", help="keep the temp data dir")
    p.add_argument("--skip-echo", action="store_true", help="no echo phase (no ratios)")
    args = p.parse_args(argv)
    if args.processes != 1:
        p.error("--processes > 1 needs a multi-process hub on a shared --db; not available yet")
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


def run(args: argparse.Namespace) -> dict[str, Any]:
    server_cpu = args.server_cpu or None
    wrk_cpu = args.wrk_cpu or None
    tmp = Path(tempfile.mkdtemp(prefix="agentpost-bench-"))
    data_dir = args.data or tmp / "hub"
    run_id = f"{int(time.time())}"
    errors: list[str] = []
    phases: dict[str, Any] = {}

    def wrk(url: str, mode: str, token: str, rooms: list[str], prefix: str, **kw: Any) -> dict:
        settings = {
            "duration": args.duration,
            "connections": args.connections,
            "threads": args.threads,
            "cpu": wrk_cpu,
        }
        settings.update(kw)
        return WrkRun(url, mode, token, rooms, f"{prefix}-{run_id}", **settings).run()

    # 1. the ceiling
    ceiling = None
    if not args.skip_echo:
        echo = benchlib.start_echo(server_cpu, tmp)
        try:
            wrk(echo.url, "unique", "x", ["x"], "warm", duration=args.warmup)
            res = wrk(echo.url, "unique", "x", ["x"], "echo")
        finally:
            echo.stop()
        ceiling = res["rps"]
        phases["echo"] = phase_report(res, None)

    # 2.-4. the hub
    admin = benchlib.new_secret()
    launcher = [str(args.launcher)] if args.launcher else None
    hub = benchlib.start_hub(data_dir, server_cpu, admin, args.db, launcher=launcher)
    try:
        many = [f"r{i:03d}" for i in range(args.rooms)]
        setup = benchlib.setup_rooms(hub.url, admin, ["one", "replay", *many])
        one, replay_room = setup.rooms["one"], setup.rooms["replay"]
        many_ids = [setup.rooms[n] for n in many]
        tok = setup.token

        warm = wrk(hub.url, "unique", tok, [one], "warm", duration=args.warmup)
        spy = py_spy(hub.pid, args.profile, "keyed_1room", args.duration) if args.profile else None
        k1 = wrk(hub.url, "unique", tok, [one], "k1")
        if spy is not None:
            spy.wait(60)
        k100 = wrk(hub.url, "unique", tok, many_ids, "k100")
        seed_started = time.monotonic()
        seed = wrk(hub.url, "seed", tok, [replay_room], "rp", nkeys=args.replay_keys, duration=3600)
        seed_s = time.monotonic() - seed_started
        spy = py_spy(hub.pid, args.profile, "replay", args.duration) if args.profile else None
        rp = wrk(hub.url, "replay", tok, [replay_room], "rp", nkeys=args.replay_keys)
        if spy is not None:
            spy.wait(60)

        phases["keyed_1room"] = phase_report(k1, ceiling)
        phases["keyed_100rooms"] = phase_report(k100, ceiling)
        phases["replay"] = phase_report(rp, ceiling)
        phases["replay"]["seeded_keys"] = seed["created"]
        phases["replay"]["seed_seconds"] = round(seed_s, 1)
        if args.profile:
            for name in ("keyed_1room", "replay"):
                phases[name]["note"] = "measured under py-spy sampling"

        for name, res in (("warmup", warm), ("keyed_1room", k1), ("keyed_100rooms", k100)):
            if res["non_2xx"] or any(res["socket_errors"].values()):
                errors.append(f"{name}: {res['non_2xx']} non-2xx, {res['socket_errors']}")
            if res["replayed"]:
                errors.append(f"{name}: {res['replayed']} replays of keys meant to be unique")
        for name, res in (("seed", seed), ("replay", rp)):
            if res["non_2xx"] or any(res["socket_errors"].values()):
                errors.append(f"{name}: {res['non_2xx']} non-2xx, {res['socket_errors']}")
        if rp["created"]:
            errors.append(f"replay: {rp['created']} keys created instead of replayed")
        if seed["created"] != args.replay_keys:
            errors.append(f"seed: {seed['created']} created of {args.replay_keys} keys")

        # 5. no loss, no dupes: every key sent is exactly one event, after a client retry
        prefix = f"-{run_id}"
        checks = {}
        for name, ids, sent, created in (
            (
                "one_room",
                [one],
                benchlib.sent_keys("warm" + prefix, warm["sent_per_thread"], [one])
                | benchlib.sent_keys("k1" + prefix, k1["sent_per_thread"], [one]),
                warm["created"] + k1["created"],
            ),
            (
                "many_rooms",
                many_ids,
                benchlib.sent_keys("k100" + prefix, k100["sent_per_thread"], many_ids),
                k100["created"],
            ),
            (
                "replay_room",
                [replay_room],
                benchlib.seeded_keys("rp" + prefix, args.replay_keys, [replay_room]),
                seed["created"] + rp["created"],
            ),
        ):
            checks[name] = benchlib.verify_exactly_once(hub.url, tok, ids, sent, created)
            if not checks[name]["ok"]:
                errors.append(f"verify {name}: {checks[name]}")
        peak_kb = benchlib.proc_status_kb(hub.pid, "VmHWM")
    finally:
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
            "wrk_threads": args.threads,
            "server_cpu": server_cpu,
            "wrk_cpu": wrk_cpu,
            "db": args.db or "sqlite (WAL, synchronous=FULL)",
            "processes": args.processes,
            "rooms": args.rooms,
            "replay_keys": args.replay_keys,
            "launcher": str(args.launcher) if args.launcher else "python -m agentpost",
        },
        "echo_ceiling_rps": ceiling,
        "phases": phases,
        "targets": {
            "keyed_ratio": TARGET_KEYED_RATIO,
            "keyed_p99_ms": TARGET_KEYED_P99_MS,
            "replay_ratio": TARGET_REPLAY_RATIO,
        },
        "verdict": verdict,
        "verify": checks,
        "hub_peak_rss_mb": round(peak_kb / 1024, 1),
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
