"""docs/ag2.md's walk-through, run as written: its shell blocks in bash, against a real hub,
with the unmodified agent-connect Worker and the example agent copied next to it as the docs
assume."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from ag2run import ECHO_AGENT, ROOT

from hubproc import HubProcess


def test_ag2_walkthrough_runs_as_written(hub: HubProcess, tmp_path: Path) -> None:
    text = (ROOT / "docs" / "ag2.md").read_text()
    blocks = re.findall(r"```sh\n(.*?)```", text, re.S)
    assert len(blocks) == 2
    (tmp_path / "examples").mkdir()
    shutil.copy(ECHO_AGENT, tmp_path / "examples" / "echo_agent.py")
    (tmp_path / ".venv").symlink_to(Path(sys.executable).parent.parent)
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("AGENT_CONNECT_", "REMOTE_TASK_"))
    }
    env.update(
        {
            "AGENTPOST_HUB": hub.url,
            "AGENTPOST_ADMIN_TOKEN": hub.admin_token,
            "AGENTPOST_HOME": str(tmp_path / "home"),
            "HOME": str(tmp_path),  # no ~/.agent-connect/config.env of the machine's user
        }
    )
    env.pop("AGENTPOST_TOKEN", None)
    p = subprocess.run(
        ["bash", "-c", "set -e\n" + "\n".join(blocks) + "\nwait\n"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert p.returncode == 0, p.stderr + p.stdout
    assert "echo:" in p.stdout and "hello" in p.stdout  # tail and inbox show the answer
    assert "room ops off" not in p.stderr + p.stdout
    # The `kill` may take agent-connect's 12 s stop budget and end on its guard warning;
    # the page says so before the reader meets it, in the warning's own words.
    if "singleton guard held" in p.stderr:
        assert "leaving the singleton guard held" in text and "12 s (its stop" in " ".join(
            text.split()
        )
