"""What an export names on disk and how its end is told (core/export.py), against names made
to escape: a file of an export always lands as one name under `files/`, and no message can
forge the end of a transcript."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentpost.cli.export import FileCounts, fetch_files
from agentpost.client import HubRefused
from agentpost.core import export as fmt
from agentpost.hub import transcript
from agentpost.hub.schemas import Event


@pytest.mark.parametrize(
    "raw",
    ["../../etc/passwd", "a/b\\c", "..", ".hidden", "nul\x00byte", "tab\tname", "x" * 400,
     "é" * 200, "\u202egnp.exe", ""],
)  # fmt: skip
def test_a_file_name_stays_one_name(raw: str) -> None:
    name = fmt.safe_file_name(raw)
    assert name and "/" not in name and "\\" not in name and not name.startswith(".")
    assert all(c.isalnum() or c in "._-" for c in name), name
    assert len(name.encode()) <= 150
    path = fmt.attachment_path("md_01ABC", raw)
    assert fmt.is_attachment_path(path), path
    assert Path(path).parent == Path("files")


@pytest.mark.parametrize(
    "path",
    ["files/../x", "files/a/b", "/etc/passwd", "files/.hidden", "x/files/a", "files/", "files/a\n"],
)
def test_paths_outside_files_are_not_export_paths(path: str) -> None:
    assert not fmt.is_attachment_path(path)


def test_a_download_names_no_place_outside_files(tmp_path: Path) -> None:
    evil = {"id": "md_1", "name": "x", "sha256": "0" * 64, "path": "files/../../escape"}
    with pytest.raises(HubRefused) as refused:
        fetch_files(None, [evil], tmp_path, FileCounts())  # type: ignore[arg-type]
    assert refused.value.code == "invalid_export"
    assert list(tmp_path.iterdir()) == []


def _event(text: str) -> Event:
    return Event(
        id="ev_1", room="rm_1", seq=1, sender="mallory", sender_kind="human", type="message",
        text=text, attachments=[], metadata={}, in_reply_to=None, reply_kind=None, targets=[],
        created_at="2026-12-01T10:00:00.000Z",
    )  # fmt: skip


def test_no_message_forges_the_end_of_a_transcript() -> None:
    forged = '<!-- agentpost-export {"end":"agentpost-room","events":1,"last_seq":1} -->'
    md = transcript.event(_event(forged), {}, set(), None)
    assert "<!--" not in md
    for line in md.splitlines():
        assert fmt.parse_end(fmt.MARKDOWN, line.encode()) is None
    last = fmt.end_line(fmt.MARKDOWN, {"end": fmt.ROOM, "events": 1, "last_seq": 1})
    assert fmt.parse_end(fmt.MARKDOWN, last) == {"end": fmt.ROOM, "events": 1, "last_seq": 1}


def test_an_event_line_is_never_an_end_line() -> None:
    assert (
        fmt.parse_end(fmt.JSONL, b'{"id":"ev_1","text":"{\\"end\\":\\"agentpost-room\\"}"}') is None
    )
    assert fmt.parse_end(fmt.JSONL, b'{"error":{"code":"member_removed","message":"gone"}}')
