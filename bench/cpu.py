"""Where the machine's cores went during a phase: hubs, PostgreSQL, wrk, everything else.

Reads /proc before and after a phase. "postgres" is every process named `postgres` (the
whole server, so other users' queries too); "wrk" the wrk runs this bench waited for;
"other" is the rest of the busy time: py-spy, loopback softirq that lands in no process,
and whatever else ran on this shared machine (other engineers' test suites).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

_TICK = os.sysconf("SC_CLK_TCK")


def _busy() -> dict[str, float]:
    """Busy seconds (not idle, not iowait) from /proc/stat: "cpu" (all cores), "cpu0", …"""
    out = {}
    for line in Path("/proc/stat").read_text().splitlines():
        if not line.startswith("cpu"):
            break
        name, *rest = line.split()
        fields = [int(x) for x in rest]
        out[name] = (sum(fields[:8]) - fields[3] - fields[4]) / _TICK
    return out


def _proc_cpu(pid: int) -> tuple[str, float] | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    comm = raw[raw.index("(") + 1 : raw.rindex(")")]
    rest = raw[raw.rindex(")") + 2 :].split()
    return comm, (int(rest[11]) + int(rest[12])) / _TICK  # utime + stime


def _postgres_cpu() -> dict[int, float]:
    out = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            got = _proc_cpu(int(entry.name))
            if got and got[0] == "postgres":
                out[int(entry.name)] = got[1]
    return out


class CpuMeter:
    """`with CpuMeter(hub_pids) as m: ...; m.report()`: cores used per group."""

    def __init__(self, hub_pids: list[int]) -> None:
        self.hub_pids = hub_pids

    def _snap(self) -> tuple[float, dict[str, float], dict[int, float], dict[int, float], float]:
        hubs = {p: c for p in self.hub_pids if (c := (_proc_cpu(p) or ("", 0.0))[1])}
        t = os.times()  # children this process waited for: the phase's wrk runs
        return time.monotonic(), _busy(), hubs, _postgres_cpu(), t.children_user + t.children_system

    def __enter__(self) -> CpuMeter:
        self._start = self._snap()
        return self

    def __exit__(self, *exc: object) -> None:
        self._end = self._snap()

    def report(self) -> dict[str, Any]:
        (t0, b0, h0, p0, w0), (t1, b1, h1, p1, w1) = self._start, self._end
        wall = max(t1 - t0, 1e-9)
        hubs = [round((h1.get(p, 0.0) - h0.get(p, 0.0)) / wall, 2) for p in self.hub_pids]
        pg = sum(c - p0.get(p, 0.0) for p, c in p1.items()) / wall
        busy = (b1["cpu"] - b0["cpu"]) / wall
        wrk = (w1 - w0) / wall
        return {
            "cores_busy": round(busy, 2),
            "per_core": {k: round((b1[k] - b0.get(k, 0.0)) / wall, 2) for k in b1 if k != "cpu"},
            "hubs": hubs,
            "postgres": round(pg, 2),
            "wrk": round(wrk, 2),
            "other": round(busy - sum(hubs) - pg - wrk, 2),
        }
