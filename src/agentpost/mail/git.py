"""Git plumbing for mail refs, through the `git` command with a timeout.

Refs are parentless commits of the empty tree whose message is the JSON document
(docs/mail.md). Peers' refs are fetched in one `git fetch` into
`refs/agentpost-remote/<remote>/…`, so a fetch never writes over this machine's own refs.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from agentpost.mail.errors import GitFailed, NoRemote, RemoteUnreachable
from agentpost.mail.limits import git_timeout_seconds
from agentpost.mail.repo import REMOTE_ENV

OWN_PREFIX = "refs/agentpost"
SIG_HEADER = "agentpost-sig"
REMOTE_PREFIX = "refs/agentpost-remote"


@dataclass(frozen=True)
class RefObject:
    """One ref as listed by for-each-ref: where it points and how big the object is."""

    name: str
    sha: str
    kind: str
    size: int


@dataclass(frozen=True)
class Document:
    """A ref document as stored: the commit message and its `agentpost-sig` header."""

    message: bytes
    signature: str | None


@dataclass(frozen=True)
class PushResult:
    ok: bool
    detail: str


class Git:
    """Runs git in one working tree; every call is bounded by a timeout."""

    def __init__(self, worktree: Path, timeout: float | None = None) -> None:
        self.worktree = worktree
        self.timeout = git_timeout_seconds() if timeout is None else timeout
        env = dict(os.environ)
        # Never prompt for credentials inside a hook; fail instead and stay queued.
        env["GIT_TERMINAL_PROMPT"] = "0"
        env["LC_ALL"] = "C"
        # Mail commits carry a fixed identity so they work on a machine with no git identity.
        for role in ("AUTHOR", "COMMITTER"):
            env[f"GIT_{role}_NAME"] = "agentpost"
            env[f"GIT_{role}_EMAIL"] = "agentpost@localhost"
        self._env = env

    def run(self, *args: str, stdin: bytes | None = None) -> bytes:
        """Run `git ARGS`, return stdout; a failure raises GitFailed with git's stderr."""
        proc = self._spawn(args, stdin)
        if proc.returncode != 0:
            raise GitFailed(f"git {args[0]} failed: {_tail(proc.stderr)}")
        return proc.stdout

    def _spawn(
        self, args: tuple[str, ...], stdin: bytes | None
    ) -> subprocess.CompletedProcess[bytes]:
        try:
            # Its own process group, so a timeout also ends the ssh (or other helper) git
            # started; otherwise that helper keeps our pipes open past the deadline.
            proc = subprocess.Popen(
                ["git", *args],
                cwd=self.worktree,
                stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=self._env,
                start_new_session=True,
            )
        except OSError as exc:
            raise GitFailed(f"cannot run git: {exc}") from exc
        try:
            out, err = proc.communicate(stdin, timeout=self.timeout)
        except subprocess.TimeoutExpired as exc:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise RemoteUnreachable(f"git {args[0]} timed out after {self.timeout:g} s") from exc
        return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)

    def remote(self) -> str:
        """The remote mail travels through: AGENTPOST_MAIL_REMOTE, else origin, else the first."""
        chosen = os.environ.get(REMOTE_ENV)
        names = self.run("remote").decode().split()
        if chosen:
            if chosen not in names:
                raise NoRemote(
                    f"{REMOTE_ENV}={chosen!r} is not a remote of this repository (its remotes: "
                    f"{', '.join(names) or 'none'}); set {REMOTE_ENV} to one of them, or unset "
                    "it (then origin, else the first remote, is used)"
                )
            return chosen
        if not names:
            raise NoRemote(
                "this repository has no remote, and mail travels through one: add the shared "
                f"remote with `git remote add origin URL` (or set {REMOTE_ENV} to the "
                "remote to use), then run the command again"
            )
        return "origin" if "origin" in names else names[0]

    def fetch(self, remote: str) -> None:
        """Fetch every peer's presence and mail ref in one round trip (docs/mail.md)."""
        refspec = f"+{OWN_PREFIX}/*:{REMOTE_PREFIX}/{remote}/*"
        proc = self._spawn(
            ("fetch", "--quiet", "--no-tags", "--no-write-fetch-head", "--prune", remote, refspec),
            None,
        )
        if proc.returncode != 0:
            raise RemoteUnreachable(self._remote_failure("fetch from", remote, proc.stderr))

    def push(self, remote: str, refs: list[str], delete: list[str] | None = None) -> PushResult:
        """Force-push our own refs (they are replaced by design) and delete `delete` on the
        remote, in one push; report, never raise on refusal."""
        specs = [f"+{ref}:{ref}" for ref in refs] + [f":{ref}" for ref in delete or []]
        try:
            proc = self._spawn(("push", "--quiet", "--porcelain", remote, *specs), None)
        except RemoteUnreachable as exc:
            return PushResult(False, exc.message)
        if proc.returncode != 0:
            return PushResult(
                False, self._remote_failure("push to", remote, proc.stderr or proc.stdout)
            )
        return PushResult(True, "")

    def _remote_failure(self, doing: str, remote: str, stderr: bytes) -> str:
        """What went wrong with `remote`, in one line that names it and what to check: git
        ends on a generic hint ("and the repository exists."), its cause is said first."""
        url = self._spawn(("remote", "get-url", remote), None).stdout.decode().strip()
        where = f"remote {remote} ({_without_password(url)})" if url else f"remote {remote}"
        cause = _cause(stderr)
        return f"cannot {doing} {where}: {cause}; {_what_to_check(cause, remote)}"

    def write_document(self, message: bytes, signature: str) -> str:
        """A parentless commit of the empty tree carrying `message`; returns its id.

        The document's signature rides in an extra commit header (git keeps unknown
        headers, as it does `gpgsig`), so the message stays exactly the JSON of
        docs/mail.md "How it works, in one screen".
        """
        empty_tree = self.run("mktree", stdin=b"").decode().strip()
        stamp = f"agentpost <agentpost@localhost> {int(time.time())} +0000"
        commit = (
            f"tree {empty_tree}\nauthor {stamp}\ncommitter {stamp}\n{SIG_HEADER} {signature}\n\n"
        ).encode() + message
        return (
            self.run("hash-object", "-t", "commit", "-w", "--stdin", stdin=commit).decode().strip()
        )

    def update_ref(self, ref: str, sha: str) -> None:
        self.run("update-ref", ref, sha)

    def delete_ref(self, ref: str) -> None:
        """Delete a local ref; one that does not exist is already gone."""
        self.run("update-ref", "-d", ref)

    def list_refs(self, prefix: str) -> list[RefObject]:
        """Refs under `prefix` with object type and size, read without loading any object."""
        fmt = "%(refname)%00%(objectname)%00%(objecttype)%00%(objectsize)"
        out = self.run("for-each-ref", f"--format={fmt}", prefix).decode()
        refs = []
        for line in out.splitlines():
            name, sha, kind, size = line.split("\0")
            refs.append(RefObject(name, sha, kind, int(size)))
        return refs

    def read_documents(self, shas: list[str]) -> dict[str, Document]:
        """Message and signature of the given commits, read in one `git cat-file --batch`."""
        if not shas:
            return {}
        out = self.run("cat-file", "--batch", stdin="".join(f"{s}\n" for s in shas).encode())
        docs: dict[str, Document] = {}
        pos = 0
        for sha in shas:
            header_end = out.index(b"\n", pos)
            fields = out[pos:header_end].split()
            size = int(fields[2])
            body = out[header_end + 1 : header_end + 1 + size]
            pos = header_end + 1 + size + 1
            # A commit object is headers, a blank line, then the message.
            split = body.find(b"\n\n")
            headers, message = (body[:split], body[split + 2 :]) if split >= 0 else (body, b"")
            signature = None
            for line in headers.split(b"\n"):
                name, _, value = line.partition(b" ")
                if name.decode("ascii", "replace") == SIG_HEADER:
                    signature = value.decode("ascii", "replace")
            docs[sha] = Document(message, signature)
        return docs


# git's generic closing lines after a remote failed: true for every cause, so never the news
_GENERIC = (
    "could not read from remote repository",
    "please make sure you have the correct access rights",
    "and the repository exists",
)


def _cause(stderr: bytes) -> str:
    """The first line of git's stderr that says what happened, without `fatal:`."""
    for line in stderr.decode("utf-8", "replace").splitlines():
        text = line.strip()
        for prefix in ("fatal:", "error:", "remote:"):
            text = text.removeprefix(prefix).strip()
        if text and not text.lower().startswith(_GENERIC):
            return text.rstrip(".")
    return "git said nothing more"


def _what_to_check(cause: str, remote: str) -> str:
    lowered = cause.lower()
    if "resolve host" in lowered or "name or service not known" in lowered:
        return f"check the host name in the remote's URL (git remote set-url {remote} URL)"
    if "connection refused" in lowered or "couldn't connect" in lowered or "timed out" in lowered:
        return "check that the server is up and reachable from here"
    if "permission denied" in lowered or "authentication" in lowered or "403" in lowered:
        return "check your access to it (ssh key or credentials for that host)"
    if "not appear to be a git repository" in lowered or "not found" in lowered:
        return f"check the remote's URL (git remote set-url {remote} URL) and that the repository exists"
    return f"check the remote's URL (git remote get-url {remote}) and your access to it"


def _without_password(url: str) -> str:
    """A remote URL as it may be shown: a password in it is left out."""
    scheme, sep, rest = url.partition("://")
    userinfo, at, host = rest.partition("@")
    if sep and at and ":" in userinfo and "/" not in userinfo:
        return f"{scheme}://{userinfo.partition(':')[0]}:…@{host}"
    return url


def _tail(stderr: bytes) -> str:
    text = stderr.decode("utf-8", "replace").strip()
    return text.splitlines()[-1] if text else "no output"
