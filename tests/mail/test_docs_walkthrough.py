"""docs/mail.md, run as written: every `console` block, in order, on two real clones.

`a$` and `b$` lines are commands on machine A and B (`export` sets that machine's
environment, `# …` ends a line's comment); the lines after a command are its expected
stdout, where `…` stands for text that differs from run to run (ids, a message tail).
The clock is pinned to the walkthrough's `sent_at`, so timestamps print as written.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .conftest import Network

DOC = Path(__file__).resolve().parents[2] / "docs" / "mail.md"
NOW = "2026-11-30T08:45:08.956Z"


def _blocks(text: str) -> list[list[str]]:
    return [m.group(1).splitlines() for m in re.finditer(r"```console\n(.*?)```", text, re.S)]


def _matches(expected: str, actual: str) -> bool:
    pattern = ".*?".join(re.escape(part) for part in expected.split("…"))
    return re.fullmatch(pattern, actual) is not None


def test_every_console_block_of_docs_mail_md_runs_as_written(network: Network) -> None:
    clones = {"a": network.clone("a-clone"), "b": network.clone("b-clone")}
    envs = {who: dict(c.env, AGENTPOST_MAIL_NOW=NOW) for who, c in clones.items()}
    ran = 0
    for block in _blocks(DOC.read_text(encoding="utf-8")):
        pending: tuple[str, str, list[str]] | None = None
        for line in [*block, "#end"]:
            prompt = re.match(r"^([ab])\$ (.*)$", line)
            if pending is not None and (prompt or line.startswith("#") or not line.strip()):
                who, command, expected = pending
                if expected:
                    out = _run(clones[who].path, envs[who], command)
                    assert len(out) == len(expected), f"{who}$ {command}\n{out}"
                    for want, got in zip(expected, out, strict=True):
                        assert _matches(want, got), f"{who}$ {command}\nwant {want}\ngot  {got}"
                else:
                    _run(clones[who].path, envs[who], command)
                ran += 1
                pending = None
            if prompt:
                who, command = prompt.groups()
                command = re.sub(r"\s+#.*$", "", command)
                if command.startswith("export "):
                    name, _, value = command.removeprefix("export ").partition("=")
                    envs[who][name] = value
                    continue
                pending = (who, command, [])
            elif pending is not None and line.strip():
                pending[2].append(line)
    assert ran >= 15, "the walkthrough blocks were found and run"


def _run(cwd: Path, env: dict[str, str], command: str) -> list[str]:
    args = shlex.split(command)
    assert args[0] == "agentpost"
    proc = subprocess.run(
        [sys.executable, "-m", "agentpost", *args[1:]],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return [line for line in proc.stdout.splitlines() if line.strip()]
