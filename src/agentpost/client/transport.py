"""`PooledTransport`: the HTTP/1.1 transport under `AsyncHubClient` — asyncio streams,
keep-alive connections reused newest first, responses parsed by httptools (C).

Why not httpcore's pool: per request it scans every pooled connection (a socket-readable
probe and anyio attribute lookups each), and without sniffio it retries a failed import on
every call; for the Worker's many small keyed posts that was most of its CPU (measured in
bench/HISTORY.md). This transport does what the hub's client needs and no more: http and
https, request bodies sent with their headers in one write when small, streamed responses
(SSE, downloads), httpx's timeouts, and every failure as an `httpx.TransportError`.

A reused connection that the hub closed meanwhile (its keep-alive timer) is skipped when
that is already visible; if it only shows as an answer-less EOF, the request is sent again
on a fresh connection only when resending cannot post twice (GET, or a keyed request).
If that fresh connection cannot be made, the failure says the request may have been received
(never "cannot connect", which tells callers nothing was sent).
"""

from __future__ import annotations

import asyncio
import os
import socket
import ssl
from collections.abc import AsyncIterator
from typing import Any

import httptools
import httpx

SMALL_BODY = 256 * 1024
READ_SIZE = 65536
MAX_IDLE = 64
_SAFE_TO_RESEND = (b"GET", b"HEAD", b"OPTIONS")


class _Stale(Exception):
    """A reused connection ended before any byte of the answer."""


class _Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.reused = False

    def usable(self) -> bool:
        return not (self.reader.at_eof() or self.writer.is_closing() or self.reader._buffer)  # type: ignore[attr-defined]

    def close(self) -> None:
        self.writer.close()


class _Parsed:
    """httptools callbacks for one response."""

    def __init__(self) -> None:
        self.headers: list[tuple[bytes, bytes]] = []
        self.headers_done = False
        self.complete = False
        self.keep_alive = False
        self.chunks: list[bytes] = []
        self.parser: Any = None

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name, value))

    def on_headers_complete(self) -> None:
        self.headers_done = True

    def on_body(self, body: bytes) -> None:
        self.chunks.append(body)

    def on_message_complete(self) -> None:
        # Asked now: once this callback returns, the parser resets for the next message.
        self.keep_alive = bool(self.parser.should_keep_alive())
        self.complete = True


def _timeouts(request: httpx.Request) -> dict[str, float | None]:
    t: dict[str, float | None] = request.extensions.get("timeout", {})
    return t


class _Body(httpx.AsyncByteStream):
    """A response body read from the connection as it is iterated; the connection goes back
    to the pool once the answer is complete and the hub keeps it alive."""

    def __init__(
        self,
        pool: PooledTransport,
        key: tuple[str, str, int],
        conn: _Connection,
        parser: Any,
        parsed: _Parsed,
        read_timeout: float | None,
    ) -> None:
        self._pool = pool
        self._key = key
        self._conn: _Connection | None = conn
        self._parser = parser
        self._parsed = parsed
        self._read_timeout = read_timeout

    async def __aiter__(self) -> AsyncIterator[bytes]:
        p = self._parsed
        while True:
            if p.chunks:
                chunks, p.chunks = p.chunks, []
                for c in chunks:
                    yield c
            if p.complete:
                self._release()
                return
            if self._conn is None:
                raise httpx.ReadError("the response was closed")
            data = await _read(self._conn, self._read_timeout)
            if not data:
                self._drop()
                raise httpx.RemoteProtocolError("the hub closed the connection mid-response")
            _feed(self._parser, data)

    def _release(self) -> None:
        conn, self._conn = self._conn, None
        if conn is None:
            return
        if self._parsed.keep_alive and conn.usable():
            self._pool._put(self._key, conn)
        else:
            conn.close()

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    async def aclose(self) -> None:
        if self._parsed.complete and not self._parsed.chunks:
            self._release()
        else:  # closed before its end: the rest of the answer is still on the wire
            self._drop()


async def _read(conn: _Connection, timeout: float | None) -> bytes:
    try:
        if timeout is None:
            return await conn.reader.read(READ_SIZE)
        async with asyncio.timeout(timeout):
            return await conn.reader.read(READ_SIZE)
    except TimeoutError:
        conn.close()
        raise httpx.ReadTimeout(f"no answer within {timeout} s") from None
    except (OSError, ConnectionError) as exc:
        conn.close()
        raise httpx.ReadError(plain(exc)) from exc


def plain(exc: BaseException) -> str:
    """An OS or TLS error in words (`connection refused`), not a Python repr."""
    if isinstance(exc, ssl.SSLError):
        return f"TLS failed ({exc.reason or exc.strerror or type(exc).__name__})"
    if isinstance(exc, OSError) and exc.errno:
        return os.strerror(exc.errno).lower()  # "connection refused", not the call's repr
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror.lower()
    return str(exc) or type(exc).__name__


def _feed(parser: Any, data: bytes) -> None:
    try:
        parser.feed_data(data)
    except httptools.HttpParserUpgrade:
        raise httpx.RemoteProtocolError("unexpected protocol upgrade") from None
    except httptools.HttpParserError as exc:
        raise httpx.RemoteProtocolError(f"malformed response: {exc}") from exc


class PooledTransport(httpx.AsyncBaseTransport):
    def __init__(self, ssl_context: ssl.SSLContext | None = None) -> None:
        self._idle: dict[tuple[str, str, int], list[_Connection]] = {}
        self._ssl = ssl_context
        self._closed = False

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if self._closed:
            raise httpx.ConnectError("the client is closed")
        url = request.url
        scheme = url.scheme
        if scheme not in ("http", "https"):
            raise httpx.UnsupportedProtocol(f"no transport for {scheme!r} URLs")
        port = url.port or (443 if scheme == "https" else 80)
        key = (scheme, url.host, port)
        head, body, chunks = await _encode(request)
        resendable = request.method.encode() in _SAFE_TO_RESEND or (
            "idempotency-key" in request.headers and chunks is None
        )
        timeouts = _timeouts(request)
        maybe_sent = False
        while True:
            conn = self._take(key)
            if conn is None:
                try:
                    conn = await self._open(key, timeouts.get("connect"))
                except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
                    if not maybe_sent:
                        raise
                    # The first try went out on a connection that then died unanswered: the
                    # hub may have taken it. "Could not connect" would say nothing was sent.
                    raise httpx.RemoteProtocolError(
                        "the hub closed the connection without answering and then could not"
                        f" be reached again ({exc}): the request may have been received"
                    ) from exc
            try:
                return await self._exchange(key, conn, request, head, body, chunks, timeouts)
            except _Stale:
                if not resendable:
                    raise httpx.RemoteProtocolError(
                        "the hub closed a kept-alive connection before answering"
                    ) from None
                maybe_sent = True
                continue  # the next try takes a fresh connection unless another is idle

    async def _exchange(
        self,
        key: tuple[str, str, int],
        conn: _Connection,
        request: httpx.Request,
        head: bytes,
        body: bytes,
        chunks: AsyncIterator[bytes] | None,
        timeouts: dict[str, float | None],
    ) -> httpx.Response:
        reused = conn.reused
        conn.reused = True
        try:
            await _send(conn, head + body, chunks, timeouts.get("write"))
        except httpx.WriteError:
            if reused:
                raise _Stale() from None
            raise
        parsed = _Parsed()
        parser = parsed.parser = httptools.HttpResponseParser(parsed)
        read_timeout = timeouts.get("read")
        first = True
        while not parsed.headers_done:
            try:
                data = await _read(conn, read_timeout)
            except httpx.ReadError:
                if first and reused:
                    raise _Stale() from None
                raise
            if not data:
                conn.close()
                if first and reused:
                    raise _Stale()
                raise httpx.RemoteProtocolError("the hub closed the connection without an answer")
            first = False
            try:
                _feed(parser, data)
            except httpx.RemoteProtocolError:
                conn.close()
                raise
        if request.method == "HEAD":
            parsed.complete = True
        stream = _Body(self, key, conn, parser, parsed, read_timeout)
        return httpx.Response(
            parser.get_status_code(),
            headers=parsed.headers,
            stream=stream,
            extensions={"http_version": b"HTTP/1.1"},
        )

    def _take(self, key: tuple[str, str, int]) -> _Connection | None:
        idle = self._idle.get(key)
        while idle:
            conn = idle.pop()
            if conn.usable():
                return conn
            conn.close()
        return None

    def _put(self, key: tuple[str, str, int], conn: _Connection) -> None:
        if self._closed:
            conn.close()
            return
        idle = self._idle.setdefault(key, [])
        idle.append(conn)
        if len(idle) > MAX_IDLE:
            idle.pop(0).close()

    async def _open(self, key: tuple[str, str, int], timeout: float | None) -> _Connection:
        scheme, host, port = key
        ctx: ssl.SSLContext | None = None
        if scheme == "https":
            ctx = self._ssl or ssl.create_default_context()
        try:
            async with asyncio.timeout(timeout):
                reader, writer = await asyncio.open_connection(
                    host, port, ssl=ctx, limit=READ_SIZE * 4
                )
        except TimeoutError:
            raise httpx.ConnectTimeout(
                f"no connection to {host}:{port} within {timeout} s"
            ) from None
        except socket.gaierror as exc:  # "unknown error -2" is a name that does not resolve
            raise httpx.ConnectError(
                f"cannot resolve host {host}: check AGENTPOST_HUB (or --hub)"
            ) from exc
        except (OSError, ssl.SSLError) as exc:
            raise httpx.ConnectError(f"cannot connect to {host}:{port}: {plain(exc)}") from exc
        return _Connection(reader, writer)

    async def aclose(self) -> None:
        self._closed = True
        for idle in self._idle.values():
            for conn in idle:
                conn.close()
        self._idle.clear()


async def _encode(request: httpx.Request) -> tuple[bytes, bytes, AsyncIterator[bytes] | None]:
    """The request head, and either its whole body (small, or of known small length) or an
    iterator of its chunks (large or of unknown length: sent chunked or as they come)."""
    target = request.url.raw_path
    lines = [request.method.encode(), b" ", target, b" HTTP/1.1\r\n"]
    for name, value in request.headers.raw:
        lines += [name, b": ", value, b"\r\n"]
    lines.append(b"\r\n")
    head = b"".join(lines)
    length = request.headers.get("content-length")
    chunked = request.headers.get("transfer-encoding", "").lower() == "chunked"
    if not chunked and (length is None or int(length) <= SMALL_BODY):
        body = b"".join([c async for c in request.stream])  # type: ignore[union-attr]
        return head, body, None
    stream: AsyncIterator[bytes] = request.stream.__aiter__()  # type: ignore[union-attr]
    return head, b"", _chunked(stream) if chunked else stream


async def _chunked(stream: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    async for c in stream:
        if c:
            yield b"%x\r\n%s\r\n" % (len(c), c)
    yield b"0\r\n\r\n"


async def _send(
    conn: _Connection, data: bytes, chunks: AsyncIterator[bytes] | None, timeout: float | None
) -> None:
    try:
        async with asyncio.timeout(timeout):
            conn.writer.write(data)
            if chunks is not None:
                async for c in chunks:
                    conn.writer.write(c)
                    await conn.writer.drain()
            await conn.writer.drain()
    except TimeoutError:
        conn.close()
        raise httpx.WriteTimeout(f"the request was not sent within {timeout} s") from None
    except (OSError, ConnectionError) as exc:
        conn.close()
        raise httpx.WriteError(plain(exc)) from exc
