"""The part every fake model server shares: a threaded HTTP server on a free loopback port,
a record of every request, and a script of answers chosen by the conversation."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Text:
    """Text the model says."""

    text: str


@dataclass(frozen=True)
class ToolCall:
    """A tool the model calls: `name` as the client named it, `args` its input."""

    name: str
    args: dict[str, Any]


Step = list[Text | ToolCall]


@dataclass
class Conversation:
    """What a request asked, in vendor-neutral words: the user's texts, the tool results
    the client sent back since the user last spoke (newest last), in how many rounds, and
    the tool names it offered, and the tools the model called since the user spoke."""

    user_texts: list[str]
    tool_results: list[str]
    tools: list[str]
    raw: dict[str, Any]
    rounds: int = 0
    called: list[str] = field(default_factory=list)

    @property
    def last_user(self) -> str:
        return self.user_texts[-1] if self.user_texts else ""


Script = Callable[[Conversation], Step]


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class FakeServer:
    """Serve `handle(method, path, headers, body) -> (status, headers, chunks)`; chunks
    are written and flushed one by one (a stream)."""

    script: Script
    delay: Callable[[Conversation], float] = lambda conv: 0.0
    requests: list[Recorded] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    _httpd: ThreadingHTTPServer | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        assert self._httpd is not None
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def conversations(self) -> list[Recorded]:
        with self._lock:
            return list(self.requests)

    def start(self) -> FakeServer:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body: Any = json.loads(raw) if raw else None
                except ValueError:
                    body = raw.decode("utf-8", "replace")
                rec = Recorded(self.command, self.path, dict(self.headers.items()), body)
                with fake._lock:
                    fake.requests.append(rec)
                try:
                    status, headers, chunks = fake.handle(rec)
                except Exception as exc:  # a bug in a fake: say it to the client plainly
                    fake.errors.append(repr(exc))
                    status, headers = 500, {"Content-Type": "application/json"}
                    chunks = [json.dumps({"error": {"message": f"fake: {exc!r}"}}).encode()]
                streaming = headers.get("Content-Type", "").startswith("text/event-stream")
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                if streaming:
                    self.send_header("Cache-Control", "no-cache")
                    self.send_header("Connection", "close")
                    self.end_headers()
                    for chunk in chunks:
                        self.wfile.write(chunk)
                        self.wfile.flush()
                    self.close_connection = True
                else:
                    data = b"".join(chunks)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_DELETE = _serve

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()

    def handle(self, rec: Recorded) -> tuple[int, dict[str, str], list[bytes]]:
        raise NotImplementedError

    def answer(self, conv: Conversation) -> Step:
        """The script's step for `conv`, after the pause the test asked for (a slow model)."""
        pause = self.delay(conv)
        if pause:
            time.sleep(pause)
        return self.script(conv)

    def bodies(self, path_part: str) -> list[Any]:
        return [r.body for r in self.conversations() if path_part in r.path]


def sse(event: str | None, data: Any) -> bytes:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data)}\n\n".encode()


def json_answer(status: int, data: Any) -> tuple[int, dict[str, str], list[bytes]]:
    return status, {"Content-Type": "application/json"}, [json.dumps(data).encode()]
