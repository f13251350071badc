"""The Worker owns its agent's processes (issue 23, docs/architecture.md#agent-processes): a real
Worker process, a real agent (agents/stubborn_agent.py) whose children ignore SIGTERM and SIGHUP
and keep writing, and a stdin close that does not end the agent; real SIGKILL and SIGTERM from
outside. Processes are looked up in /proc (Linux)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import agentpost
import hubproc
from conftest import AGENTS, Connected, WorkerProcess, agent_cmd, quiet_for, wait_for
from hubproc import HubProcess

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only")

STUBBORN = AGENTS / "stubborn_agent.py"
MARK_ENV = "AGENTPOST_AGENT_GROUP"


@pytest.fixture
def hub(shared_hub: HubProcess) -> HubProcess:
    return shared_hub


def _stat(pid: int) -> list[str] | None:
    """/proc/<pid>/stat from field 3 (state) on; None when gone or a zombie."""
    try:
        data = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    fields = data[data.rindex(b")") + 2 :].decode().split()
    return None if fields[0] in ("Z", "X") else fields


def _alive(pid: int) -> bool:
    return _stat(pid) is not None


def _start_time(pid: int) -> int:
    fields = _stat(pid)
    assert fields is not None
    return int(fields[19])


def _environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    return dict(e.split("=", 1) for e in raw.decode(errors="replace").split("\0") if "=" in e)


class Agent:
    """One generation of the stubborn agent, as it recorded itself."""

    def __init__(self, folder: Path, generation: int) -> None:
        record: dict[str, Any] = json.loads((folder / f"agent-{generation}.json").read_text())
        self.pid = int(record["pid"])
        self.keeper = int(record["ppid"])
        self.earlier_alive: list[int] = record["earlier_alive"]
        text = (folder / f"children-{generation}.txt").read_text()
        self.children = [int(p) for p in text.split()]

    def pids(self) -> list[int]:
        return [self.keeper, self.pid, *self.children]


def _agent(folder: Path, generation: int) -> Agent:
    wait_for(lambda: (folder / f"agent-{generation}.json").exists())
    return Agent(folder, generation)


def _ticks(folder: Path) -> int:
    path = folder / "ticks"
    return path.stat().st_size if path.exists() else 0


def _stubborn(connected: Connected, folder: Path, **kw: Any) -> WorkerProcess:
    folder.mkdir(exist_ok=True)
    return connected.worker(agent_cmd(STUBBORN), env={"STUBBORN_DIR": str(folder)}, **kw)


def _all_running(agent: Agent, folder: Path) -> None:
    assert all(_alive(p) for p in agent.pids())
    size = _ticks(folder)
    wait_for(lambda: _ticks(folder) > size)  # the children write


def test_kill_9_of_the_worker_alone_ends_its_agent_and_the_agents_children(
    connected: Connected, tmp_path: Path
) -> None:
    folder = tmp_path / "stubborn"
    w = _stubborn(connected, folder)
    agent = _agent(folder, 1)
    assert w.proc is not None and agent.keeper != w.proc.pid  # the agent runs under a keeper
    assert "keeper.py" in Path(f"/proc/{agent.keeper}/cmdline").read_text()
    assert (_stat(agent.keeper) or [])[1:2] == [str(w.proc.pid)]  # its parent: the Worker
    _all_running(agent, folder)
    w.kill()  # SIGKILL to the Worker's pid only, not to its group
    wait_for(lambda: not any(_alive(p) for p in agent.pids()), timeout=20)
    size = _ticks(folder)
    quiet_for(0.5)
    assert _ticks(folder) == size  # no more work


@pytest.mark.parametrize(
    ("prompt", "said", "logged"),
    [
        ("crash", "stopped mid-Turn", "agent stopped (exit code 3;"),  # the agent's own code
        ("bigframe", "frame over", "agent stopped (the agent sent a frame over"),
    ],
)
def test_an_agent_that_crashes_or_is_cut_off_leaves_no_child_for_the_next_one(
    connected: Connected, tmp_path: Path, prompt: str, said: str, logged: str
) -> None:
    folder = tmp_path / "stubborn"
    w = _stubborn(connected, folder)
    first = _agent(folder, 1)
    _all_running(first, folder)
    e1 = connected.say("helper", f"@bot {prompt}")
    reply = connected.wait_reply(e1["id"], timeout=90)
    assert reply["reply_kind"] == "error" and said in reply["text"]
    second = _agent(folder, 2)
    assert second.earlier_alive == []  # gone before the restarted agent ran
    assert not any(_alive(p) for p in first.pids())
    assert all(_alive(p) for p in second.pids())
    assert logged in w.log()
    wait_for(lambda: w.log().count("agent started") == 2)  # logged once it is initialized


def test_sigterm_stop_of_the_worker_ends_the_whole_group(
    connected: Connected, tmp_path: Path
) -> None:
    folder = tmp_path / "stubborn"
    w = _stubborn(connected, folder)
    agent = _agent(folder, 1)
    _all_running(agent, folder)
    assert w.stop() == 0
    # The Worker waited for the keeper, and the keeper for every descendant: gone already.
    assert [p for p in agent.pids() if _alive(p)] == []
    size = _ticks(folder)
    quiet_for(0.5)
    assert _ticks(folder) == size


def _marked(marker: str) -> list[int]:
    """Every live process whose environment carries this Worker run's marker."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and _alive(int(entry.name)):
            try:
                if _environ(int(entry.name)).get(MARK_ENV) == marker:
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def test_kill_9_of_the_keeper_ends_the_agent_and_its_children_before_the_next_starts(
    connected: Connected, tmp_path: Path
) -> None:
    """The log names the agent's own pid beside its keeper's; kill -9 of the keeper alone
    leaves no process of that agent running (the one that left the group included), and
    none is left when the restarted agent starts."""
    folder = tmp_path / "stubborn"
    w = _stubborn(connected, folder)
    agent = _agent(folder, 1)
    _all_running(agent, folder)
    wait_for(lambda: f"agent started: pid {agent.pid}, keeper pid {agent.keeper}," in w.log())
    os.kill(agent.keeper, signal.SIGKILL)
    wait_for(lambda: not any(_alive(p) for p in agent.pids()), timeout=20)
    second = _agent(folder, 2)
    assert second.earlier_alive == []  # gone before the restarted agent ran
    assert all(_alive(p) for p in second.pids())
    assert f"the agent's keeper (pid {agent.keeper}) is gone and left" in w.log()
    wait_for(lambda: f"agent started: pid {second.pid}, keeper pid {second.keeper}," in w.log())


def test_a_stop_just_after_the_keeper_was_killed_leaves_no_process_of_the_agent(
    connected: Connected, tmp_path: Path
) -> None:
    folder = tmp_path / "stubborn"
    w = _stubborn(connected, folder)
    agent = _agent(folder, 1)
    _all_running(agent, folder)
    marker = _environ(agent.pid)[MARK_ENV]
    os.kill(agent.keeper, signal.SIGKILL)
    assert w.stop() == 0
    assert _marked(marker) == []  # no agent, child or keeper of this Worker run is left
    size = _ticks(folder)
    quiet_for(0.5)
    assert _ticks(folder) == size


def test_survivors_of_an_earlier_worker_are_ended_at_the_next_start(
    connected: Connected, tmp_path: Path
) -> None:
    folder = tmp_path / "stubborn"
    w = _stubborn(connected, folder)
    agent = _agent(folder, 1)
    _all_running(agent, folder)
    assert w.proc is not None
    # The keeper cannot clean up: the Worker is stopped (it cannot restart the agent), the
    # keeper gets SIGKILL, then the Worker does.
    os.kill(w.proc.pid, signal.SIGSTOP)
    os.kill(agent.keeper, signal.SIGKILL)
    wait_for(lambda: not _alive(agent.keeper))
    w.kill()
    survivors = [agent.pid, *agent.children]
    assert all(_alive(p) for p in survivors)  # the agent ignores its stdin closing
    size = _ticks(folder)
    wait_for(lambda: _ticks(folder) > size)  # and its children keep working
    w.start()  # returns once the new agent started; the sweep ran before it
    assert [p for p in survivors if _alive(p)] == []
    assert w.log().count("left by an earlier Worker's agent") == 1
    second = _agent(folder, 2)
    assert second.earlier_alive == []
    size = _ticks(folder)
    wait_for(lambda: _ticks(folder) > size)  # only the new agent's children write now
    assert all(_alive(p) for p in second.pids())


def test_a_recorded_process_that_is_not_ours_is_left_alone(
    connected: Connected, tmp_path: Path
) -> None:
    marker = "ab" * 16
    sleep = ["sleep", "600"]
    # The recorded keeper's pid is live with the recorded start time, but has no marker.
    foreign = subprocess.Popen(sleep, start_new_session=True)
    # This one carries the marker but started before the recorded Worker did: a recycled pid.
    early = subprocess.Popen(sleep, start_new_session=True, env={**os.environ, MARK_ENV: marker})
    since = _start_time(early.pid) + 1

    def later() -> subprocess.Popen[bytes] | None:
        p = subprocess.Popen(sleep, start_new_session=True, env={**os.environ, MARK_ENV: marker})
        if _start_time(p.pid) >= since:
            return p
        p.kill()
        p.wait()
        return None

    ours = wait_for(later)  # carries the marker and started after: a survivor, ours
    try:
        ws = tmp_path / "ws-bot"
        ws.mkdir(mode=0o700)
        record = {
            "marker": marker,
            "worker_pid": 1,
            "since": since,
            "pgid": foreign.pid,
            "keeper_pid": foreign.pid,
            "keeper_start": _start_time(foreign.pid),
        }
        (ws / "agent-group.json").write_text(json.dumps(record))
        w = connected.worker(agent_cmd(STUBBORN), workspace=ws)
        assert ours.wait(10) == -signal.SIGKILL
        assert foreign.poll() is None and early.poll() is None
        assert f"pids {ours.pid}" in w.log()
    finally:
        for p in (foreign, early, ours):
            p.kill()
            p.wait()


def test_the_agent_and_its_keeper_get_no_hub_token(
    connected: Connected, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A Worker started fresh: a fork's /proc/<pid>/environ is its fork server's.
    monkeypatch.setattr(hubproc, "FORK_SERVER", False)
    folder = tmp_path / "stubborn"
    w = _stubborn(connected, folder)
    agent = _agent(folder, 1)
    assert w.proc is not None and "AGENTPOST_TOKEN" in _environ(w.proc.pid)
    record = json.loads((tmp_path / "ws-bot" / "agent-group.json").read_text())
    assert record["keeper_pid"] == agent.keeper
    for pid in agent.pids():
        env = _environ(pid)
        assert "AGENTPOST_TOKEN" not in env and "AGENTPOST_ADMIN_TOKEN" not in env
        assert env[MARK_ENV] == record["marker"]  # how a survivor is known to be ours


def _keeper(*agent: str) -> subprocess.CompletedProcess[str]:
    keeper = Path(agentpost.__file__).parent / "connect" / "keeper.py"
    argv = [sys.executable, "-S", str(keeper), "--worker", str(os.getpid()), "--", *agent]
    return subprocess.run(argv, capture_output=True, text=True, timeout=30)


def _lines(sock: socket.socket, want: int) -> list[str]:
    """The next `want` lines the keeper wrote on the fence (its end is blocking)."""
    sock.settimeout(20)
    data = b""
    while data.count(b"\n") < want:
        got = sock.recv(4096)
        assert got, "the keeper closed the fence"
        data += got
    return data.decode().splitlines()


def test_the_keeper_stops_everything_when_its_deadline_passes_and_resumes_on_a_later_one(
) -> None:
    """The fence alone, without a Worker: `until T` in the past stops the agent and a tool
    that left the group with setsid (SIGSTOP); a later T resumes them; a stop of a stopped
    group ends it at once (no grace in which it would work on)."""
    keeper = Path(agentpost.__file__).parent / "connect" / "keeper.py"
    ours, theirs = socket.socketpair()
    agent = [
        sys.executable, "-c",
        "import subprocess, time; c = subprocess.Popen(['setsid', 'sleep', '600']); "
        "print(c.pid, flush=True); time.sleep(600)",
    ]
    argv = [sys.executable, "-S", str(keeper), "--worker", str(os.getpid()),
            "--fence", str(theirs.fileno()), "--", *agent]
    proc = subprocess.Popen(argv, pass_fds=[theirs.fileno()], stdout=subprocess.PIPE,
                            start_new_session=True)
    theirs.close()
    try:
        said = _lines(ours, 1)[0].split()
        assert said[0] == "agent"
        pid = int(said[1])
        assert proc.stdout is not None
        tool = int(proc.stdout.readline())
        assert (_stat(tool) or [""])[0] in ("S", "R")
        assert "--fence" not in Path(f"/proc/{pid}/cmdline").read_text()
        assert not [f for f in Path(f"/proc/{pid}/fd").iterdir()
                    if "socket" in os.readlink(f)]  # the agent never holds the fence
        ours.send(f"until {time.monotonic() + 0.3!r}\n".encode())
        assert _lines(ours, 1)[0].startswith("stopped ")
        wait_for(lambda: all((_stat(p) or [""])[0] == "T" for p in (pid, tool)), timeout=10)
        ours.send(f"until {time.monotonic() + 600!r}\n".encode())
        assert _lines(ours, 1) == ["resumed"]
        wait_for(lambda: all((_stat(p) or ["T"])[0] != "T" for p in (pid, tool)), timeout=10)
        ours.send(f"until {time.monotonic()!r}\n".encode())
        assert _lines(ours, 1)[0].startswith("stopped ")
        started = time.monotonic()
        proc.terminate()
        assert proc.wait(20) == -signal.SIGKILL  # the agent's status: SIGKILLed, no SIGTERM
        assert time.monotonic() - started < 1.5  # and no 2 s grace for a stopped group
        assert not _alive(pid) and not _alive(tool)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
        ours.close()


def test_the_keeper_passes_on_the_agents_status_and_signals_as_a_direct_spawn() -> None:
    """What the Worker saw before the keeper: the agent's exit code or signal, and signals
    neither blocked nor ignored (Python's SIGPIPE/SIGXFSZ and glibc's own back to default)."""
    assert _keeper("sh", "-c", "exit 5").returncode == 5
    assert _keeper("sh", "-c", "kill -9 $$").returncode == -signal.SIGKILL
    assert _keeper("sh", "-c", "kill -TERM $$").returncode == -signal.SIGTERM
    failed = _keeper("/no/such/agent")
    assert failed.returncode == 127 and "cannot start '/no/such/agent'" in failed.stderr
    masks = ["grep", "-E", "^Sig(Blk|Ign):", "/proc/self/status"]
    direct = subprocess.run(masks, capture_output=True, text=True, timeout=30).stdout
    assert _keeper(*masks).stdout == direct
