"""The one seam to the ACP SDK (agent-client-protocol 0.12.x): spawn an agent, keep one
standing JSON-RPC connection to it over stdio, and speak our glossary to the Worker.

What this module owns, because the SDK does not (docs/connect.md):
- the agent's environment is the Worker's minus the hub credentials (the SDK's spawn
  helper would pass only HOME/LOGNAME/PATH/SHELL/TERM/USER);
- the agent's stderr is drained (an unread pipe blocks the agent at ~64 KB), keeping a tail;
- frames are capped (`MAX_FRAME_BYTES`): an agent that sends more is cut off, not buffered;
  a line that is not a JSON object is logged and skipped;
- `session/update`s are taken in wire order as they are read (the SDK would run each in a
  task of its own, after validating it), so a Turn's chunks keep their order;
- every `_…` request goes to the Worker's extension handler, in a task of ours that the
  agent going away never cancels (an accepted delivery runs to completion), answered on
  the same stdio; an unknown one is -32601, a malformed one -32602;
- what the agent says beside its reply: it is told the Worker takes `notice` updates
  (`clientCapabilities.session.notices`), which are logged, never reply text;
- `authenticate` with the method the environment provides, when `session/new` answers
  `auth_required`; an agent that refuses ACP v1 is `ProtocolRefused`, never retried;
- each session's modes (`session/set_mode`), which the Worker's policy chooses
  (connect/permissions.py, docs/architecture.md#agent-modes).
The SDK is imported lazily, only when an agent is spawned.
"""

from __future__ import annotations

import asyncio
import collections
import json
import logging
import os
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from agentpost.core.secrets import redact

log = logging.getLogger("agentpost.connect.acp")


class AgentProcesses(Protocol):
    """The owner of the agent's process group, as this connection uses it (connect/agent.py
    `AgentProcesses` is the one; a Protocol here, so this module never imports that one,
    which imports it)."""

    def environment(self, base: Mapping[str, str] | None = None) -> dict[str, str]: ...

    def command(self, argv: list[str]) -> list[str]: ...

    def pass_fds(self) -> tuple[int, ...]: ...

    def started(self, pid: int) -> None: ...

    def kill(self, pid: int) -> None: ...

    async def end(self, proc: asyncio.subprocess.Process) -> None: ...

MAX_FRAME_BYTES = 16 * 1024 * 1024
STDERR_TAIL_BYTES = 8192
READ_CHUNK = 1024 * 1024
# The hub's credentials never reach the agent (docs/connect.md "What the agent can reach").
HIDDEN_ENV = (
    "AGENTPOST_TOKEN",
    "AGENTPOST_TOKEN_FILE",
    "AGENTPOST_ADMIN_TOKEN",
    "AGENTPOST_DB",
    "AGENTPOST_DB_PASSWORD_FILE",
    "PGPASSWORD",
    "PGPASSFILE",
)
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
EVENT_META = "agentpost/event_id"  # a prompt's `_meta`: the id of the event that woke it
AGENT_META = "agentpost/agent"  # a prompt's `_meta`: the agent member the Worker serves


class AgentFailed(Exception):
    """The agent could not be started, or its connection ended (exit, crash, bad frame)."""


class AgentBroken(AgentFailed):
    """The agent lives, but what it sent cannot be taken (an answer the SDK rejects, a dead
    connection): it is cut off and restarted (docs/connect.md "When the agent fails")."""


class ProtocolRefused(Exception):
    """The agent refuses the ACP protocol version the Worker speaks (v1): a start error,
    never retried (docs/architecture.md#agent-modes). `str()` is one line naming what to
    change; the agent's own message is in the Worker's log."""


class SessionFailed(AgentFailed):
    """`session/new` failed: the agent answered it with an error (`code` set), or with what
    cannot be read. `str()` is the Worker's words and the code (it can reach a room);
    `agent_message` is the agent's own, redacted, for the Worker's log only."""

    def __init__(self, reason: str, code: int | None = None, agent_message: str = "") -> None:
        super().__init__(reason)
        self.code = code
        self.agent_message = agent_message


# JSON-RPC and ACP error codes by their spec names: a name is the protocol's, never the
# agent's words, so it may be said in a room.
ERROR_NAMES = {
    -32700: "parse_error",
    -32600: "invalid_request",
    -32601: "method_not_found",
    -32602: "invalid_params",
    -32603: "internal_error",
    -32000: "auth_required",
    -32002: "resource_not_found",
    -32022: "unsupported_protocol_version",
}
AUTH_REQUIRED = -32000
UNSUPPORTED_PROTOCOL = -32022
# Where an adapter that also speaks ACP v2 is told to speak v1 (docs/connect.md "ACP v2").
PROTOCOL_SETTINGS = {
    "claude-agent-acp": "CLAUDE_AGENT_ACP_PROTOCOL=v1 (or unset it)",
}
# Auth methods the Worker may call: by id or by `_meta["api-key"].provider`, the variables
# that must hold a key. Anything else (a browser login, a terminal) needs a person.
AUTH_ENV_BY_ID = {
    "api-key": ("CODEX_API_KEY", "OPENAI_API_KEY"),  # codex-acp
    "openai-api-key": ("OPENAI_API_KEY",),
    "codex-api-key": ("CODEX_API_KEY",),
    "anthropic-api-key": ("ANTHROPIC_API_KEY",),
    "gemini-api-key": ("GEMINI_API_KEY",),  # Gemini CLI
}
AUTH_ENV_BY_PROVIDER = {
    "openai": ("CODEX_API_KEY", "OPENAI_API_KEY"),
    "anthropic": ("ANTHROPIC_API_KEY",),
    "gemini": ("GEMINI_API_KEY",),
    "google": ("GEMINI_API_KEY",),
}


class MethodNotFound(Exception):
    """Raised by an extension handler for a method it does not know (→ -32601)."""


class InvalidParams(Exception):
    """Raised by an extension handler for a request of the wrong shape (→ -32602)."""


@dataclass(frozen=True)
class Update:
    """One `session/update` of a session, as the Worker needs it: `kind` is `text` (agent
    message text), `link` (an agent message `resource_link`) or `other`; `update` is ACP's
    `sessionUpdate` (`agent_message_chunk`, `tool_call`, …)."""

    session_id: str
    kind: str
    text: str = ""
    uri: str = ""
    name: str = ""
    meta: dict[str, Any] = field(default_factory=dict)
    update: str = ""
    message_id: str = ""  # the ACP `messageId` of a message chunk: another one is another message


@dataclass(frozen=True)
class PermissionOption:
    option_id: str
    kind: str
    name: str


@dataclass(frozen=True)
class PermissionAsk:
    """A `session/request_permission`, as the Worker judges it: the tool call's title and
    `kind` (`read`, `edit`, `execute`, …), the paths it names, and the options offered."""

    session_id: str
    title: str
    kind: str
    paths: tuple[str, ...]
    options: tuple[PermissionOption, ...]

    def what(self) -> str:
        """The tool call in a few words, for the log and a reply."""
        shown = " ".join(redact(self.title).split())[:200]
        return shown or (f"a tool call of kind {self.kind}" if self.kind else "a tool call")


@dataclass
class SessionModes:
    """A session's modes as the agent advertised them in `session/new` (ids, in its
    order), and the one it is in now (kept up to date by `current_mode_update`)."""

    current: str
    available: tuple[str, ...]


@dataclass(frozen=True)
class AuthChoice:
    """The `authenticate` method the environment provides (None: none fits), and why, in
    one line for the log (never a key's value)."""

    method_id: str | None
    why: str


def choose_auth(methods: list[dict[str, Any]], env: Mapping[str, str]) -> AuthChoice:
    """The first auth method the agent offers whose key is in `env`: an `env_var` method
    with every required variable set, or a known API-key method whose variable is set."""
    offered: list[str] = []
    for m in methods:
        raw_id = m.get("id") if isinstance(m.get("id"), str) else m.get("methodId")
        if not isinstance(raw_id, str):
            continue
        mid: str = raw_id
        offered.append(mid)
        if m.get("type") == "env_var" and isinstance(m.get("vars"), list):
            needed = [str(v["name"]) for v in m["vars"] if isinstance(v, dict)
                      and not v.get("optional") and isinstance(v.get("name"), str)]
            if needed and all(env.get(n, "").strip() for n in needed):
                return AuthChoice(mid, f"{mid} ({', '.join(needed)} set)")
            continue
        api = _dict(_dict(m.get("_meta")).get("api-key"))
        names = AUTH_ENV_BY_ID.get(mid) or AUTH_ENV_BY_PROVIDER.get(str(api.get("provider", "")), ())
        found = [n for n in names if env.get(n, "").strip()]
        if found:
            return AuthChoice(mid, f"{mid} ({found[0]} set)")
    if not offered:
        return AuthChoice(None, "the agent offers no auth method")
    return AuthChoice(
        None,
        f"none of the agent's auth methods ({', '.join(offered)}) is one the Worker can use "
        "with what its environment holds (an API key variable such as OPENAI_API_KEY)",
    )


@dataclass(frozen=True)
class PromptEnd:
    """How a prompt ended: the ACP stop reason and the response's `_meta`."""

    stop_reason: str
    meta: dict[str, Any]


@dataclass(frozen=True)
class PromptLink:
    uri: str
    name: str
    mime_type: str | None = None


UpdateHandler = Callable[[Update], None]
PermissionHandler = Callable[[PermissionAsk], Awaitable[str | None]]
# Where a tool call's raw input names a file, by the names agents use (Claude Code's Read:
# `file_path`; the ACP SDK's read helper: `path`).
_RAW_PATH_KEYS = ("path", "file_path", "filePath", "absolute_path", "abs_path")
ExtHandler = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]


def agent_environment(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The Worker's environment minus the hub credentials: the token stays with the Worker."""
    env = dict(os.environ if base is None else base)
    for name in HIDDEN_ENV:
        env.pop(name, None)
    return env


# How long the reader may take the frames an exited agent wrote before its connection closes.
DRAIN_SECONDS = 3.0


class _Transport:
    """Newline-delimited JSON over the agent's stdio, with a frame cap. What it reads goes to
    the SDK, except `session/update` notifications (`on_update`) and `_…` requests
    (`on_ext`), which are ours and never reach the SDK's router."""

    def __init__(
        self,
        proc: asyncio.subprocess.Process,
        on_cut: Callable[[str], None],
        on_update: Callable[[dict[str, Any]], None],
        on_ext: Callable[[dict[str, Any]], None],
    ) -> None:
        assert proc.stdin is not None and proc.stdout is not None
        self._proc = proc
        self._stdin = proc.stdin
        self._stdout = proc.stdout
        self._on_cut = on_cut
        self._on_update = on_update
        self._on_ext = on_ext
        self._lock = asyncio.Lock()
        self.bad_lines = 0
        self.eof = False
        self.ended = asyncio.Event()  # the reader has taken its last frame (EOF, or a cut)

    async def send(self, message: dict[str, Any]) -> None:
        data = json.dumps(message, separators=(",", ":")).encode() + b"\n"
        async with self._lock:
            self._stdin.write(data)
            await self._stdin.drain()

    async def receive(self) -> dict[str, Any] | None:
        while True:
            line = await self._read_line()
            if line is None:
                self.ended.set()
                return None
            line = line.strip()
            if not line:
                continue
            try:
                message = json.loads(line)
            except (ValueError, RecursionError):  # RecursionError: "[[[[…" nested too deep
                message = None
            if isinstance(message, dict):
                method = message.get("method")
                if method == "session/update" and "id" not in message:
                    try:
                        self._on_update(message)
                    except Exception:  # one bad update must not end the connection
                        self.bad_lines += 1
                        log.exception("a session/update from the agent could not be taken")
                    continue
                if isinstance(method, str) and method.startswith("_") and "id" in message:
                    self._on_ext(message)
                    continue
                if method is None:
                    answer = _answer_the_sdk_can_take(message)
                    if answer is None:
                        self.bad_lines += 1
                        log.warning("agent sent a frame that is neither a request nor an "
                                    "answer; skipped: %r", redact(line.decode("utf-8", "replace"))[:200])
                        continue
                    return answer
                return message
            self.bad_lines += 1
            shown = redact(line[:400].decode("utf-8", "replace"))[:200]
            log.warning("agent printed a line that is no JSON-RPC frame: %r", shown)

    async def _read_line(self) -> bytes | None:
        chunks: list[bytes] = []
        size = 0
        while True:
            try:
                chunk = await self._stdout.readuntil(b"\n")
                done = True
            except asyncio.LimitOverrunError as exc:
                chunk = await self._stdout.readexactly(exc.consumed)
                done = False
            except asyncio.IncompleteReadError as exc:
                if exc.partial:
                    chunks.append(exc.partial)
                    return b"".join(chunks)
                self.eof = True  # the agent closed its stdout: it is going away
                return None
            size += len(chunk)
            if size > MAX_FRAME_BYTES:
                self._on_cut(f"the agent sent a frame over {MAX_FRAME_BYTES} bytes")
                return None
            chunks.append(chunk)
            if done:
                return b"".join(chunks)

    async def close(self) -> None:
        try:
            self._stdin.close()
        except (OSError, RuntimeError):
            pass


class _Client:
    """The ACP `Client` the SDK calls back into; each call is handed to the Worker."""

    def __init__(self, permissions: PermissionHandler) -> None:
        self._permissions = permissions

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        return None  # never called: `_Transport` takes them in wire order

    async def request_permission(
        self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any
    ) -> Any:
        from acp.schema import AllowedOutcome, DeniedOutcome, RequestPermissionResponse

        title = str(getattr(tool_call, "title", "") or getattr(tool_call, "tool_call_id", ""))
        ours = tuple(PermissionOption(o.option_id, str(o.kind), o.name) for o in options)
        kind = getattr(tool_call, "kind", None)
        ask = PermissionAsk(session_id, title, str(kind or ""), _paths_of(tool_call), ours)
        chosen = await self._permissions(ask)
        if chosen is None:
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=chosen)
        )

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        log.info("agent sent extension notification _%s; ignored", method)

    async def read_text_file(self, *args: Any, **kwargs: Any) -> Any:
        from acp import RequestError

        raise RequestError(METHOD_NOT_FOUND, "Method not found", {"method": "fs/read_text_file"})

    async def write_text_file(self, *args: Any, **kwargs: Any) -> Any:
        from acp import RequestError

        raise RequestError(METHOD_NOT_FOUND, "Method not found", {"method": "fs/write_text_file"})


# Gemini CLI's question for an attached file outside its workspace (0.61, no locations).
GEMINI_READ_TITLE = "Allow access to absolute path: "
_RAW_COMMAND_KEYS = ("command", "cmd", "script")
COMMAND_PATH = "(a command)"


def _paths_of(tool_call: Any) -> tuple[str, ...]:
    """The files a tool call names: its `locations`, the paths in its raw input (a command
    in it counts as a path that is nowhere), else the path of Gemini CLI's "Allow access to
    absolute path: P" title, which comes with no locations."""
    found: list[str] = []
    for loc in getattr(tool_call, "locations", None) or []:
        path = getattr(loc, "path", None)
        if isinstance(path, str) and path:
            found.append(path)
    raw = getattr(tool_call, "raw_input", None)
    if isinstance(raw, dict):
        found += [raw[k] for k in _RAW_PATH_KEYS if isinstance(raw.get(k), str) and raw[k]]
        if any(k in raw for k in _RAW_COMMAND_KEYS):
            # A command reads what it likes, whatever its locations say: no path of it can
            # be vouched for (a relative marker is never inside a folder).
            found.append(COMMAND_PATH)
    if not found:
        title = str(getattr(tool_call, "title", "") or "")
        if title.startswith(GEMINI_READ_TITLE):
            tail = title[len(GEMINI_READ_TITLE):].strip()
            if tail.startswith("/"):
                found.append(tail)
    return tuple(dict.fromkeys(found))


class AgentConnection:
    """One spawned agent process and its standing ACP connection (docs/connect.md)."""

    def __init__(
        self,
        argv: list[str],
        cwd: Path,
        on_update: UpdateHandler,
        on_permission: PermissionHandler,
        on_ext: ExtHandler,
        env: Mapping[str, str] | None = None,
        processes: AgentProcesses | None = None,
    ) -> None:
        self.argv = argv
        self._processes = processes  # the owner of the group; None: the agent alone
        self.cwd = cwd
        self._on_update = on_update
        self._client = _Client(on_permission)
        self._on_ext = on_ext
        self._ext_tasks: set[asyncio.Task[None]] = set()
        self._transport: _Transport | None = None
        self._env = agent_environment(processes.environment(env) if processes else env)
        self._proc: asyncio.subprocess.Process | None = None
        self._conn: Any = None
        self._stderr_task: asyncio.Task[None] | None = None
        self._stderr_tail: collections.deque[bytes] = collections.deque()
        self._stderr_size = 0
        self.stderr_bytes = 0
        self.cut_reason: str | None = None
        self.agent_meta: dict[str, Any] = {}
        self.auth_methods: list[dict[str, Any]] = []  # as the initialize response lists them
        self.authenticated: str | None = None  # the method `authenticate` succeeded with
        self.modes: dict[str, SessionModes] = {}  # ACP session id → its modes
        self.settled_modes: dict[str, str] = {}  # ACP session id → the mode the Worker set
        self.notices = 0

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def running(self) -> bool:
        """The process has not been reaped (it may have been cut)."""
        return self._proc is not None and self._proc.returncode is None

    def alive(self) -> bool:
        return self._proc is not None and self._proc.returncode is None and self.cut_reason is None

    def stderr_tail(self) -> str:
        """The last ~8 KB the agent wrote on stderr, with secrets and anything token-like
        redacted: for the Worker's log and `connect status`, never for a room."""
        text = b"".join(self._stderr_tail).decode("utf-8", "replace")
        if self.stderr_bytes > self._stderr_size and "\n" in text:
            text = text.split("\n", 1)[1]  # the first line was cut: part of a secret, maybe
        return redact(text)

    async def start(self, client_meta: dict[str, Any], timeout: float = 30.0) -> None:
        """Spawn the agent and initialize; `AgentFailed` if it cannot be started."""
        from acp import PROTOCOL_VERSION, RequestError
        from acp.client.connection import ClientSideConnection
        from acp.schema import (
            ClientCapabilities,
            Implementation,
            InitializeRequest,
            InitializeResponse,
        )
        from acp.utils import serialize_params

        from agentpost import __version__

        argv = self._processes.command(self.argv) if self._processes else self.argv
        try:
            self._proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=self._env,
                cwd=str(self.cwd),
                limit=READ_CHUNK,
                start_new_session=True,
                pass_fds=self._processes.pass_fds() if self._processes else (),
            )
        except OSError as exc:
            raise AgentFailed(f"cannot start {self.argv[0]!r}: {exc}") from exc
        if self._processes is not None:
            self._processes.started(self._proc.pid)
        self._stderr_task = asyncio.create_task(self._drain_stderr())
        transport = _Transport(self._proc, self._cut, self._update, self._ext_request)
        self._transport = transport
        client: Any = self._client  # duck-typed: the SDK's Client protocol, the parts we serve
        self._conn = ClientSideConnection(client, transport)
        # Defence in depth: should the SDK's receive loop die on a frame our transport let
        # through, the agent is cut (and restarted) rather than left alive and unheard.
        recv = getattr(getattr(self._conn, "_conn", None), "_recv_task", None)
        if isinstance(recv, asyncio.Future):
            recv.add_done_callback(self._receive_ended)
        caps = ClientCapabilities(field_meta=client_meta or None)
        request = InitializeRequest(
            protocol_version=PROTOCOL_VERSION,
            client_capabilities=caps,
            client_info=Implementation(name="agentpost", version=__version__),
            field_meta=client_meta or None,
        )
        params = serialize_params(request)
        # The Worker takes `notice` updates (logged, never reply text): adapters that know
        # the capability send their warnings so instead of as message text. The SDK's
        # schema has no field for it yet, so it is added to the wire form.
        params.setdefault("clientCapabilities", {}).setdefault("session", {})["notices"] = {}
        try:
            raw = await asyncio.wait_for(self._conn._conn.send_request("initialize", params), timeout)
            resp = InitializeResponse.model_validate(raw)
        except RequestError as exc:
            await self.close()
            said = redact(f"{exc} {json.dumps(exc.data) if _jsonable(exc.data) else ''}")[:500]
            log.error("initialize refused by the agent (%s): %s", exc.code, said)
            if exc.code == UNSUPPORTED_PROTOCOL or "protocol version" in str(exc).lower():
                raise ProtocolRefused(self._protocol_refused()) from exc
            raise AgentFailed(self._why(f"initialize failed ({type(exc).__name__})")) from exc
        except (ConnectionError, OSError, TimeoutError, Exception) as exc:
            await self.close()
            log.error("initialize failed: %s", redact(repr(exc))[:500])
            raise AgentFailed(self._why(f"initialize failed ({type(exc).__name__})")) from exc
        if resp.protocol_version != PROTOCOL_VERSION:
            await self.close()
            log.error("the agent answered initialize with protocol version %s", resp.protocol_version)
            raise ProtocolRefused(self._protocol_refused())
        caps_meta = resp.agent_capabilities.field_meta if resp.agent_capabilities else None
        self.agent_meta = dict(caps_meta or {})
        methods = raw.get("authMethods") if isinstance(raw, dict) else None
        self.auth_methods = [m for m in methods or [] if isinstance(m, dict)]

    def _protocol_refused(self) -> str:
        program = os.path.basename(self.argv[0]) if self.argv else "the agent"
        setting = PROTOCOL_SETTINGS.get(program)
        how = (f"set {setting} in the Worker's environment" if setting
               else "start it in a mode that speaks ACP v1")
        return (f"{program} refuses ACP protocol version 1, the one this Worker speaks: {how} "
                "(docs/connect.md \"ACP v2\"; the Worker's log has the agent's message)")

    def _why(self, fallback: str) -> str:
        """Why the agent failed, in the Worker's own words: this can reach the room, so the
        agent's stderr never goes in it; it goes to the Worker's log (redacted)."""
        reason = self.cut_reason or fallback
        tail = self.stderr_tail().strip().splitlines()[-3:]
        if tail:
            log.error("%s; the agent's stderr ends (redacted): %s", reason, " | ".join(tail))
        return reason

    async def new_session(self, meta: dict[str, Any], directories: list[Path]) -> str:
        """Open a session in `cwd`; `directories` are roots it may read besides (ACP
        `additionalDirectories`, and `_meta.additionalRoots`, which claude-agent-acp reads)."""
        from acp import RequestError

        roots = [str(d) for d in directories]
        if roots:
            meta = {**meta, "additionalRoots": roots}
        try:
            try:
                resp = await self._conn.new_session(
                    cwd=str(self.cwd), mcp_servers=[], additional_directories=roots or None, **meta
                )
            except RequestError as exc:
                if exc.code != AUTH_REQUIRED or not await self._authenticate():
                    raise
                resp = await self._conn.new_session(
                    cwd=str(self.cwd), mcp_servers=[], additional_directories=roots or None, **meta
                )
        except RequestError as exc:
            named = ERROR_NAMES.get(exc.code, "")
            raise SessionFailed(
                f"the agent refused to open a session: {exc.code}{' ' + named if named else ''}",
                exc.code,
                redact(str(exc)).splitlines()[0][:300] if str(exc).strip() else "",
            ) from exc
        except Exception as exc:  # a broken connection or an answer the SDK cannot validate
            self._cut(f"session/new failed and the agent is restarted ({_brief(exc)})")
            raise SessionFailed("the agent could not open a session: " + self._why("")) from exc
        session_id = str(resp.session_id)
        if resp.modes is not None:
            self.modes[session_id] = SessionModes(
                str(resp.modes.current_mode_id),
                tuple(str(m.id) for m in resp.modes.available_modes),
            )
        return session_id

    async def _authenticate(self) -> bool:
        """`session/new` answered `auth_required`: `authenticate` once per agent process with
        the method the environment provides; said in one line (which, or why none fits)."""
        from acp import RequestError

        if self.authenticated is not None:
            return False  # authenticated, and still refused: no second try
        choice = choose_auth(self.auth_methods, self._env)
        if choice.method_id is None:
            log.warning("the agent requires authentication; not calling authenticate: %s",
                        choice.why)
            return False
        try:
            await self._conn.authenticate(method_id=choice.method_id)
        except RequestError as exc:
            log.error("the agent requires authentication; authenticate with %s failed: %s",
                      choice.why, redact(str(exc)).splitlines()[0][:300] if str(exc) else exc.code)
            self.authenticated = ""
            return False
        log.info("the agent requires authentication: authenticated with %s", choice.why)
        self.authenticated = choice.method_id
        return True

    async def set_mode(self, session_id: str, mode_id: str) -> None:
        """`session/set_mode`; `SessionFailed` when the agent refuses it (the session is not
        used in a mode the Worker did not choose)."""
        from acp import RequestError

        try:
            await self._conn.set_session_mode(session_id=session_id, mode_id=mode_id)
        except RequestError as exc:
            said = redact(str(exc)).splitlines()[0][:300] if str(exc).strip() else ""
            raise SessionFailed(
                f"the agent refused to put its session in mode {mode_id}: {exc.code}",
                exc.code,
                said,
            ) from exc
        except Exception as exc:
            self._cut(f"session/set_mode failed and the agent is restarted ({_brief(exc)})")
            raise SessionFailed("the agent could not set its session's mode: " + self._why("")) from exc
        modes = self.modes.get(session_id)
        if modes is not None:
            modes.current = mode_id
        self.settled_modes[session_id] = mode_id

    async def prompt(
        self,
        session_id: str,
        text: str,
        links: list[PromptLink],
        meta: dict[str, Any] | None = None,
    ) -> PromptEnd:
        """One prompt; its `session/update`s reach `on_update` in order before this returns.
        `meta` goes as the request's `_meta` (the waking event's id, which an agent may use
        to name the work, connect/a2a_agent.py; the Turn's `ag2/delivery` with its `turn`,
        docs/deliver.md). `AgentFailed` when the connection ends first; an error answer is
        `RequestFailed`."""
        from acp import RequestError
        from acp.schema import ResourceContentBlock, TextContentBlock

        blocks: list[Any] = [TextContentBlock(type="text", text=text)]
        for link in links:
            blocks.append(
                ResourceContentBlock(
                    type="resource_link", uri=link.uri, name=link.name, mime_type=link.mime_type
                )
            )
        try:
            resp = await self._conn.prompt(session_id=session_id, prompt=blocks, **(meta or {}))
        except RequestError as exc:
            # The agent's words stay in the log (redacted): an upstream API error quotes keys.
            log.error("the agent answered the prompt with an error: %s", redact(str(exc))[:500])
            raise RequestFailed(
                f"the agent answered the prompt with an error (code {exc.code}); "
                "the Worker's log has its message"
            ) from exc
        except (ConnectionError, OSError) as exc:
            ended = self._transport is not None and self._transport.eof
            if self.alive() and not ended:  # it lives on, but its connection cannot be read
                self._cut(f"the connection to the agent broke ({exc!r})")
                raise AgentBroken(self._why("")) from exc
            if self.cut_reason is not None and not ended:
                raise AgentBroken(self._why("")) from exc
            raise AgentFailed(self._why(f"the agent went away mid-Turn: {exc!r}")) from exc
        except Exception as exc:  # an answer the SDK cannot validate: the agent is broken
            self._cut(f"the agent answered session/prompt with a malformed result ({_brief(exc)})")
            raise AgentBroken(self._why("")) from exc
        return PromptEnd(str(resp.stop_reason), dict(resp.field_meta or {}))

    async def cancel(self, session_id: str) -> None:
        try:
            await self._conn.cancel(session_id=session_id)
        except (ConnectionError, OSError) as exc:
            log.info("session/cancel not sent, the agent is gone: %r", exc)

    async def ext_request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Send `_method` (the SDK adds the underscore; never add it here)."""
        result: dict[str, Any] = await self._conn.ext_method(method, params)
        return result

    def _update(self, message: dict[str, Any]) -> None:
        params = message.get("params")
        if isinstance(params, dict):
            update = _update_of(params)
            if update is None:
                return
            if update.kind == NOTICE:
                self.notices += 1
                log.warning("agent notice in %s: %s", update.session_id, update.text)
            elif update.update == "current_mode_update":
                raw = params["update"].get("currentModeId")
                modes = self.modes.get(update.session_id)
                if modes is not None and isinstance(raw, str):
                    modes.current = raw  # the Worker puts it back before the next Turn
            self._on_update(update)

    def _ext_request(self, message: dict[str, Any]) -> None:
        """A `_…` request: answered by a task of ours, which the agent going away (and the
        SDK closing its connection) never cancels."""
        task = asyncio.ensure_future(self._answer_ext(message))
        self._ext_tasks.add(task)
        task.add_done_callback(self._ext_tasks.discard)

    async def _answer_ext(self, message: dict[str, Any]) -> None:
        method = str(message["method"])
        params = message.get("params")
        answer: dict[str, Any] = {"jsonrpc": "2.0", "id": message["id"]}
        try:  # params missing or not an object: the handler judges `{}` (as the SDK did)
            answer["result"] = await self._on_ext(method[1:], params if isinstance(params, dict) else {})
        except MethodNotFound:
            answer["error"] = _error(METHOD_NOT_FOUND, "Method not found", {"method": method})
        except InvalidParams as exc:
            answer["error"] = _error(INVALID_PARAMS, "Invalid params", {"details": str(exc)})
        except Exception as exc:
            log.exception("extension request %s failed", method)
            answer["error"] = _error(INTERNAL_ERROR, "Internal error", {"details": repr(exc)})
        assert self._transport is not None
        try:
            await self._transport.send(answer)
        except (OSError, RuntimeError, ConnectionError) as exc:
            log.info("the answer to %s (id %r) was not sent: the agent is gone (%r)",
                     method, message["id"], exc)
        except Exception as exc:  # an answer that is no JSON: say so rather than stay silent
            log.exception("the answer to %s (id %r) could not be written", method, message["id"])
            error = _error(INTERNAL_ERROR, "Internal error", {"details": repr(exc)})
            try:
                await self._transport.send({"jsonrpc": "2.0", "id": message["id"], "error": error})
            except Exception:
                log.exception("the error answer to %s could not be sent either", method)

    def _receive_ended(self, task: asyncio.Future[Any]) -> None:
        exc = None if task.cancelled() else task.exception()
        if exc is not None:
            self._cut(f"the connection to the agent failed ({_brief(exc)})")

    def cut(self, reason: str) -> None:
        """Cut the agent off now: its whole group is SIGKILLed (a broken connection, an
        oversized frame, a lost lease)."""
        self._cut(reason)

    def _cut(self, reason: str) -> None:
        if self.cut_reason is not None:
            return
        self.cut_reason = reason
        log.error("%s; stopping it", reason)
        if self._proc is not None and self._proc.returncode is None:
            if self._processes is not None:
                self._processes.kill(self._proc.pid)  # the whole group
            else:
                self._proc.kill()

    async def _drain_stderr(self) -> None:
        assert self._proc is not None and self._proc.stderr is not None
        while True:
            chunk = await self._proc.stderr.read(65536)
            if not chunk:
                return
            self.stderr_bytes += len(chunk)
            self._stderr_tail.append(chunk)
            self._stderr_size += len(chunk)
            while self._stderr_size - len(self._stderr_tail[0]) >= STDERR_TAIL_BYTES:
                self._stderr_size -= len(self._stderr_tail.popleft())

    async def wait(self) -> int:
        """Until the agent process exits; its return code."""
        assert self._proc is not None
        return await self._proc.wait()

    async def drain(self, timeout: float = DRAIN_SECONDS) -> None:
        """After the process exited: let the reader take what the agent wrote before it went,
        up to EOF (a last `_ag2/deliver` frame is a delivery accepted, and runs to completion,
        docs/architecture.md#deferred-delivery). The exit can be seen before the pipe is
        read; closing the connection then would drop the frame. Bounded: a child still holding
        the agent's stdout keeps EOF away."""
        if self._transport is None or self._transport.ended.is_set():
            return
        try:
            await asyncio.wait_for(self._transport.ended.wait(), timeout)
        except TimeoutError:
            log.info("the agent's stdout stayed open %.0f s after it exited; not read further",
                     timeout)

    async def close(self) -> None:
        if self._transport is not None:
            self._transport.ended.set()  # nothing more is read: a drain waits no longer
        if self._conn is not None:
            try:
                await self._conn.close()
            except Exception as exc:  # closing a broken connection must not stop a restart
                log.info("closing the agent connection: %r", exc)
        if self._proc is not None and self._processes is not None:
            await self._processes.end(self._proc)  # the whole group, even if it exited
        elif self._proc is not None and self._proc.returncode is None:
            try:
                self._proc.kill()
            except ProcessLookupError:
                pass
            await self._proc.wait()
        if self._stderr_task is not None:
            try:
                await asyncio.wait_for(self._stderr_task, 5)
            except (TimeoutError, asyncio.CancelledError):
                self._stderr_task.cancel()


def _answer_the_sdk_can_take(message: dict[str, Any]) -> dict[str, Any] | None:
    """An answer frame (no `method`) in a shape the SDK's receive loop survives, or None to
    skip it. The SDK reads `error` as an object and looks `id` up in a dict: a string error
    or a list id would end its receive loop while the agent lives on, and every later
    prompt would fail (docs/connect.md "When the agent fails"). A malformed error becomes
    an internal error that says what the agent sent."""
    rid = message.get("id")
    if isinstance(rid, bool) or not isinstance(rid, int | str):
        return None
    if "result" in message or "error" not in message:
        return message
    err = message["error"]
    if (
        isinstance(err, dict)
        and isinstance(err.get("code"), int)
        and not isinstance(err.get("code"), bool)
        and isinstance(err.get("message"), str)
    ):
        return message
    shown = json.dumps(err)[:300] if _jsonable(err) else repr(err)[:300]
    return {
        "jsonrpc": "2.0",
        "id": rid,
        "error": _error(INTERNAL_ERROR, f"the agent sent a malformed error: {shown}", {}),
    }


def _jsonable(value: Any) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError, RecursionError):
        return False
    return True


def _error(code: int, message: str, data: dict[str, Any]) -> dict[str, Any]:
    return {"code": code, "message": message, "data": data}


def _brief(exc: BaseException) -> str:
    """One line on an exception (a pydantic error lists every field on lines of its own)."""
    first = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {first[0][:200]}" if first else type(exc).__name__


class RequestFailed(Exception):
    """The agent answered a request with a JSON-RPC error."""


NOTICE = "notice"
# claude-agent-acp's notice as message text, for clients without `session.notices`: its
# `_meta.claudeCode.kind` says it is the adapter's, not the model's words.
_CLAUDE_NOTICE_KINDS = frozenset({"informational", "mcpServerStatus"})


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _notice_text(update: dict[str, Any]) -> str:
    parts = [update.get(k) for k in ("severity", "title", "description")]
    return redact(" — ".join(p for p in parts if isinstance(p, str) and p))[:500]


def _update_of(params: dict[str, Any]) -> Update | None:
    session_id = params.get("sessionId")
    update = params.get("update")
    if not isinstance(session_id, str) or not isinstance(update, dict):
        return None
    meta = update.get("_meta") if isinstance(update.get("_meta"), dict) else {}
    kind = update.get("sessionUpdate")
    kind = kind if isinstance(kind, str) else ""
    if kind == NOTICE:  # an adapter's warning: for the log, never the reply
        return Update(session_id, NOTICE, text=_notice_text(update), meta=meta or {}, update=kind)
    if kind != "agent_message_chunk":
        return Update(session_id, "other", meta=meta or {}, update=kind)
    content = update.get("content")
    if not isinstance(content, dict):
        return Update(session_id, "other", meta=meta or {}, update=kind)
    mid = update.get("messageId")
    mid = mid if isinstance(mid, str) else ""
    claude = _dict((meta or {}).get("claudeCode"))
    if str(claude.get("kind")) in _CLAUDE_NOTICE_KINDS:
        text = str(content.get("text") or "")
        return Update(session_id, NOTICE, text=redact(text)[:500], meta=meta or {}, update=kind)
    if content.get("type") == "text" and isinstance(content.get("text"), str):
        return Update(
            session_id, "text", text=content["text"], meta=meta or {}, update=kind, message_id=mid
        )
    if content.get("type") == "resource_link" and isinstance(content.get("uri"), str):
        name = content.get("name")
        shown = name if isinstance(name, str) else ""
        return Update(
            session_id, "link", uri=content["uri"], name=shown, meta=meta or {}, update=kind
        )
    return Update(session_id, "other", meta=meta or {}, update=kind)
