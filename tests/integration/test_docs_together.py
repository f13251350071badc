"""README.md and then every docs page's walk-through, one after another, in the same hub and
the same clone, as a new user walks them: a page that reuses another's names fails here, and
so does a page that leaves behind files git would show.

Each page runs as written in a shell of its own (a new terminal) in a git repository made for
the test (the repo's .gitignore, examples/ and a link to this install's .venv, committed);
threads.md continues the README's terminal (alice's token in `AGENTPOST_TOKEN`), as it says.
A command the page says fails (`# error …(exit N…)` under it) must fail with that status.
What a shared hub cannot give runs only in the page's own test; `ELSEWHERE` says why.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_docs_readme import readme_script

from hubproc import HubProcess
from walkrun import run_script

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"

# page: the indexes of its ```sh blocks that make its walk-through (None: all of them)
WALKS: dict[str, list[int] | None] = {
    "a2a.md": None,
    "ag2.md": None,
    "connect.md": None,
    "delegation.md": None,
    "delivery.md": None,
    "mcp.md": [0],  # the rest is MCP tool calls in between (test_mcp_done_when.py)
    "operations.md": None,
    "presence.md": None,
    "reservations.md": None,
    "search.md": None,
    "threads.md": [0, 1],  # the scheduler is a script file (test_docs_threads.py)
    "web.md": None,
}
# "after the README's first steps", in its terminal (alice's token)
CONTINUE_THE_README = {"threads.md", "operations.md"}
ELSEWHERE = {
    "deploy.md": "its own two hubs on PostgreSQL behind nginx, on fixed ports, one killed",
    "api.md": "fragments of requests against a room of the reader's, not a walk-through",
}


def _blocks(page: Path) -> list[str]:
    return re.findall(r"```sh\n(.*?)```", page.read_text(encoding="utf-8"), re.S)


def _as_run(block: str) -> str:
    """The block, with each command the page says fails checked for its exit status."""
    lines = block.splitlines()
    out = []
    for line, below in zip(lines, [*lines[1:], ""], strict=True):
        fails = re.match(r"#\s*error .*\(exit (\d+)", below)
        out.append(
            f"if {line}\nthen exit 99; else [ $? = {fails.group(1)} ]; fi" if fails else line
        )
    return "\n".join(out)


def _clone(at: Path) -> Path:
    """A git repository as a new user's clone looks to the walk-throughs, all committed."""
    at.mkdir()
    shutil.copy(ROOT / ".gitignore", at / ".gitignore")
    shutil.copytree(
        ROOT / "examples", at / "examples", ignore=shutil.ignore_patterns("__pycache__")
    )
    (at / ".venv").symlink_to(Path(sys.executable).parent.parent)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.org"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "clone"]):
        subprocess.run([*git, *args], cwd=at, check=True, capture_output=True)
    return at


def test_every_page_with_a_walkthrough_is_walked_here() -> None:
    with_blocks = {p.name for p in DOCS.glob("*.md") if _blocks(p)}
    assert with_blocks == set(WALKS) | set(ELSEWHERE)


def test_the_tok_helper_is_one_text_and_prints_the_hubs_error(hub: HubProcess) -> None:
    helpers = {
        line
        for page in WALKS
        for block in _blocks(DOCS / page)
        for line in block.splitlines()
        if line.startswith("tok()")
    }
    assert len(helpers) == 1, helpers
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTPOST_")}
    env |= {"AGENTPOST_HUB": hub.url, "AGENTPOST_HOME": str(hub.data_dir)}
    env["PATH"] = f"{Path(sys.executable).parent}:{env['PATH']}"
    twice = "agentpost admin member add tokws hana --kind human --json | tok"
    script = (
        f"{helpers.pop()}\nagentpost admin workspace create tokws\nH=$({twice})\nH=$({twice})\n"
    )
    p = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 1, p.stdout + p.stderr
    assert re.search(r"(?m)^error \w+: .*hana", p.stderr), p.stderr
    assert "Traceback" not in p.stderr and "KeyError" not in p.stderr, p.stderr


@pytest.mark.timeout(1200)
@pytest.mark.parametrize("engine", ["sqlite"], indirect=True)
def test_readme_then_every_page_in_one_hub_leave_the_clone_clean(
    hub: HubProcess, tmp_path: Path
) -> None:
    clone = _clone(tmp_path / "clone")
    keep = tmp_path / "tokens"
    keep.mkdir()
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("AGENTPOST_", "AGENT_CONNECT_", "REMOTE_TASK_"))
    }
    env |= {
        "AGENTPOST_HOME": str(hub.data_dir),  # the README's serve: admin commands read it
        "AGENTPOST_HUB": hub.url,
        "HOME": str(tmp_path / "home"),  # no ~/.agent-connect/config.env of the machine's user
    }
    stop_jobs = "trap 'set +e; kill $(jobs -p) 2>/dev/null; wait' EXIT\n"

    def walk(name: str, script: str, extra: dict[str, str] | None = None) -> None:
        p = run_script(stop_jobs + script + "\nwait\n", clone, env | (extra or {}), 240, name)
        assert p.returncode == 0, f"{name} after the pages before it:\n{p.stdout}\n{p.stderr}"
        assert "KeyError" not in p.stderr, f"{name}:\n{p.stderr}"

    walk("README.md", readme_script(hub, keep))
    alice = (keep / "alice.json").read_text()
    alice_token = re.search(r'"token":\s*"([^"]+)"', alice)
    assert alice_token is not None, alice
    readme_terminal = {
        "AGENTPOST_TOKEN": alice_token.group(1),
        "PATH": f"{clone / '.venv' / 'bin'}:{env['PATH']}",
    }
    for page, wanted in WALKS.items():
        blocks = _blocks(DOCS / page)
        chosen = blocks if wanted is None else [blocks[i] for i in wanted]
        script = "\n".join(_as_run(b) for b in chosen)
        walk(page, script, readme_terminal if page in CONTINUE_THE_README else None)

    status = subprocess.run(
        ["git", "status", "--porcelain"], cwd=clone, capture_output=True, text=True, check=True
    )
    assert status.stdout == "", "the walk-throughs left in the clone:\n" + status.stdout
