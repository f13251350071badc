"""The first answers of `agentpost mcp`, given before the `mcp` SDK is loaded (docs/mcp.md
"Startup").

Importing the SDK takes over a second on a small machine, and a client may give a server
about one second to answer `initialize` (Codex). So the process claims stdin/stdout, loads
the SDK and the hub client in a thread, and meanwhile answers `initialize`, `ping` and
`tools/list` from `catalog.py`. The first message it does not answer hands the connection
to the SDK (`server.serve_handover`), which is first given the client's `initialize` again
(under a private id, its answer dropped) and every notification held since, so the SDK's
session is the one the client opened. Anything unusual (a 2026 per-request envelope, a
malformed frame, an `initialize` of odd shape) goes to the SDK untouched.
tests/mcp/test_mcp_startup.py holds these answers equal to the SDK's for every version.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from typing import Any

from agentpost.mcp.catalog import INSTRUCTIONS, SERVER_NAME, SERVER_VERSION, TOOLS, wire_tool

# mcp_types.version.HANDSHAKE_PROTOCOL_VERSIONS of the SDK range we take (the test checks).
HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
MODERN_META_KEY = "io.modelcontextprotocol/protocolVersion"  # a 2026-07-28 request envelope
REPLAY_ID = "agentpost-front-initialize"

# (the lines to replay, read a line, write a line, the id whose answer to drop) → served
Handover = Callable[[list[bytes], Callable[[], bytes], Callable[[bytes], None], str | None], None]


class Wire:
    """The client's stdin and stdout, moved off fds 0 and 1: fd 0 reads /dev/null and fd 1
    writes to stderr, so a stray print or child process can never corrupt the protocol."""

    def __init__(self) -> None:
        wire_in = os.dup(0)
        wire_out = os.dup(1)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        os.dup2(2, 1)
        self._in = os.fdopen(wire_in, "rb")
        self._out = os.fdopen(wire_out, "wb")
        self._lock = threading.Lock()

    def readline(self) -> bytes:
        return self._in.readline()

    def write(self, line: bytes) -> None:
        with self._lock:
            self._out.write(line.rstrip(b"\n") + b"\n")
            self._out.flush()


class Loader(threading.Thread):
    """Runs `load` (import the SDK, make the Toolbox) in the background; `result()` waits."""

    def __init__(self, load: Callable[[], Handover]) -> None:
        super().__init__(name="agentpost-mcp-loader", daemon=True)
        self._load = load
        self._value: Handover | None = None
        self._error: BaseException | None = None

    def run(self) -> None:
        try:
            self._value = self._load()
        except BaseException as exc:  # re-raised in the main thread by result()
            self._error = exc

    def result(self) -> Handover:
        self.join()
        if self._error is not None:
            raise self._error
        assert self._value is not None
        return self._value


def _id(msg: dict[str, Any]) -> int | str | None:
    rid = msg.get("id")
    return rid if isinstance(rid, (int, str)) and not isinstance(rid, bool) else None


def _modern(params: object) -> bool:
    meta = params.get("_meta") if isinstance(params, dict) else None
    return isinstance(meta, dict) and MODERN_META_KEY in meta


def _plain_initialize(params: object) -> bool:
    """An `initialize` whose params the SDK takes as given (else the SDK answers it)."""
    if not isinstance(params, dict) or _modern(params):
        return False
    client = params.get("clientInfo")
    return (
        isinstance(params.get("protocolVersion"), str)
        and isinstance(params.get("capabilities"), dict)
        and isinstance(client, dict)
        and isinstance(client.get("name"), str)
        and isinstance(client.get("version"), str)
    )


def negotiate(requested: str) -> str:
    return requested if requested in HANDSHAKE_VERSIONS else HANDSHAKE_VERSIONS[-1]


def initialize_result(version: str) -> dict[str, Any]:
    return {
        "protocolVersion": version,
        "capabilities": {"tools": {"listChanged": False}},
        "serverInfo": {"name": SERVER_NAME, "version": SERVER_VERSION},
        "instructions": INSTRUCTIONS,
    }


def tools_result() -> dict[str, Any]:
    return {"tools": [wire_tool(spec) for spec in TOOLS]}


class Front:
    """Answers what it can of the opening of a handshake-era session; None: not its to
    answer (the SDK will)."""

    def __init__(self) -> None:
        self.initialize: dict[str, Any] | None = None  # the client's, once answered
        self._tools = tools_result()

    def answer(self, line: bytes) -> bytes | None:
        try:
            msg = json.loads(line)
        except ValueError:
            return None
        if not isinstance(msg, dict) or msg.get("jsonrpc") != "2.0":
            return None
        rid, method, params = _id(msg), msg.get("method"), msg.get("params")
        if rid is None or rid == REPLAY_ID or _modern(params):
            return None
        if params is not None and not isinstance(params, dict):
            return None
        result: dict[str, Any]
        if method == "initialize" and self.initialize is None and _plain_initialize(params):
            assert isinstance(params, dict)
            self.initialize = params
            result = initialize_result(negotiate(params["protocolVersion"]))
        elif method == "tools/list" and self.initialize is not None:
            result = self._tools
        elif method == "ping" and self.initialize is not None:
            result = {}
        else:
            return None
        reply = {"jsonrpc": "2.0", "id": rid, "result": result}
        return json.dumps(reply, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _is_notification(line: bytes) -> bool:
    try:
        msg = json.loads(line)
    except ValueError:
        return False
    return isinstance(msg, dict) and "id" not in msg and isinstance(msg.get("method"), str)


def serve(load: Callable[[], Handover]) -> None:
    """Serve MCP on stdio: the front's answers until a message needs the SDK, then the
    SDK's (`load` makes the handover in a thread, started at once)."""
    wire = Wire()
    loader = Loader(load)
    loader.start()
    front = Front()
    held: list[bytes] = []
    while True:
        line = wire.readline()
        if not line:  # the client left before needing more than the handshake
            loader.join()
            return
        if not line.strip():
            continue
        answer = front.answer(line)
        if answer is not None:
            wire.write(answer)
            continue
        held.append(line)
        if not _is_notification(line):
            break
    replay: list[bytes] = []
    if front.initialize is not None:
        again = {"jsonrpc": "2.0", "id": REPLAY_ID, "method": "initialize"}
        again["params"] = front.initialize  # type: ignore[assignment]
        replay.append(json.dumps(again, ensure_ascii=False).encode("utf-8"))
    handover = loader.result()
    handover(replay + held, wire.readline, wire.write, REPLAY_ID if replay else None)
