"""What every command shares: the client from flags/env, `--json` output, exit codes.

Exit codes: 0 done; 1 a final refusal (sending again won't help), a configuration mistake
included (`not_configured`: no token, a hub URL that is no URL); 2 a command line click
cannot parse (`usage_error`); 3 the hub is unreachable; 75 another retryable failure
(EX_TEMPFAIL) — docs/threads.md. With `--json` every error is one JSON object on stdout.

Human output is never wrapped (ids stay whole), and is plain lines when stdout is not a
terminal: one line per item, its newlines and tabs written `\n` and `\t` (a backslash as
`\\`), nothing cut short. A reader that closes the pipe early (`| head -1`) ends the
command quietly (cli/app.py).
"""

from __future__ import annotations

import functools
import os
import re
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar, cast

import click
import msgspec
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from agentpost.cli import secrets
from agentpost.cli.app import hub_option, reader_left
from agentpost.cli.failing import (  # the commands import these from here
    EXIT_FINAL,
    EXIT_RETRY,
    EXIT_UNREACHABLE,
    EXIT_USAGE,  # noqa: F401
    err_console,
    fail,
)
from agentpost.client import HubClient, HubError, HubUnavailable, HubUnreachable
from agentpost.client.errors import NotConfigured

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")

# A followed stream that is cut waits this long before it reconnects, doubling to the cap.
RECONNECT_FIRST = 0.5
RECONNECT_MAX = 10.0

# soft_wrap: a long line stays one line (an id split over two lines cannot be copied).
console = Console(soft_wrap=True)


console.on_broken_pipe = reader_left  # type: ignore[method-assign]  # rich's would exit 1


def json_option(f: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")(f)


def hub_options(f: F) -> F:
    """`--hub`, `--token` and `--token-file`: the command gets `hub` and the resolved
    `token` (cli/secrets.py); a token file that is refused ends it with one line, exit 1."""

    @functools.wraps(f)
    def resolved(*args: Any, token: str | None, token_file: Path | None, **kwargs: Any) -> Any:
        ctx = click.get_current_context()
        if ctx.invoked_subcommand is None:  # a group's subcommand reads its own token
            try:
                token = secrets.member_token(
                    token,
                    token_file,
                    token_on_argv=secrets.on_argv(ctx, "token"),
                    file_on_argv=secrets.on_argv(ctx, "token_file"),
                )
            except NotConfigured as exc:
                fail(bool(kwargs.get("as_json")), exc.code, exc.message, False, EXIT_FINAL)
        return f(*args, token=token, **kwargs)

    g = click.option(
        "--token-file",
        envvar=secrets.TOKEN_FILE_ENV,
        type=click.Path(dir_okay=False, path_type=Path),
        default=None,
        help=secrets.TOKEN_FILE_HELP,
    )(resolved)
    g = click.option(
        "--token", envvar=secrets.TOKEN_ENV, default=None, help=secrets.TOKEN_FLAG_HELP
    )(g)
    return cast(F, hub_option(g))


def admin_token(explicit: str | None) -> str:
    """The admin token: flag, env AGENTPOST_ADMIN_TOKEN, or `<data>/admin.token`."""
    if explicit:
        return explicit
    env = os.environ.get("AGENTPOST_ADMIN_TOKEN")
    if env:
        return env
    from agentpost.hub.config import default_data_dir

    path = default_data_dir() / "admin.token"
    try:
        return path.read_text().strip()
    except OSError as exc:
        raise NotConfigured(
            f"no admin token: set AGENTPOST_ADMIN_TOKEN (or pass --admin-token), or set "
            f"AGENTPOST_HOME to the hub's data dir (cannot read {path}: {exc.strerror or exc})"
        ) from None


def emit(as_json: bool, data: Any, human: Callable[[], None]) -> None:
    if as_json:
        sys.stdout.write(msgspec.json.encode(data).decode() + "\n")
    else:
        human()


# A field of a request the hub's decoder refused (msgspec: "… - at `$.max_delegation_depth`").
_FIELD_PATH = re.compile(r" - at `\$\.([a-z_]+)[^`]*`")


def in_words(message: str) -> str:
    """A hub message as people read it: a decoder's field path becomes the option that
    sets it (`$.max_delegation_depth` → `--max-delegation-depth`)."""
    return _FIELD_PATH.sub(lambda m: f" (--{m.group(1).replace('_', '-')})", message)


@contextmanager
def hub_errors(as_json: bool) -> Iterator[None]:
    """Map client errors to output and exit codes, in one place: the edge where what the
    hub and the network said becomes the contract's one line (docs/cli.md)."""
    try:
        yield
    except HubUnreachable as exc:
        fail(as_json, exc.code, in_words(exc.message), True, EXIT_UNREACHABLE)
    except HubError as exc:
        fail(
            as_json,
            exc.code,
            in_words(exc.message),
            exc.retryable,
            EXIT_RETRY if exc.retryable else EXIT_FINAL,
        )


@contextmanager
def client(hub: str, token: str | None, need_token: bool = True) -> Iterator[HubClient]:
    """A hub client; a missing member token is a configuration mistake, said before any
    request (inside `hub_errors`, so it prints like every other error)."""
    if need_token and not token:
        raise NotConfigured(
            "no member token: set AGENTPOST_TOKEN_FILE (or pass --token-file) to a file "
            "of mode 0600 holding the token `agentpost admin member add` printed, or set "
            "AGENTPOST_TOKEN"
        )
    with HubClient(hub, token or "") as c:
        yield c


_ESCAPES = str.maketrans({"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"})


def one_line(text: str) -> str:
    """`text` as one line when stdout is piped (newlines, tabs and backslashes escaped, so
    `| wc -l` counts items and nothing is lost); unchanged on a terminal."""
    return text if console.is_terminal else text.translate(_ESCAPES)


def fields(*values: str) -> str:
    """One item of a stream as one line: its fields a space apart on a terminal, a tab
    apart when piped, where `table` would put them (docs/cli.md "The contract", rule 6).
    The values are rich markup; piped, a value's own tabs are already `\\t` (`one_line`)."""
    if console.is_terminal:
        return " ".join(values)
    from rich.text import Text

    return "\t".join(Text.from_markup(v).plain for v in values)


def say_line(line: str) -> None:
    """A line `fields` made: rich markup on a terminal; piped, written as it is (plain
    text whose tabs rich would turn into spaces)."""
    if console.is_terminal:
        console.print(line, highlight=False)
    else:
        sys.stdout.write(line + "\n")


def cell(value: Any) -> str:
    """A value as people read it: nothing for None, yes/no for booleans."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def table(columns: list[str], rows: list[list[Any]], empty: str = "(none)") -> None:
    """A table on a terminal; tab-separated lines with a header when piped."""
    cells = [[cell(v) for v in row] for row in rows]
    if not rows:
        console.print(empty, markup=False, highlight=False)
        return
    if not console.is_terminal:
        for line in [columns, *cells]:
            sys.stdout.write("\t".join(c.translate(_ESCAPES) for c in line))
            sys.stdout.write("\n")
        return
    t = Table(*columns)
    for row in cells:
        t.add_row(*[escape(c) for c in row])
    console.print(t, highlight=False)


def say(text: str) -> None:
    """One plain line for people (no markup: `[postgres]` stays `[postgres]`)."""
    console.print(text, markup=False, highlight=False)


def follow(
    open_stream: Callable[[int | None], Iterable[T]],
    position: Callable[[T], int],
    show: Callable[[T], None],
    after: int | None,
    shown: Callable[[T], None] | None = None,
) -> None:
    """Show a live stream until Ctrl-C. A hub that goes away (restart, network) is waited
    for, with backoff and a `reconnecting…` line on stderr, and the stream resumes after
    the last item shown (Last-Event-ID), so nothing is shown twice or skipped. A refusal
    (a removed member, an unknown room) ends it like any other final error. `shown` runs
    after an item is shown and counted (an ack: one lost to a cut is covered by the next)."""
    delay = RECONNECT_FIRST
    try:
        while True:
            try:
                for item in open_stream(after):
                    show(item)
                    after = position(item)
                    delay = RECONNECT_FIRST
                    if shown is not None:
                        shown(item)
            except (HubUnreachable, HubUnavailable) as exc:
                err_console.print(
                    f"reconnecting in {delay:g} s… ({exc.code}: {exc.message})",
                    markup=False,
                    highlight=False,
                )
                time.sleep(delay)
                delay = min(delay * 2, RECONNECT_MAX)
    except KeyboardInterrupt:
        return


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def keep_for(value: str, inherit: bool) -> int | None:
    """A retention option: `30d`, `12h`, `90m`, `45s` (seconds), `forever` (0) or, where
    `inherit`, `inherit` (None)."""
    text = value.strip().lower()
    if text == "forever":
        return 0
    if text == "inherit" and inherit:
        return None
    m = re.fullmatch(r"([0-9]{1,12})([smhd]?)", text)
    number, unit = (m.group(1), m.group(2) or "s") if m else ("", "")
    if m is None or int(number) <= 0:
        kinds = "`forever`, `inherit`" if inherit else "`forever`"
        raise click.BadParameter(f"{value!r}: a duration such as 30d, 12h, 90m, 45s, or {kinds}")
    return int(number) * _UNITS[unit]


def retention_change(events: str | None, media: str | None, inherit: bool) -> dict[str, int | None]:
    """The `events_seconds` / `media_seconds` a retention command's options set (none given:
    nothing to change, the command shows the settings)."""
    change: dict[str, int | None] = {}
    if events is not None:
        change["events_seconds"] = keep_for(events, inherit)
    if media is not None:
        change["media_seconds"] = keep_for(media, inherit)
    return change


def duration_text(seconds: int | None) -> str:
    if not seconds:
        return "for ever"
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"
