"""README.md, run as written: "Five minutes with the hub", the curl and CLI blocks, and the
connect block, in one shell, against a hub started as the README's `agentpost serve` (SQLite in
its data dir, which is `AGENTPOST_HOME`, so `admin` commands read its token file).

What the test changes, and only that: the hub is on a free port (`AGENTPOST_HUB`, and the curl
URLs), the shell runs in a temp dir that holds links to this install's `.venv` and `examples/`;
"<alice's token from above>" and "<bot's token>" are read from the `member add` output (which
the shell also keeps in a file, outside that dir); `tail --follow` runs for 3 s (it must still
be running then). test_docs_together.py runs this script again, before every docs page's.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest

from hubproc import HubProcess
from walkrun import run_script

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
TOKEN_OF = "$(python3 -c 'import json; print(json.load(open(\"{0}\"))[\"token\"])')"


def readme_script(hub: HubProcess, keep: Path) -> str:
    """The README's walk-through (its "Five minutes", curl, CLI and connect blocks) as one
    script, with only what a test must change: the hub URL, the tokens (kept in `keep`, outside
    the folder the script runs in) and `tail --follow` stopped after 3 s."""
    blocks = re.findall(r"```sh\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    install, tests, five_minutes, curl, cli, connect = blocks
    assert install.strip().endswith(".venv/bin/agentpost serve")  # the hub fixture is that serve
    script = "\n".join([five_minutes, curl, cli, connect])
    for who, add in (
        ("alice", "agentpost admin member add acme alice --kind human --json"),
        ("bot", "agentpost admin member add acme bot --kind agent --owner alice --json"),
    ):
        assert add in script
        script = script.replace(add, f"{add} | tee {keep / who}.json")
    script = script.replace("<alice's token from above>", TOKEN_OF.format(keep / "alice.json"))
    script = script.replace("<bot's token>", TOKEN_OF.format(keep / "bot.json"))
    script = script.replace("http://127.0.0.1:8470", hub.url)
    follow = "agentpost tail general --follow"
    assert script.count(follow) == 1
    return re.sub(rf"^{follow}.*$", f"timeout 3 {follow} || [ $? = 124 ]", script, flags=re.M)


@pytest.mark.parametrize("engine", ["sqlite"], indirect=True)
def test_readme_runs_as_written(hub: HubProcess, tmp_path: Path) -> None:
    startup = hub.startup_output or ""
    assert "agentpost database: SQLite" in startup and "hub.sqlite3" in startup, startup
    keep = tmp_path / "tokens"
    keep.mkdir()
    script = readme_script(hub, keep) + "\nwait\n"  # the README stops its Worker
    clone = tmp_path / "clone"
    clone.mkdir()
    (clone / ".venv").symlink_to(Path(sys.executable).parent.parent)
    (clone / "examples").symlink_to(ROOT / "examples")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTPOST_")}
    env |= {"AGENTPOST_HOME": str(hub.data_dir), "AGENTPOST_HUB": hub.url}
    p = run_script(script, clone, env, 180, "README.md")
    out = p.stdout
    assert p.returncode == 0, out + p.stderr
    statuses = re.findall(r"(?im)^idempotency-status: (\w+)", out)
    assert statuses == ["created", "replayed"], out
    assert "\nreplayed ev_" in out, out  # the CLI's second keyed post
    assert "[report.txt 10B]" in out, out  # the media event, in `tail`
    assert "alice:\tthe build is green @bot" in out, out  # `tail` piped: tab-separated
    # The agent behind `connect` answered the curl post in scratch (Turns in different rooms
    # run side by side, so which room's reply lands first is not promised), once.
    replies = re.findall(r"(?m)^\d+\tev_\w+\t(\w+)\tbot\tmessage\t(.*)$", out)
    assert replies.count(("scratch", "echo: hello @bot")) == 1, out + p.stderr
