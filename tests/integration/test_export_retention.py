"""Exports and retention (docs/api.md "Export", docs/operations.md "Retention"): a file the
room's retention ended is exported as gone (no path, no bytes, not fetched, not counted
against the embed cap), and a room whose old events were removed exports what is left."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from clirun import agentpost
from hubproc import HubProcess, make_setup, poll

FAST = {"AGENTPOST_SWEEP_INTERVAL": "0.2", "AGENTPOST_BLOB_FREE_GRACE": "0"}


def _admin_put(hub: HubProcess, path: str, json: dict[str, int]) -> Any:
    """Retention under a day is the admin's to set (docs/operations.md "Retention")."""
    with hub.client(hub.admin_token) as admin:
        return admin.put(path, json=json)


def _lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines()]


def test_an_expired_file_is_exported_as_gone(
    make_hub: Callable[..., HubProcess], tmp_path: Path
) -> None:
    hub = make_hub(env=FAST, extra_args=["--max-upload-bytes", "1000"])
    s = make_setup(hub, ["alice"], [])
    with hub.client(s.tokens["alice"]) as alice:
        old = [
            alice.post(
                f"/v1/rooms/{s.room}/media", files={"file": (f"old{n}.bin", bytes([n]) * 1000)}
            ).json()["event"]
            for n in range(5)
        ]
        assert alice.get(f"/v1/rooms/{s.room}/export", params={"files": "embed"}).status_code == 413
        r = _admin_put(hub, f"/v1/rooms/{s.room}/retention", json={"media_seconds": 1})
        assert r.status_code == 200, r.text
        ids = [e["attachments"][0]["id"] for e in old]
        poll(lambda: all(alice.get(f"/v1/media/{i}").status_code == 410 for i in ids), timeout=30)
        r = _admin_put(hub, f"/v1/rooms/{s.room}/retention", json={"media_seconds": 0})  # for ever
        assert r.status_code == 200, r.text
        r = alice.post(f"/v1/rooms/{s.room}/media", files={"file": ("new.txt", b"fresh\n")})
        assert r.status_code == 201, r.text
        jsonl = alice.get(f"/v1/rooms/{s.room}/export")
        embed = alice.get(f"/v1/rooms/{s.room}/export", params={"files": "embed"})
        md = alice.get(f"/v1/rooms/{s.room}/export", params={"format": "md"})
    assert embed.status_code == 200, embed.text  # expired files no longer count
    for text, key in [(jsonl.text, "path"), (embed.text, "content_base64")]:
        files = [a for line in _lines(text) if "seq" in line for a in line["attachments"]]
        assert len(files) == 6
        assert [a.get("gone", False) for a in files] == [True] * 5 + [False]
        assert [key in a for a in files] == [False] * 5 + [True]
    assert md.text.count("): no longer served") == 5 and "[new.txt](files/" in md.text

    out = tmp_path / "export"
    p = agentpost(
        hub, "room", "export", "general", "-o", f"{out}/", "--json", token=s.tokens["alice"]
    )
    assert json.loads(p.stdout)["files"] == {"downloaded": 1, "kept": 0, "gone": 5}
    assert [f.name.split("-", 1)[1] for f in (out / "files").iterdir()] == ["new.txt"]


def test_a_room_whose_old_events_were_removed_exports_what_is_left(
    make_hub: Callable[..., HubProcess],
) -> None:
    hub = make_hub(env=FAST)
    s = make_setup(hub, ["alice"], [])
    with hub.client(s.tokens["alice"]) as alice:
        for n in range(3):
            assert alice.post(f"/v1/rooms/{s.room}/messages", json={"text": f"old {n}"}).is_success
        r = _admin_put(hub, f"/v1/rooms/{s.room}/retention", json={"events_seconds": 1})
        assert r.status_code == 200, r.text
        poll(lambda: alice.get(f"/v1/rooms/{s.room}/events").json()["events"] == [], timeout=30)
        r = _admin_put(hub, f"/v1/rooms/{s.room}/retention", json={"events_seconds": 0})  # for ever
        assert r.status_code == 200, r.text
        new = alice.post(f"/v1/rooms/{s.room}/messages", json={"text": "a new day"}).json()
        jsonl = alice.get(f"/v1/rooms/{s.room}/export")
        md = alice.get(f"/v1/rooms/{s.room}/export", params={"format": "md"})
    head, event, end = _lines(jsonl.text)
    assert head["room"]["last_seq"] == 4 and event == new["event"]
    assert end == {"end": "agentpost-room", "events": 1, "last_seq": 4}
    assert "): a new day" in md.text and "*End of export: 1 event, up to #4.*" in md.text
