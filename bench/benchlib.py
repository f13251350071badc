"""What the bench scripts share: a pinned hub or echo process, wrk runs, RSS samples,
API setup and the no-loss/no-dupe check, and the machine description.

Load always comes from wrk (a Python client is not a load generator on this machine,
issue 2 "Speed"); Python here only starts processes, sets up rooms and checks results.
"""

from __future__ import annotations

import json
import os
import platform
import re
import secrets
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import httpx

BENCH = Path(__file__).resolve().parent
POST_LUA = BENCH / "wrk" / "post.lua"
LISTENING = re.compile(r"agentpost hub listening on (http://\S+)")


def pinned(cpu: str | None, cmd: list[str]) -> list[str]:
    """`cmd` under `taskset -c CPU` (exec'd, so the pid stays the program's own)."""
    return ["taskset", "-c", cpu, *cmd] if cpu else cmd


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# -- processes ----------------------------------------------------------------------------


@dataclass
class Served:
    """A server process started by a bench (the hub or the echo app)."""

    proc: subprocess.Popen[str]
    url: str
    log_path: Path

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        if self.proc.stdout:
            self.proc.stdout.close()


def start_hub(
    data_dir: Path,
    cpu: str | None,
    admin_token: str,
    db_url: str | None = None,
    timeout: float = 30.0,
    launcher: list[str] | None = None,
    blobs_dir: Path | None = None,
    extra_args: list[str] | None = None,
) -> Served:
    """`agentpost serve --port 0 --log-level warning`, pinned; waits for its listening line.

    `launcher` replaces `-m agentpost` (a script taking the same CLI), for what-if runs;
    hubs sharing a PostgreSQL database share `blobs_dir` and the admin token (docs/deploy.md).
    """
    data_dir.mkdir(parents=True, exist_ok=True)
    log_path = data_dir / "hub.log"
    cmd = [sys.executable, *(launcher or ["-m", "agentpost"]), "serve"]
    cmd += ["--port", "0", "--data", str(data_dir)]
    cmd += ["--log-level", "warning"]
    if db_url:
        cmd += ["--db", db_url]
    if blobs_dir:
        cmd += ["--blobs", str(blobs_dir)]
    cmd += extra_args or []
    env = {**os.environ, "AGENTPOST_ADMIN_TOKEN": admin_token}
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            pinned(cpu, cmd), stdout=subprocess.PIPE, stderr=log, text=True, env=env
        )
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            if proc.poll() is not None:
                raise RuntimeError(f"hub exited early:\n{log_path.read_text()}")
            continue
        m = LISTENING.search(line)
        if m:
            return Served(proc, m.group(1), log_path)
    proc.kill()
    raise RuntimeError("hub did not print its listening line in time")


def start_echo(cpu: str | None, log_dir: Path, timeout: float = 20.0) -> Served:
    """bench/echo_app.py under one uvicorn process with uvloop and httptools."""
    port = free_port()
    log_path = log_dir / "echo.log"
    cmd = [sys.executable, "-m", "uvicorn", "echo_app:app", "--app-dir", str(BENCH)]
    cmd += ["--host", "127.0.0.1", "--port", str(port), "--loop", "uvloop"]
    cmd += ["--http", "httptools", "--log-level", "warning", "--no-access-log"]
    with open(log_path, "w") as log:
        proc = subprocess.Popen(pinned(cpu, cmd), stdout=subprocess.PIPE, stderr=log, text=True)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"echo app exited early:\n{log_path.read_text()}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return Served(proc, f"http://127.0.0.1:{port}", log_path)
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("echo app did not accept connections in time")


# -- memory -------------------------------------------------------------------------------


def proc_status_kb(pid: int, field_name: str) -> int:
    """A `kB` field of /proc/PID/status (VmRSS, VmHWM), 0 if the process is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field_name + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


class RssSampler:
    """Samples a process's VmRSS in a background thread; keeps the max and a few points."""

    def __init__(self, pid: int, interval: float = 0.25) -> None:
        self.pid = pid
        self.interval = interval
        self.max_kb = 0
        self.samples: list[tuple[float, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._t0 = time.monotonic()

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.interval)

    def sample(self) -> int:
        kb = proc_status_kb(self.pid, "VmRSS")
        self.max_kb = max(self.max_kb, kb)
        self.samples.append((round(time.monotonic() - self._t0, 2), kb))
        return kb


# -- wrk ----------------------------------------------------------------------------------


@dataclass
class WrkRun:
    """One wrk run of bench/wrk/post.lua."""

    url: str
    mode: str  # unique | seed | replay
    token: str
    rooms: list[str]
    prefix: str
    nkeys: int = 0
    duration: float = 10.0
    connections: int = 64
    threads: int = 1
    cpu: str | None = "1"
    extra_env: dict[str, str] = field(default_factory=dict)

    def command(self) -> list[str]:
        duration = f"{int(self.duration)}s"
        cmd = ["wrk", "-t", str(self.threads), "-c", str(self.connections), "-d", duration]
        cmd += ["--timeout", "10s", "-s", str(POST_LUA), self.url, "--", self.mode, self.token]
        cmd += [",".join(self.rooms), self.prefix, str(self.nkeys), str(self.threads)]
        return pinned(self.cpu, cmd)

    def run(self) -> dict[str, Any]:
        """Run to the end (unique, replay) or until every thread seeded its keys (seed)."""
        cmd = self.command()
        if self.mode != "seed":
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=self.duration + 60)
            return _wrk_result(out.stdout, out.stderr, out.returncode)
        # Seeding: each thread writes SEED_DONE when all its keys have their 201; wrk
        # itself runs for -d regardless, so stop it with SIGINT (it still calls done()).
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert proc.stderr is not None
        done = 0
        err_lines = []
        for line in proc.stderr:
            if line.startswith("SEED_DONE"):
                done += 1
                if done >= self.threads:
                    break
            else:
                err_lines.append(line)
        # The kernel may deliver SIGINT to a worker thread: the workers stop, but the main
        # thread sleeps on through -d. Once the workers have exited, a repeat reaches it.
        for _ in range(30):
            proc.send_signal(signal.SIGINT)
            try:
                stdout, stderr = proc.communicate(timeout=2)
                break
            except subprocess.TimeoutExpired:
                continue
        else:
            proc.kill()
            stdout, stderr = proc.communicate()
        return _wrk_result(stdout, "".join(err_lines) + stderr, proc.returncode)


def _wrk_result(stdout: str, stderr: str, rc: int) -> dict[str, Any]:
    for line in stdout.splitlines():
        if line.startswith("WRK_JSON "):
            res: dict[str, Any] = json.loads(line[len("WRK_JSON ") :])
            res["rps"] = round(res["requests"] / res["duration_s"], 1)
            return res
    raise RuntimeError(f"wrk gave no report (rc={rc}):\n{stdout}\n{stderr}")


LATENCY_MERGE = (
    "one wrk per hub, connections split: p99/p999/max are the worst instance's, p50/p90/mean"
    " the connection-weighted mean of the instances'"
)


def run_parallel(runs: list[WrkRun]) -> dict[str, Any]:
    """Several wrk runs at once (one per hub, each its own key prefix), as one result:
    counts and req/s summed, latency merged as LATENCY_MERGE says; `instances` keeps each
    run's prefix and `sent_per_thread` for the exactly-once check."""
    with ThreadPoolExecutor(len(runs)) as pool:
        results = list(pool.map(WrkRun.run, runs))
    conns = [r.connections for r in runs]
    weight = sum(conns)

    def weighted(name: str) -> float:
        return (
            sum(res["latency_ms"][name] * c for res, c in zip(results, conns, strict=True)) / weight
        )

    def worst(name: str) -> float:
        return max(res["latency_ms"][name] for res in results)

    merged: dict[str, Any] = {
        k: sum(res[k] for res in results)
        for k in ("requests", "created", "replayed", "other_2xx", "non_2xx", "rps")
    }
    merged["rps"] = round(merged["rps"], 1)
    merged["duration_s"] = max(res["duration_s"] for res in results)
    merged["non_2xx_statuses"] = "".join(res["non_2xx_statuses"] for res in results)
    merged["socket_errors"] = {
        k: sum(res["socket_errors"][k] for res in results) for k in results[0]["socket_errors"]
    }
    merged["latency_ms"] = {
        **{k: weighted(k) for k in ("p50", "p90", "mean")},
        **{k: worst(k) for k in ("p99", "p999", "max")},
    }
    merged["instances"] = [
        {
            "url": run.url,
            "prefix": run.prefix,
            "connections": run.connections,
            "rps": res["rps"],
            "p50_ms": round(res["latency_ms"]["p50"], 2),
            "p99_ms": round(res["latency_ms"]["p99"], 2),
            "sent_per_thread": res["sent_per_thread"],
        }
        for run, res in zip(runs, results, strict=True)
    ]
    return merged


def split_connections(total: int, parts: int) -> list[int]:
    """`total` connections over `parts` wrk instances, as evenly as possible."""
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


# -- the API ------------------------------------------------------------------------------


@dataclass
class Setup:
    workspace: str
    token: str
    rooms: dict[str, str]  # name -> id


def setup_rooms(url: str, admin_token: str, room_names: list[str]) -> Setup:
    """One workspace, one human member who posts, and the named rooms, via the admin API."""
    ws = "bench"
    with httpx.Client(base_url=url, timeout=30) as c:
        admin = {"Authorization": f"Bearer {admin_token}"}
        r = c.post("/v1/admin/workspaces", json={"name": ws}, headers=admin)
        r.raise_for_status()
        r = c.post(
            f"/v1/admin/workspaces/{ws}/members",
            json={"name": "poster", "kind": "human"},
            headers=admin,
        )
        r.raise_for_status()
        token = r.json()["token"]
        me = {"Authorization": f"Bearer {token}"}
        rooms = {}
        for name in room_names:
            r = c.post(
                f"/v1/workspaces/{ws}/rooms", json={"name": name, "participants": []}, headers=me
            )
            r.raise_for_status()
            rooms[name] = r.json()["room"]["id"]
    return Setup(ws, token, rooms)


def sent_keys(prefix: str, sent_per_thread: list[int], rooms: list[str]) -> dict[str, str]:
    """key -> room of every request a `unique` wrk run made (as bench/wrk/post.lua does)."""
    return {
        f"{prefix}-{tid}-{i}": rooms[(i * 7919 + tid * 104729) % len(rooms)]
        for tid, sent in enumerate(sent_per_thread)
        for i in range(sent)
    }


def sent_keys_of(res: dict[str, Any], rooms: list[str]) -> dict[str, str]:
    """key -> room of every request of a `run_parallel` result (all its instances)."""
    out: dict[str, str] = {}
    for inst in res["instances"]:
        out |= sent_keys(inst["prefix"], inst["sent_per_thread"], rooms)
    return out


def seeded_keys(prefix: str, nkeys: int, rooms: list[str]) -> dict[str, str]:
    """key -> room of every key a `seed` wrk run posts."""
    return {f"{prefix}-{i}": rooms[i % len(rooms)] for i in range(nkeys)}


def body_of(key: str) -> dict[str, str]:
    return {"text": f"bench {key}"}


def room_texts(c: httpx.Client, room_ids: list[str]) -> tuple[Counter[str], bool]:
    """Every event text of the rooms, paged through the API, and whether seqs are gap-free."""
    texts: Counter[str] = Counter()
    gap_free = True
    for room in room_ids:
        after = 0
        while True:
            r = c.get(f"/v1/rooms/{room}/events", params={"after": after, "limit": 1000})
            r.raise_for_status()
            page = r.json()["events"]
            if not page:
                break
            for ev in page:
                gap_free = gap_free and ev["seq"] == after + 1
                after = ev["seq"]
                texts[ev["text"]] += 1
    return texts, gap_free


def verify_exactly_once(
    url: str, token: str, room_ids: list[str], sent: dict[str, str], created: int
) -> dict[str, Any]:
    """Every key sent is stored exactly once, as a client that retries would see it.

    Events must be at least the 201-created answers and at most the keys sent (requests
    still in flight when wrk stopped may or may not have landed). Keys that did not land
    are then retried once through the API, as a client would after a lost response; after
    that the rooms must hold exactly one event per key sent, and nothing else.
    """
    with httpx.Client(base_url=url, timeout=60, headers={"Authorization": f"Bearer {token}"}) as c:
        texts, gap_free = room_texts(c, room_ids)
        wanted = {body_of(k)["text"]: k for k in sent}
        before = sum(texts.values())
        duplicates = sum(n - 1 for n in texts.values() if n > 1)
        strangers = sum(1 for t in texts if t not in wanted)
        missing = [k for t, k in wanted.items() if t not in texts]
        retry_status: Counter[str] = Counter()
        for key in missing:
            r = c.post(
                f"/v1/rooms/{sent[key]}/messages",
                json=body_of(key),
                headers={"Idempotency-Key": key},
            )
            retry_status[f"{r.status_code} {r.headers.get('idempotency-status', '')}"] += 1
        after_texts, gap_free_after = room_texts(c, room_ids) if missing else (texts, gap_free)
    after = sum(after_texts.values())
    ok = (
        created <= before <= len(sent)
        and duplicates == 0
        and strangers == 0
        and gap_free
        and gap_free_after
        and after == len(sent)
        and all(n == 1 for n in after_texts.values())
    )
    return {
        "keys_sent": len(sent),
        "created_201": created,
        "events": before,
        "unanswered_that_landed": before - created,
        "retried_missing": len(missing),
        "retry_answers": dict(retry_status),
        "events_after_retry": after,
        "duplicates": duplicates,
        "strangers": strangers,
        "gap_free": gap_free and gap_free_after,
        "ok": ok,
    }


# -- the machine --------------------------------------------------------------------------


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _mem_total_mb() -> int:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) // 1024
    except OSError:
        pass
    return 0


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def machine_info() -> dict[str, Any]:
    wrk = shutil.which("wrk")
    wrk_version = None
    if wrk:
        out = subprocess.run([wrk, "-v"], capture_output=True, text=True)
        wrk_version = (out.stdout + out.stderr).split("Copyright")[0].strip()
    return {
        "nproc": os.cpu_count(),
        "cpu_model": _cpu_model(),
        "mem_total_mb": _mem_total_mb(),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "wrk": wrk_version,
        "packages": {
            d: _version(d) for d in ("agentpost", "starlette", "uvicorn", "uvloop", "httptools")
        },
    }


def new_secret() -> str:
    return "bench_" + secrets.token_urlsafe(24)
