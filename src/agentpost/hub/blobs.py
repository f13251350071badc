"""Media bytes: streamed to a temp file while hashing and counting, size-capped, then
renamed into the content-addressed store `<blobs>/<aa>/<sha256>` (docs/api.md Media).

The blob is durable (fsync'd file and directory) before the row that names it commits.
A disk that is full or read-only is `StorageUnavailable` (503), and no temp file is left;
temp files of a hub killed mid-upload are swept when a hub starts (`sweep_temp_files`).
"""

from __future__ import annotations

import asyncio
import fcntl
import hashlib
import io
import logging
import os
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from python_multipart.exceptions import MultipartParseError
from python_multipart.multipart import MultipartParser, parse_options_header

from agentpost.core.errors import Code, RequestError, StorageUnavailable
from agentpost.hub import mediatypes
from agentpost.hub.mediatypes import safe_name

if TYPE_CHECKING:
    from python_multipart.multipart import MultipartCallbacks

log = logging.getLogger("agentpost.hub.blobs")

_MAX_CAPTION = 65536
TEMP_PREFIX = "up-"
STAGING_PREFIX = ".up-"
STAGING_MAX_AGE_SECONDS = 3600
# Bytes touched by an upload this recently are never freed by the retention sweep: the
# upload's row may not have committed yet (`BlobStore.free`).
FREE_GRACE = 600.0
GONE_PREFIX = ".gone-"
# A body no longer than this (by its Content-Length) is parsed in memory and written to
# disk once, in a thread, when it is whole: no temp file, lock or rename on the event loop.
SMALL_BODY = 256 * 1024


def _unavailable(what: str, exc: OSError) -> StorageUnavailable:
    log.error("%s: %s; the upload was dropped", what, exc)
    return StorageUnavailable("cannot store the upload now; nothing was written")


def _discard(out: object, tmp_path: Path) -> None:
    """Close and remove a temp file, even when closing fails (its flush hits ENOSPC)."""
    try:
        out.close()  # type: ignore[attr-defined]
    except OSError as exc:
        log.warning("closing upload temp file %s failed: %s", tmp_path, exc)
    _remove(tmp_path)


def _remove(tmp_path: Path) -> None:
    try:
        tmp_path.unlink(missing_ok=True)
    except OSError as exc:
        log.error("cannot remove upload temp file %s: %s; it stays behind", tmp_path, exc)


async def _drain(stream: AsyncIterator[bytes], limit: int) -> None:
    """Read (and drop) the rest of a refused body, up to `limit` bytes, so the client
    reads our answer instead of a reset connection."""
    seen = 0
    async for chunk in stream:
        seen += len(chunk)
        if seen > limit:
            return


def _feed(parser: MultipartParser, chunk: bytes | None) -> None:
    """Feed the parser (`None`: the end); a malformed body is the client's error, a 400."""
    try:
        if chunk is None:
            parser.finalize()
        else:
            parser.write(chunk)
    except MultipartParseError as exc:
        raise RequestError(
            Code.INVALID_REQUEST, f"malformed multipart body: {exc}", field="file"
        ) from exc


async def _parse(sink: _Sink, boundary: bytes, stream: AsyncIterator[bytes]) -> Upload:
    """Feed the whole body through the streaming parser into `sink`; the first refusal
    (malformed, too large, a bad field) ends it."""
    parser = MultipartParser(boundary, sink.callbacks())
    async for chunk in stream:
        _feed(parser, chunk)
        if sink.error is not None:
            raise sink.error
    _feed(parser, None)
    if sink.error is not None:
        raise sink.error
    return sink.result()


@dataclass
class Upload:
    sha256: str
    size: int
    name: str
    mime_type: str
    caption: str


class BlobStore:
    def __init__(self, root: Path, free_grace: float = FREE_GRACE) -> None:
        self.root = root
        self.free_grace = free_grace
        self.tmp = root / "tmp"
        self.tmp.mkdir(parents=True, exist_ok=True)
        swept = sweep_temp_files(self.tmp)
        if swept:
            log.info("removed %d upload temp files left by a hub that died mid-upload", swept)

    def path_of(self, sha256: str) -> Path:
        return self.root / sha256[:2] / sha256

    def commit(self, tmp_path: Path, sha256: str) -> None:
        """Move a finished temp file into place (idempotent: same content, same name)."""
        final = self.path_of(sha256)
        try:
            final.parent.mkdir(exist_ok=True)
            if _touched(final):
                # The same bytes are there already; their directory entry may be another
                # upload's, not yet fsync'd (or one whose fsync failed): sync it before ours.
                # Touched: the retention sweep frees no blob touched lately (`free`).
                tmp_path.unlink()
            else:
                os.replace(tmp_path, final)
            self._sync_dir(final.parent)
        except OSError as exc:
            _remove(tmp_path)
            raise _unavailable("cannot move an upload into the blob store", exc) from exc

    @staticmethod
    def _sync_dir(path: Path) -> None:
        dir_fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)

    async def receive(
        self,
        content_type: str,
        stream: AsyncIterator[bytes],
        max_bytes: int,
        declared: int | None = None,
    ) -> Upload:
        """Parse a multipart body with fields `file` (required) and `text` (optional), and
        put the file into the store (durable before this returns). `declared` is the
        body's Content-Length, when it has one."""
        ctype, params = parse_options_header(content_type)
        boundary = params.get(b"boundary")
        if ctype != b"multipart/form-data" or not boundary:
            raise RequestError(
                Code.INVALID_REQUEST, "expected multipart/form-data with a `file` field"
            )
        if declared is not None and declared <= SMALL_BODY:
            return await self._receive_small(boundary, stream, max_bytes)
        try:
            fd, tmp_path = self._new_temp_file()
        except OSError as exc:
            await _drain(stream, max_bytes + 65536)
            raise _unavailable("cannot create an upload temp file", exc) from exc
        sink = _Sink(os.fdopen(fd, "wb"), max_bytes)
        try:
            upload = await _parse(sink, boundary, stream)
        except OSError as exc:  # disk full, read-only, I/O error: the store, not the request
            _discard(sink.out, tmp_path)
            await _drain(stream, max_bytes + 65536)
            raise _unavailable("cannot write an upload temp file", exc) from exc
        except BaseException:
            _discard(sink.out, tmp_path)
            raise
        # The fsyncs wait on the disk for milliseconds: in a thread, so the event loop serves
        # other requests meanwhile (and concurrent uploads share the journal's flushes). The
        # blob is durable before this returns, as before.
        await asyncio.to_thread(self._store, sink.out, tmp_path, upload.sha256)
        return upload

    async def _receive_small(
        self, boundary: bytes, stream: AsyncIterator[bytes], max_bytes: int
    ) -> Upload:
        """A small body: parsed into memory, then written once, off the loop. The server
        gives no more body than the Content-Length said (at most `SMALL_BODY`)."""
        out = io.BytesIO()
        upload = await _parse(_Sink(out, max_bytes), boundary, stream)
        await asyncio.to_thread(self._store_bytes, out.getvalue(), upload.sha256)
        return upload

    async def put_bytes(self, data: bytes) -> str:
        """Store a whole blob held in memory, durably (off the loop); its sha256."""
        sha256 = hashlib.sha256(data).hexdigest()
        await asyncio.to_thread(self._store_bytes, data, sha256)
        return sha256

    def _store_bytes(self, data: bytes, sha256: str) -> None:
        """Write a whole blob durably (blocking; off the loop): a staging file (which no
        start-up sweep takes while it is young) fsync'd, then moved into place."""
        if _touched(self.path_of(sha256)):  # the same bytes: make sure its name is on disk
            self._sync_dir(self.path_of(sha256).parent)
            return
        try:
            fd, name = tempfile.mkstemp(dir=self.tmp, prefix=STAGING_PREFIX)
        except OSError as exc:
            raise _unavailable("cannot create an upload temp file", exc) from exc
        tmp_path = Path(name)
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(data)
                out.flush()
                os.fsync(out.fileno())
        except OSError as exc:
            _remove(tmp_path)
            raise _unavailable("cannot write an upload temp file", exc) from exc
        self.commit(tmp_path, sha256)

    def _store(self, out: BinaryIO, tmp_path: Path, sha256: str) -> None:
        """fsync the temp file, move it into place, close it (blocking; off the loop)."""
        try:
            out.flush()
            os.fsync(out.fileno())
        except OSError as exc:
            _discard(out, tmp_path)
            raise _unavailable("cannot write an upload temp file", exc) from exc
        try:
            # Still open, so still locked: no other hub's start-up sweep can take it.
            self.commit(tmp_path, sha256)
        finally:
            try:
                out.close()
            except OSError as exc:  # flushed and fsync'd already: nothing is lost
                log.warning("closing upload temp file %s failed: %s", tmp_path, exc)

    def free(
        self, sha256: str, now: float | None = None, before_unlink: Callable[[], None] | None = None
    ) -> bool:
        """Remove the bytes no kept media row names any more (the caller checked, in the
        database); True when they are gone. An upload of the same bytes may be under way:
        it touches the file (`_touched`) before its row commits, so a file touched within
        `free_grace` seconds stays, and the check is made again after the file is moved
        aside, where no upload can touch it: one touched meanwhile goes back."""
        path = self.path_of(sha256)
        now = time.time() if now is None else now
        try:
            if now - path.stat().st_mtime < self.free_grace:
                return False
            aside = self.tmp / f"{GONE_PREFIX}{sha256}-{os.getpid()}"
            os.rename(path, aside)
        except FileNotFoundError:
            return True
        except OSError as exc:
            log.warning("cannot free blob %s: %s", sha256, exc)
            return False
        if before_unlink is not None:
            before_unlink()
        try:
            if time.time() - aside.stat().st_mtime < self.free_grace:
                try:
                    os.link(aside, path)  # put back, unless a new upload wrote it again
                except FileExistsError:
                    pass
                aside.unlink()
                return False
            aside.unlink()
            self._sync_dir(path.parent)
        except OSError as exc:
            log.warning("cannot free blob %s: %s", sha256, exc)
            return False
        return True

    def set_aside(self) -> list[tuple[str, Path]]:
        """(sha256, file) of bytes a `free` moved aside and did not finish with (the hub was
        killed meanwhile): the sweep puts back those still named, and removes the rest."""
        out = []
        for path in self.tmp.glob(GONE_PREFIX + "*"):
            sha256, _, pid = path.name[len(GONE_PREFIX) :].partition("-")
            try:
                young = time.time() - path.lstat().st_mtime < self.free_grace + 60
            except FileNotFoundError:
                continue
            if young and pid.isdigit() and _alive(int(pid)):
                continue  # a live process (another hub on these blobs) is still on it
            out.append((sha256, path))
        return out

    def put_back(self, sha256: str, aside: Path) -> None:
        try:
            os.link(aside, self.path_of(sha256))
        except FileExistsError:
            pass
        aside.unlink(missing_ok=True)

    def _new_temp_file(self) -> tuple[int, Path]:
        """A temp file for one upload, locked (`flock`) for as long as it is open, so a
        sweep knows it from one whose writer died. Made under a name sweeps ignore and
        renamed once locked: a sweep never sees it unlocked."""
        fd, name = tempfile.mkstemp(dir=self.tmp, prefix=STAGING_PREFIX)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            tmp_path = self.tmp / (TEMP_PREFIX + Path(name).name[len(STAGING_PREFIX) :])
            os.rename(name, tmp_path)
        except OSError:
            os.close(fd)
            _remove(Path(name))
            raise
        return fd, tmp_path


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _touched(path: Path) -> bool:
    """Mark existing bytes as wanted now (their mtime); False when there are none."""
    try:
        os.utime(path)
    except FileNotFoundError:
        return False
    return True


def sweep_temp_files(tmp: Path, now: float | None = None) -> int:
    """Remove the upload temp files whose writer is gone (killed mid-upload); the number
    removed. A writer holds its file's `flock` until it is done, and the kernel drops the
    lock of a killed process, so a file we can lock is nobody's: on a blob dir shared by
    several hub processes (PostgreSQL, docs/architecture.md#many-hub-processes) a live hub's upload
    in progress is left alone.
    A staging file (a writer died between making and locking it) goes once an hour old."""
    removed = 0
    for path in tmp.glob(TEMP_PREFIX + "*"):
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            continue  # gone already (another hub's sweep), or no plain file of ours
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue  # a live writer holds it
        try:
            path.unlink(missing_ok=True)
            removed += 1
        except OSError as exc:
            log.error("cannot remove upload temp file %s: %s; it stays behind", path, exc)
        finally:
            os.close(fd)
    cutoff = (time.time() if now is None else now) - STAGING_MAX_AGE_SECONDS
    for path in tmp.glob(STAGING_PREFIX + "*"):
        try:
            if path.lstat().st_mtime < cutoff:
                path.unlink()
                removed += 1
        except OSError:
            continue
    return removed


class _Sink:
    """Callbacks for the streaming multipart parser: file bytes to disk, caption to memory."""

    def __init__(self, out: BinaryIO, max_bytes: int) -> None:
        self.out = out
        self.max_bytes = max_bytes
        self.hasher = hashlib.sha256()
        self.size = 0
        self.error: RequestError | None = None
        self.field = b""
        self.value = b""
        self.headers: dict[bytes, bytes] = {}
        self.part: str | None = None
        self.caption = bytearray()
        self.filename: str | None = None
        self.mime: str | None = None
        self.files = 0
        self.saw_text = False
        self.ended = False  # the closing boundary arrived

    def callbacks(self) -> MultipartCallbacks:
        return {
            "on_part_begin": self.part_begin,
            "on_header_field": lambda d, s, e: setattr(self, "field", self.field + d[s:e]),
            "on_header_value": lambda d, s, e: setattr(self, "value", self.value + d[s:e]),
            "on_header_end": self.header_end,
            "on_headers_finished": self.headers_finished,
            "on_part_data": self.part_data,
            "on_end": self.end,
        }

    def part_begin(self) -> None:
        self.headers = {}
        self.part = None

    def header_end(self) -> None:
        self.headers[self.field.lower()] = self.value
        self.field = b""
        self.value = b""

    def headers_finished(self) -> None:
        disp, params = parse_options_header(self.headers.get(b"content-disposition", b""))
        name = params.get(b"name", b"").decode("utf-8", "replace")
        if name == "file":
            self.files += 1
            if self.files > 1:
                self.error = RequestError(
                    Code.INVALID_REQUEST, "only one `file` per upload", field="file"
                )
            raw = safe_name(params.get(b"filename", b"").decode("utf-8", "replace"))
            self.filename = os.path.basename(raw.replace("\\", "/")).strip() or "upload"
            try:
                self.mime = mediatypes.for_upload(self.headers.get(b"content-type"))
            except RequestError as exc:
                self.error = exc
        elif name == "text":
            self.saw_text = True
        else:
            self.error = RequestError(
                Code.INVALID_REQUEST, f"unknown form field {name!r}", field=name
            )
        self.part = name

    def end(self) -> None:
        self.ended = True

    def part_data(self, data: bytes, start: int, end: int) -> None:
        if self.error is not None:
            return
        piece = data[start:end]
        if self.part == "file":
            self.size += len(piece)
            if self.size > self.max_bytes:
                self.error = RequestError(
                    Code.PAYLOAD_TOO_LARGE, f"file is over {self.max_bytes} bytes"
                )
                return
            self.hasher.update(piece)
            self.out.write(piece)
        elif self.part == "text":
            self.caption += piece
            if len(self.caption) > _MAX_CAPTION:
                self.error = RequestError(Code.INVALID_REQUEST, "caption is too long", field="text")

    def result(self) -> Upload:
        if not self.ended:
            # A body cut short is no upload, whatever its parts held so far (docs/api.md
            # "Limits of what a request may carry").
            raise RequestError(
                Code.INVALID_REQUEST,
                "the multipart body ends before its closing boundary; nothing was stored",
                field="file",
            )
        if self.files != 1 or self.filename is None or self.mime is None:
            raise RequestError(
                Code.INVALID_REQUEST, "the upload needs one `file` field", field="file"
            )
        try:
            caption = self.caption.decode("utf-8").strip()
        except UnicodeDecodeError as exc:
            raise RequestError(Code.INVALID_REQUEST, "caption is not UTF-8", field="text") from exc
        return Upload(
            self.hasher.hexdigest(), self.size, self.filename[:255], self.mime, caption
        )
