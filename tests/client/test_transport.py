"""The client's HTTP/1.1 transport against a real hub: kept-alive connections reused,
large bodies both ways, streams, and every failure a `HubUnreachable` (retryable). A
reused connection that dies before answering is resent only when that cannot post twice;
the death is provoked by a small real TCP proxy in front of the real hub."""

from __future__ import annotations

import asyncio
import hashlib
import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentpost.client import AsyncHubClient, HubUnreachable
from agentpost.client.transport import PooledTransport
from hubproc import HubProcess, Setup, make_setup


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    hub = HubProcess(tmp_path_factory.mktemp("transport") / "hub").start()
    try:
        yield make_setup(hub, ["alice"], ["bot"])
    finally:
        hub.stop()


class CountingTransport(PooledTransport):
    """The real transport, counting the connections it opens."""

    def __init__(self) -> None:
        super().__init__()
        self.opened = 0

    async def _open(self, key, timeout):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN202
        self.opened += 1
        return await super()._open(key, timeout)


class CuttingProxy:
    """Relays one client connection to the hub; with `cut_second`, the connection is closed
    when its second request starts, before it reaches the hub (as when the hub's keep-alive
    timer fires just as the client reuses the connection). `silent` answers nothing."""

    def __init__(self, hub_url: str, cut_second: bool = False, silent: bool = False) -> None:
        host, port = hub_url.removeprefix("http://").split(":")
        self.upstream = (host, int(port))
        self.cut_second = cut_second
        self.silent = silent
        self.connections = 0
        self.cut = 0
        self.writers: list[asyncio.StreamWriter] = []

    async def start(self) -> str:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self.server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    async def _serve(self, cr: asyncio.StreamReader, cw: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.writers.append(cw)
        if self.silent:
            await cr.read()  # never answers; ends when the client gives up
            cw.close()
            return
        ur, uw = await asyncio.open_connection(*self.upstream)
        self.writers.append(uw)
        answered = asyncio.Event()

        async def down() -> None:
            while data := await ur.read(65536):
                cw.write(data)
                await cw.drain()
                answered.set()
            cw.close()

        relay = asyncio.ensure_future(down())
        try:
            while data := await cr.read(65536):
                if self.cut_second and answered.is_set():
                    self.cut += 1
                    break  # the second request: dropped unanswered
                uw.write(data)
                await uw.drain()
        finally:
            relay.cancel()
            uw.close()
            cw.close()

    async def aclose(self) -> None:
        self.server.close()
        for w in self.writers:
            w.close()
        for w in self.writers:
            try:
                await w.wait_closed()
            except OSError:
                pass
        await self.server.wait_closed()


def run(coro):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN201
    return asyncio.run(coro)


def test_requests_one_after_another_share_one_connection(setup: Setup) -> None:
    async def go() -> int:
        t = CountingTransport()
        async with AsyncHubClient(setup.hub.url, setup.tokens["bot"], transport=t) as c:
            for i in range(20):
                await c.post_message(setup.room, f"kept alive {i}", key=f"ka-{os.getpid()}-{i}")
                await c.capabilities()
        return t.opened

    assert run(go()) == 1


def test_concurrent_requests_open_at_most_one_connection_each(setup: Setup) -> None:
    async def go() -> int:
        t = CountingTransport()
        async with AsyncHubClient(setup.hub.url, setup.tokens["bot"], transport=t) as c:
            for _ in range(3):
                await asyncio.gather(*(c.capabilities() for _ in range(8)))
        return t.opened

    assert 1 <= run(go()) <= 8


def test_a_large_upload_and_download_arrive_byte_for_byte(setup: Setup, tmp_path: Path) -> None:
    data = os.urandom(700_000)  # over the transport's small-body size: sent as it is read
    src = tmp_path / "big.bin"
    src.write_bytes(data)

    async def go() -> bytes:
        async with AsyncHubClient(setup.hub.url, setup.tokens["bot"]) as c:
            res = await c.upload(setup.room, src, key=f"big-{os.getpid()}")
            assert res.media is not None and res.idempotency_status == "created"
            dest = tmp_path / "back.bin"
            await c.download(res.media.id, dest, len(data))
            again = await c.upload(setup.room, src, key=f"big-{os.getpid()}")
            assert again.idempotency_status == "replayed"
            return dest.read_bytes()

    assert hashlib.sha256(run(go())).hexdigest() == hashlib.sha256(data).hexdigest()


def test_an_inbox_stream_delivers_events_as_they_are_posted(setup: Setup) -> None:
    async def go() -> str:
        async with (
            AsyncHubClient(setup.hub.url, setup.tokens["bot"]) as bot,
            AsyncHubClient(setup.hub.url, setup.tokens["alice"]) as alice,
        ):
            start = (await bot.inbox(wait=0)).cursor
            stream = bot.inbox_stream(after=start)
            first = asyncio.ensure_future(stream.__anext__())
            await alice.post_message(setup.room, "@bot streamed to you")
            item = await asyncio.wait_for(first, 20)
            await stream.aclose()  # type: ignore[attr-defined]
            return item.event.text

    assert run(go()) == "@bot streamed to you"


def test_a_kept_alive_connection_cut_before_answering_resends_a_keyed_post_once(
    setup: Setup,
) -> None:
    async def go() -> tuple[int, int, int]:
        proxy = CuttingProxy(setup.hub.url, cut_second=True)
        url = await proxy.start()
        key = f"cut-{os.getpid()}"
        try:
            async with AsyncHubClient(url, setup.tokens["bot"]) as c:
                await c.capabilities()  # opens the connection, answered
                res = await c.post_message(setup.room, "sent over a fresh connection", key=key)
                assert res.idempotency_status == "created"
                await c.capabilities()  # the next one's second request is cut too: resent
        finally:
            await proxy.aclose()
        async with AsyncHubClient(setup.hub.url, setup.tokens["alice"]) as a:
            evs = await a.events(setup.room, limit=1000)
        return (
            proxy.cut,
            proxy.connections,
            sum(e.text == "sent over a fresh connection" for e in evs),
        )

    cut, connections, posted = run(go())
    assert (cut, connections, posted) == (2, 3, 1)


def test_an_unkeyed_post_on_a_cut_connection_is_not_resent(setup: Setup) -> None:
    async def go() -> tuple[HubUnreachable, int]:
        proxy = CuttingProxy(setup.hub.url, cut_second=True)
        url = await proxy.start()
        try:
            async with AsyncHubClient(url, setup.tokens["bot"]) as c:
                await c.capabilities()
                with pytest.raises(HubUnreachable) as err:
                    await c.post_message(setup.room, "no key, so never sent twice")
        finally:
            await proxy.aclose()
        return err.value, proxy.connections

    err, connections = run(go())
    assert err.retryable and connections == 1


def test_no_answer_within_the_timeout_is_hub_unreachable(setup: Setup) -> None:
    async def go() -> HubUnreachable:
        proxy = CuttingProxy(setup.hub.url, silent=True)
        url = await proxy.start()
        try:
            async with AsyncHubClient(url, setup.tokens["bot"], timeout=0.5) as c:
                with pytest.raises(HubUnreachable) as err:
                    await c.capabilities()
        finally:
            await proxy.aclose()
        return err.value

    message = run(go()).message
    assert "no answer within 0.5 s; nothing is known to have happened" in message, message


def test_nothing_listening_is_hub_unreachable() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, never listening: connections are refused

        async def go() -> HubUnreachable:
            async with AsyncHubClient(f"http://127.0.0.1:{port}", "t") as c:
                with pytest.raises(HubUnreachable) as err:
                    await c.capabilities()
            return err.value

        message = run(go()).message
        assert message.startswith(
            f"nothing listens at http://127.0.0.1:{port} (connection refused)"
        )
        assert "Error(" not in message  # words, not a Python repr
