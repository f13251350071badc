"""Which files may leave with a Turn's reply (DESIGN.md §6): only from the Turn egress
roots, judged on an opened descriptor, never on a path string.

A `file://` path is walked component by component from the root's own descriptor with
`O_NOFOLLOW` (a symlink anywhere is refused, `.` and `..` are refused outright), and the
last component must open as a regular file with one link (`st_nlink == 1`, so a hard link
to a file elsewhere is refused) and at most `max_bytes`. The caller reads the bytes from
that very descriptor, so nothing can be swapped in between the check and the upload.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit


class EgressRefused(Exception):
    """A file that may not be sent; the message names why, for the one-line notice."""


@dataclass(frozen=True)
class OpenedFile:
    fd: int
    name: str
    size: int


class EgressRoots:
    """The Turn egress roots (the repo and every `--egress-root`), resolved once."""

    def __init__(self, roots: list[Path], max_bytes: int) -> None:
        self.roots = [Path(os.path.realpath(r)) for r in roots]
        self.max_bytes = max_bytes

    def contains(self, path: Path) -> Path | None:
        """The first root whose tree lexically holds `path` (real path), or None."""
        real = Path(os.path.realpath(path))
        for root in self.roots:
            if real == root or root in real.parents:
                return root
        return None

    def open(self, uri: str) -> OpenedFile:
        """Open the file a `resource_link` names, or raise `EgressRefused`."""
        path = _path_of(uri)
        for root in self.roots:
            rest = _relative(path, root)
            if rest is not None:
                return self._open_under(root, rest, path)
        raise EgressRefused(f"{path} is outside the egress roots")

    def _open_under(self, root: Path, parts: list[str], shown: str) -> OpenedFile:
        if not parts:
            raise EgressRefused(f"{shown} is a directory")
        try:
            dir_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as exc:
            raise EgressRefused(f"egress root {root} cannot be opened: {exc.strerror}") from exc
        try:
            for part in parts[:-1]:
                next_fd = _step(dir_fd, part, shown)
                os.close(dir_fd)
                dir_fd = next_fd
            flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY
            try:
                fd = os.open(parts[-1], flags, dir_fd=dir_fd)
            except OSError as exc:
                raise EgressRefused(_why(shown, exc)) from exc
        finally:
            os.close(dir_fd)
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise EgressRefused(f"{shown} is not a regular file")
            if st.st_nlink != 1:
                raise EgressRefused(f"{shown} has {st.st_nlink} hard links")
            if st.st_size > self.max_bytes:
                raise EgressRefused(f"{shown} is over {self.max_bytes} bytes")
            os.set_blocking(fd, True)
        except BaseException:
            os.close(fd)
            raise
        return OpenedFile(fd=fd, name=parts[-1], size=st.st_size)


def _path_of(uri: str) -> str:
    parts = urlsplit(uri)
    if parts.scheme != "file":
        raise EgressRefused(f"{uri[:120]} is not a file:// link")
    if parts.netloc not in ("", "localhost"):
        raise EgressRefused(f"{uri[:120]} names another host")
    path = unquote(parts.path)
    if not path.startswith("/") or "\x00" in path:
        raise EgressRefused(f"{uri[:120]} is not an absolute path")
    return path


def _relative(path: str, root: Path) -> list[str] | None:
    """The components of `path` below `root`, lexically; `.`/`..` anywhere refuse it."""
    parts = [p for p in path.split("/") if p]
    if any(p in (".", "..") for p in parts):
        raise EgressRefused(f"{path} has a '.' or '..' component")
    root_parts = [p for p in str(root).split("/") if p]
    if parts[: len(root_parts)] != root_parts:
        return None
    return parts[len(root_parts) :]


def _step(dir_fd: int, part: str, shown: str) -> int:
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        return os.open(part, flags, dir_fd=dir_fd)
    except OSError as exc:
        raise EgressRefused(_why(shown, exc)) from exc


def _why(shown: str, exc: OSError) -> str:
    if exc.errno in (errno.ELOOP, errno.ENOTDIR):
        return f"{shown} goes through a symlink or a non-directory"
    if exc.errno == errno.ENOENT:
        return f"{shown} does not exist"
    return f"{shown} cannot be opened: {exc.strerror}"
