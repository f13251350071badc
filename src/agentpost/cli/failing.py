"""How a command fails (docs/cli.md "Exit codes"): the exit codes and the one function that
prints an error, `{"error": {...}}` for scripts or `error CODE: MESSAGE` for people, then
exits. Below both `cli/app.py` (a command line that does not parse) and `cli/common.py`
(everything else), so neither imports the other back."""

from __future__ import annotations

import sys
from typing import NoReturn

import msgspec
from rich.console import Console
from rich.markup import escape

EXIT_FINAL = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3
EXIT_RETRY = 75

# soft_wrap: a long line stays one line (an id split over two lines cannot be copied).
err_console = Console(stderr=True, soft_wrap=True)


def fail(as_json: bool, code: str, message: str, retryable: bool, exit_code: int) -> NoReturn:
    if as_json:
        body = {"error": {"code": code, "message": message, "retryable": retryable}}
        sys.stdout.write(msgspec.json.encode(body).decode() + "\n")
        sys.stdout.flush()
    else:
        err_console.print(f"[red]error[/red] {escape(code)}: {escape(message)}", highlight=False)
    sys.exit(exit_code)
