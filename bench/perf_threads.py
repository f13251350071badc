"""Where one hub's CPU goes during keyed posts, per thread, from `perf` (issue 14).

py-spy over-weights code that makes system calls and sees no C; `perf record` samples the
CPU itself (cpu-clock: this VM has no hardware counters), kernel and C included. The hub
runs pinned to core 0, wrk on core 1 (as bench/post_path.py); `perf record -g -p HUB`
samples every thread of it for `--duration` seconds of keyed posts, and the report gives,
per thread (named from `py-spy dump`, which knows Python's thread names and their native
ids): its share of the hub's samples, the split by object (kernel, libpython, SQLite,
uvloop, httptools, libc, …) and its top symbols. One JSON report on stdout.

    .venv/bin/python bench/perf_threads.py [--duration 8] [--rooms 1] [--top 12]
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import benchlib  # noqa: E402
from cpu import _proc_cpu  # noqa: E402

PY_SPY = str(Path(sys.executable).with_name("py-spy"))


def thread_names(pid: int) -> dict[int, str]:
    """Native thread id -> Python thread name, from `py-spy dump --native` (its lines read
    `Thread <native id> (idle): "sqlite-writer"`)."""
    out = subprocess.run(
        [PY_SPY, "dump", "--native", "-p", str(pid)], capture_output=True, text=True, timeout=60
    ).stdout
    names: dict[int, str] = {}
    for m in re.finditer(r'^Thread (0x[0-9A-Fa-f]+|\d+) \(([^)]*)\): "([^"]*)"', out, re.M):
        ident, name = m.group(1), m.group(3)
        names[int(ident, 16) if ident.startswith("0x") else int(ident)] = name
    return names


def native_names(pid: int) -> dict[int, str]:
    """Native tid -> a name: MainThread for the pid itself, else the Python name py-spy
    reports for it (`py-spy dump` prints `Thread <tid>` with --native on Linux), else tid."""
    names = thread_names(pid)
    tids = [int(p.name) for p in Path(f"/proc/{pid}/task").iterdir()]
    out = {}
    for tid in tids:
        out[tid] = "MainThread (event loop)" if tid == pid else names.get(tid, f"thread {tid}")
    return out


def dso_of(name: str) -> str:
    if name.startswith("[kernel") or name == "[unknown]":
        return "kernel" if name.startswith("[kernel") else "unknown"
    base = Path(name).name
    for key, label in (
        ("libpython", "libpython (the interpreter)"),
        ("libsqlite3", "libsqlite3"),
        ("libpq", "libpq"),
        ("loop.cpython", "uvloop"),
        ("parser.cpython", "httptools"),
        ("url_parser", "httptools"),
        ("libc.so", "libc"),
        ("libcrypto", "libcrypto (sha256)"),
        ("_msgspec", "msgspec"),
    ):
        if key in base:
            return label
    return base


def perf_script_rows(data: Path) -> list[tuple[int, str, str]]:
    """(tid, dso, symbol) of every sample's leaf frame."""
    out = subprocess.run(
        ["perf", "script", "-i", str(data), "-F", "tid,ip,sym,dso", "-G"],
        capture_output=True, text=True, timeout=600,
    ).stdout
    rows = []
    for line in out.splitlines():
        m = re.match(r"\s*(\d+)\s+[0-9a-f]+\s+(.*?)\s+\((.*)\)\s*$", line)
        if m:
            rows.append((int(m.group(1)), dso_of(m.group(3)), m.group(2).split("+")[0]))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--duration", type=float, default=8.0)
    ap.add_argument("--rooms", type=int, default=1)
    ap.add_argument("--connections", type=int, default=64)
    ap.add_argument("--top", type=int, default=12)
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="agentpost-perf-"))
    token = benchlib.new_secret()
    hub = benchlib.start_hub(tmp / "hub", "0", token)
    try:
        s = benchlib.setup_rooms(hub.url, token, [f"r{i}" for i in range(a.rooms)])
        rooms = list(s.rooms.values())
        warm = benchlib.WrkRun(hub.url, "unique", s.token, rooms, "warm", duration=2,
                               connections=a.connections)
        warm.run()
        names = native_names(hub.pid)
        data = tmp / "perf.data"
        run = benchlib.WrkRun(hub.url, "unique", s.token, rooms, "perf", duration=a.duration,
                              connections=a.connections)
        cpu0 = (_proc_cpu(hub.pid) or ("", 0.0))[1]
        perf = subprocess.Popen(
            ["taskset", "-c", "1", "perf", "record", "-F", "999", "-g", "-p", str(hub.pid),
             "-o", str(data), "--", "sleep", str(a.duration - 1)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        t0 = time.monotonic()
        res = run.run()
        wall = time.monotonic() - t0
        perf.wait(60)
        cpu1 = (_proc_cpu(hub.pid) or ("", 0.0))[1]
        names.update({t: n for t, n in native_names(hub.pid).items() if t not in names})
        rows = perf_script_rows(data)
    finally:
        hub.stop()
    per_tid: dict[int, Counter[str]] = defaultdict(Counter)
    syms: dict[int, Counter[str]] = defaultdict(Counter)
    for tid, dso, sym in rows:
        per_tid[tid][dso] += 1
        syms[tid][f"{sym} [{dso}]"] += 1
    total = sum(sum(c.values()) for c in per_tid.values()) or 1
    threads = []
    for tid, c in sorted(per_tid.items(), key=lambda kv: -sum(kv[1].values())):
        n = sum(c.values())
        threads.append({
            "thread": names.get(tid, f"thread {tid} (started during the run)"),
            "share_of_hub_samples": round(n / total, 3),
            "by_object": {k: round(v / n, 3) for k, v in c.most_common()},
            "top_symbols": {k: round(v / n, 3) for k, v in syms[tid].most_common(a.top)},
        })
    requests = res.get("requests", 0)
    report = {
        "machine": benchlib.machine_info(),
        "phase": f"keyed posts, {a.rooms} room(s), {a.connections} connections, wrk on core 1",
        "req_per_s": round(requests / wall, 1) if wall else None,
        "hub_cpu_us_per_post": round((cpu1 - cpu0) * 1e6 / requests) if requests else None,
        "non_2xx": res.get("non_2xx"),
        "samples": total,
        "threads": threads,
    }
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
