"""docs/reservations.md's five minutes, run as written on both engines: a conflict names the
holder, the guard refuses the conflicting commit and lets the other through, the release
frees the file, and the room shows each change. A command the page says fails (`# error …
(exit N)` under it) must fail with that status and print what the page says."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

from test_docs_together import _as_run, _blocks

from hubproc import HubProcess
from walkrun import run_script

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "reservations.md"


def _said(expected: str, actual: str) -> bool:
    """The page's line, `…` standing for what differs, in the output read as one line."""
    pattern = ".*?".join(re.escape(part) for part in expected.split("…"))
    return re.search(pattern, " ".join(actual.split())) is not None


def test_docs_reservations_md_runs_as_written(hub: HubProcess, tmp_path: Path) -> None:
    [walk] = _blocks(DOC)
    clone = tmp_path / "clone"
    clone.mkdir()
    (clone / ".venv").symlink_to(Path(sys.executable).parent.parent)
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTPOST_")}
    env |= {
        "AGENTPOST_HUB": hub.url,
        "AGENTPOST_HOME": str(hub.data_dir),
        "HOME": str(tmp_path / "home"),
    }
    p = run_script(_as_run(walk), clone, env, 240, "docs/reservations.md")
    assert p.returncode == 0, p.stdout + p.stderr
    for line in walk.splitlines():
        m = re.match(r"#\s*error (.*) \(exit \d+", line)
        if m:
            assert _said(m.group(1), p.stderr), f"the page says {m.group(1)!r}:\n{p.stderr}"
    assert "held exclusively by ada (src/auth/**)" in p.stderr and "auth refactor" in p.stderr
    assert re.search(r"reserved src/auth/\*\* of github\.com/acme/app \(exclusive\)", p.stdout)
    assert "released" in p.stdout
    # The room's notices, as the page says.
    assert "ada reserved src/auth/** of github.com/acme/app (exclusively) until" in p.stdout
    assert "ada released src/auth/**" in p.stdout
    assert [p.name for p in clone.iterdir()] == [".venv"]  # the page's repo was its own
