"""What a lower layer said, translated where it enters the CLI (docs/cli.md "The contract",
rule 1): one line in words that names what to change. A test per source."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from clirun import agentpost, json_error
from hubproc import HubProcess, Setup


@pytest.fixture
def hub(shared_hub: HubProcess) -> HubProcess:
    return shared_hub


def test_a_hub_name_that_does_not_resolve_names_the_variable() -> None:
    env = {"AGENTPOST_HUB": "http://no-such-hub.invalid:8470", "AGENTPOST_TOKEN": "ap_x"}
    p = agentpost(None, "whoami", env=env, check=False)
    assert p.returncode == 3, p.stderr
    (line,) = p.stderr.splitlines()
    assert line.startswith("error hub_unreachable: ")
    assert "cannot resolve host no-such-hub.invalid" in line and "AGENTPOST_HUB" in line
    assert "unknown error" not in line and "-2" not in line


def test_a_hub_url_with_a_path_says_it_must_be_the_root(setup_: Setup) -> None:
    env = {"AGENTPOST_HUB": setup_.hub.url + "/foo"}
    p = agentpost(None, "whoami", "--json", token=setup_.tokens["alice"], env=env, check=False)
    err = json_error(p)
    assert p.returncode == 1
    assert "root URL" in err["message"] and "/foo" in err["message"]
    assert "AGENTPOST_HUB" in err["message"]


def test_a_wrong_admin_token_is_not_read_as_a_missing_one(hub: HubProcess) -> None:
    env = {"AGENTPOST_ADMIN_TOKEN": "not-the-admin-token"}
    p = agentpost(hub, "admin", "workspace", "list", env=env, check=False)
    assert p.returncode == 1
    (line,) = p.stderr.splitlines()
    assert line.startswith("error unauthorized: ")
    assert "not this hub's admin token" in line and "admin.token" in line


def test_a_decoder_path_becomes_the_option(setup_: Setup) -> None:
    p = agentpost(
        setup_.hub,
        "room",
        "settings",
        "general",
        "--max-delegation-depth",
        "-1",
        token=setup_.tokens["alice"],
        check=False,
    )
    assert p.returncode == 1
    (line,) = p.stderr.splitlines()
    assert "--max-delegation-depth" in line and "$." not in line


def test_a_route_name_is_said_in_words(setup_: Setup) -> None:
    alice = setup_.tokens["alice"]
    agentpost(setup_.hub, "room", "create", "alone", token=alice)
    p = agentpost(setup_.hub, "post", "alone", "-t", "hi", token=alice)
    assert "woke no one (no @mention, and the room has no single agent to wake)" in p.stdout
    assert "no_sole_agent" not in p.stdout
    as_json = agentpost(setup_.hub, "post", "alone", "-t", "hi", "--json", token=alice)
    assert '"route":"no_sole_agent"' in as_json.stdout  # scripts keep the name


@pytest.fixture
def setup_(shared_setup: Setup) -> Setup:
    return shared_setup


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A local port held bound but not listening: a connection to it is refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


@pytest.mark.parametrize("command", [("db", "migrate"), ("serve", "--port", "0")])
def test_postgresql_unreachable_is_one_line_naming_host_and_variable(
    command: tuple[str, ...], closed_port: int, tmp_path: Path
) -> None:
    url = f"postgresql://ap@127.0.0.1:{closed_port}/agentpost"
    env = {"AGENTPOST_HOME": str(tmp_path)}
    p = agentpost(None, *command, "--db", url, env=env, check=False, timeout=30)
    assert p.returncode != 0
    (line,) = p.stderr.splitlines()
    assert f"cannot reach PostgreSQL at 127.0.0.1:{closed_port} (Connection refused)" in line
    assert "AGENTPOST_DB or --db" in line
    assert "Is the server running" not in line
