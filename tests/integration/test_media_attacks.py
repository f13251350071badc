"""Attacks on uploads and downloads (docs/api.md Media): bodies cut short, hostile part
headers, stored types that predate the checks, active content. A refusal stores nothing
(no media row, no blob, no event) and leaves the key unused; a download never breaks and
never runs in the hub's origin."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import httpx
import pytest

from hubproc import HubProcess, Setup

BOUNDARY = "b0undary7f3a"


def form(file_part: bytes, headers: bytes, caption: bytes | None = None) -> bytes:
    """A whole multipart body: a `file` part with `headers` after its disposition."""
    out = b""
    if caption is not None:
        out += (
            f"--{BOUNDARY}\r\n".encode()
            + b'Content-Disposition: form-data; name="text"\r\n\r\n'
            + caption
            + b"\r\n"
        )
    out += (
        f"--{BOUNDARY}\r\n".encode()
        + b'Content-Disposition: form-data; name="file"; filename="a.bin"\r\n'
        + headers
        + b"\r\n"
        + file_part
        + f"\r\n--{BOUNDARY}--\r\n".encode()
    )
    return out


def send(c: httpx.Client, room: str, body: bytes, key: str | None = None) -> httpx.Response:
    headers = {"Content-Type": f"multipart/form-data; boundary={BOUNDARY}"}
    if key:
        headers["Idempotency-Key"] = key
    return c.post(f"/v1/rooms/{room}/media", content=body, headers=headers)


def stored_nothing(setup: Setup, c: httpx.Client, data: bytes) -> None:
    assert c.get(f"/v1/rooms/{setup.room}/events").json()["events"] == []
    digest = hashlib.sha256(data).hexdigest()
    blobs = setup.hub.data_dir / "blobs"
    assert not (blobs / digest[:2] / digest).exists()
    assert [p for p in (blobs / "tmp").rglob("*") if p.is_file() and "up-" in p.name] == []


DATA = b"%PDF-1.4 the whole file\n" * 200
WHOLE = form(DATA, b"Content-Type: application/pdf\r\n")


@pytest.mark.parametrize(
    "cut",
    [
        WHOLE[: len(WHOLE) // 2],  # in the middle of the file's bytes
        WHOLE[: WHOLE.rindex(b"\r\n--")],  # every byte of the file, no boundary after it
        WHOLE[: WHOLE.rindex(b"--\r\n")],  # the boundary without its closing `--`
        WHOLE[: WHOLE.index(b"\r\n\r\n")],  # inside the part's headers
    ],
    ids=["mid-data", "before-boundary", "no-closing-dashes", "in-headers"],
)
def test_multipart_body_cut_before_its_closing_boundary_is_400_and_stores_nothing(
    setup: Setup, cut: bytes
) -> None:
    with setup.hub.client(setup.tokens["alice"]) as c:
        r = send(c, setup.room, cut, key="cut")
        assert r.status_code == 400, r.text
        assert r.json()["error"]["code"] == "invalid_request"
        stored_nothing(setup, c, cut[cut.index(b"%PDF") :] if b"%PDF" in cut else b"")
        stored_nothing(setup, c, DATA)
        whole = send(c, setup.room, WHOLE, key="cut")  # the key was not consumed
        assert whole.status_code == 201, whole.text
        assert whole.headers["idempotency-status"] == "created"
        assert whole.json()["media"]["sha256"] == hashlib.sha256(DATA).hexdigest()


@pytest.mark.parametrize(
    "ctype", [b"text/plain\x01", b"text/\x00html", b"text/pl\x0bain", b"image/png\x7f", b"a b/c"]
)
def test_part_content_type_that_is_no_media_type_is_refused(setup: Setup, ctype: bytes) -> None:
    body = form(b"hello", b"Content-Type: " + ctype + b"\r\n")
    with setup.hub.client(setup.tokens["alice"]) as c:
        r = send(c, setup.room, body, key="ct")
        assert r.status_code == 400, r.text
        error = r.json()["error"]
        assert (error["code"], error["field"]) == ("invalid_request", "file")
        assert "Content-Type" in error["message"]
        stored_nothing(setup, c, b"hello")
        ok = send(c, setup.room, form(b"hello", b"Content-Type: text/plain\r\n"), key="ct")
        assert ok.status_code == 201 and ok.headers["idempotency-status"] == "created"


def test_part_content_type_is_stored_normalized(setup: Setup) -> None:
    body = form(b"hello", b'Content-Type: Text/Plain ;Charset="utf-8"\r\n')
    with setup.hub.client(setup.tokens["alice"]) as c:
        r = send(c, setup.room, body)
        assert r.status_code == 201, r.text
        assert r.json()["media"]["mime_type"] == 'text/plain; charset="utf-8"'
        none = send(c, setup.room, form(b"raw", b""))
        assert none.json()["media"]["mime_type"] == "application/octet-stream"


def test_file_name_loses_its_control_characters(setup: Setup) -> None:
    body = WHOLE.replace(b'filename="a.bin"', b'filename="re\x1b[31mport\x07.pdf"')
    with setup.hub.client(setup.tokens["alice"]) as c:
        r = send(c, setup.room, body)
        assert r.status_code == 201, r.text
        assert r.json()["media"]["name"] == "re_[31mport_.pdf"
        got = c.get(r.json()["media"]["url"])
        assert got.status_code == 200 and got.content == DATA


def _set_stored_type(hub: HubProcess, media_id: str, mime: str) -> None:
    """Write a type as an older hub could have stored it, behind the hub's back."""
    if hub.db_url:
        import psycopg

        with psycopg.connect(hub.db_url, autocommit=True) as conn:
            conn.execute("UPDATE media SET mime_type = %s WHERE id = %s", (mime, media_id))
        return
    with sqlite3.connect(Path(hub.data_dir) / "hub.sqlite3") as conn:
        conn.execute("UPDATE media SET mime_type = ? WHERE id = ?", (mime, media_id))


def test_an_already_stored_bad_type_never_breaks_a_download(setup: Setup) -> None:
    with setup.hub.client(setup.tokens["alice"]) as c:
        r = send(c, setup.room, WHOLE)
        assert r.status_code == 201, r.text
        media = r.json()["media"]
        _set_stored_type(setup.hub, media["id"], "text/html\x01\r\nX-Injected: 1")
        for _ in range(2):  # the same connection serves it again
            got = c.get(media["url"])
            assert got.status_code == 200 and got.content == DATA
            assert got.headers["content-type"] == "application/octet-stream"
            assert "x-injected" not in got.headers
        assert c.get("/healthz").status_code == 200


@pytest.mark.parametrize(
    "ctype",
    ["text/html", "image/svg+xml", "application/xhtml+xml", "text/xml", "text/javascript"]
    + ["application/pdf", "image/png", "text/plain"],
)
def test_downloads_are_attachments_never_sniffed_never_run(setup: Setup, ctype: str) -> None:
    payload = b"<svg xmlns='http://www.w3.org/2000/svg'><script>alert(1)</script></svg>"
    with setup.hub.client(setup.tokens["alice"]) as c:
        r = send(c, setup.room, form(payload, f"Content-Type: {ctype}\r\n".encode()))
        assert r.status_code == 201, r.text
        got = c.get(r.json()["media"]["url"])
        assert got.status_code == 200 and got.content == payload
        assert got.headers["content-type"].split(";")[0] == ctype
        assert got.headers["x-content-type-options"] == "nosniff"
        assert got.headers["content-disposition"].startswith("attachment;")
        assert "sandbox" in got.headers["content-security-policy"]
