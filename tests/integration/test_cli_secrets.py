"""Secrets stay off the command line (cli/secrets.py, docs/cli.md "Tokens"): a token file is
read once and refused in one line when other users could read it or it is not yours; a
secret given as a flag value still works and warns; a database password comes from the
environment or a file."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from urllib.parse import SplitResult, urlsplit, urlunsplit

import pytest

from clirun import agentpost, json_error
from hubproc import HubProcess, Setup

TOKEN_WARNING = (
    "warning: --token is visible to every local user in the process list; "
    "use --token-file FILE or env AGENTPOST_TOKEN"
)


@pytest.fixture
def hub(shared_hub: HubProcess) -> HubProcess:
    return shared_hub


@pytest.fixture
def setup(shared_setup: Setup) -> Setup:
    return shared_setup


def _token_file(path: Path, token: str, mode: int = 0o600) -> Path:
    path.write_text(token + "\n")
    path.chmod(mode)
    return path


Run = subprocess.CompletedProcess[str]


def _whoami(p: Run) -> str:
    return str(json.loads(p.stdout)["member"]["name"])


@pytest.mark.parametrize("engine", ["sqlite"], indirect=True)
def test_the_token_comes_from_a_file_by_flag_or_environment(setup: Setup, tmp_path: Path) -> None:
    alice = _token_file(tmp_path / "alice.token", setup.tokens["alice"])
    by_flag = agentpost(setup.hub, "whoami", "--json", "--token-file", str(alice))
    assert _whoami(by_flag) == "alice" and by_flag.stderr == ""
    by_env = agentpost(setup.hub, "whoami", "--json", env={"AGENTPOST_TOKEN_FILE": str(alice)})
    assert _whoami(by_env) == "alice" and by_env.stderr == ""


@pytest.mark.parametrize("engine", ["sqlite"], indirect=True)
@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o660], ids="{:04o}".format)
def test_a_token_file_open_to_other_users_is_final_in_one_line(
    setup: Setup, tmp_path: Path, mode: int
) -> None:
    f = _token_file(tmp_path / "alice.token", setup.tokens["alice"], mode)
    want = f"the token file {f} is open to other users (mode {mode:04o}); run `chmod 600 {f}`"
    p = agentpost(setup.hub, "post", "general", "-t", "hi", "--json", "--token-file", str(f),
                  check=False)
    assert p.returncode == 1
    assert json_error(p) == {"code": "not_configured", "message": want, "retryable": False}
    human = agentpost(setup.hub, "post", "general", "-t", "hi", check=False,
                      env={"AGENTPOST_TOKEN_FILE": str(f)})
    assert human.returncode == 1 and human.stderr.splitlines() == [f"error not_configured: {want}"]
    with setup.hub.client(setup.tokens["alice"]) as c:
        assert c.get(f"/v1/rooms/{setup.room}/events").json()["events"] == []  # nothing sent


@pytest.mark.parametrize("engine", ["sqlite"], indirect=True)
def test_an_empty_or_missing_token_file_is_final(setup: Setup, tmp_path: Path) -> None:
    empty = _token_file(tmp_path / "empty.token", "")
    p = agentpost(setup.hub, "whoami", "--json", "--token-file", str(empty), check=False)
    assert p.returncode == 1 and "does not hold one secret" in json_error(p)["message"]
    gone = tmp_path / "gone.token"
    p = agentpost(setup.hub, "whoami", "--json", "--token-file", str(gone), check=False)
    assert p.returncode == 1
    message = json_error(p)["message"]
    assert message == f"cannot read the token file {gone}: No such file or directory"


@pytest.mark.parametrize("engine", ["sqlite"], indirect=True)
def test_a_token_on_the_command_line_still_works_and_warns_once(setup: Setup) -> None:
    p = agentpost(setup.hub, "whoami", "--json", "--token", setup.tokens["carol"])
    assert _whoami(p) == "carol"
    assert p.stderr.splitlines() == [TOKEN_WARNING]
    quiet = agentpost(setup.hub, "whoami", "--json", token=setup.tokens["carol"])  # env: no warning
    assert quiet.stderr == ""


@pytest.mark.parametrize("engine", ["sqlite"], indirect=True)
def test_the_command_line_beats_the_environment_and_a_file_beats_a_value(
    setup: Setup, tmp_path: Path
) -> None:
    alice = _token_file(tmp_path / "alice.token", setup.tokens["alice"])
    carol = setup.tokens["carol"]
    env_file = {"AGENTPOST_TOKEN_FILE": str(alice)}

    def who(*args: str, token: str | None = None, env: dict[str, str] | None = None) -> str:
        return _whoami(agentpost(setup.hub, "whoami", "--json", *args, token=token, env=env))

    assert who("--token", carol, env=env_file) == "carol"
    assert who("--token-file", str(alice), token=carol) == "alice"
    assert who(token=carol, env=env_file) == "alice"
    both = agentpost(
        setup.hub, "whoami", "--json", "--token", carol, "--token-file", str(alice), check=False
    )
    assert both.returncode == 1
    assert json_error(both)["message"] == "give --token or --token-file, not both"


@pytest.mark.parametrize("engine", ["sqlite"], indirect=True)
def test_the_admin_token_on_the_command_line_warns(hub: HubProcess) -> None:
    p = agentpost(hub, "admin", "workspace", "list", "--json", "--admin-token", hub.admin_token)
    assert p.stderr.splitlines() == [
        "warning: --admin-token is visible to every local user in the process list; use env "
        "AGENTPOST_ADMIN_TOKEN or the data dir's admin.token"
    ]


# -- the database password ---------------------------------------------------------------


def _migrate(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> Run:
    return agentpost(
        None, "db", "migrate", "--json", "--data", str(tmp_path / "d"), *args,
        env=env, check=False,
    )


def _with(parts: SplitResult, password: str | None) -> str:
    host = parts.netloc.rpartition("@")[2]
    user = parts.username or "postgres"
    netloc = f"{user}:{password}@{host}" if password else f"{user}@{host}"
    return urlunsplit(parts._replace(netloc=netloc))


def test_a_password_in_db_on_the_command_line_warns_and_still_works(
    engine: str | None, tmp_path: Path
) -> None:
    if engine is None:
        pytest.skip("a PostgreSQL URL")
    parts = urlsplit(engine)
    password = parts.password or "unused-by-trust-auth"
    with_password, without = _with(parts, password), _with(parts, None)
    p = _migrate(tmp_path, "--db", with_password)
    assert p.returncode == 0, p.stderr
    assert p.stderr.splitlines() == [
        "warning: a password in --db is visible to every local user in the process list; "
        "use env AGENTPOST_DB or --db-password-file FILE"
    ]
    quiet = _migrate(tmp_path, env={"AGENTPOST_DB": with_password})
    assert quiet.returncode == 0 and quiet.stderr == ""

    secret = _token_file(tmp_path / "db.password", password)
    by_file = _migrate(tmp_path, "--db", without, "--db-password-file", str(secret))
    assert by_file.returncode == 0 and by_file.stderr == ""
    assert f":{password}@" not in by_file.stdout  # (CI's role has its password as its name)

    secret.chmod(0o644)
    refused = _migrate(
        tmp_path, env={"AGENTPOST_DB": without, "AGENTPOST_DB_PASSWORD_FILE": str(secret)}
    )
    assert refused.returncode == 1
    assert json_error(refused)["message"] == (
        f"the database password file {secret} is open to other users (mode 0644); "
        f"run `chmod 600 {secret}`"
    )


def test_a_password_file_needs_a_postgresql_url(engine: str | None, tmp_path: Path) -> None:
    if engine is not None:
        pytest.skip("SQLite: no password to give")
    secret = _token_file(tmp_path / "db.password", "x")
    p = _migrate(tmp_path, "--db-password-file", str(secret))
    assert p.returncode == 1
    assert json_error(p)["message"] == (
        "--db-password-file needs a PostgreSQL --db (or AGENTPOST_DB)"
    )
    assert not (tmp_path / "d").exists()
