"""File egress: which local files an agent may send out, judged on the opened descriptor.

A path is allowed only inside one of the configured roots. It is opened by walking from
the root's own descriptor one component at a time with `O_NOFOLLOW`, so a symlink anywhere
below the root (or swapped in while we walk) is refused, never followed; `..` is refused
before any walk. The final descriptor must be a regular file with one link (a hard link
would let a file from outside a root be named from inside it) and at most `max_bytes`.
What is sent is read from that descriptor, so nothing can change which file it is after
the check (DESIGN.md §6 "Turn egress roots"; `agentpost mcp --allow-root`, §11).

Shared by every part that sends local files: the MCP server's `upload_file` and the
connect Worker's `resource_link` files.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

OUTSIDE_ROOTS = "path_outside_roots"
PARENT_REFERENCE = "path_parent_reference"
SYMLINK = "path_symlink"
NOT_REGULAR = "path_not_regular"
HARD_LINK = "path_hard_link"
TOO_LARGE = "path_too_large"
NOT_FOUND = "path_not_found"
UNREADABLE = "path_unreadable"

CODES = (
    OUTSIDE_ROOTS,
    PARENT_REFERENCE,
    SYMLINK,
    NOT_REGULAR,
    HARD_LINK,
    TOO_LARGE,
    NOT_FOUND,
    UNREADABLE,
)

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: opening a FIFO for reading must not wait for a writer before we can refuse it.
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOCTTY", 0)


class EgressRefused(Exception):
    """The file may not be sent; `code` is one of `CODES`, stable for callers."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


@dataclass
class OpenedFile:
    """A file allowed out: its open binary handle (positioned at 0), name and size."""

    file: BinaryIO
    name: str
    size: int
    root: Path

    def close(self) -> None:
        self.file.close()

    def __enter__(self) -> OpenedFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class EgressRoots:
    """The directories files may be sent from (none: nothing may be sent)."""

    def __init__(self, roots: Iterable[str | Path], max_bytes: int) -> None:
        # Each root as given and as resolved (a root may itself be reached through a link,
        # e.g. /tmp on macOS): a path may name it either way; below it, no link is followed.
        self.roots: list[Path] = []
        for r in roots:
            for spelling in (Path(os.path.abspath(r)), Path(os.path.realpath(r))):
                if spelling not in self.roots:
                    self.roots.append(spelling)
        self.max_bytes = max_bytes

    def open(self, path: str | Path, base: Path | None = None) -> OpenedFile:
        """Open `path` (relative paths against `base`, default the working directory) if
        it is a regular single-link file under a root, reached without any symlink."""
        raw = str(path)
        if not raw or "\x00" in raw:
            raise EgressRefused(NOT_FOUND, "the path is empty or holds a NUL byte")
        given = Path(raw)
        if ".." in given.parts:
            raise EgressRefused(PARENT_REFERENCE, f"{raw!r}: `..` is not allowed in a path")
        full = given if given.is_absolute() else (base or Path.cwd()) / given
        full = Path(os.path.normpath(full))  # only `.` and `//` go: `..` was refused above
        if not self.roots:
            raise EgressRefused(OUTSIDE_ROOTS, "no --allow-root was given: no file may be sent")
        for root in self.roots:
            rest = _below(full, root)
            if rest is not None:
                return _open_under(root, rest, raw, self.max_bytes)
        names = ", ".join(str(r) for r in self.roots)
        raise EgressRefused(OUTSIDE_ROOTS, f"{raw!r} is not inside an allowed root ({names})")


def _below(full: Path, root: Path) -> list[str] | None:
    """The components of `full` below `root` (compared component by component, so a
    look-alike prefix like `/data-evil` is not under `/data`); None when not below."""
    fp, rp = full.parts, root.parts
    if len(fp) <= len(rp) or fp[: len(rp)] != rp:
        return None
    return list(fp[len(rp) :])


def _refusal(exc: OSError, raw: str) -> EgressRefused:
    if exc.errno in (errno.ELOOP, errno.EMLINK):
        return EgressRefused(SYMLINK, f"{raw!r} goes through a symbolic link")
    if exc.errno == errno.ENOTDIR:
        # O_DIRECTORY|O_NOFOLLOW on a symlink to a directory also lands here.
        return EgressRefused(SYMLINK, f"{raw!r}: a path component is a link or not a directory")
    if exc.errno == errno.ENOENT:
        return EgressRefused(NOT_FOUND, f"{raw!r} does not exist")
    return EgressRefused(UNREADABLE, f"{raw!r} cannot be opened: {exc.strerror}")


def _open_under(root: Path, rest: list[str], raw: str, max_bytes: int) -> OpenedFile:
    try:
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise EgressRefused(UNREADABLE, f"the root {str(root)!r} cannot be opened") from exc
    try:
        for part in rest[:-1]:
            try:
                nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                raise _refusal(exc, raw) from None
            os.close(fd)
            fd = nxt
        try:
            file_fd = os.open(rest[-1], _FILE_FLAGS, dir_fd=fd)
        except OSError as exc:
            raise _refusal(exc, raw) from None
    finally:
        os.close(fd)
    try:
        return _judge(file_fd, root, rest[-1], raw, max_bytes)
    except BaseException:
        os.close(file_fd)
        raise


def _judge(fd: int, root: Path, name: str, raw: str, max_bytes: int) -> OpenedFile:
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        raise EgressRefused(NOT_REGULAR, f"{raw!r} is not a regular file")
    if st.st_nlink != 1:
        raise EgressRefused(HARD_LINK, f"{raw!r} has {st.st_nlink} hard links; only one is allowed")
    if st.st_size > max_bytes:
        raise EgressRefused(TOO_LARGE, f"{raw!r} is {st.st_size} bytes; at most {max_bytes}")
    os.set_blocking(fd, True)
    return OpenedFile(file=os.fdopen(fd, "rb"), name=name, size=st.st_size, root=root)
