"""Inputs of the operations commands (docs/operations.md): a database URL becomes libpq's
environment, never a command line (a password least of all, wherever the URL holds it), and
a retention duration is ASCII digits and a unit, or refused."""

from __future__ import annotations

import click
import pytest

from agentpost.cli.common import keep_for
from agentpost.core.errors import Code
from agentpost.store.backup import OpsError, _pg_env


def test_every_part_of_a_url_goes_to_the_environment() -> None:
    env = _pg_env("postgresql://app:s%40cret@db.example:5433/hub?sslmode=require")
    assert (env["PGHOST"], env["PGPORT"], env["PGUSER"], env["PGDATABASE"]) == (
        "db.example",
        "5433",
        "app",
        "hub",
    )
    assert env["PGPASSWORD"] == "s@cret" and env["PGSSLMODE"] == "require"


def test_a_socket_url_and_a_password_in_the_query_work() -> None:
    env = _pg_env("postgresql:///hub?host=/run/postgresql&password=s3cret&user=app")
    assert env["PGHOST"] == "/run/postgresql" and env["PGDATABASE"] == "hub"
    assert env["PGPASSWORD"] == "s3cret" and env["PGUSER"] == "app"


def test_a_url_libpq_cannot_take_is_refused_cleanly() -> None:
    with pytest.raises(OpsError) as refused:
        _pg_env("postgresql://h/db?nosuchoption=1")
    assert refused.value.code is Code.INVALID_REQUEST


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("30d", 30 * 86400),
        ("12h", 43200),
        ("90m", 5400),
        ("45s", 45),
        ("45", 45),
        ("forever", 0),
        ("inherit", None),
    ],
)
def test_durations(text: str, seconds: int | None) -> None:
    assert keep_for(text, inherit=True) == seconds


@pytest.mark.parametrize("text", ["²d", "0d", "-1d", "3w", "1.5d", "", "inherit-ish"])
def test_bad_durations_are_refused(text: str) -> None:
    with pytest.raises(click.BadParameter):
        keep_for(text, inherit=True)
    with pytest.raises(click.BadParameter):
        keep_for("inherit", inherit=False)
