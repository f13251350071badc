"""The CLI speaks plainly (issue 28): one error style, piped output one line per item,
`post` from stdin, queries that start with `-`, suggestions for a mistyped command.
Each test runs the real `agentpost` command against a real hub (or a real socket)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from clirun import agentpost, json_error
from hubproc import Setup


@contextmanager
def proxy_page(status: int) -> Iterator[str]:
    """A proxy in front of a hub that is down: its HTML error page, as nginx sends."""

    class Page(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = (
                b"<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n"
                b"<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx</center>\r\n"
                b"</body>\r\n</html>\r\n"
            )
            self.send_response(status)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_POST = do_GET

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Page)
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        t.join()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def test_errors_are_one_plain_line_without_python_reprs(setup: Setup) -> None:
    token = setup.tokens["alice"]
    down = f"http://127.0.0.1:{_free_port()}"
    p = agentpost(None, "whoami", token=token, env={"AGENTPOST_HUB": down}, check=False)
    assert p.returncode == 3
    assert p.stderr.strip() == (
        f"error hub_unreachable: nothing listens at {down} (connection refused): is the hub "
        "running (`agentpost serve`), and is AGENTPOST_HUB (or --hub) its address?"
    ), p.stderr
    assert "Error(" not in p.stderr and "(111" not in p.stderr

    with proxy_page(502) as url:
        p = agentpost(None, "whoami", token=token, env={"AGENTPOST_HUB": url}, check=False)
    assert p.returncode == 75, p.stderr
    assert p.stderr.count("\n") == 1 and "<html>" not in p.stderr, p.stderr
    assert "error http_502: 502 Bad Gateway from 127.0.0.1:" in p.stderr
    assert "(a proxy in front of the hub, or no hub at this address?)" in p.stderr

    tls = setup.hub.url.replace("http://", "https://")
    p = agentpost(None, "whoami", "--json", token=token, env={"AGENTPOST_HUB": tls}, check=False)
    err = json_error(p)
    assert p.returncode == 1, p.stdout  # a setting to fix, not an outage to wait out
    assert err["code"] == "not_configured" and err["retryable"] is False
    assert err["message"] == (
        f"{tls} does not speak TLS (the hub serves plain HTTP unless a proxy in front of it "
        f"adds TLS): use {setup.hub.url}"
    )

    p = agentpost(None, "whoami", token=token, env={"AGENTPOST_HUB": setup.hub.url + "/v1/"})
    assert "alice" in p.stdout  # the API's /v1 pasted on the URL names the same hub

    p = agentpost(
        None, "whoami", token=token, env={"AGENTPOST_HUB": "http://127.0.0.1:99999"}, check=False
    )
    assert p.returncode == 1
    assert "names port 99999; a port is 1 to 65535" in p.stderr and "Overflow" not in p.stderr


def test_serve_refuses_a_port_out_of_range_as_a_usage_error(tmp_path) -> None:  # noqa: ANN001
    p = agentpost(None, "serve", "--port", "99999", "--data", str(tmp_path / "d"), check=False)
    assert p.returncode == 2
    assert "Invalid value for '--port': 99999 is not in the range 0<=x<=65535" in p.stderr
    assert "internal" not in p.stderr and "Overflow" not in p.stderr


def test_a_mistyped_command_names_the_nearest_one() -> None:
    p = agentpost(None, "psot", check=False)
    assert p.returncode == 2
    assert "No such command 'psot'. Did you mean 'post'?" in p.stderr


def test_piped_output_is_one_line_per_item_whole_and_escaped(setup: Setup) -> None:
    alice, bot = setup.tokens["alice"], setup.tokens["bot"]
    long = "word " * 60
    agentpost(setup.hub, "post", setup.room, "-t", f"@bot line one\nline two\t{long}", token=alice)
    agentpost(setup.hub, "post", setup.room, "-t", "plain", token=alice)
    out = agentpost(setup.hub, "tail", setup.room, token=alice).stdout
    lines = out.splitlines()
    assert len(lines) == 2, out
    assert "@bot line one\\nline two\\t" + long.strip() in lines[0]
    out = agentpost(setup.hub, "inbox", token=bot).stdout
    rows = out.splitlines()
    assert len(rows) == 2, out  # the header and one wake-up
    assert rows[1].endswith("@bot line one\\nline two\\t" + long.strip()), rows[1]
    assert "…" not in out


def test_a_reader_that_closes_the_pipe_ends_the_command_quietly(setup: Setup) -> None:
    for i in range(3):
        agentpost(
            setup.hub, "post", setup.room, "-t", f"m{i} " + "x" * 300, token=setup.tokens["alice"]
        )
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTPOST_")}
    env |= {"AGENTPOST_HUB": setup.hub.url, "AGENTPOST_TOKEN": setup.tokens["alice"]}
    with setup.hub.client(setup.tokens["alice"]) as c:
        for i in range(400):
            body = {"text": f"bulk {i} " + "y" * 400}
            assert c.post(f"/v1/rooms/{setup.room}/messages", json=body).status_code == 201
    p = subprocess.run(
        [
            "bash",
            "-o",
            "pipefail",
            "-c",
            f"{sys.executable} -m agentpost tail {setup.room} | head -1",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert p.returncode == 0, p.stderr
    assert p.stderr == ""
    assert p.stdout.count("\n") == 1 and "m0" in p.stdout


def test_post_reads_text_or_a_file_from_stdin_and_refuses_nothing_to_post(
    setup: Setup,
) -> None:
    alice = setup.tokens["alice"]
    p = agentpost(
        setup.hub,
        "post",
        setup.room,
        "-t",
        "-",
        "--json",
        token=alice,
        stdin="from a pipe\nsecond line\n",
    )
    assert json.loads(p.stdout)["event"]["text"] == "from a pipe\nsecond line"
    p = agentpost(
        setup.hub,
        "post",
        setup.room,
        "-f",
        "-",
        "--name",
        "notes.md",
        "-t",
        "cap",
        "--json",
        token=alice,
        stdin="# notes\n",
    )
    event = json.loads(p.stdout)["event"]
    assert [a["name"] for a in event["attachments"]] == ["notes.md"]
    assert event["attachments"][0]["size"] == len("# notes\n")
    with setup.hub.client(alice) as c:
        before = c.get(f"/v1/rooms/{setup.room}").json()["room"]["last_seq"]
    p = agentpost(setup.hub, "post", setup.room, token=alice, check=False)
    assert p.returncode == 2
    assert "nothing to post: give --text TEXT (or -t - for stdin), or --file" in p.stderr
    p = agentpost(
        setup.hub, "post", setup.room, "-t", "-", "-f", "-", token=alice, check=False, stdin="x"
    )
    assert p.returncode == 2 and "both read stdin" in p.stderr
    with setup.hub.client(alice) as c:
        assert c.get(f"/v1/rooms/{setup.room}").json()["room"]["last_seq"] == before


def test_search_takes_a_query_that_starts_with_a_dash_and_names_rooms(setup: Setup) -> None:
    alice = setup.tokens["alice"]
    agentpost(setup.hub, "post", setup.room, "-t", "deploy the draft", token=alice)
    agentpost(setup.hub, "post", setup.room, "-t", "deploy the release", token=alice)
    for argv in (
        ["search", "deploy -draft"],
        ["search", "--", "-draft deploy"],
        ["search", "deploy", "-draft"],  # unquoted: the words are joined
        ["search", "-draft", "deploy"],
        ["search", "--", "-draft", "deploy"],
    ):
        out = agentpost(setup.hub, *argv, token=alice).stdout
        rows = out.splitlines()
        assert len(rows) == 2 and rows[1].endswith("deploy the release"), out
        assert "\tgeneral\t" in rows[1], rows[1]  # the room's name, not its id
    out = agentpost(setup.hub, "search", "-draft", "--room", "general", token=alice, check=False)
    assert out.returncode in (0, 1) and "No such option" not in out.stderr, out.stderr


def test_tail_says_which_message_a_reply_answers(setup: Setup) -> None:
    alice, bot = setup.tokens["alice"], setup.tokens["bot"]
    p = agentpost(setup.hub, "post", setup.room, "-t", "@bot do it", "--json", token=alice)
    first = json.loads(p.stdout)["event"]
    agentpost(
        setup.hub,
        "post",
        setup.room,
        "-t",
        "done",
        "--in-reply-to",
        first["id"],
        "--reply-kind",
        "result",
        token=bot,
    )
    lines = agentpost(setup.hub, "tail", setup.room, token=alice).stdout.splitlines()
    assert f"(answers #{first['seq']}) done" in lines[1], lines
    lines = agentpost(setup.hub, "tail", setup.room, "--after", "1", token=alice).stdout
    assert f"(answers {first['id']}) done" in lines  # not shown: named by its id


def test_an_agent_needs_an_owner_unless_said_otherwise(setup: Setup) -> None:
    ws = setup.workspace
    p = agentpost(setup.hub, "admin", "member", "add", ws, "stray", "--kind", "agent", check=False)
    assert p.returncode == 2
    assert "an agent needs --owner PERSON" in p.stderr and "--no-owner" in p.stderr
    with setup.hub.client(setup.hub.admin_token) as c:
        names = [m["name"] for m in c.get(f"/v1/admin/workspaces/{ws}/members").json()["members"]]
    assert "stray" not in names  # refused before anything was sent
    p = agentpost(
        setup.hub, "admin", "member", "add", ws, "stray", "--kind", "agent", "--no-owner", "--json"
    )
    assert json.loads(p.stdout)["member"]["owner"] is None
    p = agentpost(
        setup.hub,
        "admin",
        "member",
        "add",
        ws,
        "aide",
        "--kind",
        "agent",
        "--owner",
        "alice",
        "--json",
    )
    assert json.loads(p.stdout)["member"]["owner"] == "alice"
    p = agentpost(setup.hub, "admin", "member", "add", ws, "dana", "--owner", "alice", check=False)
    assert p.returncode == 2 and "--owner is for an agent" in p.stderr


def test_output_shapes_agree(setup: Setup) -> None:
    alice = setup.tokens["alice"]
    p = agentpost(
        setup.hub,
        "room",
        "create",
        "shapes",
        "-w",
        setup.workspace,
        "-p",
        "bot",
        "--json",
        token=alice,
    )
    room = json.loads(p.stdout)["room"]
    assert room["router"] == "sole-agent" and room["sensitive_filter"] is False
    assert room["max_delegation_depth"] == 8
    header = agentpost(setup.hub, "members", token=alice).stdout.splitlines()[0].split("\t")
    admin = agentpost(setup.hub, "admin", "member", "list", setup.workspace).stdout
    assert (
        admin.splitlines()[0].split("\t")[:4] == header[:4] == ["name", "kind", "owner", "status"]
    )
    made = agentpost(
        setup.hub, "thread", "ensure", "notes", "-w", setup.workspace, "--json", token=alice
    )
    thread = json.loads(made.stdout)["thread_id"]
    out = agentpost(setup.hub, "thread", "archive", thread, token=alice).stdout
    assert out.strip().endswith(f"({thread}) archived"), out
    out = agentpost(setup.hub, "thread", "unarchive", thread, token=alice).stdout
    assert out.strip().endswith(f"({thread}) unarchived"), out
    out = agentpost(setup.hub, "room", "archive", "shapes", token=alice).stdout
    assert out.strip().endswith(f"({room['id']}) archived"), out
    out = agentpost(setup.hub, "room", "unarchive", "shapes", token=alice).stdout
    assert out.strip().endswith(f"({room['id']}) unarchived"), out


def test_the_inbox_hook_says_a_missing_token_file_in_one_line(setup: Setup, tmp_path) -> None:  # noqa: ANN001
    missing = tmp_path / "nope" / "token"
    for env in (
        {"AGENTPOST_TOKEN_FILE": str(missing)},
        {"AGENTPOST_TOKEN_FILE": str(missing), "AGENTPOST_TOKEN": "ap_x"},
    ):
        p = agentpost(
            setup.hub,
            "inbox",
            "hook",
            "session-start",
            env=env,
            stdin='{"session_id": "s1", "source": "startup"}',
        )
        assert p.returncode == 0  # a hook never breaks the agent's turn
        assert p.stdout == ""
        lines = p.stderr.splitlines()
        assert len(lines) == 1 and "cannot read the token file" in lines[0], p.stderr


def test_an_unknown_field_is_named_and_bad_json_said_once(setup: Setup) -> None:
    with setup.hub.client(setup.tokens["alice"]) as c:
        r = c.post(f"/v1/rooms/{setup.room}/messages", json={"txt": "hi"})
        assert r.status_code == 400
        err = r.json()["error"]
        assert err["code"] == "invalid_request" and err["field"] == "$.txt", err
        r = c.post(f"/v1/workspaces/{setup.workspace}/rooms", json={"name": "x", "nope": 1})
        assert r.json()["error"]["field"] == "$.nope"
        r = c.post(
            f"/v1/rooms/{setup.room}/messages",
            content=b'{"text": hi}',
            headers={"Content-Type": "application/json"},
        )
        err = r.json()["error"]
        assert err["code"] == "invalid_json"
        assert err["message"].startswith("malformed JSON: ") and "malformed: " not in err["message"]
        assert c.get(f"/v1/rooms/{setup.room}").json()["room"]["last_seq"] == 0  # nothing posted
