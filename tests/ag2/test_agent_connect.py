"""The unmodified ag2-agent-connect Worker (0.2.1: adapter `acp`, examples/echo_agent.py as
its agent) on our hub, on both engines (docs/ag2.md): it answers its owner once, with the
placeholder edited into the answer and a reply that wakes the owner; it refuses a guest
once, with its own notice; files go both ways; kill -9 of the Worker mid-Turn, or of the hub
mid-lease, still ends in one answer; two hub processes on one PostgreSQL serve one Worker."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from ag2run import Worker, events, inbox, post, said, setup_ag2, start_worker

from hubproc import HubProcess, Setup, poll


@pytest.fixture
def workers() -> Iterator[list[Worker]]:
    started: list[Worker] = []
    yield started
    for w in started:
        w.stop()


def _answers(hub: HubProcess, s: Setup, asked: dict[str, Any]) -> list[dict[str, Any]]:
    """The agent's replies to `asked` (its placeholder, edited, is one of them)."""
    return [
        e for e in said(hub, s.tokens["alice"], s.room, "bot") if e["in_reply_to"] == asked["id"]
    ]


def _answered(
    hub: HubProcess, s: Setup, asked: dict[str, Any], words: str, timeout: float = 90
) -> dict[str, Any]:
    def done() -> dict[str, Any] | None:
        found = [e for e in _answers(hub, s, asked) if words in e["text"]]
        return found[0] if found else None

    answer: dict[str, Any] = poll(done, timeout=timeout, interval=0.2)
    return answer


def _bot_woke(hub: HubProcess, token: str) -> list[dict[str, Any]]:
    return [e for e in inbox(hub, token) if e["sender"] == "bot"]


def test_owner_is_answered_once_in_the_edited_placeholder(
    hub: HubProcess, tmp_path: Path, workers: list[Worker]
) -> None:
    s = setup_ag2(hub)
    w = start_worker(hub.url, s.tokens["bot"], tmp_path)
    workers.append(w)
    asked = post(hub, s.tokens["alice"], s.room, "@bot hello there")
    answer = _answered(hub, s, asked, "echo:")
    assert answer["edited"] is True  # the "⏳ On it..." placeholder, edited into the answer
    assert "hello there" in answer["text"]
    poll(lambda: _done(hub, s, asked), timeout=30)
    assert [e["id"] for e in _answers(hub, s, asked)] == [answer["id"]]
    assert [e["id"] for e in _bot_woke(hub, s.tokens["alice"])] == [answer["id"]]
    assert "room ops off" not in w.output()


def _done(hub: HubProcess, s: Setup, asked: dict[str, Any]) -> bool:
    """The task is answered: the agent's wake-up is acknowledged past it."""
    with hub.client(s.tokens["bot"]) as c:
        return int(c.get("/v1/me").json()["inbox_cursor"]) >= 1


def test_guest_is_refused_once_with_the_worker_s_own_notice(
    hub: HubProcess, tmp_path: Path, workers: list[Worker]
) -> None:
    s = setup_ag2(hub)
    workers.append(start_worker(hub.url, s.tokens["bot"], tmp_path))
    asked = post(hub, s.tokens["carol"], s.room, "@bot do something for me")
    refusal = _answered(hub, s, asked, "I only answer my owner")
    poll(lambda: _done(hub, s, asked), timeout=30)
    assert [e["id"] for e in _answers(hub, s, asked)] == [refusal["id"]]
    assert [e["id"] for e in _bot_woke(hub, s.tokens["carol"])] == [refusal["id"]]
    assert "echo:" not in refusal["text"]  # the agent never ran


def test_a_file_each_way(hub: HubProcess, tmp_path: Path, workers: list[Worker]) -> None:
    s = setup_ag2(hub)
    w = start_worker(hub.url, s.tokens["bot"], tmp_path)
    workers.append(w)
    (w.repo / "notes.txt").write_text("the agent's notes\n")
    with hub.client(s.tokens["alice"]) as c:
        files = {"file": ("photo.png", b"\x89PNG\r\n\x1a\nnot really", "image/png")}
        up = c.post(f"/v1/rooms/{s.room}/media", files=files, data={"text": "@bot look"})
        assert up.status_code == 201, up.text
    inbound = up.json()["event"]
    # The Worker fetched the file with its bearer and told its agent about it.
    seen = _answered(hub, s, inbound, "echo:")
    # Fetched with the Worker's bearer: a file it could not fetch is "not readable" to it.
    assert "not readable" not in seen["text"] and "@bot look" in seen["text"]
    asked = post(hub, s.tokens["alice"], s.room, "@bot send [file:notes.txt]")

    def sent() -> list[dict[str, Any]]:
        return [
            e
            for e in said(hub, s.tokens["alice"], s.room, "bot")
            if e["type"] == "media" and e["attachments"][0]["name"] == "notes.txt"
        ]

    media = poll(sent, timeout=90, interval=0.2)
    with hub.client(s.tokens["alice"]) as c:
        got = c.get(f"/v1/media/{media[0]['attachments'][0]['id']}")
        assert got.content == b"the agent's notes\n"
    poll(lambda: len(_answers(hub, s, asked)) >= 2, timeout=60, interval=0.2)
    texts = [e["text"] for e in _answers(hub, s, asked)]
    assert texts[0].startswith("✅ Done") and "echo:" in texts[1]
    assert len(sent()) == 1
    assert "room ops off" not in w.output()


WORKER_KILL_LEASE = 3.0


def test_kill_9_of_the_worker_mid_turn_ends_in_one_answer(
    make_hub: Callable[..., HubProcess], tmp_path: Path, workers: list[Worker]
) -> None:
    """The Worker is killed mid-Turn and restarted on the same workspace (same journal):
    its lease runs out, the task is served again with the next attempt, and the new
    attempt's placeholder edits the first attempt's reply into the one answer.

    agent-connect's own poller guard would keep the restarted Worker standing by ~150 s
    (its predecessor's heartbeat must go stale; no setting shortens it). Here the test is
    the supervisor that knows the old Worker is gone: once the hub's lease window has run
    out with nobody polling — as it has after agent-connect's 150 s — it empties the dead
    Worker's guard record, as agent-connect's clean stop does. The hub sees what it sees
    after the standby: no poll until the lease is past, then the same Worker's poll."""
    hub = make_hub(env={"AGENTPOST_AG2_LEASE_SECONDS": str(WORKER_KILL_LEASE)})
    s = setup_ag2(hub)
    w = start_worker(hub.url, s.tokens["bot"], tmp_path)
    workers.append(w)
    asked = post(hub, s.tokens["alice"], s.room, "@bot sleep 10")
    placeholder = poll(lambda: _answers(hub, s, asked), timeout=60, interval=0.2)[0]
    w.kill()  # mid-Turn: the agent is asleep, its answer not given
    assert not [e for e in _answers(hub, s, asked) if "slept" in e["text"]]
    time.sleep(WORKER_KILL_LEASE + 1)  # the lease runs out while nobody polls
    w.release_guard()
    again = start_worker(hub.url, s.tokens["bot"], tmp_path, name="w2")
    workers.append(again)
    answer = _answered(hub, s, asked, "slept 10s", timeout=90)
    poll(lambda: _done(hub, s, asked), timeout=30)
    assert answer["id"] == placeholder["id"] and answer["edited"] is True
    assert [e["id"] for e in _answers(hub, s, asked)] == [answer["id"]]
    assert [e["id"] for e in _bot_woke(hub, s.tokens["alice"])] == [answer["id"]]
    assert "room ops off" not in w.output() + again.output()


SIGTERM_LEASE = 600.0


def test_sigterm_of_the_worker_mid_turn_and_a_restart_at_once_ends_in_one_answer(
    make_hub: Callable[..., HubProcess], tmp_path: Path, workers: list[Worker]
) -> None:
    """The Worker is stopped with SIGTERM mid-Turn and restarted at once on the same
    workspace, its guard released (as its clean stop does when its poll ends in time; else
    emptied here, as a supervisor may). The new Worker polls within the lease window, so the
    lease alone would keep the lost Turn's task reserved for as long as it polls; its
    heartbeat says it has nothing in hand (agent-connect drops its predecessor's ids on its
    second heartbeat, a minute in), and the hub serves the task again: one answer, in the
    first placeholder, long before the lease (10 minutes here) could run out."""
    hub = make_hub(env={"AGENTPOST_AG2_LEASE_SECONDS": str(SIGTERM_LEASE)})
    s = setup_ag2(hub)
    w = start_worker(hub.url, s.tokens["bot"], tmp_path)
    workers.append(w)
    asked = post(hub, s.tokens["alice"], s.room, "@bot sleep 8")
    placeholder = poll(lambda: _answers(hub, s, asked), timeout=60, interval=0.2)[0]
    start = time.monotonic()
    w.stop(grace=20.0)  # mid-Turn: agent-connect's SIGTERM, up to its 12 s stop budget
    assert not [e for e in _answers(hub, s, asked) if "slept" in e["text"]]
    w.release_guard()
    again = start_worker(hub.url, s.tokens["bot"], tmp_path, name="w2")
    workers.append(again)
    answer = _answered(hub, s, asked, "slept 8s", timeout=180)
    poll(lambda: _done(hub, s, asked), timeout=30)
    assert time.monotonic() - start < SIGTERM_LEASE / 3
    assert answer["id"] == placeholder["id"] and answer["edited"] is True
    assert [e["id"] for e in _answers(hub, s, asked)] == [answer["id"]]
    assert [e["id"] for e in _bot_woke(hub, s.tokens["alice"])] == [answer["id"]]
    assert "room ops off" not in w.output() + again.output()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_kill_9_of_the_hub_mid_lease_ends_in_one_answer(
    make_hub: Callable[..., HubProcess], tmp_path: Path, workers: list[Worker]
) -> None:
    hub = make_hub(extra_args=["--port", str(_free_port())])
    s = setup_ag2(hub)
    workers.append(start_worker(hub.url, s.tokens["bot"], tmp_path))
    asked = post(hub, s.tokens["alice"], s.room, "@bot sleep 6")
    poll(lambda: _answers(hub, s, asked), timeout=60, interval=0.2)  # leased, placeholder up
    hub.kill()
    hub.start()  # same data dir (or database), same port
    answer = _answered(hub, s, asked, "slept 6s", timeout=120)
    poll(lambda: _done(hub, s, asked), timeout=60)
    assert [e["id"] for e in _answers(hub, s, asked)] == [answer["id"]]
    assert [e["id"] for e in _bot_woke(hub, s.tokens["alice"])] == [answer["id"]]


class RoundRobin:
    """A TCP front for two hub processes, each new connection to the next one (urllib, the
    relay client's transport, opens one connection per request)."""

    def __init__(self, backends: list[str]) -> None:
        self.backends = [
            (u.split("//")[1].split(":")[0], int(u.rsplit(":", 1)[1])) for u in backends
        ]
        self.served = [0] * len(backends)
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        n = 0
        while True:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            i = n % len(self.backends)
            n += 1
            self.served[i] += 1
            try:
                upstream = socket.create_connection(self.backends[i])
            except OSError:
                client.close()
                continue
            threading.Thread(target=self._serve, args=(client, upstream), daemon=True).start()

    def _serve(self, client: socket.socket, upstream: socket.socket) -> None:
        """Both directions of one connection; both sockets closed when either side ends."""
        with client, upstream:
            back = threading.Thread(target=self._pipe, args=(upstream, client), daemon=True)
            back.start()
            self._pipe(client, upstream)
            back.join()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (src, dst):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        self.sock.close()


@pytest.mark.parametrize("engine", ["postgres"], indirect=True)
def test_two_hub_processes_on_postgres_serve_one_worker(
    make_hub: Callable[..., HubProcess], tmp_path: Path, workers: list[Worker]
) -> None:
    one, two = make_hub("one"), make_hub("two")
    s = setup_ag2(one)
    front = RoundRobin([one.url, two.url])
    try:
        workers.append(start_worker(front.url, s.tokens["bot"], tmp_path))
        asked = [
            post(two if i % 2 else one, s.tokens["alice"], s.room, f"@bot number {i}")
            for i in range(3)
        ]
        for i, a in enumerate(asked):
            _answered(one, s, a, f"number {i}")
        poll(lambda: len(_bot_woke(two, s.tokens["alice"])) == 3, timeout=60)
        for a in asked:
            assert len(_answers(two, s, a)) == 1
        assert all(front.served)  # both processes served the Worker
    finally:
        front.close()
    assert len(events(one, s.tokens["alice"], s.room)) == len(
        events(two, s.tokens["alice"], s.room)
    )
