"""A stop of the Worker always ends (docs/connect.md "Stopping"): SIGTERM is a graceful stop
bounded by `AGENTPOST_CONNECT_STOP_DEADLINE`, and a second SIGTERM ends it at once; either
way the agent's whole group ends with it and the log says what was still running. The hub is
frozen with SIGSTOP, so the lease's release at the end of the stop gets no answer."""

from __future__ import annotations

import signal
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from conftest import Connected, wait_for
from hubproc import HubProcess

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only")


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in (b"Z", b"X")


def _keeper_of(worker_pid: int) -> int:
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_bytes().rsplit(b")", 1)[1].split()
                cmd = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if int(fields[1]) == worker_pid and b"keeper.py" in cmd:
                return int(entry.name)
    raise AssertionError(f"no keeper under the Worker {worker_pid}")


@contextmanager
def _frozen(hub: HubProcess) -> Iterator[None]:
    assert hub.proc is not None
    hub.proc.send_signal(signal.SIGSTOP)
    try:
        yield
    finally:
        hub.proc.send_signal(signal.SIGCONT)


@pytest.mark.parametrize("engine", ["sqlite"], indirect=True)
def test_a_stop_that_waits_on_a_frozen_hub_ends_at_its_deadline_with_the_agent(
    connected: Connected,
) -> None:
    w = connected.worker(env={"AGENTPOST_CONNECT_STOP_DEADLINE": "3"})
    assert w.proc is not None
    keeper = _keeper_of(w.proc.pid)
    with _frozen(connected.hub):
        started = time.monotonic()
        w.proc.terminate()
        code = w.proc.wait(30)
        took = time.monotonic() - started
    assert code == 1, w.log()
    assert 3 <= took < 20, took
    assert "the stop took more than 3s: ending now" in w.log()
    assert "Thread" in w.log()  # the stacks of what still ran
    wait_for(lambda: not _alive(keeper), timeout=20)


@pytest.mark.parametrize("engine", ["sqlite"], indirect=True)
def test_a_second_sigterm_ends_the_worker_and_its_agent_at_once(connected: Connected) -> None:
    w = connected.worker()  # the default deadline: 45 s
    assert w.proc is not None
    keeper = _keeper_of(w.proc.pid)
    with _frozen(connected.hub):
        w.proc.terminate()
        wait_for(lambda: "agent" in w.log() and not _alive(keeper), timeout=20)  # first stop
        assert w.proc.poll() is None  # still waiting on the hub for the lease's release
        started = time.monotonic()
        w.proc.terminate()
        code = w.proc.wait(30)
        took = time.monotonic() - started
    assert code == 1, w.log()
    assert took < 10, took
    assert "a second stop signal: ending now" in w.log()
