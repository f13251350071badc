"""Where mail lives: the git common dir, `.git/agentpost/`, and the names used in refs.

Finding the repository is pure file reading (no git process), so a hook in a repo
that never used mail costs no git work (docs/mail.md). The machine name and the
session instance come from the environment (the machine name through identity.py,
which remembers it).
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from agentpost.mail.errors import InvalidName, NotARepo

MACHINE_ENV = "AGENTPOST_MACHINE"
INSTANCE_ENV = "AGENTPOST_INSTANCE_ID"
REMOTE_ENV = "AGENTPOST_MAIL_REMOTE"

# Machine names become ref components; session names are shown to agents. Both are
# kept to a conservative set so no name can escape its ref or inbox directory.
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,79}$")


@dataclass(frozen=True)
class MailPaths:
    """The files under `.git/agentpost/` (never committed, docs/mail.md)."""

    root: Path

    @property
    def log(self) -> Path:
        return self.root / "log.jsonl"

    @property
    def key(self) -> Path:
        return self.root / "machine.key"

    @property
    def lock(self) -> Path:
        return self.root / "lock"

    @property
    def state(self) -> Path:
        return self.root / "state.json"

    @property
    def inboxes(self) -> Path:
        return self.root / "inbox"


@dataclass(frozen=True)
class Repo:
    """A git working tree and the common dir that all its worktrees share."""

    worktree: Path
    common_dir: Path

    @property
    def paths(self) -> MailPaths:
        return MailPaths(self.common_dir / "agentpost")


def find_repo(start: Path | None = None) -> Repo:
    """The repository containing `start` (default: the current directory)."""
    if os.environ.get("GIT_DIR"):
        return _repo_from_git(start or Path.cwd())
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        dot_git = folder / ".git"
        if dot_git.is_dir():
            return Repo(folder, _common_dir(dot_git))
        if dot_git.is_file():
            return Repo(folder, _common_dir(_gitdir_from_file(dot_git)))
    raise NotARepo(f"{here} is not inside a git repository")


def _gitdir_from_file(dot_git: Path) -> Path:
    # A linked worktree or submodule: `.git` is a file "gitdir: <path>".
    text = dot_git.read_text(encoding="utf-8").strip()
    if not text.startswith("gitdir:"):
        raise NotARepo(f"{dot_git} is not a gitdir file")
    target = Path(text.removeprefix("gitdir:").strip())
    return (dot_git.parent / target).resolve()


def _common_dir(gitdir: Path) -> Path:
    # A worktree's gitdir names the shared dir in `commondir`; mail state lives there
    # so every worktree of one clone is one machine with one log.
    marker = gitdir / "commondir"
    if marker.is_file():
        return (gitdir / marker.read_text(encoding="utf-8").strip()).resolve()
    return gitdir


def _repo_from_git(start: Path) -> Repo:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--path-format=absolute", "--git-common-dir"],
            cwd=start,
            capture_output=True,
            timeout=10,
            check=True,
        )
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as exc:
        raise NotARepo(f"{start} is not inside a git repository") from exc
    return Repo(start, Path(out.stdout.decode().strip()))


def check_name(name: str, what: str) -> str:
    """`name` if it is safe as a ref component and a display name, else InvalidName."""
    if not _NAME.match(name) or ".." in name or name.endswith((".lock", ".")):
        raise InvalidName(
            f"{what} name {name!r} must be 1-64 of A-Z a-z 0-9 . _ - starting alphanumeric"
        )
    return name


def is_safe_id(value: str) -> bool:
    """Ids become file names in inboxes; anything else is refused on import."""
    return bool(_ID.match(value))


def instance_from_env() -> str | None:
    """The session this command acts as (`AGENTPOST_INSTANCE_ID`), if set."""
    return os.environ.get(INSTANCE_ENV) or None
