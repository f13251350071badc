"""`EgressRoots` (egress.py): a root is accepted spelled as given or resolved, either way;
below it no link is followed; a path under a root as given is judged without resolving any
path (the delivery path builds one per file)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agentpost.egress import OUTSIDE_ROOTS, SYMLINK, EgressRefused, EgressRoots


@pytest.fixture
def linked(tmp_path: Path) -> tuple[Path, Path]:
    real = tmp_path / "real"
    real.mkdir()
    (real / "f.txt").write_text("F")
    link = tmp_path / "link"
    link.symlink_to(real)
    return real, link


def read(roots: EgressRoots, path: Path) -> bytes:
    opened = roots.open_path(str(path))
    with os.fdopen(opened.fd, "rb") as f:
        return f.read()


def test_a_root_given_through_a_link_takes_either_spelling(linked: tuple[Path, Path]) -> None:
    real, link = linked
    roots = EgressRoots([link], 1024)
    assert read(roots, link / "f.txt") == b"F"
    assert read(roots, real / "f.txt") == b"F"  # the resolved spelling
    assert roots.roots == [real, link]


def test_a_path_under_a_root_as_given_resolves_nothing(linked: tuple[Path, Path]) -> None:
    real, link = linked
    roots = EgressRoots([link], 1024)
    assert read(roots, link / "f.txt") == b"F"
    assert roots._all is None  # realpath never ran
    assert read(roots, real / "f.txt") == b"F"
    assert roots._all is not None


def test_outside_every_spelling_and_links_below_a_root_are_refused(
    linked: tuple[Path, Path], tmp_path: Path
) -> None:
    real, link = linked
    (tmp_path / "other.txt").write_text("O")
    (real / "below").symlink_to(tmp_path / "other.txt")
    roots = EgressRoots([link], 1024)
    with pytest.raises(EgressRefused) as outside:
        roots.open_path(str(tmp_path / "other.txt"))
    assert outside.value.code == OUTSIDE_ROOTS
    for spelling in (link, real):
        with pytest.raises(EgressRefused) as below:
            roots.open_path(str(spelling / "below"))
        assert below.value.code == SYMLINK
