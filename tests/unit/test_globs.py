"""Reservation patterns (core/globs.py, docs/reservations.md "Patterns"): a path matches a
pattern as gitignore reads it, and two patterns some path matches both always overlap
(property tests over generated globs and paths)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentpost.core import globs

TOKENS = ["a", "b", "*", "?", "[ab]", "[!a]", "[a-c]", "\\*"]
NAMES = ["a", "b", "c", "ab", "ba", "bc", "*"]


@st.composite
def patterns(draw: st.DrawFn) -> str:
    segs = []
    for _ in range(draw(st.integers(1, 3))):
        if draw(st.integers(0, 4)) == 0:
            segs.append("**")
        else:
            segs.append("".join(draw(st.lists(st.sampled_from(TOKENS), min_size=1, max_size=3))))
    lead = "/" if draw(st.booleans()) else ""
    tail = "/" if draw(st.integers(0, 4)) == 0 else ""
    return lead + "/".join(segs) + tail


paths = st.lists(st.sampled_from(NAMES), min_size=1, max_size=4).map("/".join)


def _segment_regex(seg: str) -> str:
    out, i = "", 0
    while i < len(seg):
        c = seg[i]
        if c == "\\":
            out += re.escape(seg[i + 1])
            i += 2
            continue
        if c == "*":
            out += "[^/]*"
        elif c == "?":
            out += "[^/]"
        elif c == "[":
            end = seg.index("]", i + 2)
            body = seg[i + 1 : end]
            out += "[^/" + body[1:] + "]" if body.startswith("!") else "[" + body + "]"
            i = end
        else:
            out += re.escape(c)
        i += 1
    return out


def reference(pattern: str, path: str) -> bool:
    """gitignore's reading, written independently as one regular expression over the path
    with a slash after every segment: a pattern with no inner slash matches at any depth,
    `**` spans whole segments, and a match covers everything under it."""
    anchored = "/" in pattern.strip("/") or pattern.startswith("/")
    deep = "(?:[^/]+/)*"
    rx = "" if anchored else deep
    for seg in (s for s in pattern.split("/") if s):
        rx += deep if seg == "**" else _segment_regex(seg) + "/"
    return re.fullmatch(rx + deep, path + "/") is not None


@given(patterns(), paths)
@settings(max_examples=400)
def test_a_path_matches_a_pattern_as_gitignore_reads_it(pattern: str, path: str) -> None:
    assert globs.matches(globs.normalize(pattern), path) == reference(pattern, path)


@given(patterns(), patterns(), paths)
@settings(max_examples=600)
def test_two_patterns_a_path_matches_both_of_always_overlap(p: str, q: str, path: str) -> None:
    a, b = globs.normalize(p), globs.normalize(q)
    if globs.matches(a, path) and globs.matches(b, path):
        assert globs.overlap(a, b) and globs.overlap(b, a)


@given(patterns(), patterns())
def test_overlap_is_symmetric(p: str, q: str) -> None:
    a, b = globs.normalize(p), globs.normalize(q)
    assert globs.overlap(a, b) == globs.overlap(b, a)


@pytest.mark.parametrize(
    ("p", "q", "meet"),
    [
        ("src/**", "src/auth/login.py", True),
        ("*.py", "src/**", True),
        ("src", "src/a/b.py", True),  # a directory's pattern covers what is under it
        ("README.md", "docs/README.md", True),  # no slash: at any depth
        ("/README.md", "docs/README.md", False),  # a leading slash anchors it
        ("docs/*.md", "docs/a/b.md", False),  # * stays within a segment
        ("a/**/b", "a/b", True),
        ("a/[bc]*.py", "a/d*.py", False),
        ("a/[!b]x", "a/bx", False),
        ("a/[[:alpha:]]", "a/1", True),  # not modelled: read as any character
    ],
)
def test_overlap_cases(p: str, q: str, meet: bool) -> None:
    assert globs.overlap(globs.normalize(p), globs.normalize(q)) is meet


def test_collisions_name_both_sides() -> None:
    mine, theirs = ["src/a.py", "docs/x", "lib/y"], ["src/**", "lib/*.md", "/lib"]
    assert globs.collisions(mine, theirs) == [("src/a.py", "src/**"), ("lib/y", "/lib")]


@pytest.mark.parametrize("bad", ["!src", "#x", "/", ".", "", "a\x00b"])
def test_patterns_that_name_no_files_are_refused(bad: str) -> None:
    with pytest.raises(globs.GlobError):
        globs.normalize(bad)
