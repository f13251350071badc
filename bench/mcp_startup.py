"""How fast `agentpost mcp` answers a client's opening (docs/mcp.md "Startup").

Spawns `python -m agentpost mcp` N times and times, over raw JSON-RPC on its stdio pipes:
spawn → `initialize` answered → `tools/list` answered, and (with --call) → the first
`tools/call` answered (that one waits for the SDK to load). Prints one JSON report with
the median and p90 of each, in milliseconds. No hub is needed: the call is one that fails
on its arguments.

    PYTHONPATH=src python bench/mcp_startup.py --runs 20 --call
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from typing import Any

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "bench", "version": "1"},
    },
}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
LIST = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
CALL = {
    "jsonrpc": "2.0",
    "id": 3,
    "method": "tools/call",
    "params": {"name": "read_room", "arguments": {"room": "general", "limit": 0}},
}


def _send(p: subprocess.Popen[bytes], msg: dict[str, Any]) -> None:
    assert p.stdin is not None
    p.stdin.write(json.dumps(msg).encode() + b"\n")
    p.stdin.flush()


def _answer(p: subprocess.Popen[bytes], rid: int) -> dict[str, Any]:
    assert p.stdout is not None
    while True:
        line = p.stdout.readline()
        if not line:
            raise RuntimeError(f"the server closed stdout before answering id {rid}")
        msg: dict[str, Any] = json.loads(line)
        if msg.get("id") == rid:
            return msg


def one_run(env: dict[str, str], call: bool) -> dict[str, float]:
    t0 = time.perf_counter()
    p = subprocess.Popen(
        [sys.executable, "-m", "agentpost", "mcp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    try:
        _send(p, INIT)
        assert "result" in _answer(p, 1)
        t_init = time.perf_counter()
        _send(p, INITIALIZED)
        _send(p, LIST)
        assert len(_answer(p, 2)["result"]["tools"]) > 0
        t_list = time.perf_counter()
        out = {"initialize_ms": (t_init - t0) * 1e3, "tools_list_ms": (t_list - t0) * 1e3}
        if call:
            _send(p, CALL)
            _answer(p, 3)
            out["first_call_ms"] = (time.perf_counter() - t0) * 1e3
        return out
    finally:
        assert p.stdin is not None
        p.stdin.close()
        p.wait(timeout=30)


def _summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    p90 = ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]
    return {"median": round(statistics.median(ordered), 1), "p90": round(p90, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--call", action="store_true", help="also time the first tools/call")
    args = ap.parse_args()
    env = {**os.environ, "AGENTPOST_HUB": "http://127.0.0.1:9", "AGENTPOST_TOKEN": "ap_bench"}
    one_run(env, False)  # warm the page cache and the .pyc files; not counted
    runs = [one_run(env, args.call) for _ in range(args.runs)]
    report = {
        "bench": "mcp_startup",
        "runs": args.runs,
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        **{k: _summary([r[k] for r in runs]) for k in runs[0]},
    }
    print(json.dumps(report))


if __name__ == "__main__":
    main()
