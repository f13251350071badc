"""docs/a2a.md, run as written, after the README's first steps (workspace `acme`, alice's
token in `AGENTPOST_TOKEN`).

The page's `sh` blocks run in one shell, in order, with its two Python blocks written where
the page names them (`call.py`, `get.py`); each `# …` line under a command is a line it
prints (`…` stands for what differs from run to run). The `pip install` line is left out:
the test's own install has `a2a-sdk` 1.3.0 already (pyproject.toml's `test` extra). The
signature check of the push section runs against a body and headers made here as the hub's
sender makes them.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from test_cli import run

from agentpost.hub.a2a.push import signature
from hubproc import HubProcess

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "a2a.md"


def _matches(expected: str, actual: str) -> bool:
    pattern = ".*?".join(re.escape(part) for part in expected.split("…"))
    return re.fullmatch(pattern, actual) is not None


def test_docs_a2a_md_runs_as_written(hub: HubProcess, tmp_path: Path) -> None:
    run(hub, "admin", "workspace", "create", "acme")
    alice = json.loads(
        run(hub, "admin", "member", "add", "acme", "alice", "--kind", "human", "--json").stdout
    )["token"]
    text = DOC.read_text()
    shells = re.findall(r"```sh\n(.*?)```", text, re.S)
    call_py, get_py, check_py = re.findall(r"```python\n(.*?)```", text, re.S)
    (tmp_path / "call.py").write_text(call_py)
    (tmp_path / "get.py").write_text(get_py)
    script = "\n".join(shells)
    assert "pip install -q 'a2a-sdk==1.3.0'" in script
    script = script.replace("pip install -q 'a2a-sdk==1.3.0'", ":")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTPOST_")}
    env |= {
        "AGENTPOST_HUB": hub.url,
        "AGENTPOST_ADMIN_TOKEN": hub.admin_token,
        "AGENTPOST_TOKEN": alice,
        "PATH": f"{Path(sys.executable).parent}:{env['PATH']}",  # this install's python
        "HOME": str(tmp_path),
    }
    p = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 0, p.stdout + p.stderr
    expected = [line[2:] for line in script.splitlines() if line.startswith("# ")]
    got = p.stdout.splitlines()
    assert len(got) == len(expected) == 3, p.stdout
    for want, line in zip(expected, got, strict=True):
        assert _matches(want, line), f"want {want}\ngot  {line}"
    assert got[0] == got[1]  # the retry named the same task
    task = got[0].split()[0]
    with hub.client(alice) as c:  # one call event, however often it was sent (three times)
        room = got[0].split()[1]
        events = c.get(f"/v1/rooms/{room}/events", params={"after": 0}).json()["events"]
    assert [e["id"] for e in events][:1] == [task] and len(events) == 2

    scope: dict[str, object] = {}
    exec(check_py, scope)  # noqa: S102 - the page's own check, run as written
    body = b'{"task": {}}'
    headers = {
        "x-agentpost-notification-id": "n-1",
        "x-agentpost-signature": signature("tok", "n-1", 1700000000, body),
    }
    genuine = scope["genuine"]
    assert callable(genuine)
    assert genuine(headers, body, "tok") is True
    assert genuine(headers, body + b" ", "tok") is False
