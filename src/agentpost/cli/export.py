"""`agentpost room export` and `agentpost admin workspace export` (docs/cli.md "Export").

An export file is written whole or not at all: it goes to a `.part` file beside its place,
and only an export that ended with its end line (client/exports.py) is fsync'd and renamed
into place. In a directory, the files of the export go beside it, `files/<media id>-<name>`,
each checked against the sha256 the export names for it (a mismatch stops the command, exit
1); a file already there with that sha256 is kept, so exporting into the same directory again
fetches only what is new. Everything written is the caller's alone (mode 0600, folders 0700):
an export holds a room's messages.
"""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import click
import msgspec

from agentpost.cli.admin import _admin_options, workspace
from agentpost.cli.common import (
    EXIT_FINAL,
    admin_token,
    client,
    emit,
    fail,
    hub_errors,
    hub_options,
    json_option,
    say,
)
from agentpost.cli.rooms import room
from agentpost.client import HubClient, HubRefused
from agentpost.client.exports import error_of
from agentpost.core import export as fmt

# A file the hub no longer serves is recorded as gone, not an error: its event was
# redacted, or the room's retention ended it, after the export named it.
# Files no longer served, counted as gone: ended on purpose, or (media_missing) lost from
# the hub's store, which the hub logs and `agentpost db verify` lists.
GONE = {"media_redacted", "media_expired", "media_missing"}
INDEX = "workspace.json"


@dataclass
class FileCounts:
    """What became of the files an export names."""

    downloaded: int = 0
    kept: int = 0  # there already, with the right sha256
    gone: int = 0  # no longer served by the hub

    def line(self) -> str:
        n = self.downloaded + self.kept + self.gone
        return (
            f"{n} file{'s' if n != 1 else ''} in {fmt.FILES_DIR}/: {self.downloaded} downloaded,"
            f" {self.kept} already there, {self.gone} no longer served"
        )


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class _Part:
    """A private `.part` file being written; `keep` puts it in its place once whole."""

    def __init__(self, directory: Path) -> None:
        fd, name = tempfile.mkstemp(prefix=".agentpost-export-", suffix=".part", dir=directory)
        self.path = Path(name)
        self.sink: IO[bytes] = os.fdopen(fd, "wb")

    def keep(self, dest: Path) -> None:
        """fsync the file, move it to `dest` (replacing an older one there), fsync the dir."""
        self.sink.flush()
        os.fsync(self.sink.fileno())
        self.sink.close()
        os.replace(self.path, dest)
        _fsync_dir(dest.parent)

    def drop(self) -> None:
        self.sink.close()
        self.path.unlink(missing_ok=True)  # gone already once kept


@contextmanager
def _part(directory: Path) -> Iterator[_Part]:
    """A `.part` file in `directory`, removed at the end unless it was kept."""
    part = _Part(directory)
    try:
        yield part
    finally:
        part.drop()


def _private_dir(path: Path) -> None:
    path.mkdir(mode=0o700, parents=True, exist_ok=True)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def fetch_files(
    c: HubClient,
    attachments: Iterable[dict[str, Any]],
    into: Path,
    counts: FileCounts,
    workspace_name: str | None = None,
) -> None:
    """Download each attachment an export names into `into/files/`, once per media id, its
    bytes checked against the export's sha256 (and the hub's, by `fetch_media`)."""
    seen: set[str] = set()
    for att in attachments:
        media_id = str(att.get("id", ""))
        if media_id in seen:
            continue
        seen.add(media_id)
        if att.get("gone"):
            counts.gone += 1
            continue
        rel = str(att.get("path") or fmt.attachment_path(media_id, str(att.get("name", ""))))
        if not fmt.is_attachment_path(rel):
            raise HubRefused(
                "invalid_export",
                f"the export names the file path {rel[:120]!r}, which is not one name under"
                f" {fmt.FILES_DIR}/; nothing was written there",
            )
        target = into / rel
        want = str(att.get("sha256", ""))
        if target.is_file() and _sha256(target) == want:
            counts.kept += 1
            continue
        _private_dir(target.parent)
        with _part(target.parent) as part:
            try:
                got = c.fetch_media(media_id, part.sink, None, workspace_name)
            except HubRefused as exc:
                if exc.code not in GONE:
                    raise
                counts.gone += 1
                continue
            if got.sha256 != want:
                raise HubRefused(
                    "download_corrupt",
                    f"{media_id} ({att.get('name')}): its bytes have sha256 {got.sha256}, not"
                    f" the {want} the export names; {target} was not written",
                )
            part.keep(target)
        counts.downloaded += 1


def attachments_in(export_file: Path) -> Iterator[dict[str, Any]]:
    """The attachments of the events of a JSONL export, read from disk line by line."""
    with open(export_file, "rb") as f:
        for line in f:
            if not line.startswith(b'{"id":'):
                continue  # the header, receipts and end lines
            event = msgspec.json.decode(line)
            yield from event.get("attachments") or []


def attachments_up_to(c: HubClient, room_id: str, last_seq: int) -> Iterator[dict[str, Any]]:
    """The attachments of the room's events up to `last_seq`, from the events API: what a
    Markdown export links (its files are named as a JSONL export names them)."""
    after = 0
    while after < last_seq:
        page = c.events(room_id, after, 1000)
        if not page:
            return
        for ev in page:
            if ev.seq > last_seq:
                return
            for a in ev.attachments:
                yield {**msgspec.to_builtins(a), "path": fmt.attachment_path(a.id, a.name)}
        after = page[-1].seq


def _output(output: str) -> tuple[Path, Path | None]:
    """(directory to write in, file to write or None: named by the hub, in the directory)."""
    path = Path(output)
    if output.endswith("/") or path.is_dir():
        _private_dir(path)
        return path, None
    return path.parent, path


@room.command("export")
@click.argument("room_ref", metavar="ROOM")
@click.option(
    "--format",
    "format_",
    type=click.Choice(fmt.FORMATS),
    default=fmt.JSONL,
    show_default=True,
    help="jsonl: one JSON object per line, each event as the events API serves it; md: a"
    " readable transcript.",
)
@click.option(
    "--files",
    type=click.Choice(fmt.FILE_MODES),
    default=fmt.PATHS,
    show_default=True,
    help="paths: name each file (downloaded beside the export with --output DIR); embed: put"
    " the bytes in the export (jsonl, rooms whose files total at most 4 × the upload cap).",
)
@click.option(
    "--output",
    "-o",
    default=None,
    help="FILE, or DIR (an existing directory, or a path ending in /) to write"
    " DIR/<room>.<format> and DIR/files/; default: stdout.",
)
@hub_options
@json_option
def room_export(
    room_ref: str,
    format_: str,
    files: str,
    output: str | None,
    hub: str,
    token: str | None,
    as_json: bool,
) -> None:
    """Export ROOM: every event up to now, in one file that is whole or not written.

    \b
    agentpost room export general > general.jsonl
    agentpost room export general --format md -o general.md
    agentpost room export general -o backup/      # backup/general.jsonl and backup/files/
    """
    if format_ == fmt.MARKDOWN and files == fmt.EMBED:
        raise click.UsageError("--files embed is for --format jsonl (a transcript links files)")
    if output in (None, "-"):
        with hub_errors(as_json), client(hub, token) as c:
            c.export_room(c.resolve_room(room_ref), sys.stdout.buffer, format_, files)
        return
    assert output is not None
    counts = FileCounts()
    with hub_errors(as_json), client(hub, token) as c:
        room_id = c.resolve_room(room_ref)
        try:
            directory, named = _output(output)
            with _part(directory) as part:
                got = c.export_room(room_id, part.sink, format_, files)
                dest = named if named is not None else directory / got.name
                part.keep(dest)
            if named is None and files == fmt.PATHS:
                found = (
                    attachments_in(dest)
                    if format_ == fmt.JSONL
                    else attachments_up_to(c, room_id, got.last_seq)
                )
                fetch_files(c, found, directory, counts)
        except OSError as exc:
            fail(as_json, "cannot_write", f"{exc.filename}: {exc.strerror}", False, EXIT_FINAL)
    out = {
        "path": str(dest),
        "room": room_id,
        "format": format_,
        "events": got.events,
        "last_seq": got.last_seq,
        "bytes": got.size,
        "files": msgspec.to_builtins(counts) if named is None and files == fmt.PATHS else None,
    }

    def human() -> None:
        say(f"wrote {dest} ({got.events} events up to #{got.last_seq}, {got.size} bytes)")
        if out["files"] is not None:
            say(counts.line())

    emit(as_json, out, human)


@dataclass
class _Splitter:
    """Writes each room of a workspace export to `<room>.jsonl` in `into`, as its lines
    arrive; a room's file is kept only once its end line came."""

    into: Path
    header: dict[str, Any] | None = None
    rooms: list[dict[str, Any]] = field(default_factory=list)
    _open: tuple[_Part, dict[str, Any]] | None = None
    _names: set[str] = field(default_factory=set)

    def take(self, line: bytes) -> None:
        if self._open is not None:
            part, entry = self._open
            part.sink.write(line)
            if line.startswith((b'{"end":', b'{"error":')):
                end = fmt.parse_end(fmt.JSONL, line)
                if end is None or "error" in end:
                    raise error_of((end or {}).get("error") or {})
                part.keep(self.into / entry["file"])
                entry.update(events=end["events"], last_seq=end["last_seq"])
                self.rooms.append(entry)
                self._open = None
            return
        head = msgspec.json.decode(line) if line.startswith(b'{"export":') else None
        if isinstance(head, dict) and head.get("export") == fmt.WORKSPACE:
            self.header = head
        elif isinstance(head, dict) and head.get("export") == fmt.ROOM:
            r = head["room"]
            name = fmt.room_file_name(r["name"], fmt.JSONL)
            if name in self._names or name == INDEX:
                name = fmt.room_file_name(f"{r['name']}-{r['id']}", fmt.JSONL)
            self._names.add(name)
            part = _Part(self.into)
            part.sink.write(line)
            self._open = (part, {"id": r["id"], "name": r["name"], "file": name})

    def abandon(self) -> None:
        """Remove the file of a room the export did not finish."""
        if self._open is not None:
            self._open[0].drop()
            self._open = None


@workspace.command("export")
@click.argument("name", metavar="WS")
@click.option(
    "--output",
    "-o",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="The directory to write: one <room>.jsonl per room, files/, and workspace.json.",
)
@_admin_options
@json_option
def workspace_export(
    name: str, output: Path, hub: str, admin_tok: str | None, as_json: bool
) -> None:
    """Export every room of WS (archived rooms and threads too) into DIR, with their files.

    The one command with which the admin token reads conversations; the hub logs each use.
    """
    counts = FileCounts()
    split = _Splitter(output)
    with hub_errors(as_json), client(hub, admin_token(admin_tok)) as c:
        try:
            _private_dir(output)
            try:
                c.export_workspace(name, split.take)
            finally:
                split.abandon()
            for entry in split.rooms:
                fetch_files(c, attachments_in(output / entry["file"]), output, counts, name)
            index = {**(split.header or {}), "rooms": split.rooms, "files": counts}
            with _part(output) as part:
                part.sink.write(msgspec.json.format(msgspec.json.encode(index)) + b"\n")
                part.keep(output / INDEX)
        except OSError as exc:
            fail(as_json, "cannot_write", f"{exc.filename}: {exc.strerror}", False, EXIT_FINAL)
    out = {"path": str(output), "workspace": name, "rooms": split.rooms, "files": counts}

    def human() -> None:
        events = sum(int(r["events"]) for r in split.rooms)
        rooms = f"{len(split.rooms)} room{'s' if len(split.rooms) != 1 else ''}"
        say(f"wrote {rooms} ({events} events) to {output}, index {INDEX}")
        say(counts.line())

    emit(as_json, msgspec.to_builtins(out), human)
