"""What every command shares: the client from flags/env, `--json` output, exit codes.

Exit codes: 0 done; 1 a final refusal (sending again won't help); 3 the hub is
unreachable; 75 another retryable failure (EX_TEMPFAIL) — DESIGN.md §5.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import click
import msgspec
from rich.console import Console
from rich.table import Table

from agentpost.client import HubClient, HubError, HubUnreachable

F = TypeVar("F", bound=Callable[..., Any])
EXIT_FINAL = 1
EXIT_UNREACHABLE = 3
EXIT_RETRY = 75

console = Console()
err_console = Console(stderr=True)


def json_option(f: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")(f)


def hub_options(f: F) -> F:
    f = click.option(
        "--token",
        envvar="AGENTPOST_TOKEN",
        default=None,
        help="Member token (env AGENTPOST_TOKEN).",
    )(f)
    f = click.option(
        "--hub",
        envvar="AGENTPOST_HUB",
        default="http://127.0.0.1:8470",
        show_default=True,
        help="Hub URL (env AGENTPOST_HUB).",
    )(f)
    return f


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
    except OSError:
        raise click.UsageError(
            f"no admin token: set AGENTPOST_ADMIN_TOKEN or pass --admin-token (looked in {path})"
        ) from None


def emit(as_json: bool, data: Any, human: Callable[[], None]) -> None:
    if as_json:
        sys.stdout.write(msgspec.json.encode(data).decode() + "\n")
    else:
        human()


def fail(as_json: bool, code: str, message: str, retryable: bool, exit_code: int) -> None:
    if as_json:
        body = {"error": {"code": code, "message": message, "retryable": retryable}}
        sys.stdout.write(msgspec.json.encode(body).decode() + "\n")
    else:
        err_console.print(f"[red]error[/red] {code}: {message}")
    sys.exit(exit_code)


@contextmanager
def hub_errors(as_json: bool) -> Iterator[None]:
    """Map client errors to output and exit codes, in one place."""
    try:
        yield
    except HubUnreachable as exc:
        fail(as_json, exc.code, exc.message, True, EXIT_UNREACHABLE)
    except HubError as exc:
        fail(
            as_json,
            exc.code,
            exc.message,
            exc.retryable,
            EXIT_RETRY if exc.retryable else EXIT_FINAL,
        )


@contextmanager
def client(hub: str, token: str | None) -> Iterator[HubClient]:
    with HubClient(hub, token or "") as c:
        yield c


def table(columns: list[str], rows: list[list[Any]]) -> None:
    t = Table(*columns)
    for row in rows:
        t.add_row(*["" if v is None else str(v) for v in row])
    console.print(t)
