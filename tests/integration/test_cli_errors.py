"""The CLI's errors: with `--json` always the JSON error object; configuration mistakes are
final and name the setting; no traceback; output people read is not mangled."""

from __future__ import annotations

import json

import pytest

from clirun import agentpost, json_error
from hubproc import HubProcess, Setup


# One hub per engine for this module: its tests make no workspace or one of their own.
@pytest.fixture
def hub(shared_hub: HubProcess) -> HubProcess:
    return shared_hub


@pytest.fixture
def setup(shared_setup: Setup) -> Setup:
    return shared_setup


@pytest.mark.parametrize(
    "args",
    [
        ["post", "--json"],  # missing argument
        ["post", "general", "--bogus", "--json"],  # unknown option
        ["post", "general", "--file", "/no/such/report.pdf", "--json"],  # no such file
        ["room", "create", "x", "--mode", "star", "--json"],  # not a choice
        ["tail", "general", "--after", "many", "--json"],  # not an int
    ],
)
def test_usage_errors_with_json_are_the_json_error(hub: HubProcess, args: list[str]) -> None:
    p = agentpost(hub, *args, token="ap_x", check=False)
    assert p.returncode == 2
    err = json_error(p)
    assert err["code"] == "usage_error" and err["retryable"] is False
    assert err["message"]


def test_usage_errors_without_json_are_clicks_text(hub: HubProcess) -> None:
    p = agentpost(hub, "post", "general", "--file", "/no/such/report.pdf", check=False)
    assert p.returncode == 2 and p.stdout == ""
    assert "does not exist" in p.stderr and "Traceback" not in p.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["post", "general", "-t", "hi"],
        ["tail", "general"],
        ["inbox"],
        ["room", "create", "x", "-w", "acme"],
        ["thread", "send", "t", "-k", "k", "--text", "hi"],
        ["thread", "ensure", "t", "-w", "acme"],
    ],
)
def test_no_token_is_final_and_names_the_variable(hub: HubProcess, args: list[str]) -> None:
    p = agentpost(hub, *args, "--json", check=False)
    err = json_error(p)
    assert p.returncode == 1
    assert err["code"] == "not_configured" and err["retryable"] is False
    assert "AGENTPOST_TOKEN" in err["message"]
    human = agentpost(hub, *args, check=False)
    assert human.returncode == 1 and "AGENTPOST_TOKEN" in human.stderr


@pytest.mark.parametrize("url", ["127.0.0.1:8470", "localhost", "ftp://127.0.0.1:8470"])
def test_a_hub_url_without_http_is_final_and_names_the_variable(url: str) -> None:
    for args in (["post", "general", "-t", "hi"], ["thread", "send", "t", "-k", "k", "-t", "x"]):
        p = agentpost(
            None,
            *args,
            "--json",
            env={"AGENTPOST_HUB": url, "AGENTPOST_TOKEN": "ap_x"},
            check=False,
        )
        err = json_error(p)
        assert p.returncode == 1, p.stdout
        assert err["code"] == "not_configured" and err["retryable"] is False
        assert "AGENTPOST_HUB" in err["message"] and url in err["message"]
    caps = agentpost(None, "capabilities", "--json", env={"AGENTPOST_HUB": url}, check=False)
    assert caps.returncode == 1 and json_error(caps)["code"] == "not_configured"


def test_no_admin_token_is_final_and_names_the_variable(hub: HubProcess, tmp_path) -> None:  # noqa: ANN001
    env = {"AGENTPOST_HOME": str(tmp_path / "elsewhere"), "AGENTPOST_ADMIN_TOKEN": ""}
    p = agentpost(hub, "admin", "workspace", "create", "w", "--json", env=env, check=False)
    err = json_error(p)
    assert p.returncode == 1 and err["code"] == "not_configured"
    assert "AGENTPOST_ADMIN_TOKEN" in err["message"]


def test_a_non_ascii_post_key_is_refused_before_sending(setup: Setup) -> None:
    alice = setup.tokens["alice"]
    p = agentpost(
        setup.hub, "post", "general", "-t", "hi", "-k", "clé-1", "--json", token=alice, check=False
    )
    err = json_error(p)
    assert p.returncode == 1 and err["code"] == "invalid_idempotency_key"
    assert "visible ASCII" in err["message"]
    spaced = agentpost(
        setup.hub, "post", "general", "-t", "hi", "-k", "a b", token=alice, check=False
    )
    assert spaced.returncode == 1 and "invalid_idempotency_key" in spaced.stderr
    assert "Traceback" not in spaced.stderr
    with setup.hub.client(alice) as c:
        assert c.get(f"/v1/rooms/{setup.room}/events").json()["events"] == []


def test_messages_keep_their_brackets(tmp_path) -> None:  # noqa: ANN001
    # Rich markup would print `pip install -e '.'` here.
    p = agentpost(
        None,
        "db",
        "migrate",
        "--db",
        "postgresql://u@127.0.0.1:9/x",
        "--data",
        str(tmp_path),
        env={"PYTHONPATH": str(_no_psycopg(tmp_path))},
        check=False,
    )
    assert p.returncode == 1
    assert "pip install -e '.[postgres]'" in p.stderr, p.stderr


def _no_psycopg(tmp_path):  # noqa: ANN001, ANN202
    site = tmp_path / "site"
    site.mkdir()
    (site / "psycopg.py").write_text("raise ImportError('no psycopg here')\n")
    return site


def test_piped_output_is_plain_and_ids_are_whole(setup: Setup) -> None:
    alice = setup.tokens["alice"]
    made = agentpost(
        setup.hub,
        "room",
        "create",
        "a-room-with-a-rather-long-name-" + "x" * 28,
        "-w",
        setup.workspace,
        "-p",
        "bot",
        "-p",
        "helper",
        "-p",
        "carol",
        token=alice,
    )
    lines = made.stdout.splitlines()
    assert lines[0].split("\t") == ["id", "name", "mode", "participants"]
    row = lines[1].split("\t")
    assert row[0].startswith("rm_") and len(lines) == 2
    assert not any(ch in made.stdout for ch in "┏━│└")
    posted = agentpost(setup.hub, "post", "general", "-t", "x" * 300 + " @bot", token=alice)
    assert len(posted.stdout.splitlines()) == 1
    tail = agentpost(setup.hub, "tail", "general", token=alice)
    assert len(tail.stdout.splitlines()) == 1 and "x" * 300 in tail.stdout


def test_a_replayed_post_says_no_one_was_woken(setup: Setup) -> None:
    alice = setup.tokens["alice"]
    first = agentpost(setup.hub, "post", "general", "-t", "hi @bot", "-k", "r1", token=alice)
    assert "woke bot" in first.stdout
    again = agentpost(setup.hub, "post", "general", "-t", "hi @bot", "-k", "r1", token=alice)
    assert "replayed" in again.stdout and "no one was woken again" in again.stdout
    assert "woke bot" not in again.stdout


def test_the_inbox_shows_room_names_types_and_event_ids(setup: Setup) -> None:
    alice, bot = setup.tokens["alice"], setup.tokens["bot"]
    empty = agentpost(setup.hub, "inbox", token=bot)
    assert empty.stdout.startswith("(nothing new") and "┏" not in empty.stdout
    ev = json.loads(
        agentpost(setup.hub, "post", "general", "-t", "hi @bot", "--json", token=alice).stdout
    )["event"]
    lines = agentpost(setup.hub, "inbox", token=bot).stdout.splitlines()
    assert lines[0].split("\t") == ["cursor", "event", "room", "from", "type", "text"]
    cursor, event_id, room, sender, kind, text = lines[1].split("\t")
    assert (event_id, room, sender, kind, text) == (
        ev["id"],
        "general",
        "alice",
        "message",
        "hi @bot",
    )


def test_booleans_read_as_yes_and_no(setup: Setup) -> None:
    alice = setup.tokens["alice"]
    out = agentpost(
        setup.hub, "room", "settings", "general", "--sensitive-filter", token=alice
    ).stdout.splitlines()
    header, row = out[0].split("\t"), out[1].split("\t")
    assert dict(zip(header, row, strict=True))["sensitive filter"] == "yes"
    assert "True" not in out[1]


def test_capabilities_without_json_are_lines_for_people(hub: HubProcess) -> None:
    out = agentpost(hub, "capabilities").stdout
    assert not out.lstrip().startswith("{")
    assert "room_post_idempotency.header: Idempotency-Key" in out.splitlines()
    assert "thread_send_idempotency: yes" in out.splitlines()


def test_mail_json_is_the_one_style(tmp_path) -> None:  # noqa: ANN001
    # Outside a git repository: a final mail error, in the same shape as the hub commands'.
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTPOST_", "GIT_"))}
    env["GIT_CEILING_DIRECTORIES"] = str(tmp_path.parent)
    p = subprocess.run(
        [sys.executable, "-m", "agentpost", "mail", "inbox", "--json"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    err = json_error(p)
    assert p.returncode == 1 and err["retryable"] is False
    assert ", " not in p.stdout.split('"message"')[0] and '": ' not in p.stdout  # compact
