"""`agentpost inbox hook session-start|prompt|stop`: a coding agent's hooks show its new
hub wake-ups (docs/mcp.md: an MCP notification never starts a turn in an idle agent).

Each wake-up is shown once per agent session: what was shown is remembered in a small
state file per (hub, token, session) under `$AGENTPOST_HOME/inbox-hook/` when that is set,
else `$XDG_STATE_HOME/agentpost/inbox-hook/` (0600),
the session being the `session_id` of the JSON the client writes on the hook's stdin
(Claude Code, Codex, Gemini CLI), or one per (hub, token) without it. A new session is shown
every wake-up the hub still holds unacknowledged; the hub's cursor moves only with `--ack`.
`prompt` asks the hub at most every 30 s. The output is what the client's hook contract
asks (`hook_output`). A hook never fails the agent's turn: it always exits 0, errors are one
line on stderr, and it prints nothing when nothing is new.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import select
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import click
import msgspec

from agentpost.cli import secrets
from agentpost.cli.app import hub_option
from agentpost.cli.inbox import inbox
from agentpost.client import Event, HubClient, HubError
from agentpost.mcp.tools import delegation_waiting

EVENTS = ("session-start", "prompt", "stop")
PROMPT_EVERY_SECONDS = 30.0
PAGE = 20
FIRST_LINE_CHARS = 200
NOW_ENV = "AGENTPOST_HOOK_NOW"  # pins the clock (tests)
STDIN_SECONDS = 1.0  # a client writes its JSON at once; a terminal or silent pipe is not waited on
STDIN_MAX_BYTES = 1 << 20
KEEP_SESSION_SECONDS = 7 * 24 * 3600  # a session's state file unused this long is removed
# The client events whose context a new start wipes (Claude Code's /clear, a compaction):
# their session is shown its unacknowledged wake-ups again.
FRESH_SOURCES = ("clear", "compact")
# Hook events named by Gemini CLI (its own names for a prompt and a stop).
GEMINI_PROMPT, GEMINI_STOP = "BeforeAgent", "AfterAgent"


@dataclass(frozen=True)
class HookInput:
    """What the client said on the hook's stdin (all clients: JSON with `session_id` and
    `hook_event_name`; nothing when run by hand)."""

    session_id: str | None = None
    event_name: str | None = None  # the client's name: SessionStart, UserPromptSubmit, Stop…
    source: str | None = None  # SessionStart: startup, resume, clear, compact
    stop_hook_active: bool = False


class HookState(msgspec.Struct):
    shown: int = 0  # the highest inbox cursor already printed
    checked_at: float | None = None  # when the hub was last asked


@dataclass
class Shown:
    cursor: int
    event: Event
    room_name: str
    waiting: bool


def state_dir() -> Path:
    """`$AGENTPOST_HOME/inbox-hook/` when AGENTPOST_HOME is set: a home that names where
    agentpost keeps its files keeps these too (a test, a second setup, a container volume);
    else `$XDG_STATE_HOME/agentpost/inbox-hook/` (default ~/.local/state/…)."""
    home = os.environ.get("AGENTPOST_HOME")
    if home:
        return Path(home) / "inbox-hook"
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "agentpost" / "inbox-hook"


def state_path(hub: str, token: str, session: str | None = None) -> Path:
    # Named by a digest of (hub, token[, session]) with its own prefix: never the hub's
    # token hash, and no session id in clear.
    named = f"agentpost inbox hook\0{hub}\0{token}"
    if session is not None:
        named += f"\0session\0{session}"
    digest = hashlib.sha256(named.encode()).hexdigest()
    return state_dir() / f"{digest[:32]}.json"


def read_hook_input() -> HookInput:
    """The client's JSON on stdin, read only when stdin is not a terminal and only as long
    as STDIN_SECONDS: a hook never blocks on a stdin nobody writes. Anything that is not a
    JSON object is no input (run by hand: today's per-token state)."""
    try:
        fd = sys.stdin.fileno()
    except (AttributeError, OSError, ValueError):
        return HookInput()
    if os.isatty(fd):
        return HookInput()
    raw = b""
    deadline = time.monotonic() + STDIN_SECONDS
    try:
        while len(raw) < STDIN_MAX_BYTES:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                break
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            raw += chunk
    except OSError:
        return HookInput()
    try:
        data = json.loads(raw)
    except ValueError:
        return HookInput()
    if not isinstance(data, dict):
        return HookInput()

    def text(key: str) -> str | None:
        v = data.get(key)
        return v if isinstance(v, str) and v else None

    return HookInput(
        session_id=text("session_id"),
        event_name=text("hook_event_name"),
        source=text("source"),
        stop_hook_active=data.get("stop_hook_active") is True,
    )


def hook_output(event: str, given: HookInput, text: str) -> str:
    """What the client's hook contract asks for (docs/mcp.md "Hooks"):
    - no stdin JSON (run by hand, an older client): the block as text; `stop` as Claude
      Code's `{"decision": "block", "reason": …}`;
    - a stop (`Stop`; Gemini CLI's `AfterAgent` takes `deny`): the decision that makes the
      agent go on with the block as its reason;
    - otherwise (SessionStart, UserPromptSubmit, Gemini CLI's BeforeAgent): JSON
      `hookSpecificOutput.additionalContext` under the client's own event name, which all
      three clients add to the model's context (Gemini CLI takes JSON only)."""
    if event == "stop":
        decision = "deny" if given.event_name == GEMINI_STOP else "block"
        return json.dumps({"decision": decision, "reason": text}) + "\n"
    if given.event_name is None:
        return text
    out = {"hookEventName": given.event_name, "additionalContext": text}
    return json.dumps({"hookSpecificOutput": out}) + "\n"


def prune_sessions(keep: Path, now: float) -> None:
    """Remove session state (and lock) files unused for KEEP_SESSION_SECONDS, so the state
    folder does not grow with every session ever run. A removed file only means its
    session, if it comes back, is shown its unacknowledged wake-ups again."""
    try:
        entries = list(state_dir().iterdir())
    except OSError:
        return
    for p in entries:
        if p.suffix not in (".json", ".lock") or p.stem == keep.stem:
            continue
        try:
            if now - p.stat().st_mtime > KEEP_SESSION_SECONDS:
                p.unlink()
        except OSError as exc:  # another hook removed it, or it is not ours to remove
            print(f"agentpost inbox hook: could not prune {p.name}: {exc}", file=sys.stderr)


def load_state(path: Path) -> HookState:
    try:
        return msgspec.json.decode(path.read_bytes(), type=HookState)
    except FileNotFoundError:
        return HookState()
    except (OSError, msgspec.DecodeError) as exc:
        # Unreadable: start over. The worst case is a wake-up shown twice, never one hidden.
        print(
            f"agentpost inbox hook: state {path} unreadable ({exc}); starting over", file=sys.stderr
        )
        return HookState()


def save_state(path: Path, state: HookState) -> None:
    """temp → fsync → rename → fsync(dir), the file 0600 (CONVENTIONS 6)."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".state-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(msgspec.json.encode(state))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    dfd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


@contextmanager
def hook_lock(path: Path) -> Iterator[bool]:
    """True when this hook may run; False while another hook of the same member runs (it
    shows the same wake-ups, so this one stays quiet)."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(path.with_suffix(".lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        os.utime(fd)  # in use: not for prune_sessions
        yield True
    finally:
        os.close(fd)


def read_token_file(path: Path) -> str | None:
    try:
        return secrets.read_secret_file(path, "token file")
    except secrets.SecretRefused as exc:
        print(f"agentpost inbox hook: {exc.message}", file=sys.stderr)
        return None


def _now() -> float:
    pinned = os.environ.get(NOW_ENV)
    return float(pinned) if pinned else time.time()


def render(name: str, shown: list[Shown], more: bool) -> str:
    noun = "wake-up" if len(shown) == 1 else "wake-ups"
    lines = [f"agentpost inbox: {len(shown)} new {noun} for {name}"]
    for s in shown:
        ev = s.event
        first = (ev.text.splitlines() or [""])[0][:FIRST_LINE_CHARS]
        if ev.type == "media" and ev.attachments:
            first = first or f"[file {ev.attachments[0].name}]"
        lines.append(f"- in {s.room_name} from {ev.sender} (event {ev.id}, cursor {s.cursor}):")
        lines.append(f"    {first}")
        if s.waiting:
            lines.append(
                "    delegation: waits for your receipt (reply to this event with reply_kind "
                "result, error, needs_input or cancelled)"
            )
    if more:
        lines.append("More are waiting: read them with the read_inbox tool.")
    lines.append("Read them with read_inbox (or `agentpost inbox`); answer with reply.")
    return "\n".join(lines) + "\n"


def _fetch(
    event: str,
    given: HookInput,
    hub: str,
    token: str,
    after_shown: int,
    ack: bool,
    quiet: bool = False,
) -> int:
    """Print the new wake-ups after `after_shown`; the cursor shown up to."""
    with HubClient(hub, token, timeout=10.0) as c:
        me = c.me()
        after = max(after_shown, int(me.get("inbox_cursor", 0)))
        page = c.inbox(after=after, limit=PAGE)
        if not page.items:
            return after
        names = {r.id: r.name for r in c.rooms(me["workspace"]["name"])}
        name = str(me["member"]["name"])
        shown = [
            Shown(
                i.cursor,
                i.event,
                names.get(i.event.room, i.event.room),
                delegation_waiting(i.event, name),
            )
            for i in page.items
        ]
        if quiet:
            return after_shown  # nothing was shown, so nothing counts as shown
        _emit(hook_output(event, given, render(name, shown, more=len(page.items) >= PAGE)))
        if ack:
            try:
                c.ack(page.cursor)
            except HubError as exc:
                print(
                    f"agentpost inbox hook: ack failed: {exc.code}: {exc.message}", file=sys.stderr
                )
        return page.cursor


def _emit(out: str) -> None:
    sys.stdout.write(out)
    sys.stdout.flush()


def run_hook(
    event: str, hub: str, token: str | None, ack: bool, given: HookInput | None = None
) -> None:
    given = given or HookInput()
    if event not in EVENTS:
        print(
            f"agentpost inbox hook: unknown event {event!r}; use one of {', '.join(EVENTS)}",
            file=sys.stderr,
        )
        return
    if not token:
        print(
            "agentpost inbox hook: no member token (AGENTPOST_TOKEN is not set and no "
            "--token-file); nothing to show",
            file=sys.stderr,
        )
        return
    path = state_path(hub, token, given.session_id)
    with hook_lock(path) as mine:
        if not mine:
            return
        known = path.exists()
        state = load_state(path)
        if event == "session-start" and given.source in FRESH_SOURCES:
            state = HookState()  # the context was wiped: show what is unacknowledged again
        now = _now()
        if event == "prompt" and state.checked_at is not None:
            if 0 <= now - state.checked_at < PROMPT_EVERY_SECONDS:
                return
        try:
            # A stop the client already continued once (`stop_hook_active`) never blocks on
            # a state it cannot trust to say what was shown: no loop, whatever happened.
            quiet = event == "stop" and given.stop_hook_active and not known
            cursor = _fetch(event, given, hub, token, state.shown, ack, quiet)
        except HubError as exc:
            print(f"agentpost inbox hook: {exc.code}: {exc.message}", file=sys.stderr)
            cursor = state.shown  # a hub that is down is asked again after the pause too
        save_state(path, HookState(shown=max(cursor, state.shown), checked_at=now))
    if given.session_id is not None:
        prune_sessions(path, time.time())


@inbox.command("hook")
@click.argument("event", required=False, default="", metavar="session-start|prompt|stop")
@click.option("--ack", is_flag=True, help="Also acknowledge what was shown on the hub.")
@hub_option
@click.option(
    "--token-file",
    envvar=secrets.TOKEN_FILE_ENV,
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Read the member token from this file (mode 0600, yours; keeps it out of the "
    "agent's environment; env AGENTPOST_TOKEN_FILE); default: env AGENTPOST_TOKEN.",
)
def hook_cmd(event: str, ack: bool, hub: str, token_file: Path | None) -> None:
    """Run from a coding agent's hook: print new wake-ups once. Always exits 0."""
    try:
        token = os.environ.get("AGENTPOST_TOKEN")
        if token_file is not None:
            token = read_token_file(token_file)
            if token is None:  # said why in one line; nothing to show
                sys.exit(0)
        run_hook(event, hub.rstrip("/"), token, ack, read_hook_input())
    except Exception as exc:  # a hook must never break the agent's turn; say what happened
        print(f"agentpost inbox hook: failed: {type(exc).__name__}: {exc}", file=sys.stderr)
    sys.exit(0)
