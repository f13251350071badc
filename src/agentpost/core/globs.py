"""Path patterns of file reservations (docs/reservations.md "Patterns"): gitignore-style globs
relative to the repository root, whether two of them overlap, and whether a path matches one.

A pattern covers what git would: `*` and `?` within one path segment, `[…]` classes, `**` for
any number of segments, a pattern without a slash at any depth (`*.py`), and everything under a
directory it names (`src` covers `src/a/b.py`). Overlap is decided exactly over those meanings,
and where a construct is not modelled (a POSIX class such as `[[:alpha:]]`) it is read as "any
character": overlap may say yes too often, never "no" when some path matches both.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

MAX_PATTERN = 512


class GlobError(ValueError):
    """A pattern or path that names nothing in a repository (a negation, the root, empty)."""


@dataclass(frozen=True, slots=True)
class Chars:
    """One character out of a set: `ranges` (inclusive code points), or any character
    outside them when `negated` (`?` is a negated empty set)."""

    ranges: tuple[tuple[int, int], ...]
    negated: bool


STAR = "*"  # any run of characters within a segment
DEEP = "**"  # any number of whole segments
Token = Chars | str
Segment = tuple[Token, ...]
Pattern = tuple[Segment | str, ...]  # segments, and DEEP between them

ANY = Chars((), True)


def _literal(c: str) -> Chars:
    return Chars(((ord(c), ord(c)),), False)


def _class(text: str, i: int) -> tuple[Chars, int] | None:
    """The class opening at text[i] == "[" and the index after it; None: no closing bracket
    (git then reads the "[" literally)."""
    j = i + 1
    negated = j < len(text) and text[j] in "!^"
    if negated:
        j += 1
    start = j
    ranges: list[tuple[int, int]] = []
    fuzzy = False
    while j < len(text):
        c = text[j]
        if c == "]" and j > start:
            if fuzzy:  # a POSIX class: read as any character (conservative)
                return ANY, j + 1
            return Chars(tuple(ranges), negated), j + 1
        if c == "[" and j + 1 < len(text) and text[j + 1] == ":":
            end = text.find(":]", j + 2)
            if end != -1:
                fuzzy = True
                j = end + 2
                continue
        if c == "\\" and j + 1 < len(text):
            j += 1
            c = text[j]
        if j + 2 < len(text) and text[j + 1] == "-" and text[j + 2] != "]":
            hi = text[j + 2]
            if hi == "\\" and j + 3 < len(text):
                hi = text[j + 3]
                j += 1
            if ord(hi) >= ord(c):
                ranges.append((ord(c), ord(hi)))
            j += 3
            continue
        ranges.append((ord(c), ord(c)))
        j += 1
    return None


def _segment(text: str) -> Segment:
    out: list[Token] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text):
            out.append(_literal(text[i + 1]))
            i += 2
        elif c == "*":
            if not out or out[-1] != STAR:
                out.append(STAR)
            i += 1
        elif c == "?":
            out.append(ANY)
            i += 1
        elif c == "[" and (found := _class(text, i)) is not None:
            out.append(found[0])
            i = found[1]
        else:
            out.append(_literal(c))
            i += 1
    return tuple(out)


def _parts(text: str, what: str) -> list[str]:
    if not text:
        raise GlobError(f"an empty {what}")
    if len(text) > MAX_PATTERN:
        raise GlobError(f"a {what} longer than {MAX_PATTERN} characters")
    if any(ord(c) < 32 or ord(c) == 127 for c in text):
        raise GlobError(f"a {what} with a control character: {text!r}")
    # A ".." segment is kept as a name: git never prints one, so it matches no real path.
    parts = [p for p in text.split("/") if p not in ("", ".")]
    if not parts:
        raise GlobError(f"{text!r} names the repository itself, not a path in it")
    return parts


def normalize(text: str) -> str:
    """The pattern as stored: its segments joined by one slash, a leading slash kept (it
    anchors a pattern that has no other slash), a trailing one dropped (a directory's
    pattern covers what is under it anyway). Refuses negations and comments, which name
    no files to hold."""
    if text.startswith("!"):
        raise GlobError(f"{text!r}: a negation reserves nothing; name the paths to hold")
    if text.startswith("#"):
        raise GlobError(f"{text!r}: a comment in gitignore; escape it as '\\#' to mean a file")
    parts = _parts(text, "pattern")
    lead = "/" if text.startswith("/") and len(parts) == 1 else ""
    return lead + "/".join(parts)


@cache
def parse(text: str) -> Pattern:
    """A normalized pattern's meaning: its segments with DEEP where any number of segments
    may stand, one at the front of a pattern with no inner slash (it matches at any depth)
    and one at the end (it covers what is under a directory it names)."""
    anchored = "/" in text.strip("/") or text.startswith("/")
    out: list[Segment | str] = [] if anchored else [DEEP]
    for part in _parts(text, "pattern"):
        item: Segment | str = DEEP if part == "**" else _segment(part)
        if item == DEEP and out and out[-1] == DEEP:
            continue
        out.append(item)
    if not out or out[-1] != DEEP:
        out.append(DEEP)
    return tuple(out)


def normalize_path(text: str) -> str:
    """A concrete path relative to the repository root, as `git diff --name-only` prints it."""
    return "/".join(_parts(text, "path"))


def _path_pattern(path: str) -> Pattern:
    return tuple(tuple(_literal(c) for c in part) for part in normalize_path(path).split("/"))


def _chars_meet(a: Chars, b: Chars) -> bool:
    if a.negated and b.negated:
        return True  # finite sets left out of an unbounded alphabet
    if a.negated:
        a, b = b, a
    if not b.negated:
        return any(lo <= h2 and lo2 <= hi for lo, hi in a.ranges for lo2, h2 in b.ranges)
    # Some character of a's ranges outside every one of b's.
    for lo, hi in a.ranges:
        at = lo
        for lo2, hi2 in sorted(b.ranges):
            if hi2 < at or lo2 > hi:
                continue
            if lo2 > at:
                return True
            at = max(at, hi2 + 1)
        if at <= hi:
            return True
    return False


def _meet(
    a: tuple[Any, ...], b: tuple[Any, ...], star: str, unit: Callable[[Any, Any], bool]
) -> bool:
    """Whether two token sequences match a common string: `star` stands for any run of
    units, `unit(x, y)` says whether two single tokens meet. Exact (a product of the two
    automata walked depth-first, memoized on positions)."""
    seen: set[tuple[int, int]] = set()

    def go(i: int, j: int) -> bool:
        if (i, j) in seen:
            return False
        seen.add((i, j))
        if i == len(a) and j == len(b):
            return True
        if i < len(a) and a[i] == star:
            return go(i + 1, j) or (j < len(b) and go(i, j + 1))
        if j < len(b) and b[j] == star:
            return go(i, j + 1) or (i < len(a) and go(i + 1, j))
        if i < len(a) and j < len(b) and unit(a[i], b[j]):
            return go(i + 1, j + 1)
        return False

    return go(0, 0)


def _segments_meet(x: Segment, y: Segment) -> bool:
    return _meet(x, y, STAR, _chars_meet)


def overlap(p: str, q: str) -> bool:
    """Whether some path matches both patterns (never False when one does)."""
    return _meet(parse(p), parse(q), DEEP, _segments_meet)


def matches(pattern: str, path: str) -> bool:
    """Whether the pattern covers the concrete path."""
    return _meet(parse(pattern), _path_pattern(path), DEEP, _segments_meet)


def collisions(mine: list[str], theirs: list[str]) -> list[tuple[str, str]]:
    """The (mine, theirs) pairs of patterns that overlap, in order."""
    return [(m, t) for m in mine for t in theirs if overlap(m, t)]
