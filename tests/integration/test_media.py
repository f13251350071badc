"""Media uploads: streamed, hashed, capped, content-addressed, participants only
(docs/api.md "Limits of what a request may carry")."""

from __future__ import annotations

import hashlib
import os

import pytest

from agentpost.hub.blobs import SMALL_BODY
from hubproc import HubProcess, Setup, fresh_workspace, make_setup


# One hub per engine for this module; each test makes its own workspace on it (the one
# test with its own upload cap starts its own hub).
@pytest.fixture
def setup(shared_setup: Setup) -> Setup:
    return shared_setup


def upload(
    c,
    room: str,
    data: bytes,
    name: str = "a.bin",
    key: str | None = None,  # noqa: ANN001
    caption: str | None = None,
):  # noqa: ANN201
    headers = {"Idempotency-Key": key} if key else {}
    form = {"text": caption} if caption is not None else None
    return c.post(
        f"/v1/rooms/{room}/media",
        files={"file": (name, data, "application/pdf")},
        data=form,
        headers=headers,
    )


def test_upload_makes_its_own_event_with_the_attachment(setup: Setup) -> None:
    data = b"%PDF-1.4 fake\n" * 1000
    with setup.hub.client(setup.tokens["alice"]) as c:
        r = upload(c, setup.room, data, "report.pdf", caption="  the report ")
        assert r.status_code == 201, r.text
        body = r.json()
        att = body["event"]["attachments"][0]
        assert body["event"]["type"] == "media" and body["event"]["text"] == "the report"
        assert att == {
            "id": body["media"]["id"],
            "name": "report.pdf",
            "mime_type": "application/pdf",
            "size": len(data),
            "sha256": hashlib.sha256(data).hexdigest(),
        }
        got = c.get(f"/v1/media/{att['id']}")
        assert got.status_code == 200 and got.content == data
        assert got.headers["content-type"].startswith("application/pdf")


def test_blobs_are_content_addressed_once(setup: Setup) -> None:
    data = b"same bytes"
    with setup.hub.client(setup.tokens["alice"]) as c:
        a = upload(c, setup.room, data).json()
        b = upload(c, setup.room, data).json()
    assert a["media"]["id"] != b["media"]["id"]
    digest = hashlib.sha256(data).hexdigest()
    blob = setup.hub.data_dir / "blobs" / digest[:2] / digest
    assert blob.read_bytes() == data
    assert list((setup.hub.data_dir / "blobs" / "tmp").iterdir()) == []


@pytest.mark.parametrize(
    "size", [1, SMALL_BODY - 400, SMALL_BODY + 1, 3 * SMALL_BODY], ids=["tiny", "small", "over", "large"]
)
def test_small_bodies_in_memory_and_large_ones_streamed_store_the_same(
    setup: Setup, size: int
) -> None:
    """A body up to `SMALL_BODY` is parsed in memory and written once; a longer one is
    streamed to a temp file: either way the blob is whole, named by its hash, and nothing
    is left in the temp dir."""
    data = os.urandom(size)
    digest = hashlib.sha256(data).hexdigest()
    with setup.hub.client(setup.tokens["alice"]) as c:
        r = upload(c, setup.room, data, "x.bin", key=f"size-{size}", caption="cap")
        assert r.status_code == 201, r.text
        assert r.json()["media"]["sha256"] == digest and r.json()["media"]["size"] == size
        assert r.json()["event"]["text"] == "cap"
        again = upload(c, setup.room, data, "x.bin", key=f"size-{size}", caption="cap")
        assert again.headers["idempotency-status"] == "replayed"
        got = c.get(f"/v1/media/{r.json()['media']['id']}")
        assert got.status_code == 200 and got.content == data
    blobs = setup.hub.data_dir / "blobs"
    assert (blobs / digest[:2] / digest).read_bytes() == data
    assert list((blobs / "tmp").iterdir()) == []


def test_keyed_upload_replays_and_conflicts_on_other_content(setup: Setup) -> None:
    with setup.hub.client(setup.tokens["alice"]) as c:
        first = upload(c, setup.room, b"one", key="up")
        again = upload(c, setup.room, b"one", key="up")
        other = upload(c, setup.room, b"two", key="up")
        assert first.headers["idempotency-status"] == "created"
        assert again.headers["idempotency-status"] == "replayed" and again.content == first.content
        assert other.status_code == 422
        assert other.json()["error"]["code"] == "idempotency_conflict"
        evs = c.get(f"/v1/rooms/{setup.room}/events").json()["events"]
        assert len(evs) == 1


def test_oversize_upload_is_413_and_keeps_the_key(make_hub) -> None:  # noqa: ANN001
    hub = make_hub(extra_args=["--max-upload-bytes", "1000"])
    s = make_setup(hub, ["alice"], [])
    with hub.client(s.tokens["alice"]) as c:
        r = upload(c, s.room, b"x" * 5000, key="big")
        assert (r.status_code, r.json()["error"]["code"]) == (413, "payload_too_large")
        assert list((hub.data_dir / "blobs" / "tmp").iterdir()) == []
        ok = upload(c, s.room, b"x" * 1000, key="big")
        assert ok.headers["idempotency-status"] == "created"


def test_media_downloads_only_for_participants(shared_hub: HubProcess) -> None:
    hub = shared_hub
    s = make_setup(hub, ["alice", "eve"], [], workspace=fresh_workspace())
    with hub.client(s.tokens["alice"]) as c:
        c.delete(f"/v1/rooms/{s.room}/participants/eve")
        media_id = upload(c, s.room, b"secret").json()["media"]["id"]
    with hub.client(s.tokens["eve"]) as eve:
        r = eve.get(f"/v1/media/{media_id}")
        assert (r.status_code, r.json()["error"]["code"]) == (404, "media_not_found")
    with hub.client() as anon:
        assert anon.get(f"/v1/media/{media_id}").status_code == 401


def test_bytes_lost_outside_the_hub_are_a_clean_media_missing(setup: Setup) -> None:
    """A file whose bytes vanished from the store (an operator's rm, a lost disk) answers a
    stable code and a message naming the remedy, is logged, and changes nothing: the bytes
    put back serve again."""
    data = os.urandom(3000)
    digest = hashlib.sha256(data).hexdigest()
    blob = setup.hub.data_dir / "blobs" / digest[:2] / digest
    with setup.hub.client(setup.tokens["alice"]) as c:
        media_id = upload(c, setup.room, data).json()["media"]["id"]
        aside = blob.with_name(digest + ".aside")
        blob.rename(aside)
        try:
            r = c.get(f"/v1/media/{media_id}")
            assert r.status_code == 500, r.text
            err = r.json()["error"]
            assert err["code"] == "media_missing" and "db verify" in err["message"]
            assert f"media {media_id}: its bytes {digest} are missing" in (
                setup.hub.log_path.read_text()  # type: ignore[union-attr]
            )
            assert c.get(f"/v1/rooms/{setup.room}/events").status_code == 200
        finally:
            aside.rename(blob)
        again = c.get(f"/v1/media/{media_id}")
        assert again.status_code == 200 and again.content == data


def test_bad_uploads_are_refused(setup: Setup) -> None:
    with setup.hub.client(setup.tokens["alice"]) as c:
        no_file = c.post(
            f"/v1/rooms/{setup.room}/media", data={"text": "x"}, files={"other": ("a", b"1")}
        )
        assert no_file.status_code == 400
        not_multipart = c.post(f"/v1/rooms/{setup.room}/media", json={"text": "x"})
        assert not_multipart.json()["error"]["code"] == "invalid_request"
        assert c.get(f"/v1/rooms/{setup.room}/events").json()["events"] == []


def test_message_can_reference_uploaded_media(setup: Setup) -> None:
    with setup.hub.client(setup.tokens["alice"]) as c:
        media_id = upload(c, setup.room, b"chart").json()["media"]["id"]
        r = c.post(
            f"/v1/rooms/{setup.room}/messages", json={"text": "see", "attachments": [media_id]}
        )
        assert r.status_code == 201
        assert [a["id"] for a in r.json()["event"]["attachments"]] == [media_id]
