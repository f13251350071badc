"""Finding `.git/agentpost/` without running git, and the names allowed in refs."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from agentpost.mail.errors import InvalidName, NotARepo
from agentpost.mail.identity import FROM_ENV, FROM_HOST, Asked
from agentpost.mail.repo import check_name, find_repo


def test_worktrees_of_one_clone_share_the_common_dir(tmp_path: Path) -> None:
    env_args = ["-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    main = tmp_path / "main"
    subprocess.run(["git", "init", "-q", str(main)], check=True)
    subprocess.run(
        ["git", *env_args, "commit", "-q", "--allow-empty", "-m", "x"], cwd=main, check=True
    )
    subprocess.run(["git", "worktree", "add", "-q", str(tmp_path / "wt")], cwd=main, check=True)
    (tmp_path / "wt" / "sub").mkdir()
    assert find_repo(tmp_path / "wt" / "sub").common_dir == (main / ".git").resolve()
    assert find_repo(main).paths.root == (main / ".git" / "agentpost").resolve()


def test_outside_a_repository_is_not_a_repo(tmp_path: Path) -> None:
    with pytest.raises(NotARepo):
        find_repo(tmp_path)


@pytest.mark.parametrize("bad", ["", "-x", "a/b", "a..b", "x.lock", "a b", "é", "x" * 65, "a."])
def test_unsafe_names_are_refused(bad: str) -> None:
    with pytest.raises(InvalidName):
        check_name(bad, "machine")


def test_machine_name_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTPOST_MACHINE", "laptop-1.home")
    assert Asked.from_env() == Asked("laptop-1.home", FROM_ENV)
    monkeypatch.delenv("AGENTPOST_MACHINE")
    assert Asked.from_env().source == FROM_HOST
