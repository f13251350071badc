"""Slow readers: streams that never read must not make the hub hold their backlog in memory,
nor slow anyone else's requests (a stream's bytes in flight are bounded, docs/api.md).

The readers are raw sockets with a small receive buffer that send a request and then never
call `recv`: the hub can write at most a few kernel buffers to each, and everything else it
would have sent stays in the store. The hub's memory is read from /proc/<pid>/status of the
real hub process: `VmHWM` is its peak resident size, so a short burst counts too.
"""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from hubproc import HubProcess, make_setup, poll

EVENTS = 40  # ~40 MiB of room history: a reader from the start is 40 MiB behind
READERS_PER_MEMBER = 4
MEMBERS = ("alice", "carol", "dave")
BIG = "x" * 1_000_000  # metadata near the 1 MiB JSON cap
# The peak may grow by this much while every reader is open: ~10 MiB a reader (~3 MiB
# measured; without the bound each reader cost its whole backlog, ~1.5 GB in all).
RSS_GROWTH_BOUND_MB = 160
POST_BOUND_S = 2.0


def proc_status_kb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc/{pid}/status")


def open_streams(hub: HubProcess) -> float:
    with hub.client() as c:
        total = 0.0
        for line in c.get("/metrics").text.splitlines():
            if line.startswith("agentpost_open_streams{") and "inbox_poll" not in line:
                total += float(line.rsplit(" ", 1)[1])
        return total


@contextmanager
def never_reading(hub: HubProcess, path: str, token: str, n: int) -> Iterator[list[socket.socket]]:
    """`n` connections that ask for `path` as an SSE stream and then never read."""
    url = urlsplit(hub.url)
    socks: list[socket.socket] = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)
            s.connect((url.hostname, url.port))
            s.sendall(
                (
                    f"GET {path} HTTP/1.1\r\nHost: {url.netloc}\r\n"
                    f"Authorization: Bearer {token}\r\nAccept: text/event-stream\r\n"
                    "Last-Event-ID: 0\r\n\r\n"
                ).encode()
            )
            socks.append(s)
        yield socks
    finally:
        for s in socks:
            s.close()


def timed_post(c: httpx.Client, room: str, text: str) -> float:
    start = time.monotonic()
    r = c.post(f"/v1/rooms/{room}/messages", json={"text": text})
    assert r.status_code == 201, r.text
    return time.monotonic() - start


@pytest.mark.slow
def test_never_reading_streams_keep_hub_memory_bounded_and_posts_fast(
    make_hub: Callable[..., HubProcess],
) -> None:
    hub = make_hub()
    setup = make_setup(hub, ["alice", "carol", "dave"], ["bot"])
    assert hub.proc is not None
    pid = hub.proc.pid
    with hub.client(setup.tokens["alice"], timeout=60) as c:
        for i in range(EVENTS):
            # Each event wakes bot, so bot's inbox is as far behind as the room.
            r = c.post(
                f"/v1/rooms/{setup.room}/messages",
                json={"text": f"@bot big {i}", "metadata": {"blob": BIG}},
            )
            assert r.status_code == 201, r.text
    # Peak resident size from here on only (writing 5 to clear_refs resets VmHWM).
    Path(f"/proc/{pid}/clear_refs").write_text("5")
    before_kb = proc_status_kb(pid, "VmRSS")
    streams = len(MEMBERS) * READERS_PER_MEMBER + READERS_PER_MEMBER + 1
    room_path = f"/v1/rooms/{setup.room}/stream"
    with contextlib.ExitStack() as stack:
        for name in MEMBERS:
            stack.enter_context(
                never_reading(hub, room_path, setup.tokens[name], READERS_PER_MEMBER)
            )
        stack.enter_context(
            never_reading(hub, "/v1/inbox/stream", setup.tokens["bot"], READERS_PER_MEMBER)
        )
        # One more that stops reading after the headers, and reads everything at the end.
        late = stack.enter_context(hub.client(setup.tokens["carol"], timeout=60))
        paused = stack.enter_context(late.stream("GET", room_path))
        poll(lambda: open_streams(hub) >= streams, timeout=60)
        with hub.client(setup.tokens["alice"], timeout=60) as c:
            # While every reader sits on its full buffer, ordinary posts stay fast; each post
            # also wakes every stream of the room.
            slowest = max(timed_post(c, setup.room, f"ordinary {i}") for i in range(10))
            peak_kb = proc_status_kb(pid, "VmHWM")
            assert open_streams(hub) == streams  # the readers are still there, still stuck
        # Held back, not lost: the paused reader gets every event, in order, once it reads.
        seqs = []
        for line in paused.iter_lines():
            if line.startswith("id: "):
                seqs.append(int(line[4:]))
                if len(seqs) == EVENTS + 10:
                    break
        assert seqs == list(range(1, EVENTS + 11))
    growth_mb = (peak_kb - before_kb) / 1024
    seen = f"peak RSS grew {growth_mb:.0f} MB, slowest post {slowest:.2f} s"
    assert growth_mb < RSS_GROWTH_BOUND_MB, seen
    assert slowest < POST_BOUND_S, seen
