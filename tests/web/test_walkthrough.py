"""docs/web.md, run as written: its shell blocks fed one by one to one bash (the reader's
terminal) against a real hub, with the example ACP agent next to it as the docs assume; and
what it says the page shows, in headless Chromium signed in with the token it prints."""

from __future__ import annotations

import os
import queue
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path

from playwright.sync_api import Page, expect
from webhelp import open_room, sign_in

from hubproc import HubProcess

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "web.md"


class Terminal:
    """One bash reading the blocks from stdin; each block ends by printing a marker."""

    def __init__(self, cwd: Path, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            ["bash", "-s"],
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        self.n = 0

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def run(self, block: str, timeout: float = 120) -> str:
        assert self.proc.stdin is not None
        self.n += 1
        marker = f"--- block {self.n} done, status"
        self.proc.stdin.write(f'set -e\n{block}\necho "{marker} $?"\n')
        self.proc.stdin.flush()
        out: list[str] = []
        while True:
            line = self.lines.get(timeout=timeout)
            assert line is not None, "bash exited:\n" + "".join(out)
            if line.startswith(marker):
                assert line.strip().endswith(" 0"), "".join(out)
                return "".join(out)
            out.append(line)

    def close(self) -> None:
        """End the terminal and whatever it still runs in the background (a failed test
        never reached the walk-through's own `kill %1`)."""
        assert self.proc.stdin is not None
        self.proc.stdin.write("\nset +e; kill $(jobs -p) 2>/dev/null; wait\n")
        self.proc.stdin.close()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        self.reader.join(10)
        assert self.proc.stdout is not None
        self.proc.stdout.close()


def test_the_walkthrough_of_docs_web_md(page: Page, hub: HubProcess, tmp_path: Path) -> None:
    setup, delegate, stop = re.findall(r"```sh\n(.*?)```", DOC.read_text(), flags=re.S)
    (tmp_path / "examples").mkdir()
    shutil.copy(REPO / "examples" / "echo_agent.py", tmp_path / "examples" / "echo_agent.py")
    (tmp_path / ".venv").symlink_to(Path(sys.executable).parent.parent)
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTPOST_")}
    env.update({"AGENTPOST_HUB": hub.url, "AGENTPOST_ADMIN_TOKEN": hub.admin_token})
    env["AGENTPOST_HOME"] = str(tmp_path / "home")  # the user's data home: the Worker's folder
    terminal = Terminal(tmp_path, env)
    try:
        token = re.search(r"hana's token: (\S+)", terminal.run(setup))
        assert token
        sign_in(page, hub, token.group(1))
        open_room(page, "launch")
        out = terminal.run(delegate)
        assert "here is notes.md" in out  # the planner was woken by the receipt

        items = page.locator("[data-event-id]")
        first = items.first
        expect(first).to_contain_text("@writer file notes.md")
        expect(first).to_contain_text("Delegates to writer")
        expect(first).to_contain_text("Reported back — writer: returned")
        upload = page.locator("[data-event-id]", has=page.get_by_role("link", name="notes.md"))
        expect(upload).to_contain_text("writer")
        receipt = page.locator("[data-event-id]", has_text="here is notes.md")
        badge = receipt.locator("[data-reply-kind]")
        expect(badge).to_have_attribute("data-reply-kind", "returned")
        receipt.get_by_role("button", name="Delivery details").click()
        receipt.get_by_text("Woke planner").click()
        expect(receipt).to_contain_text("receipt")
        receipt.get_by_role("link", name="Answers #1").click()
        expect(first).to_be_focused()
        question = page.locator("[data-event-id]", has_text="Which one do you mean?")
        expect(question.locator("[data-reply-kind]")).to_have_text("needs input")

        page.get_by_label("Message").fill("thanks both")
        page.keyboard.press("Enter")
        expect(page.locator("[data-event-id]", has_text="thanks both")).to_have_count(1)
        terminal.run(stop)
    finally:
        terminal.close()
    log = (tmp_path / "ws-writer.log").read_text()
    assert "agent started" in log, log
