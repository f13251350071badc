"""docs/operations.md runs as written against a hub with the README's first steps (a workspace,
a room, a keyed post, an upload), and says what it says: the backup and the restore check
clean, counting what the hub holds, and a second restore is refused."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest

from hubproc import HubProcess, make_setup
from walkrun import run_script

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("engine", ["sqlite"], indirect=True)
def test_docs_operations_md_runs_as_written(hub: HubProcess, tmp_path: Path) -> None:
    setup = make_setup(hub, ["alice"], ["bot"])
    with hub.client(setup.tokens["alice"]) as c:
        r = c.post(f"/v1/rooms/{setup.room}/messages", json={"text": "hello"})
        assert r.status_code == 201, r.text
        r = c.post(f"/v1/rooms/{setup.room}/media", files={"file": ("a.txt", b"all green\n")})
        assert r.status_code == 201, r.text
    backup, retention = re.findall(
        r"```sh\n(.*?)```", (ROOT / "docs/operations.md").read_text(), re.S
    )
    script = backup + retention.replace(
        "agentpost room retention general --events forever    # longer than the workspace: refused",
        "if agentpost room retention general --events forever; then exit 99; fi",
    )
    script = script.replace(
        'agentpost db restore "$BK/hub-backup" --data "$BK/restored"   # never over a data dir',
        'if agentpost db restore "$BK/hub-backup" --data "$BK/restored"; then exit 99; fi',
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTPOST_")}
    env |= {
        "AGENTPOST_HOME": str(hub.data_dir),
        "AGENTPOST_HUB": hub.url,
        "AGENTPOST_TOKEN": setup.tokens["alice"],  # the README's terminal
        "PATH": f"{Path(sys.executable).parent}:{env['PATH']}",
        "TMPDIR": str(tmp_path / "tmp"),
    }
    (tmp_path / "tmp").mkdir()
    (tmp_path / "clone").mkdir()  # the page runs in the clone: its .venv
    (tmp_path / "clone" / ".venv").symlink_to(Path(sys.executable).parent.parent)
    p = run_script(script, tmp_path / "clone", env, 120, "docs/operations.md")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "backed up sqlite schema" in p.stdout and "2 events in 1 rooms, 1 files" in p.stdout
    assert p.stdout.count("ok: schema") == 2, p.stdout
    assert "1 rooms, 2 events, 1 media" in p.stdout, p.stdout
    assert "error target_not_empty" in p.stderr and "restored is not empty" in p.stderr
    assert list((tmp_path / "tmp").iterdir()) == []  # rm -r "$BK": nothing left behind
    said = p.stdout[p.stdout.index("workspace acme keeps") :]
    assert said.splitlines()[:2] == [
        "workspace acme keeps events 365d (set here)",
        "workspace acme keeps files 90d (set here)",
    ], said
    assert "room general keeps events 30d (set here)" in said
    assert "room general keeps files 90d (as its workspace)" in said
    assert said.rstrip().splitlines()[-2:] == [
        "workspace acme keeps events for ever (set here)",
        "workspace acme keeps files for ever (set here)",
    ]
    # Said in days, as the user gave it (365d), never as the wire's 31536000 seconds.
    assert "error forbidden: the workspace keeps events for 365 days: a participant may keep " \
        "them for less (not for ever)" in p.stderr
    assert "31536000" not in p.stderr
