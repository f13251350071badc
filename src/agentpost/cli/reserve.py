"""`agentpost reserve`, `reservations`, `release` and `guard` (docs/reservations.md): claim the
files you are about to change, see who holds what, let go, and a git hook that refuses a
commit touching files another member holds exclusively. The project defaults to the
normalized `origin` of the repository you are in (core/projects.py)."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import click
import msgspec

from agentpost.cli.app import main
from agentpost.cli.common import (
    client,
    emit,
    hub_errors,
    hub_options,
    json_option,
    keep_for,
    say,
    table,
)
from agentpost.cli.failing import EXIT_FINAL, EXIT_USAGE, fail
from agentpost.client.errors import HubRefused
from agentpost.client.reservations import Conflict, Reservation, conflicts_of
from agentpost.repo import origin_project

GUARD_ENV = "AGENTPOST_GUARD"  # "off": the hook lets this commit or push through
HOOK_MARK = "# agentpost guard (docs/reservations.md)"
HOOKS = ("pre-commit", "pre-push")
MAX_TTL = 7 * 86400


def _git(*args: str, cwd: Path | None = None) -> str | None:
    try:
        done = subprocess.run(
            ["git", *args], cwd=cwd, capture_output=True, text=True, check=False, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def project_of(given: str | None, as_json: bool) -> str:
    """`--project`, else the normalized `origin` of the repository in the working dir."""
    found = given or origin_project()
    if found:
        return found
    fail(
        as_json,
        "invalid_request",
        "no project: pass --project NAME (here is no git repository with an `origin` remote)",
        False,
        EXIT_USAGE,
    )


def _ttl(value: str) -> int:
    seconds = keep_for(value, inherit=False)
    if not seconds or seconds > MAX_TTL:
        raise click.BadParameter(f"{value!r}: a time from 1s to 7d, such as 30m or 2h")
    return seconds


def _conflict_line(c: Conflict) -> str:
    why = f": {c.reason}" if c.reason else ""
    kind = "exclusively" if c.exclusive else "shared"
    return (
        f"{', '.join(c.requested)} — held {kind} by {c.holder} ({', '.join(c.paths)}) "
        f"until {c.expires_at}{why} [{c.id}]"
    )


def _refused(as_json: bool, exc: HubRefused) -> None:
    """A conflict named line by line (and in `--json`, with the conflicts as data)."""
    found = conflicts_of(exc)
    if as_json:
        body = {
            "error": {
                "code": exc.code,
                "message": exc.message,
                "retryable": False,
                "conflicts": msgspec.to_builtins(found),
            }
        }
        sys.stdout.write(msgspec.json.encode(body).decode() + "\n")
        sys.exit(EXIT_FINAL)
    lines = "\n".join("  " + _conflict_line(c) for c in found)
    fail(False, exc.code, f"not granted; in the way:\n{lines}", False, EXIT_FINAL)


def _row(r: Reservation) -> list[object]:
    kind = "exclusive" if r.exclusive else "shared"
    return [r.id, r.holder, ", ".join(r.paths), kind, r.expires_at, r.reason]


@main.command()
@click.argument("paths", nargs=-1, required=True)
@click.option("--project", default=None, help="Project (default: this repository's origin).")
@click.option("--exclusive/--shared", default=True, help="Hold alone (default) or shared.")
@click.option("--ttl", default="2h", show_default=True, help="How long: 30m, 2h, 1d (≤ 7d).")
@click.option("--reason", default="", help="What you are doing, shown to the others.")
@click.option("--room", default=None, help="Room (name or id) that announces it.")
@click.option("--key", default=None, help="Idempotency-Key: the same key replays the grant.")
@hub_options
@json_option
def reserve(
    paths: tuple[str, ...],
    project: str | None,
    exclusive: bool,
    ttl: str,
    reason: str,
    room: str | None,
    key: str | None,
    hub: str,
    token: str | None,
    as_json: bool,
) -> None:
    """Reserve PATHS (gitignore-style globs from the repository root) for a while."""
    seconds = _ttl(ttl)
    name = project_of(project, as_json)
    with hub_errors(as_json), client(hub, token) as c:
        ws = str(c.me()["workspace"]["name"])
        room_id = c.resolve_room(room) if room is not None else None
        try:
            r = c.reserve(
                ws,
                name,
                list(paths),
                exclusive=exclusive,
                ttl_seconds=seconds,
                reason=reason,
                room=room_id,
                key=key,
            )
        except HubRefused as exc:
            if exc.code != "reservation_conflict":
                raise
            _refused(as_json, exc)
            return
    emit(
        as_json,
        {"reservation": msgspec.to_builtins(r)},
        lambda: say(
            f"reserved {', '.join(r.paths)} of {r.project} "
            f"({'exclusive' if r.exclusive else 'shared'}) until {r.expires_at} [{r.id}]"
        ),
    )


@main.command()
@click.option("--project", default=None, help="Only this project (default: every project).")
@hub_options
@json_option
def reservations(project: str | None, hub: str, token: str | None, as_json: bool) -> None:
    """The live reservations of your workspace: who holds what, until when."""
    with hub_errors(as_json), client(hub, token) as c:
        ws = str(c.me()["workspace"]["name"])
        found = c.reservations(ws, project)
    emit(
        as_json,
        {"reservations": msgspec.to_builtins(found)},
        lambda: table(
            ["id", "holder", "paths", "kind", "until", "reason"],
            [_row(r) for r in found],
            "(no reservations)",
        ),
    )


@main.command()
@click.argument("reservation_id")
@click.option("--key", default=None, help="Idempotency-Key for the release.")
@hub_options
@json_option
def release(
    reservation_id: str, key: str | None, hub: str, token: str | None, as_json: bool
) -> None:
    """Release a reservation you hold (or force one of your agent's)."""
    with hub_errors(as_json), client(hub, token) as c:
        r = c.release_reservation(reservation_id, key)
    emit(
        as_json,
        {"reservation": msgspec.to_builtins(r)},
        lambda: say(f"{r.id}: {r.state} ({', '.join(r.paths)} of {r.project})"),
    )


@main.group()
def guard() -> None:
    """A git hook that refuses commits touching files others hold exclusively."""


def _hook_text(project: str, hub: str, token_file: str | None) -> str:
    argv = [sys.executable, "-m", "agentpost", "guard", "check", "--hook"]
    cmd = " ".join(shlex.quote(a) for a in argv) + ' "$hook"'
    lines = [
        "#!/bin/sh",
        HOOK_MARK,
        "# Refuses a commit (or push) that touches paths another member holds exclusively.",
        f"# Let one through anyway: {GUARD_ENV}=off git commit …  The token is read at run",
        "# time (AGENTPOST_TOKEN, or the file AGENTPOST_TOKEN_FILE names), never kept here.",
        f'[ "${GUARD_ENV}" = off ] && exit 0',
        'hook="$(basename "$0")"',
        f': "${{AGENTPOST_HUB:={hub}}}"',
        "export AGENTPOST_HUB",
    ]
    if token_file:
        lines += [f': "${{AGENTPOST_TOKEN_FILE:={token_file}}}"', "export AGENTPOST_TOKEN_FILE"]
    lines.append(f"exec {cmd} --project {shlex.quote(project)}")
    return "\n".join(lines) + "\n"


@guard.command("install")
@click.option("--project", default=None, help="Project (default: this repository's origin).")
@click.option("--force", is_flag=True, help="Replace hooks that are not agentpost's.")
@click.option(
    "--hub",
    envvar="AGENTPOST_HUB",
    default="http://127.0.0.1:8470",
    help="Hub URL (env AGENTPOST_HUB).",
)
@click.option(
    "--token-file",
    envvar="AGENTPOST_TOKEN_FILE",
    default=None,
    help="The token file the hook reads at run time (its path is kept, never the token).",
)
@json_option
def guard_install(
    project: str | None, force: bool, hub: str, token_file: str | None, as_json: bool
) -> None:
    """Write pre-commit and pre-push hooks into this repository."""
    name = project_of(project, as_json)
    hooks = _git("rev-parse", "--git-path", "hooks")
    top = _git("rev-parse", "--show-toplevel")
    if hooks is None or top is None:
        fail(as_json, "invalid_request", "not in a git repository", False, EXIT_USAGE)
    folder = Path(hooks.strip())
    if not folder.is_absolute():
        folder = Path.cwd() / folder
    folder.mkdir(parents=True, exist_ok=True)
    kept = str(Path(token_file).resolve()) if token_file else None
    written = []
    for hook in HOOKS:
        path = folder / hook
        if path.exists() and HOOK_MARK not in path.read_text(errors="replace") and not force:
            fail(
                as_json,
                "target_exists",
                f"{path} is not agentpost's hook; pass --force to replace it",
                False,
                EXIT_FINAL,
            )
        tmp = path.with_suffix(".agentpost-tmp")
        tmp.write_text(_hook_text(name, hub, kept))
        tmp.chmod(0o755)
        os.replace(tmp, path)
        written.append(str(path))
    emit(
        as_json,
        {"project": name, "hooks": written},
        lambda: say(f"guard installed for {name}: {', '.join(written)} ({GUARD_ENV}=off skips)"),
    )


def _changed(hook: str | None) -> list[str]:
    """The paths a commit (staged) or a push (its new commits) touches, both sides of a
    rename."""
    if hook == "pre-push":
        paths: list[str] = []
        for line in sys.stdin.read().splitlines():
            parts = line.split()
            if len(parts) != 4 or set(parts[1]) == {"0"}:
                continue  # a deleted ref changes no files
            local, remote = parts[1], parts[3]
            spec = [f"{remote}..{local}"] if set(remote) != {"0"} else [local, "--not", "--remotes"]
            out = _git("log", "--format=", "--name-only", "--no-renames", *spec) or ""
            paths += [p for p in out.splitlines() if p]
        return list(dict.fromkeys(paths))
    out = _git("diff", "--cached", "--name-only", "--no-renames", "-z") or ""
    return [p for p in out.split("\0") if p]


def _from_root(paths: tuple[str, ...]) -> list[str]:
    """Paths as given (absolute, or relative to the working dir, as an edit hook passes
    them), relative to the repository root as reservations name them."""
    top = _git("rev-parse", "--show-toplevel")
    if top is None:
        return list(paths)
    root = Path(top.strip()).resolve()
    out = []
    for text in paths:
        full = Path(os.path.abspath(text))
        try:
            out.append(full.relative_to(root).as_posix())
        except ValueError:
            try:
                out.append(full.resolve().relative_to(root).as_posix())
            except ValueError:
                out.append(text)  # outside this repository: asked as given
    return out


@guard.command("check")
@click.argument("paths", nargs=-1)
@click.option("--project", default=None, help="Project (default: this repository's origin).")
@click.option("--hook", default=None, help="pre-commit (staged paths) or pre-push (stdin refs).")
@hub_options
@json_option
def guard_check(
    paths: tuple[str, ...],
    project: str | None,
    hook: str | None,
    hub: str,
    token: str | None,
    as_json: bool,
) -> None:
    """Exit 1, naming holder and reason, if another member holds any of PATHS (or the
    staged paths) exclusively; exit 0 otherwise. An agent's edit hook may call it too."""
    if os.environ.get(GUARD_ENV) == "off":
        return
    name = project_of(project, as_json)
    wanted = _from_root(paths) if paths else _changed(hook or "pre-commit")
    if not wanted:
        emit(as_json, {"conflicts": []}, lambda: None)
        return
    with hub_errors(as_json), client(hub, token) as c:
        ws = str(c.me()["workspace"]["name"])
        found = c.check_paths(ws, name, wanted)
    if not found:
        emit(as_json, {"conflicts": []}, lambda: None)
        return
    lines = "\n".join("  " + _conflict_line(c) for c in found)
    message = (
        f"refused: other members hold these paths of {name} exclusively:\n{lines}\n"
        f"(ask them, wait, or let this one through with {GUARD_ENV}=off)"
    )
    if as_json:
        body = {
            "error": {
                "code": "reservation_conflict",
                "message": message,
                "retryable": False,
                "conflicts": msgspec.to_builtins(found),
            }
        }
        sys.stdout.write(msgspec.json.encode(body).decode() + "\n")
        sys.exit(EXIT_FINAL)
    fail(False, "reservation_conflict", message, False, EXIT_FINAL)


# Where an agent's edit tool names the file it is about to write (Claude Code's and Codex's
# Edit/Write/MultiEdit `file_path`, NotebookEdit `notebook_path`; Gemini CLI's write_file and
# replace `file_path`, some tools `absolute_path` or `path`).
_EDIT_FIELDS = ("file_path", "notebook_path", "absolute_path", "path")
GEMINI_BEFORE_TOOL = "BeforeTool"


def edit_hook_paths(event: object) -> list[str]:
    """The file paths a PreToolUse / BeforeTool hook event's tool input names."""
    if not isinstance(event, dict) or not isinstance(event.get("tool_input"), dict):
        return []
    found = [event["tool_input"].get(f) for f in _EDIT_FIELDS]
    return [p for p in found if isinstance(p, str) and p]


def edit_hook_denial(event_name: str, reason: str) -> dict[str, object]:
    """The answer that stops the edit, in the asking client's own shape: Gemini CLI's
    BeforeTool takes a decision; Claude Code (and Codex, which takes its contract) a
    PreToolUse permission decision whose reason the model reads."""
    if event_name == GEMINI_BEFORE_TOOL:
        return {"decision": "deny", "reason": reason}
    return {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": reason,
        }
    }


@guard.command("edit-hook")
@click.option("--project", default=None, help="Project (default: this repository's origin).")
@hub_options
def guard_edit_hook(project: str | None, hub: str, token: str | None) -> None:
    """An agent's edit hook (Claude Code and Codex PreToolUse, Gemini CLI BeforeTool): reads
    the hook event on stdin and, when another member holds the file the tool is about to
    write exclusively, prints the client's deny decision naming holder and reason, so the
    agent is told before it writes. Prints nothing (the edit goes on) otherwise, and when
    the hub cannot be asked (said on stderr: the git guard still checks the commit)."""
    if os.environ.get(GUARD_ENV) == "off":
        return
    try:
        event = msgspec.json.decode(sys.stdin.buffer.read() or b"{}")
    except msgspec.DecodeError:
        sys.stderr.write("agentpost guard edit-hook: stdin is not a hook event (JSON)\n")
        return
    paths = edit_hook_paths(event)
    if not paths:
        return
    cwd = event.get("cwd") if isinstance(event, dict) else None
    if isinstance(cwd, str) and cwd:
        paths = [p if os.path.isabs(p) else os.path.join(cwd, p) for p in paths]
        os.chdir(cwd)  # the repository the agent works in: its origin names the project
    name = origin_project() if project is None else project
    if name is None:  # no repository with an origin here: no project to hold paths of
        return
    wanted = _from_root(tuple(paths))
    from agentpost.client.errors import HubError, NotConfigured

    try:
        with client(hub, token) as c:
            ws = str(c.me()["workspace"]["name"])
            found = c.check_paths(ws, name, wanted)
    except (HubError, NotConfigured) as exc:
        sys.stderr.write(f"agentpost guard edit-hook: not checked: {exc}\n")
        return
    if not found:
        return
    lines = "; ".join(_conflict_line(c) for c in found)
    reason = (
        f"Reserved by another member, do not edit it now: {lines}. Ask them in the room, "
        "or work on something else until the reservation ends."
    )
    event_name = str(event.get("hook_event_name") or "") if isinstance(event, dict) else ""
    sys.stdout.write(msgspec.json.encode(edit_hook_denial(event_name, reason)).decode() + "\n")
