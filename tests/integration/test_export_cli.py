"""`agentpost room export` and `agentpost admin workspace export` (docs/cli.md "Export"),
run as the real command against a real hub: an export directory holds the export and every
file it names, each checked by sha256; a file changed on the hub stops the command.

One hub per engine serves this module, each test in a workspace of its own."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from agentpost.hub.blobs import BlobStore
from clirun import agentpost, json_error
from hubproc import Setup


@pytest.fixture
def setup(shared_setup: Setup) -> Setup:
    return shared_setup


def _upload(setup: Setup, data: bytes, name: str, token: str | None = None) -> dict[str, Any]:
    with setup.hub.client(token or setup.tokens["alice"]) as c:
        r = c.post(f"/v1/rooms/{setup.room}/media", files={"file": (name, data, "text/plain")})
        assert r.status_code == 201, r.text
        event: dict[str, Any] = r.json()["event"]
        return event


def _post(setup: Setup, text: str, room: str | None = None) -> dict[str, Any]:
    with setup.hub.client(setup.tokens["alice"]) as c:
        r = c.post(f"/v1/rooms/{room or setup.room}/messages", json={"text": text})
        assert r.status_code == 201, r.text
        event: dict[str, Any] = r.json()["event"]
        return event


def _private(path: Path) -> bool:
    return path.stat().st_mode & 0o077 == 0


def test_export_into_a_directory_brings_its_files(setup: Setup, tmp_path: Path) -> None:
    alice = setup.tokens["alice"]
    _post(setup, "before the files")
    one = _upload(setup, b"first file\n", "notes.txt")
    two = _upload(setup, b"second file\n" * 100, "../../etc/passwd")
    out = tmp_path / "export"
    p = agentpost(setup.hub, "room", "export", "general", "-o", f"{out}/", "--json", token=alice)
    said = json.loads(p.stdout)
    assert said["path"] == str(out / "general.jsonl") and said["format"] == "jsonl"
    assert said["events"] == 3 and said["last_seq"] == 3
    assert said["files"] == {"downloaded": 2, "kept": 0, "gone": 0}
    lines = [json.loads(x) for x in (out / "general.jsonl").read_text().splitlines()]
    assert lines[0]["export"] == "agentpost-room" and lines[-1]["end"] == "agentpost-room"
    for event in (one, two):
        (att,) = event["attachments"]
        written = out / f"files/{att['id']}-{att['name']}"
        assert written.parent == out / "files"
        assert hashlib.sha256(written.read_bytes()).hexdigest() == att["sha256"]
        assert _private(written)
    assert _private(out) and _private(out / "general.jsonl") and _private(out / "files")
    assert not list(out.rglob("*.part"))

    # Again into the same directory: only what is new is fetched, the export replaced.
    _upload(setup, b"third\n", "more.txt")
    p = agentpost(setup.hub, "room", "export", "general", "-o", str(out), "--json", token=alice)
    assert json.loads(p.stdout)["files"] == {"downloaded": 1, "kept": 2, "gone": 0}
    assert json.loads((out / "general.jsonl").read_text().splitlines()[-1])["last_seq"] == 4


def test_markdown_export_into_a_directory_links_and_brings_its_files(
    setup: Setup, tmp_path: Path
) -> None:
    event = _upload(setup, b"chart data\n", "chart.csv")
    (att,) = event["attachments"]
    args = ["room", "export", setup.room, "--format", "md", "-o", f"{tmp_path}/"]
    p = agentpost(setup.hub, *args, token=setup.tokens["carol"])
    assert "wrote" in p.stdout and "1 downloaded" in p.stdout
    md = (tmp_path / "general.md").read_text()
    link = f"files/{att['id']}-chart.csv"
    assert f"[chart.csv]({link})" in md
    assert (tmp_path / link).read_bytes() == b"chart data\n"


def test_export_to_stdout_and_to_a_file(setup: Setup, tmp_path: Path) -> None:
    _post(setup, "one line for stdout")
    p = agentpost(setup.hub, "room", "export", "general", token=setup.tokens["alice"])
    lines = [json.loads(x) for x in p.stdout.splitlines()]
    assert [line.get("text") for line in lines[1:-1]] == ["one line for stdout"]
    target = tmp_path / "room.md"
    args = ["room", "export", "general", "--format", "md", "-o", str(target)]
    p = agentpost(setup.hub, *args, token=setup.tokens["alice"])
    assert f"wrote {target}" in p.stdout and "files/" not in p.stdout
    assert "one line for stdout" in target.read_text()
    assert os.listdir(tmp_path) == ["room.md"]


def test_a_file_changed_on_the_hub_stops_the_export_loudly(setup: Setup, tmp_path: Path) -> None:
    event = _upload(setup, b"the true bytes\n", "truth.txt")
    (att,) = event["attachments"]
    blob = BlobStore(setup.hub.data_dir / "blobs").path_of(att["sha256"])
    os.chmod(blob, 0o600)
    blob.write_bytes(b"something else\n")
    out = tmp_path / "export"
    p = agentpost(
        setup.hub, "room", "export", "general", "-o", f"{out}/", "--json",
        token=setup.tokens["alice"], check=False,
    )  # fmt: skip
    assert p.returncode != 0
    err = json_error(p)
    assert err["code"] == "download_corrupt" and att["id"] in err["message"]
    assert not (out / "files").exists() or not list((out / "files").iterdir())


def test_a_file_lost_from_the_hubs_store_is_counted_gone_not_retried(
    setup: Setup, tmp_path: Path
) -> None:
    """Bytes removed from the hub's store behind its back: the download is `media_missing`,
    final (a retry cannot bring them back), so the export finishes and counts the file gone,
    as an embedded export marks it."""
    with setup.hub.client(setup.tokens["alice"]) as c:
        r = c.post(f"/v1/workspaces/{setup.workspace}/rooms", json={"name": "lost"})
        assert r.status_code == 201, r.text
        room = r.json()["room"]["id"]
        data = os.urandom(2000)
        r = c.post(f"/v1/rooms/{room}/media", files={"file": ("lost.bin", data, "text/plain")})
        assert r.status_code == 201, r.text
    (att,) = r.json()["event"]["attachments"]
    blob = BlobStore(setup.hub.data_dir / "blobs").path_of(att["sha256"])
    blob.unlink()
    out = tmp_path / "export"
    p = agentpost(
        setup.hub, "room", "export", room, "-o", f"{out}/", "--json",
        token=setup.tokens["alice"], check=False,
    )  # fmt: skip
    assert p.returncode == 0, p.stdout + p.stderr
    assert json.loads(p.stdout)["files"] == {"downloaded": 0, "kept": 0, "gone": 1}
    p = agentpost(
        setup.hub, "room", "export", room, "--files", "embed", "--json",
        token=setup.tokens["alice"],
    )  # fmt: skip
    (line,) = [json.loads(x) for x in p.stdout.splitlines() if '"attachments"' in x]
    assert line["attachments"][0].get("gone") is True


def test_export_refusals_say_why(setup: Setup, tmp_path: Path) -> None:
    with setup.hub.client(setup.tokens["alice"]) as c:
        r = c.post(f"/v1/workspaces/{setup.workspace}/rooms", json={"name": "secret"})
        assert r.status_code == 201, r.text
        secret = r.json()["room"]["id"]
    p = agentpost(
        setup.hub, "room", "export", secret, "-o", f"{tmp_path}/", "--json",
        token=setup.tokens["carol"], check=False,
    )  # fmt: skip
    assert p.returncode == 1 and json_error(p)["code"] == "channel_membership_required"
    assert os.listdir(tmp_path) == []  # nothing written, not even a part file
    p = agentpost(
        setup.hub, "room", "export", "general", "--format", "md", "--files", "embed", "--json",
        token=setup.tokens["alice"], check=False,
    )  # fmt: skip
    assert p.returncode == 2 and json_error(p)["code"] == "usage_error"
    p = agentpost(
        setup.hub, "room", "export", "general", "-o", str(tmp_path / "no" / "such" / "x.jsonl"),
        "--json", token=setup.tokens["alice"], check=False,
    )  # fmt: skip
    assert p.returncode == 1 and json_error(p)["code"] == "cannot_write"


def test_admin_exports_every_room_of_a_workspace(setup: Setup, tmp_path: Path) -> None:
    _post(setup, "in general")
    event = _upload(setup, b"shared file\n", "shared.txt")
    with setup.hub.client(setup.tokens["carol"]) as c:
        r = c.post(f"/v1/workspaces/{setup.workspace}/rooms", json={"name": "side"})
        assert r.status_code == 201, r.text
        side = r.json()["room"]["id"]
        r = c.post(f"/v1/rooms/{side}/messages", json={"text": "carol alone"})
        assert r.status_code == 201, r.text
        r = c.post(f"/v1/rooms/{side}/archive")
        assert r.status_code == 200, r.text
    out = tmp_path / "ws"
    p = agentpost(setup.hub, "admin", "workspace", "export", setup.workspace, "-o", str(out))
    assert "wrote 2 rooms (3 events)" in p.stdout and "1 downloaded" in p.stdout
    assert setup.hub.log_path is not None
    assert f"the operator exports workspace {setup.workspace} (2 rooms)" in (
        setup.hub.log_path.read_text()
    )
    index = json.loads((out / "workspace.json").read_text())
    assert index["export"] == "agentpost-workspace"
    assert [(r["name"], r["file"], r["events"]) for r in index["rooms"]] == [
        ("general", "general.jsonl", 2),
        ("side", "side.jsonl", 1),
    ]
    assert index["files"] == {"downloaded": 1, "kept": 0, "gone": 0}
    (att,) = event["attachments"]
    assert (out / f"files/{att['id']}-shared.txt").read_bytes() == b"shared file\n"
    # Each room's file is what its participant's export holds, event for event.
    member = agentpost(setup.hub, "room", "export", "general", token=setup.tokens["alice"])
    mine = [json.loads(x) for x in member.stdout.splitlines()]
    ops = [json.loads(x) for x in (out / "general.jsonl").read_text().splitlines()]
    assert ops[1:] == mine[1:]
    assert ops[0]["exported_by"] is None and ops[0]["room"]["id"] == setup.room
    side_lines = (out / "side.jsonl").read_text().splitlines()
    assert json.loads(side_lines[0])["room"]["archived"] is True
    assert "carol alone" in side_lines[1]


def test_workspace_export_needs_the_admin_token(setup: Setup, tmp_path: Path) -> None:
    p = agentpost(
        setup.hub, "admin", "workspace", "export", setup.workspace, "-o", str(tmp_path / "x"),
        "--json", "--admin-token", setup.tokens["alice"], check=False,
    )  # fmt: skip
    assert p.returncode == 1 and json_error(p)["code"] == "unauthorized"
    p = agentpost(
        setup.hub, "admin", "workspace", "export", "nosuchws", "-o", str(tmp_path / "y"),
        "--json", check=False,
    )  # fmt: skip
    assert p.returncode == 1 and json_error(p)["code"] == "no_workspace"
    with setup.hub.client(setup.hub.admin_token) as admin:
        r = admin.get(f"/v1/admin/workspaces/{setup.workspace}/media/md_nothere")
        assert r.status_code == 404 and r.json()["error"]["code"] == "media_not_found"


@contextlib.contextmanager
def cutting_proxy(upstream: str, after: int) -> Iterator[str]:
    """A TCP proxy to the hub that passes everything, except that the answer to a request
    whose line names `/export` is cut (both sockets closed) after `after` bytes: a broken
    connection in the middle of an export, as a real network or a stopped hub makes it."""
    up = urlsplit(upstream)
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def pipe(src: socket.socket, dst: socket.socket, answer: bool, cut: list[bool]) -> None:
        sent = 0
        try:
            while data := src.recv(65536):
                if answer and cut[0]:
                    data = data[: max(0, after - sent)]
                    sent += len(data)
                    dst.sendall(data)
                    if sent >= after:
                        break
                    continue
                if not answer and b"/export" in data.split(b"\r\n", 1)[0]:
                    cut[0] = True
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
                s.close()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            server = socket.create_connection((up.hostname, up.port))
            cut = [False]
            threading.Thread(target=pipe, args=(conn, server, False, cut), daemon=True).start()
            threading.Thread(target=pipe, args=(server, conn, True, cut), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        with contextlib.suppress(OSError):
            listener.shutdown(socket.SHUT_RDWR)  # wakes the accept()
        listener.close()


CUT = {(75, "export_cut_short")}


@pytest.mark.parametrize("after", [1500, 9000, 30000])
def test_an_export_cut_midway_over_the_wire_is_said_and_leaves_nothing(
    setup: Setup, tmp_path: Path, after: int
) -> None:
    """The connection breaks in the middle of the export (a real TCP cut between the
    command and the hub): the command says `export_cut_short` (retryable, exit 75) and leaves
    neither the export nor a part file; a retry over a whole connection writes it."""
    with setup.hub.client(setup.tokens["alice"]) as c:
        r = c.post(f"/v1/workspaces/{setup.workspace}/rooms", json={"name": f"long{after}"})
        assert r.status_code == 201, r.text
        room = r.json()["room"]["id"]
        for i in range(200):
            r = c.post(f"/v1/rooms/{room}/messages", json={"text": f"line {i} " + "x" * 200})
            assert r.status_code == 201, r.text
    target = tmp_path / "room.jsonl"
    with cutting_proxy(setup.hub.url, after) as url:
        p = agentpost(
            setup.hub, "room", "export", room, "-o", str(target), "--json",
            token=setup.tokens["alice"], env={"AGENTPOST_HUB": url}, check=False,
        )  # fmt: skip
        err = json_error(p)
        assert (p.returncode, err["code"]) in CUT, err
        assert err["retryable"] is True and "cut" in err["message"], err
        assert os.listdir(tmp_path) == []
        p = agentpost(
            setup.hub, "admin", "workspace", "export", setup.workspace,
            "-o", str(tmp_path / "ws"), "--json", env={"AGENTPOST_HUB": url}, check=False,
        )  # fmt: skip
        err = json_error(p)
        assert (p.returncode, err["code"]) in CUT and err["retryable"] is True, err
        # No index says the directory is whole; what is left is only rooms whose end line
        # came, each a whole export of its own, and no part file.
        left = sorted(x.name for x in (tmp_path / "ws").iterdir())
        assert "workspace.json" not in left and not [x for x in left if x.startswith(".")]
        for name in left:
            assert json.loads((tmp_path / "ws" / name).read_text().splitlines()[-1])["end"]
    p = agentpost(setup.hub, "room", "export", room, "-o", str(target), token=setup.tokens["alice"])
    lines = [json.loads(x) for x in target.read_text().splitlines()]
    assert len(lines) == 202 and lines[-1]["events"] == 200
    agentpost(setup.hub, "admin", "workspace", "export", setup.workspace, "-o", str(tmp_path / "ws"))
    assert (tmp_path / "ws" / "workspace.json").exists()
