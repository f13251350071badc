"""Room export over HTTP (docs/api.md "Export"): the JSONL export is the events API line for
line (files named or embedded, receipts beside the events that asked agents), the Markdown
one reads as a transcript, and an export is refused exactly as reading the room is.

One hub per engine serves this module, each test in a workspace of its own; the tests with
their own upload cap start their own hub."""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from hubproc import HubProcess, Setup, make_setup


@pytest.fixture
def setup(shared_setup: Setup) -> Setup:
    return shared_setup


def _post(c: httpx.Client, room: str, text: str, **body: Any) -> dict[str, Any]:
    r = c.post(f"/v1/rooms/{room}/messages", json={"text": text, **body})
    assert r.status_code == 201, r.text
    event: dict[str, Any] = r.json()["event"]
    return event


def _upload(
    c: httpx.Client, room: str, data: bytes, name: str, caption: str = ""
) -> dict[str, Any]:
    files = {"file": (name, data, "application/octet-stream")}
    r = c.post(f"/v1/rooms/{room}/media", files=files, data={"text": caption})
    assert r.status_code == 201, r.text
    event: dict[str, Any] = r.json()["event"]
    return event


def _events(c: httpx.Client, room: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    while True:
        after = out[-1]["seq"] if out else 0
        r = c.get(f"/v1/rooms/{room}/events", params={"after": after, "limit": 1000})
        assert r.status_code == 200, r.text
        if not r.json()["events"]:
            return out
        out += r.json()["events"]


def _lines(r: httpx.Response) -> list[dict[str, Any]]:
    assert r.status_code == 200, r.text
    assert r.text.endswith("\n")
    return [json.loads(line) for line in r.text.splitlines()]


def _conversation(setup: Setup) -> dict[str, Any]:
    """A room with what a conversation holds: a person's mention of an agent, a file, a
    reply, an edit, a reaction, a redaction, and an agent's delegation with its receipt."""
    hub, room = setup.hub, setup.room
    data = b"quarterly numbers\n" * 50
    with hub.client(setup.tokens["alice"]) as alice, hub.client(setup.tokens["carol"]) as carol:
        hello = _post(alice, room, "hello <b>@bot</b> & everyone")
        media = _upload(alice, room, data, "report.txt", caption="the report")
        reply = _post(carol, room, "thanks,\nreading it now", in_reply_to=media["id"])
        r = carol.post(f"/v1/rooms/{room}/events/{reply['id']}/edits", json={"text": "read it"})
        assert r.status_code == 201, r.text
        r = alice.post(f"/v1/rooms/{room}/events/{reply['id']}/reactions", json={"emoji": "🎉"})
        assert r.status_code == 201, r.text
        oops = _post(alice, room, "the password is hunter2")
        r = alice.post(f"/v1/rooms/{room}/events/{oops['id']}/redactions", json={})
        assert r.status_code == 201, r.text
    with hub.client(setup.tokens["bot"]) as bot, hub.client(setup.tokens["helper"]) as helper:
        asked = _post(bot, room, "@helper sum the numbers")
        done = _post(helper, room, "the sum is 42", in_reply_to=asked["id"], reply_kind="result")
    return {
        "hello": hello,
        "media": media,
        "data": data,
        "reply": reply,
        "oops": oops,
        "asked": asked,
        "done": done,
    }


def test_jsonl_export_is_the_events_api_line_for_line(setup: Setup) -> None:
    said = _conversation(setup)
    with setup.hub.client(setup.tokens["alice"]) as alice:
        r = alice.get(f"/v1/rooms/{setup.room}/export")
        served = _events(alice, setup.room)
        room = alice.get(f"/v1/rooms/{setup.room}").json()["room"]
        delivery = alice.get(f"/v1/events/{said['asked']['id']}/delivery").json()["delivery"]
    assert r.headers["content-type"].startswith("application/x-ndjson")
    assert r.headers["content-disposition"].startswith('attachment; filename="general.jsonl"')
    assert r.headers["cache-control"] == "no-store"
    head, *body, end = _lines(r)
    assert head["export"] == "agentpost-room" and head["version"] == 1
    assert head["room"] == room and head["files"] == "paths"
    assert head["exported_by"] == "alice" and head["exported_at"].endswith("Z")
    assert end == {"end": "agentpost-room", "events": len(served), "last_seq": room["last_seq"]}

    events = [line for line in body if "seq" in line]
    receipts = {line["receipts_of"]: line["receipts"] for line in body if "receipts_of" in line}
    assert len(events) + len(receipts) == len(body)
    media_id = said["media"]["attachments"][0]["id"]
    for line in events:  # a file keeps its fields and gains where the export keeps it
        for att in line["attachments"]:
            assert att.pop("path") == f"files/{media_id}-report.txt"
    assert events == served
    # The receipts of the events that asked agents, as their delivery state says them.
    assert receipts[said["asked"]["id"]] == delivery["receipts"]
    assert receipts[said["asked"]["id"]][0]["state"] == "replied"
    assert said["hello"]["id"] in receipts  # alice's mention woke bot
    assert said["reply"]["id"] not in receipts  # it woke no agent
    # Each receipts line follows its event.
    for n, line in enumerate(body):
        if "receipts_of" in line:
            assert body[n - 1]["id"] == line["receipts_of"]
    by_id = {e["id"]: e for e in events}
    assert by_id[said["oops"]["id"]]["redacted"] is True
    assert "hunter2" not in r.text
    assert by_id[said["reply"]["id"]]["text"] == "read it" and by_id[said["reply"]["id"]]["edited"]


def test_markdown_export_reads_as_a_transcript(setup: Setup) -> None:
    said = _conversation(setup)
    with setup.hub.client(setup.tokens["carol"]) as carol:
        r = carol.get(f"/v1/rooms/{setup.room}/export", params={"format": "md"})
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/markdown")
    assert 'filename="general.md"' in r.headers["content-disposition"]
    md = r.text
    assert md.startswith("# general\n")
    media_id = said["media"]["attachments"][0]["id"]
    seq = {k: said[k]["seq"] for k in ("hello", "media", "reply", "oops", "asked", "done")}
    # Texts, never as HTML: the message's markup is written as entities.
    hello = f", #{seq['hello']}): hello &lt;b&gt;@bot&lt;/b&gt; &amp; everyone"
    assert "**alice** (" in md and hello in md
    assert "<b>" not in md
    assert (
        f"- file [report.txt](files/{media_id}-report.txt) (application/octet-stream, 900 bytes)"
        in md
    )
    assert f"replying to [#{seq['media']}](#seq-{seq['media']})" in md
    assert "*(edited)*: read it" in md and "- reactions: 🎉 1 (alice)" in md
    assert f"#{seq['oops']}): *(message deleted)*" in md and "hunter2" not in md
    assert f"replying to [#{seq['asked']}](#seq-{seq['asked']}) (returned): the sum is 42" in md
    assert f"- reported back: helper returned in [#{seq['done']}](#seq-{seq['done']})" in md
    assert f'<a id="seq-{seq["asked"]}"></a>**bot**' in md
    end = {"end": "agentpost-room", "events": seq["done"], "last_seq": seq["done"]}
    assert md.endswith(f"<!-- agentpost-export {json.dumps(end, separators=(',', ':'))} -->\n")


def test_files_embed_carries_each_files_bytes(setup: Setup) -> None:
    said = _conversation(setup)
    with setup.hub.client(setup.tokens["alice"]) as alice:
        r = alice.get(f"/v1/rooms/{setup.room}/export", params={"files": "embed"})
    head, *body, end = _lines(r)
    assert head["files"] == "embed" and end["end"] == "agentpost-room"
    (att,) = [a for line in body for a in line.get("attachments", [])]
    assert "path" not in att
    assert base64.b64decode(att.pop("content_base64")) == said["data"]
    assert att == said["media"]["attachments"][0]
    assert hashlib.sha256(said["data"]).hexdigest() == att["sha256"]


def test_a_file_attached_again_is_embedded_once(make_hub: Callable[..., HubProcess]) -> None:
    """The embed cap counts each file once, so each file's bytes are written once: the later
    events that carry it name the event whose line holds them."""
    hub = make_hub()
    s = make_setup(hub, ["alice"], [])
    with hub.client(s.tokens["alice"]) as alice:
        up = _upload(alice, s.room, b"x" * 5000, "big.bin")
        media_id = up["attachments"][0]["id"]
        again = [_post(alice, s.room, f"again {i}", attachments=[media_id]) for i in range(3)]
        r = alice.get(f"/v1/rooms/{s.room}/export", params={"files": "embed"})
    _, *body, _ = _lines(r)
    atts = [a for line in body for a in line.get("attachments", [])]
    assert len(atts) == 4
    assert base64.b64decode(atts[0]["content_base64"]) == b"x" * 5000
    assert [a.get("embedded_in") for a in atts[1:]] == [up["seq"]] * 3
    assert all("content_base64" not in a for a in atts[1:])
    assert [e["seq"] for e in again] == [up["seq"] + 1, up["seq"] + 2, up["seq"] + 3]


def test_a_room_longer_than_a_page_is_exported_whole(setup: Setup) -> None:
    with setup.hub.client(setup.tokens["alice"]) as alice:
        for n in range(520):  # the export reads 500 events a page
            _post(alice, setup.room, f"message {n}")
        jsonl = alice.get(f"/v1/rooms/{setup.room}/export")
        md = alice.get(f"/v1/rooms/{setup.room}/export", params={"format": "md"})
        served = _events(alice, setup.room)
    head, *events, end = _lines(jsonl)
    assert [e["seq"] for e in events if "seq" in e] == list(range(1, 521))
    assert [e for e in events if "seq" in e] == served
    assert end == {"end": "agentpost-room", "events": 520, "last_seq": 520}
    assert md.text.count("): message ") == 520 and md.text.rstrip().endswith("-->")


@pytest.mark.parametrize(
    "query,field",
    [
        ({"format": "xml"}, "format"),
        ({"format": ""}, "format"),
        ({"files": "zip"}, "files"),
        ({"format": "md", "files": "embed"}, "files"),
    ],
)
def test_a_bad_format_or_files_is_refused_naming_it(
    setup: Setup, query: dict[str, str], field: str
) -> None:
    with setup.hub.client(setup.tokens["alice"]) as alice:
        r = alice.get(f"/v1/rooms/{setup.room}/export", params=query)
        assert r.status_code == 400, r.text
        assert r.json()["error"]["code"] == "invalid_request"
        assert r.json()["error"]["field"] == field


def _refusal(c: httpx.Client, path: str) -> tuple[int, str]:
    r = c.get(path)
    return r.status_code, r.json()["error"]["code"]


def test_an_export_is_refused_exactly_as_reading_the_room(setup: Setup) -> None:
    hub, room = setup.hub, setup.room
    other = make_setup(hub, ["olga"], [], workspace=setup.workspace + "x")
    with hub.client(setup.tokens["alice"]) as alice:
        _post(alice, room, "private things")
        r = alice.delete(f"/v1/rooms/{room}/participants/carol")
        assert r.status_code == 200, r.text
    with hub.client(hub.admin_token) as admin:
        r = admin.delete(f"/v1/admin/workspaces/{setup.workspace}/members/helper")
        assert r.status_code == 200, r.text
    callers: dict[str, str | None] = {
        "carol (taken out of the room)": setup.tokens["carol"],
        "helper (removed from the workspace)": setup.tokens["helper"],
        "olga (another workspace)": other.tokens["olga"],
        "the admin token": hub.admin_token,
        "no token": None,
        "a made-up token": "nope",
    }
    for who, token in callers.items():
        with hub.client(token) as c:
            refused = _refusal(c, f"/v1/rooms/{room}/export")
            assert refused == _refusal(c, f"/v1/rooms/{room}/events"), who
            assert refused[0] in (401, 403, 404), (who, refused)
            r = c.get(f"/v1/rooms/{room}/export", params={"format": "md"})
            assert "private things" not in r.text, who
    with hub.client(setup.tokens["alice"]) as alice:
        assert _refusal(alice, "/v1/rooms/rm_nothere/export") == (404, "room_not_found")


def test_embedding_more_than_four_uploads_worth_is_refused(
    make_hub: Callable[..., HubProcess],
) -> None:
    hub = make_hub(extra_args=["--max-upload-bytes", "1000"])
    s = make_setup(hub, ["alice"], [])
    with hub.client(s.tokens["alice"]) as alice:
        for n in range(4):
            _upload(alice, s.room, bytes([n]) * 1000, f"f{n}.bin")
        r = alice.get(f"/v1/rooms/{s.room}/export", params={"files": "embed"})
        assert r.status_code == 200, r.text  # 4000 bytes: at the cap
        _upload(alice, s.room, b"x", "one-more.bin")
        last_seq = alice.get(f"/v1/rooms/{s.room}").json()["room"]["last_seq"]
        r = alice.get(f"/v1/rooms/{s.room}/export", params={"files": "embed"})
        assert r.status_code == 413, r.text
        err = r.json()["error"]
        assert err["code"] == "payload_too_large"
        assert (
            "4001 bytes" in err["message"] and "4 × this hub's max upload bytes" in err["message"]
        )
        assert "files=paths" in err["message"]
        r = alice.get(f"/v1/rooms/{s.room}/export")  # by path, nothing is too large
        assert r.status_code == 200 and _lines(r)[-1]["last_seq"] == last_seq
        assert alice.get(f"/v1/rooms/{s.room}").json()["room"]["last_seq"] == last_seq


def test_redacted_files_are_not_counted_nor_embedded(make_hub: Callable[..., HubProcess]) -> None:
    hub = make_hub(extra_args=["--max-upload-bytes", "1000"])
    s = make_setup(hub, ["alice"], [])
    with hub.client(s.tokens["alice"]) as alice:
        big = [_upload(alice, s.room, bytes([n]) * 1000, f"f{n}.bin") for n in range(5)]
        assert alice.get(f"/v1/rooms/{s.room}/export", params={"files": "embed"}).status_code == 413
        r = alice.post(f"/v1/rooms/{s.room}/events/{big[0]['id']}/redactions", json={})
        assert r.status_code == 201, r.text
        r = alice.get(f"/v1/rooms/{s.room}/export", params={"files": "embed"})
    lines = _lines(r)
    embedded = [a for line in lines if "seq" in line for a in line["attachments"]]
    assert len(embedded) == 4 and all("content_base64" in a for a in embedded)


def test_the_hub_says_it_exports(setup: Setup) -> None:
    with setup.hub.client() as c:
        assert "export" in c.get("/v1/capabilities").json()["features"]
