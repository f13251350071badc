"""The Worker's hub token stays with the Worker (issue 24; docs/connect.md "What the agent
can reach"): real Workers, a real agent (agents/snoop_agent.py) that tries every way an agent
with a shell has to read its Worker's token, and real processes of another uid.

The threat is an agent running as the Worker's own user; root passes every check the
kernel makes, so these Workers run as `nobody` (setpriv), with an interpreter that user can
run. Without root or setpriv there is no other uid to run as, and the tests say so.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import agentpost
import hubproc
from conftest import AGENTS, ECHO_AGENT, Connected, WorkerProcess, agent_cmd
from hubproc import HubProcess

pytestmark = [
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl and /proc: Linux"),
    pytest.mark.parametrize("engine", ["sqlite"], indirect=True),  # no store is involved
]

SNOOP = AGENTS / "snoop_agent.py"
REFUSED_MODE = "is open to other users"


@pytest.fixture(autouse=True)
def fresh_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    """Workers started fresh, not forked (tests/forkserver.py): a fork's /proc/<pid>/environ
    is its server's, so these tests would not meet the token there for the flag to guard."""
    monkeypatch.setattr(hubproc, "FORK_SERVER", False)


@pytest.fixture
def hub(shared_hub: HubProcess) -> HubProcess:
    return shared_hub


@dataclass
class OtherUser:
    """`nobody`, and a Python it can run with this checkout's packages."""

    uid: int
    gid: int
    python: str
    base: Path

    @property
    def become(self) -> list[str]:
        return ["setpriv", f"--reuid={self.uid}", f"--regid={self.gid}", "--clear-groups"]

    def folder(self, name: str) -> Path:
        path = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=self.base))
        os.chown(path, self.uid, self.gid)
        return path

    def secret_file(self, folder: Path, text: str) -> Path:
        path = folder / "bot.token"
        path.write_text(text + "\n")
        path.chmod(0o600)
        os.chown(path, self.uid, self.gid)
        return path

    def probe(self, pid: int, ptrace: bool = True) -> dict[str, Any]:
        """Another process of this user tries to read `pid`'s token (agents/snoop_agent.py)."""
        p = subprocess.run(
            [*self.become, self.python, str(SNOOP), "--probe", str(pid)]
            + ([] if ptrace else ["--no-ptrace"]),
            capture_output=True, text=True, timeout=120,
        )
        assert p.returncode == 0, p.stderr
        report: dict[str, Any] = json.loads(p.stdout)
        return report


def _runs_as(user: pwd.struct_passwd, python: str) -> subprocess.CompletedProcess[str]:
    # Through a shell of that user: setpriv's own exec still has root's reach.
    script = 'exec "$0" -c "import acp, agentpost.connect.worker"'
    become = ["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--clear-groups"]
    return subprocess.run(
        [*become, "sh", "-c", script, python], capture_output=True, text=True, timeout=60
    )


def _python_for(user: pwd.struct_passwd, base: Path) -> str:
    """sys.executable when `user` can run it; else a venv of copies in `base` that reaches
    this interpreter's packages and this checkout (a venv under /root is out of its reach)."""
    if _runs_as(user, sys.executable).returncode == 0:
        return sys.executable
    venv = base / "venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", "--copies", str(venv)],
        check=True, timeout=120,
    )
    ours = [str(Path(agentpost.__file__).parents[1])]
    ours += [p for p in sys.path if p.endswith("site-packages")]
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    (venv / "lib" / version / "site-packages" / "this-checkout.pth").write_text(
        "\n".join(ours) + "\n"
    )
    for root, _, files in os.walk(venv):
        os.chmod(root, 0o755)
        for name in files:
            if not (path := Path(root, name)).is_symlink():
                path.chmod(path.stat().st_mode | 0o444)
    python = str(venv / "bin" / "python")
    tried = _runs_as(user, python)
    if tried.returncode != 0:
        pytest.skip(f"user {user.pw_name} cannot run this checkout's Python: {tried.stderr}")
    return python


@pytest.fixture(scope="module")
def nobody() -> Iterator[OtherUser]:
    if os.geteuid() != 0:
        pytest.skip("running the Worker as another user (to be attacked by its agent as "
                    "the same, unprivileged user) needs root")
    if shutil.which("setpriv") is None:
        pytest.skip("no setpriv (util-linux): no way to run the Worker as another user")
    try:
        user = pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("no user `nobody` to run the Worker as")
    base = Path(tempfile.mkdtemp(prefix="agentpost-token-"))
    base.chmod(0o755)
    try:
        yield OtherUser(user.pw_uid, user.pw_gid, _python_for(user, base), base)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _worker(
    c: Connected, agent: str, *args: str, python: list[str], env: dict[str, str], log: str
) -> WorkerProcess:
    w = WorkerProcess(
        args=["--agent", agent, *args],
        env={k: v for k, v in os.environ.items() if not k.startswith("AGENTPOST_")}
        | {"AGENTPOST_HUB": c.hub.url, **env},
        log_path=c.tmp / f"worker-{log}.log",
        python=python,
    )
    c.workers.append(w)
    return w.start()


def _nobody_worker(
    c: Connected, nobody: OtherUser, agent: Path, token_by: str
) -> tuple[WorkerProcess, Path]:
    home = nobody.folder("home")
    (repo := home / "repo").mkdir()
    os.chown(repo, nobody.uid, nobody.gid)
    token = c.setup.tokens["bot"]
    args = ["--workspace-dir", str(home / "ws"), "--repo", str(repo)]
    env = {"HOME": str(home)}
    if token_by == "file":
        keys = nobody.folder("keys")
        args += ["--token-file", str(nobody.secret_file(keys, token))]
    else:
        env["AGENTPOST_TOKEN"] = token
    w = _worker(
        c, f"{nobody.python} {agent}", *args,
        python=[*nobody.become, nobody.python], env=env, log=f"nobody-{token_by}",
    )
    assert w.proc is not None
    assert f"Uid:\t{nobody.uid}\t" in Path(f"/proc/{w.proc.pid}/status").read_text()
    return w, home


@pytest.mark.parametrize("token_by", ["env", "file"])
def test_the_agent_cannot_read_its_workers_token_as_the_same_user(
    connected: Connected, nobody: OtherUser, token_by: str
) -> None:
    """The agent (same uid as its Worker) reads the Worker's /proc/<pid>/environ, scans its
    memory through /proc/<pid>/mem, lists its fds and tries ptrace: all refused, and no
    token in what it could read (its command line)."""
    _nobody_worker(connected, nobody, SNOOP, token_by)
    asked = connected.say("alice", "@bot what can you find?")
    text = connected.wait_reply(asked["id"])["text"]
    assert connected.setup.tokens["bot"] not in text
    report = json.loads(text.removeprefix("snoop "))
    assert report["uid"] == nobody.uid  # the agent runs as the Worker's user
    assert report["environ"] == {"result": "denied (EACCES)"}
    assert report["mem"] == {"result": "maps denied (EACCES)"}
    assert report["fd"] == {"result": "denied (EACCES)"}
    assert report["ptrace"] == {"result": "denied (EPERM)"}
    assert report["cmdline"]["tokens"] == []


def test_another_process_of_the_workers_user_gets_nothing_but_can_read_its_agents(
    connected: Connected, nobody: OtherUser
) -> None:
    """What protects the token is the Worker's flag (not dumpable): the same probe, run by
    the same user, reads the environment and memory of the Worker's keeper (an ordinary
    process), and is refused every one of the Worker's. The Worker's own `os.environ`
    forgetting the token does not change /proc/<pid>/environ, which only the flag guards."""
    w, home = _nobody_worker(connected, nobody, ECHO_AGENT, "env")
    assert w.proc is not None
    kept = nobody.probe(w.proc.pid)
    assert kept["environ"] == {"result": "denied (EACCES)"}
    assert kept["mem"] == {"result": "maps denied (EACCES)"}
    assert kept["ptrace"] == {"result": "denied (EPERM)"}
    record = json.loads((home / "ws" / "agent-group.json").read_text())
    keeper = nobody.probe(int(record["keeper_pid"]), ptrace=False)
    assert keeper["environ"]["result"].startswith("read ")
    assert "AGENTPOST_TOKEN" not in keeper["environ"]["agentpost"]  # hidden from the agent
    assert keeper["mem"]["result"].startswith("read ")


def test_another_user_finds_no_token_in_the_workers_command_line(
    connected: Connected, nobody: OtherUser, tmp_path: Path
) -> None:
    """/proc/<pid>/cmdline is every local user's to read: with --token-file the token is not
    in it (and --token is refused: the test below)."""
    token_file = tmp_path / "keys" / "bot.token"
    token_file.parent.mkdir()
    token_file.write_text(connected.setup.tokens["bot"] + "\n")
    token_file.chmod(0o600)
    (tmp_path / "repo").mkdir()
    (tmp_path / "repo2").mkdir()
    by_file = _worker(
        connected, agent_cmd(ECHO_AGENT), "--token-file", str(token_file),
        "--workspace-dir", str(tmp_path / "ws"), "--repo", str(tmp_path / "repo"),
        python=[sys.executable], env={}, log="file",
    )
    assert by_file.proc is not None
    seen = nobody.probe(by_file.proc.pid)
    assert seen["cmdline"]["result"].startswith("read ") and seen["cmdline"]["tokens"] == []
    assert "warning" not in by_file.log()



def test_connect_refuses_a_token_on_its_command_line_in_one_line(
    connected: Connected, tmp_path: Path
) -> None:
    """docs/cli.md "Tokens": a Worker's command line is readable by its agent and by every
    local user for as long as it runs, so `connect --token` is refused (exit 2), pointing
    to --token-file and AGENTPOST_TOKEN, before anything starts."""
    p = _connect(tmp_path, connected.setup.hub, "--token", connected.setup.tokens["helper"])
    assert p.returncode == 2, p.stdout + p.stderr
    assert p.stderr == (
        "agentpost connect: --token would put the token in the process list, readable by the "
        "agent and other users: use --token-file FILE or env AGENTPOST_TOKEN\n"
    )
    assert not (tmp_path / "ws").exists()


def _connect(tmp_path: Path, hub: HubProcess, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTPOST_")}
    return subprocess.run(
        [sys.executable, "-m", "agentpost", "connect", "--agent", agent_cmd(ECHO_AGENT),
         "--workspace-dir", str(tmp_path / "ws"), *args],
        env=env | {"AGENTPOST_HUB": hub.url}, capture_output=True, text=True, timeout=60,
    )


MODES = [0o644, 0o640, 0o604, 0o620, 0o602]


@pytest.mark.parametrize("mode", MODES, ids="{:04o}".format)
def test_a_token_file_open_to_other_users_is_refused_in_one_line_and_nothing_starts(
    connected: Connected, tmp_path: Path, mode: int
) -> None:
    token_file = tmp_path / "keys" / "bot.token"
    token_file.parent.mkdir()
    token_file.write_text(connected.setup.tokens["bot"] + "\n")
    token_file.chmod(mode)
    (tmp_path / "repo").mkdir()
    p = _connect(tmp_path, connected.hub, "--repo", str(tmp_path / "repo"),
                 "--token-file", str(token_file))
    assert p.returncode == 1  # EXIT_FINAL, as the CLI's final errors
    assert p.stderr.splitlines() == [
        f"error not_configured: the token file {token_file} {REFUSED_MODE} (mode {mode:04o}); "
        f"run `chmod 600 {token_file}`"
    ]
    assert not (tmp_path / "ws").exists()  # nothing started: no workspace, no agent
    assert connected.acked("bot") == 0


def test_a_token_file_of_another_user_is_refused(
    connected: Connected, nobody: OtherUser, tmp_path: Path
) -> None:
    keys = nobody.folder("keys")
    token_file = nobody.secret_file(keys, connected.setup.tokens["bot"])
    (tmp_path / "repo").mkdir()
    p = _connect(tmp_path, connected.hub, "--repo", str(tmp_path / "repo"),
                 "--token-file", str(token_file))
    assert p.returncode == 1
    assert p.stderr.splitlines() == [
        f"error not_configured: the token file {token_file} belongs to uid {nobody.uid}, not to you (uid 0); "
        "use a file of your own, mode 0600"
    ]
    assert not (tmp_path / "ws").exists()


@pytest.mark.parametrize("inside", ["--repo", "--egress-root"])
def test_a_token_file_the_agent_reads_or_delivers_from_is_refused(
    connected: Connected, tmp_path: Path, inside: str
) -> None:
    """The agent's working directory and the egress roots are the agent's to read and to
    deliver from (a file there can be posted into a room)."""
    (root := tmp_path / "repo").mkdir()
    (root / "keys").mkdir()
    token_file = root / "keys" / "bot.token"
    token_file.write_text(connected.setup.tokens["bot"] + "\n")
    token_file.chmod(0o600)
    (other := tmp_path / "other").mkdir()
    repo, egress = (root, other) if inside == "--repo" else (other, root)
    p = _connect(tmp_path, connected.hub, "--repo", str(repo), "--egress-root", str(egress),
                 "--token-file", str(token_file))
    assert p.returncode == 1
    assert p.stderr.splitlines() == [
        f"error not_configured: the token file {token_file} is inside {root}, which the agent reads and can "
        "deliver from; keep it outside (docs/connect.md)"
    ]
    assert not (tmp_path / "ws").exists()
