"""docs/a2a.md, run as written: its `sh` blocks in one shell, in order (the page writes its
two Python scripts itself); each `# …` line under a command is a line it prints (`…` stands
for what differs from run to run). The `pip install` line finds `a2a-sdk` 1.3.0 installed
already (pyproject.toml's `test` extra). tests/integration/test_docs_together.py walks it
too, after the README and the other pages. The signature check of the push section runs
against a body and headers made here as the hub's sender makes them.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from agentpost.hub.a2a.push import signature
from hubproc import HubProcess

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "a2a.md"


def _matches(expected: str, actual: str) -> bool:
    pattern = ".*?".join(re.escape(part) for part in expected.split("…"))
    return re.fullmatch(pattern, actual) is not None


def test_docs_a2a_md_runs_as_written(hub: HubProcess, tmp_path: Path) -> None:
    text = DOC.read_text()
    shells = re.findall(r"```sh\n(.*?)```", text, re.S)
    (check_py,) = re.findall(r"```python\n(.*?)```", text, re.S)
    # After the page: hana's token, for the check of her room below.
    script = "\n".join(shells) + '\nprintf "%s" "$AGENTPOST_TOKEN" > "$HOME/hana.token"\n'
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTPOST_")}
    env |= {
        "AGENTPOST_HUB": hub.url,
        "AGENTPOST_HOME": str(hub.data_dir),  # the admin commands read the hub's token
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
    assert len(got) == len(expected) == 4, p.stdout
    for want, line in zip(expected, got, strict=True):
        assert _matches(want, line), f"want {want}\ngot  {line}"
    assert got[1] == got[2]  # the retry named the same task
    task, room = got[1].split()[:2]
    with hub.client((tmp_path / "hana.token").read_text()) as hana:
        events = hana.get(f"/v1/rooms/{room}/events", params={"after": 0}).json()["events"]
    # One call event though it was sent twice, then scout's receipt.
    assert [(e["id"] == task, e["reply_kind"]) for e in events] == [(True, None), (False, "result")]

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
