"""docs/threads.md, run as written, after the README's first steps (workspace `acme`,
`AGENTPOST_TOKEN` set to alice's token).

The first two blocks run in one shell; each `# {…}` line is the JSON the command above it
prints (`…` stands for what differs from run to run). The crash-safe scheduler runs as the
page gives it, as a script; the test changes its hub URL to the test hub's, puts alice's token
where the script reads it (`~/.config/agentpost/token`, under a temp HOME) and
/var/lib/tasks in a temp dir.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from test_cli import run

from hubproc import HubProcess

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "threads.md"


def _matches(expected: str, actual: str) -> bool:
    pattern = ".*?".join(re.escape(part) for part in expected.split("…"))
    return re.fullmatch(pattern, actual) is not None


def test_docs_threads_md_runs_as_written(hub: HubProcess, tmp_path: Path) -> None:
    run(hub, "admin", "workspace", "create", "acme")
    alice = json.loads(
        run(hub, "admin", "member", "add", "acme", "alice", "--kind", "human", "--json").stdout
    )["token"]
    one_thread, sending_once, scheduler = re.findall(r"```sh\n(.*?)```", DOC.read_text(), re.S)
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTPOST_")}
    env |= {
        "AGENTPOST_HUB": hub.url,
        "AGENTPOST_ADMIN_TOKEN": hub.admin_token,
        "AGENTPOST_TOKEN": alice,
        "PATH": f"{Path(sys.executable).parent}:{env['PATH']}",  # `agentpost` of this install
        "HOME": str(tmp_path),
    }
    script = one_thread + sending_once
    p = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )
    assert p.returncode == 0, p.stdout + p.stderr
    out = p.stdout.splitlines()
    assert json.loads(out[0])["member"]["name"] == "buddy"  # "buddy's token, once"
    expected = [line[2:] for line in script.splitlines() if line.startswith("# {")]
    assert len(out[1:]) == len(expected) == 2, p.stdout
    for want, got in zip(expected, out[1:], strict=True):
        assert _matches(want, got), f"want {want}\ngot  {got}"
    thread = json.loads(out[1])["thread_id"]

    token_file = tmp_path / ".config" / "agentpost" / "token"
    token_file.parent.mkdir(parents=True)
    token_file.write_text(alice + "\n")
    token_file.chmod(0o600)
    tasks = tmp_path / "tasks"
    for task, summary in (("7", "all green"), ("8", "two tests flaky")):
        (tasks / task).mkdir(parents=True)
        (tasks / task / "summary").write_text(summary + "\n")
    wake = tmp_path / "wake-buddy"
    wake.write_text(
        scheduler.replace("http://127.0.0.1:8470", hub.url).replace("/var/lib/tasks", str(tasks))
    )
    sched_env = {k: v for k, v in env.items() if k not in ("AGENTPOST_HUB", "AGENTPOST_TOKEN")}

    def wake_buddy(task: str) -> str:
        p = subprocess.run(
            ["sh", str(wake), task],
            cwd=tmp_path, env=sched_env, capture_output=True, text=True, timeout=120,
        )
        assert p.returncode == 0, p.stdout + p.stderr
        return str(json.loads(p.stdout)["delivery"])

    # Task 7 is the message the block above sent with the same key: the script repeats it.
    assert [wake_buddy("7"), wake_buddy("8"), wake_buddy("8")] == ["replayed", "sent", "replayed"]

    # A final error (here a token the hub does not know) ends the script with 1 and the
    # hub's words, never 75 ("retry later") that a supervisor would retry for ever.
    good = token_file.read_text()
    for bad in ("ap_not-a-token\n", "\n"):
        token_file.write_text(bad)
        p = subprocess.run(
            ["sh", str(wake), "9"],
            cwd=tmp_path, env=sched_env, capture_output=True, text=True, timeout=120,
        )
        assert p.returncode == 1, (bad, p.returncode, p.stdout, p.stderr)
        assert "Traceback" not in p.stderr and '"code"' in p.stderr, p.stderr
    token_file.write_text(good)
    events = [
        json.loads(line)
        for line in run(hub, "tail", thread, "--json", token=alice).stdout.splitlines()
    ]
    assert [e["text"] for e in events] == ["task 7 ended: all green", "task 8 ended: two tests flaky"]
