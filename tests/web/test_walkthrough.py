"""docs/web.md, run as written: its shell blocks in bash against a real hub, and what it says
the page shows, in headless Chromium signed in with the token the first block prints."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from playwright.sync_api import Page, expect
from webhelp import open_room, sign_in

from hubproc import HubProcess

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "web.md"


def sh_blocks() -> list[str]:
    return re.findall(r"```sh\n(.*?)```", DOC.read_text(), flags=re.S)


def bash(script: str, hub: HubProcess, state: Path) -> str:
    """Run `script` as the reader's terminal would: in the repository, the shell's variables
    carried from one block to the next (kept in `state`)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTPOST_")}
    env.update({"AGENTPOST_HUB": hub.url, "AGENTPOST_HOME": str(hub.data_dir)})
    prelude = f"set -euo pipefail\n[ -f {state} ] && source {state}\n"
    keep = f"\n{{ declare -p | grep -Ev '^declare -[a-zA-Z]*r'; declare -f; }} > {state}\n"
    done = subprocess.run(
        ["bash", "-c", prelude + script + keep],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_the_walkthrough_of_docs_web_md(page: Page, hub: HubProcess, tmp_path: Path) -> None:
    setup, agents = sh_blocks()
    state = tmp_path / "shell-state.sh"
    out = bash(setup, hub, state)
    token = re.search(r"hana's token: (\S+)", out)
    assert token, out

    sign_in(page, hub, token.group(1))
    open_room(page, "launch")
    bash(agents, hub, state)

    items = page.locator("[data-event-id]")
    expect(items).to_have_count(3)
    delegation, receipt, upload = items.nth(0), items.nth(1), items.nth(2)
    expect(delegation).to_contain_text("@writer please draft the release notes")
    expect(delegation).to_contain_text("Delegates to writer")
    expect(delegation).to_contain_text("Reported back — writer: returned")
    expect(receipt.locator("[data-reply-kind]")).to_have_attribute("data-reply-kind", "returned")
    receipt.get_by_text("Woke planner").click()
    expect(receipt).to_contain_text("receipt")
    receipt.get_by_role("link", name="Answers #1").click()
    expect(delegation).to_be_focused()
    size = (REPO / "README.md").stat().st_size
    expect(upload.get_by_role("link", name="README.md")).to_be_visible()
    expect(upload).to_contain_text("the notes so far")
    expect(upload).to_contain_text(f"{size / 1024:.1f} KB")

    page.get_by_label("Message").fill("thanks both")
    page.get_by_role("button", name="Send").click()
    expect(items).to_have_count(4)
