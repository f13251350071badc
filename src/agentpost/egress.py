"""Which local files may leave (docs/connect.md, docs/mcp.md): only from egress roots, judged on an
opened descriptor, never on a path string. The one judge for every part that sends files:
a connect Turn's `resource_link` files (`open(uri)`) and the MCP server's `upload_file`
(`open_path(path)`).

A `file://` path is walked component by component from the root's own descriptor with
`O_NOFOLLOW` (a symlink anywhere is refused, `.` and `..` are refused outright), and the
last component must open as a regular file with one link (`st_nlink == 1`, so a hard link
to a file elsewhere is refused) and at most `max_bytes`. The caller reads the bytes from
that very descriptor, so nothing can be swapped in between the check and the upload.
Folders that are never egress (the Worker's own workspace: its attachments, ledger,
status) are refused wherever they sit, judged on each opened folder's (dev, inode), so no
layout (a workspace inside the repo) and no spelling of a path reaches them. Every refusal carries a stable `code` (one of `CODES`) besides its one-line message.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

OUTSIDE_ROOTS = "path_outside_roots"
PARENT_REFERENCE = "path_parent_reference"
SYMLINK = "path_symlink"
NOT_REGULAR = "path_not_regular"
HARD_LINK = "path_hard_link"
TOO_LARGE = "path_too_large"
NOT_FOUND = "path_not_found"
UNREADABLE = "path_unreadable"
INVALID = "path_invalid"
PRIVATE = "path_private"

CODES = (
    OUTSIDE_ROOTS,
    PARENT_REFERENCE,
    SYMLINK,
    NOT_REGULAR,
    HARD_LINK,
    TOO_LARGE,
    NOT_FOUND,
    UNREADABLE,
    INVALID,
    PRIVATE,
)


class EgressRefused(Exception):
    """A file that may not be sent; the message names why, for the one-line notice, and
    `code` says it for programs."""

    def __init__(self, message: str, code: str = UNREADABLE) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class OpenedFile:
    fd: int
    name: str
    size: int


class EgressRoots:
    """The egress roots (connect: the repo and every `--egress-root`; mcp: every
    `--allow-root`), each kept as given and as resolved, so a path may name a root that is
    itself reached through a link either way; below a root, no link is ever followed."""

    def __init__(
        self, roots: Iterable[str | Path], max_bytes: int, never: Iterable[Path] = ()
    ) -> None:
        self._given: list[Path] = []
        for r in roots:
            if (given := Path(os.path.abspath(r))) not in self._given:
                self._given.append(given)
        self._all: list[Path] | None = None
        self.max_bytes = max_bytes
        self._never: set[tuple[int, int]] = set()
        for folder in never:
            try:
                st = os.stat(folder)
            except OSError:
                continue  # made later, by its owner: `forbid` it then
            self._never.add((st.st_dev, st.st_ino))

    def forbid(self, folder: Path) -> None:
        """Never send anything from under `folder` (it must exist)."""
        st = os.stat(folder)
        self._never.add((st.st_dev, st.st_ino))

    def _judge_root(self, root_fd: int, shown: str) -> None:
        """The root and every folder above it: a root inside a private folder (an egress
        root under the workspace, a repo inside the data home) is private all through."""
        if not self._never:
            return
        self._judge_folder(root_fd, shown)
        here = os.fstat(root_fd)
        fd = root_fd
        try:
            for _ in range(256):
                up = os.open("..", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=fd)
                if fd != root_fd:
                    os.close(fd)
                fd = up
                st = os.fstat(fd)
                if (st.st_dev, st.st_ino) == (here.st_dev, here.st_ino):
                    return  # "/" is its own parent
                self._judge_folder(fd, shown)
                here = st
        finally:
            if fd != root_fd:
                os.close(fd)

    def _judge_folder(self, dir_fd: int, shown: str) -> None:
        if self._never:
            st = os.fstat(dir_fd)
            if (st.st_dev, st.st_ino) in self._never:
                raise EgressRefused(f"{shown} is in the Worker's private folder", PRIVATE)

    @property
    def roots(self) -> list[Path]:
        """Every root resolved and as given (resolved once, when first needed: a path under
        a root as given, the usual case, never needs it)."""
        if self._all is None:
            spellings: list[Path] = []
            for given in self._given:
                for spelling in (Path(os.path.realpath(given)), given):
                    if spelling not in spellings:
                        spellings.append(spelling)
            self._all = spellings
        return self._all

    def contains(self, path: Path) -> Path | None:
        """The first root whose tree lexically holds `path` (real path), or None."""
        real = Path(os.path.realpath(path))
        for root in self.roots:
            if real == root or root in real.parents:
                return root
        return None

    def open(self, uri: str) -> OpenedFile:
        """Open the file a `resource_link` names, or raise `EgressRefused`."""
        return self.open_path(_path_of(uri))

    def open_path(self, path: str) -> OpenedFile:
        """Open the file at the absolute `path`, or raise `EgressRefused`."""
        if not path.startswith("/") or "\x00" in path:
            raise EgressRefused(f"{path[:120]!r} is not an absolute path", INVALID)
        found = _under(path, self._given) or _under(path, self.roots)  # as given first
        if found is None:
            raise EgressRefused(f"{path} is outside the egress roots", OUTSIDE_ROOTS)
        return self._open_under(found[0], found[1], path)

    def _open_under(self, root: Path, parts: list[str], shown: str) -> OpenedFile:
        if not parts:
            raise EgressRefused(f"{shown} is a directory", NOT_REGULAR)
        try:
            dir_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as exc:
            raise EgressRefused(
                f"egress root {root} cannot be opened: {exc.strerror}", UNREADABLE
            ) from exc
        try:
            self._judge_root(dir_fd, shown)
            for part in parts[:-1]:
                next_fd = _step(dir_fd, part, shown)
                os.close(dir_fd)
                dir_fd = next_fd
                self._judge_folder(dir_fd, shown)
            flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY
            try:
                fd = os.open(parts[-1], flags, dir_fd=dir_fd)
            except OSError as exc:
                raise _why(shown, exc) from exc
        finally:
            os.close(dir_fd)
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise EgressRefused(f"{shown} is not a regular file", NOT_REGULAR)
            if st.st_nlink != 1:
                raise EgressRefused(f"{shown} has {st.st_nlink} hard links", HARD_LINK)
            if st.st_size > self.max_bytes:
                raise EgressRefused(f"{shown} is over {self.max_bytes} bytes", TOO_LARGE)
            os.set_blocking(fd, True)
        except BaseException:
            os.close(fd)
            raise
        return OpenedFile(fd=fd, name=parts[-1], size=st.st_size)


def _path_of(uri: str) -> str:
    parts = urlsplit(uri)
    if parts.scheme != "file":
        raise EgressRefused(f"{uri[:120]} is not a file:// link", INVALID)
    if parts.netloc not in ("", "localhost"):
        raise EgressRefused(f"{uri[:120]} names another host", INVALID)
    path = unquote(parts.path)
    if not path.startswith("/") or "\x00" in path:
        raise EgressRefused(f"{uri[:120]} is not an absolute path", INVALID)
    return path


def _under(path: str, roots: list[Path]) -> tuple[Path, list[str]] | None:
    """The first of `roots` that lexically holds `path`, and the components below it."""
    for root in roots:
        rest = _relative(path, root)
        if rest is not None:
            return root, rest
    return None


def _relative(path: str, root: Path) -> list[str] | None:
    """The components of `path` below `root`, lexically; `.`/`..` anywhere refuse it."""
    parts = [p for p in path.split("/") if p]
    if any(p in (".", "..") for p in parts):
        raise EgressRefused(f"{path} has a '.' or '..' component", PARENT_REFERENCE)
    root_parts = [p for p in str(root).split("/") if p]
    if parts[: len(root_parts)] != root_parts:
        return None
    return parts[len(root_parts) :]


def _step(dir_fd: int, part: str, shown: str) -> int:
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        return os.open(part, flags, dir_fd=dir_fd)
    except OSError as exc:
        raise _why(shown, exc) from exc


def _why(shown: str, exc: OSError) -> EgressRefused:
    if exc.errno in (errno.ELOOP, errno.ENOTDIR):
        return EgressRefused(f"{shown} goes through a symlink or a non-directory", SYMLINK)
    if exc.errno == errno.ENOENT:
        return EgressRefused(f"{shown} does not exist", NOT_FOUND)
    return EgressRefused(f"{shown} cannot be opened: {exc.strerror}", UNREADABLE)
