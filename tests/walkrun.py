"""Run a docs walk-through script for a test, and when it does not end in time, say why:
the process tree it left (with each one's state and age), the stacks of the Python processes
in it (py-spy, when installed) and the tail of what it printed; then end the whole session."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

TAIL = 6000


def run_script(
    script: str, cwd: Path, env: dict[str, str], timeout: float, name: str
) -> subprocess.CompletedProcess[str]:
    proc = subprocess.Popen(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own session: everything it started is found and ended
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        why = _diagnose(proc.pid)
        _end_session(proc.pid)
        out, err = proc.communicate(timeout=30)
        raise AssertionError(
            f"{name} did not end in {timeout:.0f}s\n--- left running:\n{why}\n"
            f"--- stdout (tail):\n{out[-TAIL:]}\n--- stderr (tail):\n{err[-TAIL:]}"
        ) from None
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _session(sid: int) -> list[int]:
    """The processes of the session `sid` and every descendant of its leader (an agent's
    keeper leads a session of its own)."""
    parent: dict[int, int] = {}
    session: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_bytes()
        except OSError:
            continue
        fields = stat[stat.rindex(b")") + 2 :].split()
        parent[int(entry)], session[int(entry)] = int(fields[1]), int(fields[3])
    found = {pid for pid, s in session.items() if s == sid}
    grew = True
    while grew:
        more = {pid for pid, pp in parent.items() if pp in found} - found
        found |= more
        grew = bool(more)
    return sorted(found)


def _diagnose(sid: int) -> str:
    pids = _session(sid)
    if not pids:
        return "(nothing)"
    ps = subprocess.run(
        ["ps", "-o", "pid,ppid,pgid,stat,etime,args", "-p", ",".join(map(str, pids))],
        capture_output=True,
        text=True,
        timeout=30,
    ).stdout
    spy = shutil.which("py-spy", path=f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}")
    stacks = []
    if spy is not None:
        for pid in pids:
            dump = subprocess.run(
                [spy, "dump", "--pid", str(pid)], capture_output=True, text=True, timeout=60
            )
            if dump.returncode == 0:
                stacks.append(dump.stdout)
    return ps + "\n".join(stacks)


def _end_session(sid: int) -> None:
    for pid in _session(sid):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
