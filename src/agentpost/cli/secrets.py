"""Secrets on the command line: member tokens and database passwords (docs/cli.md "Tokens").

Every command line is readable by every local user (`ps`, /proc/<pid>/cmdline), so a secret
comes from the environment or from a file; a file is read once, and refused with one line
when other users could read or change it (mode & 0o077) or it is not the caller's. A secret
given as a flag value still works, with one warning line on stderr.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import parse_qsl, quote, urlsplit, urlunsplit

import click
from click.core import ParameterSource

from agentpost.cli.token_names import TOKEN_ENV as TOKEN_ENV
from agentpost.cli.token_names import TOKEN_FILE_ENV as TOKEN_FILE_ENV
from agentpost.cli.token_names import TOKEN_FILE_HELP as TOKEN_FILE_HELP
from agentpost.client.errors import NotConfigured

DB_PASSWORD_FILE_ENV = "AGENTPOST_DB_PASSWORD_FILE"
MAX_SECRET_BYTES = 64 * 1024  # a token is ~50 bytes; a bigger "secret" is the wrong file
TOKEN_FLAG_HELP = (
    "Member token. Every local user can read it in the process list: prefer --token-file "
    "or env AGENTPOST_TOKEN."
)


class SecretRefused(NotConfigured):
    """A secret file that cannot be used: unreadable, empty, not the caller's, or open to
    other users. Nothing was sent or started; the message names the file and the fix."""


def read_secret_file(path: Path, what: str) -> str:
    """The secret in `path` (surrounding whitespace is not part of it), checked on the opened file,
    so what is checked is what is read. A pipe (`--token-file <(pass show bot)`) passes: its
    mode is 0600 and it is the caller's."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as exc:
        raise SecretRefused(f"cannot read the {what} {path}: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        me = os.geteuid()
        if st.st_uid != me:
            raise SecretRefused(
                f"the {what} {path} belongs to uid {st.st_uid}, not to you (uid {me}); "
                "use a file of your own, mode 0600"
            )
        if st.st_mode & 0o077:
            raise SecretRefused(
                f"the {what} {path} is open to other users (mode {st.st_mode & 0o777:04o}); "
                f"run `chmod 600 {path}`"
            )
        with os.fdopen(os.dup(fd), "rb") as f:
            data = f.read(MAX_SECRET_BYTES + 1)
    finally:
        os.close(fd)
    try:
        secret = data.decode().strip()
    except UnicodeDecodeError:
        secret = ""
    if not secret or len(data) > MAX_SECRET_BYTES or "\n" in secret or "\r" in secret:
        raise SecretRefused(f"the {what} {path} does not hold one secret on one line")
    return secret


def warn_on_argv(flag: str, instead: str) -> None:
    """One line on stderr: the value of `flag` is in this process's command line."""
    click.echo(
        f"warning: {flag} is visible to every local user in the process list; use {instead}",
        err=True,
    )


def on_argv(ctx: click.Context, name: str) -> bool:
    return ctx.get_parameter_source(name) is ParameterSource.COMMANDLINE


def member_token(
    token: str | None,
    token_file: Path | None,
    *,
    token_on_argv: bool = False,
    file_on_argv: bool = False,
) -> str | None:
    """The member token a command acts with. The command line beats the environment;
    at the same level a file beats a value (`AGENTPOST_TOKEN_FILE` over `AGENTPOST_TOKEN`).
    `--token` on the command line warns; both flags at once are refused."""
    if token_on_argv and file_on_argv:
        raise SecretRefused("give --token or --token-file, not both")
    if token_on_argv:
        warn_on_argv("--token", "--token-file FILE or env AGENTPOST_TOKEN")
        return token or None
    if token_file is not None:
        return read_secret_file(token_file, "token file")
    return token or None


def password_in_url(url: str) -> bool:
    """True when a database URL carries a password (`user:PASSWORD@` or `?password=`)."""
    parts = urlsplit(url)
    return bool(parts.password) or any(k == "password" for k, _ in parse_qsl(parts.query))


def db_url(flag: str | None, password_file: Path | None) -> str | None:
    """The database URL a hub command opens: `--db` (the `db_url` parameter of the running
    click command), else env AGENTPOST_DB. A password may come from `password_file`
    (`--db-password-file`, env AGENTPOST_DB_PASSWORD_FILE), from libpq's own PGPASSWORD or
    ~/.pgpass, or from env AGENTPOST_DB; one on the command line warns (docs/deploy.md)."""
    url = flag or os.environ.get("AGENTPOST_DB")
    url_on_argv = flag is not None and on_argv(click.get_current_context(), "db_url")
    if url is not None and url_on_argv and password_in_url(url):
        warn_on_argv("a password in --db", "env AGENTPOST_DB or --db-password-file FILE")
    if password_file is None:
        return url
    if url is None or not url.startswith(("postgresql://", "postgres://")):
        raise SecretRefused("--db-password-file needs a PostgreSQL --db (or AGENTPOST_DB)")
    password = read_secret_file(password_file, "database password file")
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    user = quote(parts.username or "", safe="")
    netloc = f"{user}:{quote(password, safe='')}@{host}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
