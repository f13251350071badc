"""The real `agentpost thread` CLI against real hub processes (docs/threads.md): one message
per key from separate processes, six concurrent ensures make one thread, and every failure
of the issue maps to its code, its exit status, and a key that no failure spent unsent.

One hub per engine serves this module's tests, each in a workspace of its own; the tests that
stop or crash a hub, or run two on one database, start their own (`make_hub`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from hubproc import HubProcess, Setup, make_setup

Run = subprocess.CompletedProcess[str]


@pytest.fixture
def setup(shared_setup: Setup) -> Setup:
    return shared_setup


def cli_env(url: str, token: str | None, env: dict[str, str] | None = None) -> dict[str, str]:
    full = {**os.environ, "AGENTPOST_HUB": url, **(env or {})}
    for name in ("AGENTPOST_TOKEN", "AGENTPOST_ACTING_FOR"):
        full.pop(name, None)
    if token:
        full["AGENTPOST_TOKEN"] = token
    full.update(env or {})
    return full


def cli(
    url: str,
    token: str | None,
    *args: str,
    env: dict[str, str] | None = None,
    stdin: str | None = None,
) -> Run:
    return subprocess.run(
        [sys.executable, "-m", "agentpost", *args],
        capture_output=True,
        text=True,
        env=cli_env(url, token, env),
        input=stdin,
        timeout=60,
    )


def spawn(url: str, token: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "agentpost", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=cli_env(url, token),
    )


def finish(p: subprocess.Popen[str]) -> Run:
    out, err = p.communicate(timeout=60)
    return subprocess.CompletedProcess(p.args, p.returncode, out, err)


def ok(p: Run) -> dict:
    assert p.returncode == 0, p.stdout + p.stderr
    data: dict = json.loads(p.stdout)
    return data


def refused(p: Run, code: str, exit_code: int, retryable: bool) -> None:
    assert p.returncode == exit_code, p.stdout + p.stderr
    err = json.loads(p.stdout)["error"]
    assert set(err) == {"code", "message", "retryable"}
    assert (err["code"], err["retryable"]) == (code, retryable), err


def send(
    url: str,
    token: str | None,
    thread: str,
    *args: str,
    env: dict[str, str] | None = None,
    stdin: str | None = None,
) -> Run:
    return cli(url, token, "thread", "send", thread, "--json", *args, env=env, stdin=stdin)


def events(hub: HubProcess, token: str, room: str) -> list[dict]:
    with hub.client(token) as c:
        r = c.get(f"/v1/rooms/{room}/events", params={"limit": 1000})
        assert r.status_code == 200, r.text
        out: list[dict] = r.json()["events"]
        return out


def thread_for(s: Setup, who: str, name: str) -> str:
    return str(
        ok(cli(s.hub.url, s.tokens[who], "thread", "ensure", name, "-w", s.workspace, "--json"))[
            "thread_id"
        ]
    )


@pytest.fixture
def two_hubs(engine: str | None, make_hub: Callable[..., HubProcess]) -> list[HubProcess]:
    """Two hub processes on one database on PostgreSQL; one hub on SQLite (one writer)."""
    if engine is None:
        return [make_hub()]
    token = {"AGENTPOST_ADMIN_TOKEN": "admin-of-both"}
    return [make_hub("a", env=token), make_hub("b", env=token)]


def test_done_when(two_hubs: list[HubProcess], tmp_path: Path) -> None:
    hubs = two_hubs
    s = make_setup(hubs[0], ["alice"], ["budicek", "buddy"])
    urls = [h.url for h in hubs]
    budicek = s.tokens["budicek"]

    # Six concurrent `thread ensure` make one thread.
    ensure = ["thread", "ensure", "buddy", "-w", "acme", "--owner", "buddy", "--json"]
    ensures = [spawn(urls[i % len(urls)], budicek, *ensure) for i in range(6)]
    made = [ok(finish(p)) for p in ensures]
    assert len({m["thread_id"] for m in made}) == 1
    assert [m["created"] for m in made].count(True) == 1
    assert {(m["name"], m["owner"], m["workspace"]) for m in made} == {("buddy", "buddy", "acme")}
    thread = made[0]["thread_id"]
    with hubs[-1].client(s.tokens["buddy"]) as c:
        rooms = c.get("/v1/workspaces/acme/rooms").json()["rooms"]
    assert [r["id"] for r in rooms if r["name"] == "buddy"] == [thread]

    # Two separate `thread send` processes with one key: one message, same ids.
    wake = tmp_path / "wake.txt"
    wake.write_text("budíček: úkol doběhl\n")
    args = ["thread", "send", thread, "--idempotency-key", "wake-7", "--message-file", str(wake)]
    both = [spawn(urls[i % len(urls)], budicek, *args, "--json") for i in range(2)]
    first, second = (ok(finish(p)) for p in both)
    assert set(first) == {"thread_id", "message_id", "command_id", "delivery"}
    assert (first["message_id"], first["command_id"]) == (
        second["message_id"],
        second["command_id"],
    )
    assert sorted([first["delivery"], second["delivery"]]) == ["replayed", "sent"]
    assert first["thread_id"] == thread and first["command_id"].startswith("cmd_")
    assert [e["text"] for e in events(hubs[0], budicek, thread)] == ["budíček: úkol doběhl"]

    # The same key with another text: exit 1 idempotency_conflict, nothing sent.
    other = send(urls[-1], budicek, thread, "-k", "wake-7", "--text", "something else")
    refused(other, "idempotency_conflict", 1, False)
    assert len(events(hubs[0], budicek, thread)) == 1

    # After archiving, a repeat still reports the delivery and sends nothing.
    ok(cli(urls[0], budicek, "thread", "archive", thread, "--json"))
    repeat = ok(send(urls[-1], budicek, thread, "-k", "wake-7", "--message-file", str(wake)))
    assert (repeat["message_id"], repeat["command_id"]) == (
        first["message_id"],
        first["command_id"],
    )
    assert repeat["delivery"] == "replayed"  # the hub checks the key before the archive
    assert len(events(hubs[0], budicek, thread)) == 1

    # The hub down: exit 3, hub_unreachable.
    for h in hubs:
        h.stop()
    down = send(urls[0], budicek, thread, "-k", "wake-8", "--text", "later")
    refused(down, "hub_unreachable", 3, True)


def test_failures_map_to_codes_and_leave_the_key_unused(setup: Setup, tmp_path: Path) -> None:
    url, alice, carol = setup.hub.url, setup.tokens["alice"], setup.tokens["carol"]
    thread = thread_for(setup, "alice", "alice-home")

    # Empty message (blank after trimming): a blank --text is a command line that does not
    # parse, as for `post` and `mail send` (docs/cli.md rule 4); an empty file is refused.
    refused(send(url, alice, thread, "-k", "k1", "--text", "  \n"), "usage_error", 2, False)
    empty = tmp_path / "empty.txt"
    empty.write_text("\n")
    refused(
        send(url, alice, thread, "-k", "k1", "--message-file", str(empty)),
        "invalid_request",
        1,
        False,
    )
    # Unreadable --message-file: missing, a directory, not UTF-8.
    refused(
        send(url, alice, thread, "-k", "k1", "--message-file", str(tmp_path / "missing.txt")),
        "invalid_request",
        1,
        False,
    )
    refused(
        send(url, alice, thread, "-k", "k1", "--message-file", str(tmp_path)),
        "invalid_request",
        1,
        False,
    )
    latin = tmp_path / "latin1.txt"
    latin.write_bytes("café".encode("latin-1"))
    refused(
        send(url, alice, thread, "-k", "k1", "--message-file", str(latin)),
        "invalid_request",
        1,
        False,
    )
    # Neither or both of --text and --message-file: usage errors (rule 4).
    refused(send(url, alice, thread, "-k", "k1"), "usage_error", 2, False)
    refused(
        send(url, alice, thread, "-k", "k1", "--text", "a", "--message-file", str(latin)),
        "usage_error",
        2,
        False,
    )
    # A key over 255 bytes.
    refused(send(url, alice, thread, "-k", "é" * 128, "--text", "hi"), "invalid_request", 1, False)
    # A thread id that is a channel: nothing posted into the channel.
    refused(send(url, alice, setup.room, "-k", "k1", "--text", "hi"), "thread_not_found", 1, False)
    refused(
        send(url, alice, "rm_nothing", "-k", "k1", "--text", "hi"), "thread_not_found", 1, False
    )
    assert events(setup.hub, alice, setup.room) == []
    # A token that is not a participant, and a token that is not a member at all.
    refused(send(url, carol, thread, "-k", "k1", "--text", "hi"), "permission_denied", 1, False)
    refused(
        send(url, "ap_bogus", thread, "-k", "k1", "--text", "hi"), "permission_denied", 1, False
    )
    # No token at all: a configuration mistake, final until AGENTPOST_TOKEN is set.
    refused(send(url, None, thread, "-k", "k1", "--text", "hi"), "not_configured", 1, False)
    # An archived thread.
    ok(cli(url, alice, "thread", "archive", thread, "--json"))
    refused(send(url, alice, thread, "-k", "k1", "--text", "hi"), "thread_not_sendable", 1, False)
    assert events(setup.hub, alice, thread) == []

    # None of those spent k1: it sends now, from stdin.
    ok(cli(url, alice, "thread", "unarchive", thread, "--json"))
    sent = ok(send(url, alice, thread, "-k", "k1", "--message-file", "-", stdin="hi\n"))
    assert sent["delivery"] == "sent"
    assert [e["text"] for e in events(setup.hub, alice, thread)] == ["hi"]
    # carol's refusal did not spend her key either (keys are per sender).
    ok(
        cli(
            url,
            carol,
            "thread",
            "ensure",
            "alice-home",
            "-w",
            setup.workspace,
            "--owner",
            "alice",
            "--json",
        )
    )
    assert ok(send(url, carol, thread, "-k", "k1", "--text", "hi"))["delivery"] == "sent"


def test_without_a_key_each_run_sends_and_acting_for_scopes_the_key(setup: Setup) -> None:
    url, alice = setup.hub.url, setup.tokens["alice"]
    thread = thread_for(setup, "alice", "alice-home")
    a = ok(send(url, alice, thread, "--text", "ping"))
    b = ok(send(url, alice, thread, "--text", "ping"))
    assert a["message_id"] != b["message_id"] and a["command_id"] != b["command_id"]
    mine = ok(send(url, alice, thread, "-k", "w", "--text", "x"))
    for_bot = ok(
        send(url, alice, thread, "-k", "w", "--text", "x", env={"AGENTPOST_ACTING_FOR": "bot"})
    )
    again = ok(
        send(url, alice, thread, "-k", "w", "--text", "x", env={"AGENTPOST_ACTING_FOR": "bot"})
    )
    assert mine["command_id"] != for_bot["command_id"] == again["command_id"]
    assert (for_bot["delivery"], again["delivery"]) == ("sent", "replayed")
    assert len(events(setup.hub, alice, thread)) == 4


def test_a_sender_who_left_the_thread_learns_its_delivery(setup: Setup) -> None:
    """The hub would replay the key, but the thread is no longer visible to the sender: the
    CLI reads the send state and prints `delivered` with the first message."""
    url, alice, bot = setup.hub.url, setup.tokens["alice"], setup.tokens["bot"]
    thread = thread_for(setup, "alice", "alice-home")
    ws = setup.workspace
    ok(cli(url, bot, "thread", "ensure", "alice-home", "-w", ws, "--owner", "alice", "--json"))
    first = ok(send(url, bot, thread, "-k", "report-1", "--text", "done"))
    with setup.hub.client(alice) as c:
        assert c.delete(f"/v1/rooms/{thread}/participants/bot").status_code == 200
    again = ok(send(url, bot, thread, "-k", "report-1", "--text", "done"))
    assert again == {**first, "delivery": "delivered"}
    refused(
        send(url, bot, thread, "-k", "report-1", "--text", "other"),
        "idempotency_conflict",
        1,
        False,
    )
    refused(
        send(url, bot, thread, "-k", "report-2", "--text", "done"), "permission_denied", 1, False
    )
    assert len(events(setup.hub, alice, thread)) == 1


class _Relay(BaseHTTPRequestHandler):
    """A stand-in in front of the hub: answers 500 to everything, or forwards everything
    but cuts the connection after the hub answered a post (the answer is lost)."""

    upstream = ""
    mode = "relay"  # "relay" | "500"
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:
        pass

    def _handle(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        if self.mode == "500":
            out = b'{"error":{"code":"internal","message":"internal error; it was logged"}}'
            self.send_response(500)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)
            return
        keep = {"authorization", "content-type", "idempotency-key"}
        headers = {k: v for k, v in self.headers.items() if k.lower() in keep}
        r = httpx.request(
            self.command, self.upstream + self.path, headers=headers, content=body, timeout=10
        )
        if self.command == "POST" and self.path.endswith("/messages"):
            self.close_connection = True  # the hub committed; its answer never arrives
            return
        self.send_response(r.status_code)
        for name in ("content-type", "idempotency-status"):
            if name in r.headers:
                self.send_header(name, r.headers[name])
        self.send_header("Content-Length", str(len(r.content)))
        self.end_headers()
        self.wfile.write(r.content)

    do_GET = do_POST = _handle


@contextmanager
def relay(upstream: str, mode: str) -> Iterator[str]:
    handler = type("Relay", (_Relay,), {"upstream": upstream, "mode": mode})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        t.join()


def test_a_hub_answering_5xx_is_retryable(setup: Setup) -> None:
    thread = thread_for(setup, "alice", "alice-home")
    with relay(setup.hub.url, "500") as url:
        refused(
            send(url, setup.tokens["alice"], thread, "-k", "k", "--text", "hi"),
            "hub_error",
            75,
            True,
        )
        refused(
            cli(
                url, setup.tokens["alice"], "thread", "ensure", "x", "-w", setup.workspace, "--json"
            ),
            "internal",
            75,
            True,
        )
    assert events(setup.hub, setup.tokens["alice"], thread) == []


def test_an_answer_lost_after_the_commit_is_learned_as_delivered(setup: Setup) -> None:
    alice = setup.tokens["alice"]
    thread = thread_for(setup, "alice", "alice-home")
    with relay(setup.hub.url, "relay") as url:
        first = ok(send(url, alice, thread, "-k", "cut-1", "--text", "wake"))
        assert first["delivery"] == "delivered"
        # The same key with other text learns the conflict from the record too.
        refused(
            send(url, alice, thread, "-k", "cut-1", "--text", "other"),
            "idempotency_conflict",
            1,
            False,
        )
    direct = ok(send(setup.hub.url, alice, thread, "-k", "cut-1", "--text", "wake"))
    assert direct == {**first, "delivery": "replayed"}
    assert [e["id"] for e in events(setup.hub, alice, thread)] == [first["message_id"]]


def test_a_hub_crash_after_the_commit_then_the_same_command_reports_the_delivery(
    make_hub: Callable[..., HubProcess],
) -> None:
    hub = make_hub()
    s = make_setup(hub, ["alice"], ["bot"])
    thread = thread_for(s, "bot", "bot-home")
    hub.stop()
    crashing = make_hub(env={"AGENTPOST_CRASH_POINT": "after_commit"})
    cut = send(crashing.url, s.tokens["bot"], thread, "-k", "wake-1", "--text", "wake")
    assert crashing.wait_exit() == 137  # it committed, then died before answering
    # No answer and no record reachable: the outcome is unknown, so retry (never exit 1).
    refused(cut, "request_failed", 75, True)
    restarted = make_hub()
    again = ok(send(restarted.url, s.tokens["bot"], thread, "-k", "wake-1", "--text", "wake"))
    assert again["delivery"] == "replayed"
    assert [e["id"] for e in events(restarted, s.tokens["bot"], thread)] == [again["message_id"]]


def test_capabilities_adds_the_cli_flags(setup: Setup) -> None:
    caps = ok(cli(setup.hub.url, None, "capabilities", "--json"))
    assert caps["room_post_idempotency"]["header"] == "Idempotency-Key"
    assert "threads" in caps["features"]
    for flag in ("thread_send_idempotency", "thread_send_outcome", "thread_ensure"):
        assert caps[flag] is True


def test_the_docs_table_is_the_clients_codes() -> None:
    from agentpost.client import SEND_CODES

    doc = (Path(__file__).parents[2] / "docs" / "threads.md").read_text()
    rows = {}
    for line in doc.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 4 and cells[0].startswith("`"):
            rows[cells[0].strip("`")] = (int(cells[2]), cells[3])
    expected = {}
    for c in SEND_CODES:
        exit_code = 3 if c.code == "hub_unreachable" else 75 if c.retryable else 1
        expected[c.code] = (exit_code, c.key)
    expected["usage_error"] = (2, "unused")  # the CLI's own: nothing is sent (docs/cli.md)
    assert rows == expected


def test_a_refusal_for_content_spends_the_key(setup: Setup) -> None:
    url, alice = setup.hub.url, setup.tokens["alice"]
    thread = thread_for(setup, "alice", "alice-home")
    with setup.hub.client(alice) as c:
        r = c.patch(f"/v1/rooms/{thread}", json={"sensitive_filter": True})
        assert r.status_code == 200, r.text
    secret = "the key is AKIA" + "ABCDEFGHIJKLMNOP"
    refused(send(url, alice, thread, "-k", "leak", "--text", secret), "command_rejected", 1, False)
    # Spent: the same command again is rejected again, and other text is a conflict.
    refused(send(url, alice, thread, "-k", "leak", "--text", secret), "command_rejected", 1, False)
    refused(
        send(url, alice, thread, "-k", "leak", "--text", "clean"), "idempotency_conflict", 1, False
    )
    assert events(setup.hub, alice, thread) == []
    # A new key sends the clean text.
    assert ok(send(url, alice, thread, "-k", "leak-2", "--text", "clean"))["delivery"] == "sent"
