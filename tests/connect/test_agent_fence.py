"""The keeper fences the agent by time (docs/architecture.md#fenced-by-time):
a Worker frozen with SIGSTOP stops renewing its lease; before the lease can lapse and a
standby take over, its keeper stops the agent's processes (SIGSTOP), so the tool the agent
was running does no more work; once the Worker is resumed and learns the lease moved, the
whole group is ended. Resumed still holding the lease, the agent works on. Real hub and
Worker processes on both engines, a real tool process, real SIGSTOP and SIGCONT."""

from __future__ import annotations

import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from conftest import AGENTS, Connected, agent_cmd, quiet_for, wait_for
from hubproc import HubProcess

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only")

TOOL = AGENTS / "tool_agent.py"
LEASE = 6.0  # seconds: the hub's lease lapses this long after the last renewal
MARGIN = 2.0  # seconds: the keeper stops the agent this long before that


@pytest.fixture
def hub(make_hub: Callable[..., HubProcess]) -> HubProcess:
    return make_hub(env={"AGENTPOST_WORKER_LEASE_SECONDS": str(LEASE)})


def _state(pid: int) -> str | None:
    """The state letter in /proc/<pid>/stat; None when gone or a zombie."""
    try:
        data = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    state = data[data.rindex(b")") + 2 :].split()[0].decode()
    return None if state in ("Z", "X") else state


def _ticks(folder: Path) -> list[tuple[int, int]]:
    """(tool pid, wall-clock ns) of every tick the tools wrote."""
    path = folder / "ticks"
    text = path.read_text() if path.exists() else ""
    return [(int(a), int(b)) for a, b in (line.split() for line in text.splitlines()
                                          if len(line.split()) == 2)]


def _tools(folder: Path) -> list[int]:
    """Tool pids, in the order they first ticked."""
    seen: list[int] = []
    for pid, _ in _ticks(folder):
        if pid not in seen:
            seen.append(pid)
    return seen


def test_a_frozen_holders_tool_stops_before_the_standby_runs_it_and_ends_once_the_lease_moved(
    connected: Connected, tmp_path: Path
) -> None:
    c = connected
    folder = tmp_path / "tools"
    folder.mkdir()
    first = c.worker(
        agent_cmd(TOOL),
        env={"TOOL_DIR": str(folder), "AGENTPOST_CONNECT_FENCE_MARGIN": str(MARGIN)},
    )
    second = c.worker(
        agent_cmd(TOOL),
        env={"TOOL_DIR": str(folder), "AGENTPOST_CONNECT_FENCE_MARGIN": str(MARGIN)},
        workspace=tmp_path / "ws-bot-2",
        log_name="bot-2",
        wait_agent=False,
    )
    wait_for(lambda: "standby: another Worker serves this agent" in second.log())
    first_agent = int((folder / "agent-1").read_text())
    e1 = c.say("alice", "@bot tool 9")
    tool = wait_for(lambda: _tools(folder) and _tools(folder)[0])
    assert first.proc is not None
    first.proc.send_signal(signal.SIGSTOP)  # the Worker alone, as Ctrl-Z would
    frozen = time.monotonic()
    try:
        # The keeper stops the tool (and the agent) before the lease can lapse.
        wait_for(lambda: _state(tool) == "T", timeout=LEASE + 10)
        assert _state(first_agent) == "T"
        stopped_after = time.monotonic() - frozen
        assert "lease held" not in second.log()  # the standby has not taken it yet
        assert stopped_after < LEASE, stopped_after
        done = len([t for t in _ticks(folder) if t[0] == tool])
        wait_for(lambda: "lease held: fence 2" in second.log(), timeout=30)
        reply = c.wait_reply(e1["id"], timeout=60)
        assert reply["text"] == "tool done 9"  # run to the end by the standby's agent
        tools = _tools(folder)
        assert len(tools) == 2 and tools[0] == tool
        ticks = _ticks(folder)
        first_ran_to = max(t for p, t in ticks if p == tool)
        second_ran_from = min(t for p, t in ticks if p == tools[1])
        assert first_ran_to < second_ran_from  # no overlap: never two at once
        assert len([t for t in ticks if t[0] == tool]) == done  # nothing while frozen
        assert _state(tool) == "T"
    finally:
        first.proc.send_signal(signal.SIGCONT)
    # Resumed, the Worker learns the lease moved: the stopped group is ended, not resumed.
    wait_for(lambda: "lease lost: " in first.log(), timeout=30)
    wait_for(lambda: _state(tool) is None and _state(first_agent) is None, timeout=20)
    wait_for(lambda: "standby: another Worker serves this agent" in first.log(), timeout=30)
    assert "the keeper stopped the agent's processes (SIGSTOP)" in first.log()
    assert "the keeper resumed" not in first.log()
    ends = sorted(p.name for p in folder.glob("end-*"))
    assert ends == [f"end-{tools[1]}"]  # the tool ran to its end once
    assert len([t for t in _ticks(folder) if t[0] == tool]) == done
    quiet_for(1.0)
    assert len(c.replies_to(e1["id"])) == 1


def test_a_holder_resumed_while_it_still_holds_the_lease_resumes_its_agent(
    connected: Connected, tmp_path: Path
) -> None:
    """No standby: the lease lapses but nobody takes it, so the resumed Worker renews it
    under the same fence, and the keeper resumes the tool, which runs to its end once."""
    c = connected
    folder = tmp_path / "tools"
    folder.mkdir()
    w = c.worker(
        agent_cmd(TOOL),
        env={"TOOL_DIR": str(folder), "AGENTPOST_CONNECT_FENCE_MARGIN": str(MARGIN)},
    )
    e1 = c.say("alice", "@bot tool 9")
    tool = wait_for(lambda: _tools(folder) and _tools(folder)[0])
    assert w.proc is not None
    w.proc.send_signal(signal.SIGSTOP)
    try:
        wait_for(lambda: _state(tool) == "T", timeout=LEASE + 10)
    finally:
        w.proc.send_signal(signal.SIGCONT)
    wait_for(lambda: "the keeper resumed the agent's processes" in w.log(), timeout=30)
    reply = c.wait_reply(e1["id"], timeout=60)
    assert reply["text"] == "tool done 9"
    assert "lease lost" not in w.log()
    assert [p.name for p in folder.glob("end-*")] == [f"end-{tool}"]
    assert _tools(folder) == [tool]
