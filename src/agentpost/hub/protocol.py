"""uvicorn's HTTP/1.1 protocols with the hub's JSON error for a request that cannot even be
parsed (a control character in a header, a broken request line): 400 `invalid_request` in
the body every refusal has (docs/api.md), instead of uvicorn's plain text.

Only the answer changes, and only on that path: the parser, the app and keep-alive are
uvicorn's. Such a request never reached the app, so nothing was done; the connection is
closed after the answer, since the parser's place in the byte stream is lost.
"""

from __future__ import annotations

import asyncio
import importlib.util

import h11
import msgspec
from uvicorn.protocols.http.h11_impl import H11Protocol

from agentpost.core.errors import AgentpostError, Code

MALFORMED = AgentpostError(
    Code.INVALID_REQUEST,
    "malformed HTTP request (a header with a control character, a bad request line, …);"
    " nothing was done",
)
_BODY = msgspec.json.encode(MALFORMED.body())
_HEADERS = [
    (b"content-type", b"application/json"),
    (b"content-length", str(len(_BODY)).encode("ascii")),
    (b"connection", b"close"),
]


class H11JsonErrors(H11Protocol):
    def send_400_response(self, msg: str) -> None:
        event = h11.Response(status_code=400, headers=_HEADERS, reason=b"Bad Request")
        out = self.conn.send(event) or b""
        out += self.conn.send(h11.Data(data=_BODY)) or b""
        out += self.conn.send(h11.EndOfMessage()) or b""
        self.transport.write(out)
        self.transport.close()


def protocol_class() -> type[asyncio.Protocol]:
    """httptools where uvicorn[standard] brought it (faster), else h11; both answer JSON."""
    if importlib.util.find_spec("httptools") is None:
        return H11JsonErrors
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    class HttpToolsJsonErrors(HttpToolsProtocol):
        def send_400_response(self, msg: str) -> None:
            head = [b"HTTP/1.1 400 Bad Request\r\n"]
            for name, value in [*self.server_state.default_headers, *_HEADERS]:
                head += [name, b": ", value, b"\r\n"]
            self.transport.write(b"".join([*head, b"\r\n", _BODY]))
            self.transport.close()

    return HttpToolsJsonErrors
