"""`tail --follow` and `inbox --follow` live through a hub restart: they say they are
reconnecting, resume after the last item shown (nothing twice, nothing skipped), and end
with a final error when the member is removed."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from hubproc import HubProcess, make_setup, poll, with_default_signals


class Follower:
    """A running `agentpost … --follow --json`, its stdout lines read into a queue."""

    def __init__(self, hub: HubProcess, token: str, args: list[str], stderr: Path) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTPOST_")}
        env.update({"AGENTPOST_HUB": hub.url, "AGENTPOST_TOKEN": token})
        self.stderr_path = stderr
        with open(stderr, "w") as err:
            # It gets a Ctrl-C (SIGINT) at the end, so it must not inherit an ignored one.
            self.proc = subprocess.Popen(
                with_default_signals([sys.executable, "-m", "agentpost", *args]),
                stdout=subprocess.PIPE,
                stderr=err,
                text=True,
                env=env,
            )
        self.lines: queue.Queue[str] = queue.Queue()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)

    def next(self, timeout: float = 60) -> dict:
        return json.loads(self.lines.get(timeout=timeout))

    def stderr(self) -> str:
        return self.stderr_path.read_text()


@contextmanager
def following(hub: HubProcess, token: str, args: list[str], tmp: Path) -> Iterator[Follower]:
    f = Follower(hub, token, args, tmp / "follower.err")
    try:
        yield f
    finally:
        if f.proc.poll() is None:
            f.proc.send_signal(signal.SIGINT)  # Ctrl-C
        f.proc.wait(30)
        f.reader.join(30)
        assert f.proc.stdout is not None
        f.proc.stdout.close()


def _post(hub: HubProcess, token: str, room: str, text: str) -> dict:
    with hub.client(token) as c:
        r = c.post(f"/v1/rooms/{room}/messages", json={"text": text})
        assert r.status_code == 201, r.text
        return r.json()["event"]


def _restart(make_hub, hub: HubProcess) -> HubProcess:  # noqa: ANN001
    """SIGKILL the hub and start it again on the same port, data dir and database."""
    port = hub.url.rsplit(":", 1)[1]
    hub.kill()
    return make_hub(extra_args=["--port", port])


def test_tail_follow_reconnects_after_a_hub_restart(make_hub, tmp_path: Path) -> None:  # noqa: ANN001
    hub = make_hub()
    s = make_setup(hub, ["alice"], ["bot"])
    alice = s.tokens["alice"]
    _post(hub, alice, s.room, "one")
    with following(hub, alice, ["tail", "general", "--follow", "--json"], tmp_path) as f:
        assert f.next()["text"] == "one"
        _post(hub, alice, s.room, "two")
        assert f.next()["text"] == "two"
        hub2 = _restart(make_hub, hub)
        poll(lambda: "reconnecting" in f.stderr(), timeout=60)
        _post(hub2, alice, s.room, "three")
        three = f.next()
        assert (three["text"], three["seq"]) == ("three", 3)
        assert f.proc.poll() is None
    assert f.lines.empty(), list(f.lines.queue)  # nothing shown twice
    assert "Traceback" not in f.stderr()


def test_inbox_follow_shows_and_acks_wake_ups_across_a_restart(make_hub, tmp_path: Path) -> None:  # noqa: ANN001
    hub = make_hub()
    s = make_setup(hub, ["alice"], ["bot"])
    alice, bot = s.tokens["alice"], s.tokens["bot"]
    first = _post(hub, alice, s.room, "hi @bot")
    args = ["inbox", "--follow", "--ack", "--json"]
    with following(hub, bot, args, tmp_path) as f:
        item = f.next()
        assert item["event"]["id"] == first["id"]
        hub2 = _restart(make_hub, hub)
        poll(lambda: "reconnecting" in f.stderr(), timeout=60)
        second = _post(hub2, alice, s.room, "again @bot")
        item2 = f.next()
        assert item2["event"]["id"] == second["id"] and item2["cursor"] > item["cursor"]

        def acked() -> bool:
            with hub2.client(bot) as c:
                return c.get("/v1/me").json()["inbox_cursor"] == item2["cursor"]

        poll(acked, timeout=30)
    assert f.lines.empty(), list(f.lines.queue)


def test_inbox_follow_ends_with_a_final_error_when_removed(hub: HubProcess, tmp_path: Path) -> None:
    s = make_setup(hub, ["alice"], ["bot"])
    with following(hub, s.tokens["bot"], ["inbox", "--follow", "--json"], tmp_path) as f:
        _post(hub, s.tokens["alice"], s.room, "hi @bot")
        assert f.next()["event"]["text"] == "hi @bot"
        with hub.client(hub.admin_token) as admin:
            r = admin.delete(f"/v1/admin/workspaces/{s.workspace}/members/bot")
            assert r.status_code == 200, r.text
        assert f.proc.wait(60) == 1
        err = f.next()["error"]
        assert err["retryable"] is False and err["code"] in ("agent_removed", "unauthorized")
