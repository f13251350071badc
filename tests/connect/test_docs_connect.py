"""docs/connect.md's walk-through, run as written: its shell blocks in bash, against a real
hub, with the example agent copied next to it as the docs assume."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import ECHO_AGENT, REPO_ROOT
from hubproc import HubProcess


def test_connect_walkthrough_runs_as_written(hub: HubProcess, tmp_path: Path) -> None:
    text = (REPO_ROOT / "docs" / "connect.md").read_text()
    blocks = re.findall(r"```sh\n(.*?)```", text, re.S)[:2]
    (tmp_path / "examples").mkdir()
    shutil.copy(ECHO_AGENT, tmp_path / "examples" / "echo_agent.py")
    (tmp_path / ".venv").symlink_to(Path(sys.executable).parent.parent)
    env = {
        **os.environ,
        "AGENTPOST_HUB": hub.url,
        "AGENTPOST_ADMIN_TOKEN": hub.admin_token,
        "AGENTPOST_HOME": str(tmp_path / "home"),  # the user's data home
    }
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
    assert "echo: @bot hello" in p.stdout
    assert "end_turn" in p.stdout  # connect status lists the Turn
    assert "agent started" in p.stderr
    # The Worker's folder is the default one, under the data home, outside the repo (".");
    # delivery is on with the documented layout.
    port = hub.url.rsplit(":", 1)[1]
    folder = tmp_path / "home" / "workers" / f"127.0.0.1_{port}" / "lab" / "bot"
    assert (folder / "worker-id").exists()
    assert "delivery (_ag2/deliver): enabled" in p.stderr
