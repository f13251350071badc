"""`agentpost connect`: run a Worker for one agent member; `connect status` (docs/connect.md)."""

from __future__ import annotations

import logging
import os
import sys
import time
from pathlib import Path
from typing import Any

import click

from agentpost.cli import secrets
from agentpost.cli.app import hub_option, main
from agentpost.cli.common import (
    EXIT_FINAL,
    EXIT_USAGE,
    cell,
    console,
    emit,
    err_console,
    fail,
    hub_options,
    json_option,
    table,
)

PERMISSION_KINDS = ("allow_once", "allow_always", "reject_once", "reject_always")


@main.group(invoke_without_command=True)
@click.option(
    "--agent",
    "agent_cmd",
    help="Required. claude, codex or gemini (their ACP adapters, needs checked at start), or "
    "the ACP agent command, split like a shell would.",
)
@click.option(
    "--a2a",
    "a2a_url",
    help="Instead of --agent: a remote A2A agent (its base URL, or its Agent Card's URL); each "
    "wake-up is one A2A task (docs/a2a.md).",
)
@click.option(
    "--a2a-token-file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="With --a2a: a file holding the bearer token the remote A2A agent asks for.",
)
@hub_option
@click.option("--token", envvar=secrets.TOKEN_ENV, default=None, help=secrets.TOKEN_FLAG_HELP)
@click.option(
    "--token-file",
    envvar=secrets.TOKEN_FILE_ENV,
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help=secrets.TOKEN_FILE_HELP + " Not inside --repo or an --egress-root.",
)
@click.option(
    "--workspace-dir",
    type=click.Path(path_type=Path),
    help="The Worker's own folder (default: one per hub and agent under the data home).",
)
@click.option(
    "--repo",
    type=click.Path(path_type=Path),
    help="Required. The agent's working directory (an existing folder).",
)
@click.option(
    "--log",
    "log_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write the Worker's log to this file (appended) instead of stderr. Started in the "
    "background of a terminal (`&`), the Worker logs to worker.log in its folder unless "
    "given this.",
)
@click.option("--collaborator", "collaborators", multiple=True, help="Also answer this member.")
@click.option("--egress-root", "egress_roots", multiple=True, type=click.Path(path_type=Path))
@click.option("--allow-permission", "allow", multiple=True, type=click.Choice(PERMISSION_KINDS))
@click.option(
    "--agent-mode",
    default=None,
    help="Run the agent's sessions in this mode of its own (e.g. auto, agent): it then decides "
    "alone what it does, and the Worker is asked only what that mode asks. By default the "
    "Worker puts each session in the mode in which the agent asks before it acts.",
)
@click.option("--turn-timeout", type=float, default=1800.0, show_default=True, help="Seconds.")
@click.option(
    "--hub-timeout",
    type=float,
    default=30.0,
    show_default=True,
    help="Seconds a hub request may take before it counts as unanswered (and is retried).",
)
@click.option(
    "--takeover",
    is_flag=True,
    help="End another Worker's lease on this agent at once (only when you know it is dead).",
)
@click.pass_context
def connect(
    ctx: click.Context,
    agent_cmd: str | None,
    a2a_url: str | None,
    a2a_token_file: Path | None,
    hub: str,
    token: str | None,
    token_file: Path | None,
    workspace_dir: Path | None,
    repo: Path | None,
    log_file: Path | None,
    collaborators: tuple[str, ...],
    egress_roots: tuple[Path, ...],
    allow: tuple[str, ...],
    agent_mode: str | None,
    turn_timeout: float,
    hub_timeout: float,
    takeover: bool,
) -> None:
    """Put an ACP agent in rooms: answer its owner and collaborators, one reply per wake-up."""
    if ctx.invoked_subcommand is not None:
        return
    if secrets.on_argv(ctx, "token"):
        # A Worker runs for hours beside an agent that can read every process's command
        # line, as can every local user (docs/cli.md "Tokens"): the flag is refused outright.
        click.echo(
            "agentpost connect: --token would put the token in the process list, readable by "
            "the agent and other users: use --token-file FILE or env AGENTPOST_TOKEN",
            err=True,
        )
        sys.exit(EXIT_USAGE)
    from agentpost.connect import WorkerConfig, known_agents, run_worker
    from agentpost.connect.keeper import forbid_dumping
    from agentpost.connect.workspace import WorkspaceError

    # Before the token is read: from here on no other process of this uid (the agent
    # included) can read this process's memory, environ or fds (docs/connect.md "What the
    # agent can reach"). Python's start before this line is the one window left.
    dumpable = not forbid_dumping()
    # Each start problem is (CODE, message), said as every command says an error
    # (docs/cli.md "The contract", rule 1); all of them at once, so one run shows them all.
    problems: list[tuple[str, str]] = []
    token_on_argv = secrets.on_argv(ctx, "token")
    if token_on_argv and not secrets.on_argv(ctx, "token_file"):
        token_file = None  # the flag beats AGENTPOST_TOKEN_FILE
    try:
        token = secrets.member_token(
            token,
            token_file,
            token_on_argv=token_on_argv,
            file_on_argv=secrets.on_argv(ctx, "token_file"),
        )
    except secrets.SecretRefused as exc:
        problems.append((NOT_CONFIGURED, exc.message))
        token = ""
    else:
        if not token:
            problems.append(
                (
                    NOT_CONFIGURED,
                    "a token is required (--token-file, AGENTPOST_TOKEN_FILE or AGENTPOST_TOKEN)",
                )
            )
    # The Worker's own environment forgets it, so no child it ever starts inherits it. This
    # does not change what /proc/<pid>/environ shows (the block this process started with):
    # forbid_dumping is what keeps that from the agent.
    for name in (secrets.TOKEN_ENV, secrets.TOKEN_FILE_ENV):
        os.environ.pop(name, None)
    if token_file is not None:
        exposed = _agent_reaches(token_file, [*(r for r in [repo] if r), *egress_roots])
        problems += [(NOT_CONFIGURED, p) for p in exposed]
    usage: list[str] = []
    if agent_cmd and a2a_url:
        usage.append("--agent and --a2a name the agent twice: give one")
    elif not agent_cmd and not a2a_url:
        usage.append("--agent is required (or --a2a URL for a remote A2A agent)")
    if a2a_token_file is not None and not a2a_url:
        usage.append("--a2a-token-file goes with --a2a")
    usage += _repo_problems(repo)
    argv: list[str] = []
    if a2a_url and not agent_cmd:
        argv, found = _a2a_agent(a2a_url, a2a_token_file, token_file)
        usage += found
    if agent_cmd:  # a known agent's needs are named here, before the lease or the agent
        command = known_agents.resolve(agent_cmd, os.environ, os.geteuid())
        argv = command.argv
        problems += [(AGENT_NOT_READY, p) for p in command.problems]
        if command.known is None and not command.problems:
            argv, missing = _here(argv, Path.cwd())
            problems += [(AGENT_NOT_READY, p) for p in missing]
        for note in command.notes:
            err_console.print(f"note: {note}", highlight=False)
    for root in egress_roots:
        if not root.is_dir():
            usage.append(f"--egress-root {root} is not a directory")
    if turn_timeout <= 0:
        usage.append("--turn-timeout must be positive")
    if hub_timeout <= 0:
        usage.append("--hub-timeout must be positive")
    problems += [(USAGE_ERROR, p) for p in usage]
    if problems:
        for code, p in problems:
            err_console.print(f"error {code}: {p}", markup=False, highlight=False)
        # Only a command line that does not parse is exit 2 (rule 3); anything else to fix
        # in the setup first (a token, an agent not installed) makes the whole start exit 1.
        only_usage = all(code == USAGE_ERROR for code, _ in problems)
        sys.exit(EXIT_USAGE if only_usage else EXIT_FINAL)
    assert repo is not None and token is not None
    if workspace_dir is None:
        workspace_dir = _default_workspace(hub, token, hub_timeout)
    if log_file is None and _in_background():
        log_file = workspace_dir / "worker.log"
    if log_file is not None:
        try:
            log_file.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            stream = open(log_file, "a", buffering=1, encoding="utf-8")  # noqa: SIM115
            os.chmod(log_file, 0o600)
        except OSError as exc:
            err_console.print(
                f"error log_unwritable: cannot write the log {log_file}: {exc.strerror or exc} "
                "(give --log another file)",
                markup=False,
                highlight=False,
            )
            sys.exit(EXIT_FINAL)
        err_console.print(f"agentpost connect: logging to {log_file}", highlight=False)
    else:
        stream = sys.stderr
    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=stream,
    )
    # Every heartbeat and inbox poll is a request: at INFO, httpx would write a line for
    # each and drown the Worker's own lines. Their failures still come through (WARNING).
    for chatty in ("httpx", "httpcore"):
        logging.getLogger(chatty).setLevel(logging.WARNING)
    if dumpable:
        logging.getLogger("agentpost.connect").warning(
            "this system has no prctl(PR_SET_DUMPABLE): processes of your user, the agent's "
            "included, may read this Worker's memory and its token (docs/connect.md)"
        )
    config = WorkerConfig(
        agent_argv=argv,
        hub=hub,
        token=token,
        workspace_dir=workspace_dir.resolve(),
        repo=repo.resolve(),
        collaborators=list(collaborators),
        egress_roots=[r.resolve() for r in egress_roots],
        allow_permissions=list(allow),
        agent_mode=agent_mode,
        turn_timeout=turn_timeout,
        agent_start_wait=min(60.0, turn_timeout),
        hub_timeout=hub_timeout,
        takeover=takeover,
    )
    try:
        code = run_worker(config)
    except WorkspaceError as exc:
        err_console.print(f"error no_worker_folder: {exc}", markup=False, highlight=False)
        sys.exit(EXIT_FINAL)
    sys.exit(code)


# The codes of `connect`'s start check (docs/connect.md "Starting").
USAGE_ERROR = "usage_error"
NOT_CONFIGURED = "not_configured"
AGENT_NOT_READY = "agent_not_ready"


def _repo_problems(repo: Path | None) -> list[str]:
    """--repo names the agent's working directory, which must exist: said with the path."""
    if repo is None:
        return ["--repo is required: it names the agent's working directory (an existing folder)"]
    if not repo.exists():
        return [
            f"--repo {repo}: no such directory; --repo names the agent's working directory, "
            "which must exist (create it, or name another)"
        ]
    if not repo.is_dir():
        return [f"--repo {repo} is a file; --repo names the agent's working directory (a folder)"]
    return []


# What names a script an interpreter runs (`python3 examples/echo_agent.py`).
SCRIPT_SUFFIXES = (".py", ".js", ".mjs", ".cjs", ".ts", ".sh", ".rb", ".pl")


def _here(argv: list[str], cwd: Path) -> tuple[list[str], list[str]]:
    """`--agent`'s relative paths, read where `connect` was started: the agent runs in
    `--repo`, where `examples/echo_agent.py` is not, so each relative argument that names
    a file here becomes its absolute path; a script that is not here is a start error
    naming it (else the Worker would restart the agent for ever)."""
    out, problems = [], []
    for i, arg in enumerate(argv):
        path = Path(arg)
        relative = not arg.startswith("-") and not path.is_absolute()
        if relative and ("/" in arg or i > 0) and (cwd / path).is_file():
            out.append(str(cwd / path))
            continue
        if relative and i > 0 and path.suffix in SCRIPT_SUFFIXES:
            problems.append(
                f"--agent: the script {arg} is not in {cwd}, where `agentpost connect` was "
                "started (a relative path is read from there): give its path"
            )
        out.append(arg)
    return out, problems


def _in_background() -> bool:
    """Started with `&` from a terminal: stderr is the terminal, but another process group
    has it. Its log lines would land in the middle of what the user types next."""
    try:
        fd = sys.stderr.fileno()
        return os.isatty(fd) and os.tcgetpgrp(fd) != os.getpgrp()
    except (OSError, ValueError):
        return False


def _a2a_agent(
    url: str, token_file: Path | None, hub_token_file: Path | None
) -> tuple[list[str], list[str]]:
    """The agent command of `--a2a` (connect/a2a_agent.py run by this Python), and what is
    wrong with its arguments, one line each."""
    problems = []
    if not url.startswith(("http://", "https://")):
        problems.append(f"--a2a {url!r} is not an http(s) URL")
    argv = [sys.executable, "-m", "agentpost.connect.a2a_agent", url]
    if token_file is not None:
        if not token_file.is_file():
            problems.append(f"--a2a-token-file {token_file} is not a file")
        elif hub_token_file is not None and token_file.resolve() == hub_token_file.resolve():
            problems.append("--a2a-token-file is the hub token's file: the agent would read it")
        argv += ["--token-file", str(token_file.resolve())]
    return argv, problems


def _default_workspace(
    hub: str, token: str, timeout: float, wait: bool = True, as_json: bool = False
) -> Path:
    """The agent member's default Worker folder: the hub says who the token is. A Worker
    waits for a hub that does not answer yet (as it would for its inbox); `status` not.
    A refusal ends the command as every command's does (docs/cli.md "The contract")."""
    from agentpost.cli.common import hub_errors
    from agentpost.client import HubClient, HubError, HubRefused
    from agentpost.connect.workspace import WorkspaceError, default_dir

    delay = 0.5
    told = False
    while True:
        try:
            with HubClient(hub, token, timeout) as c:
                me = c.me()
            break
        except HubRefused as exc:
            with hub_errors(as_json):
                raise
            raise AssertionError("hub_errors exits") from exc
        except HubError as exc:
            if not wait:
                exc.message += " (or pass --workspace-dir: the Worker's folder needs no hub)"
                with hub_errors(as_json):
                    raise
            if not told:
                err_console.print(f"waiting for the hub to say who this token is ({exc})")
                told = True
            time.sleep(delay)
            delay = min(delay * 2, 15.0)
    if me["member"].get("kind") != "agent":
        fail(
            as_json,
            "not_an_agent",
            f"this token is {me['member']['name']}'s, a {me['member'].get('kind')}: "
            "a Worker and its folder belong to an agent member; use the agent's token "
            "(AGENTPOST_TOKEN or --token-file)",
            False,
            EXIT_FINAL,
        )
    try:
        return default_dir(hub, str(me["workspace"]["name"]), str(me["member"]["name"]))
    except (WorkspaceError, OSError) as exc:
        fail(as_json, "no_worker_folder", f"{exc}; pass --workspace-dir", False, EXIT_FINAL)


def _agent_reaches(token_file: Path, roots: list[Path]) -> list[str]:
    """A token file inside the agent's working directory or an egress root is refused: the
    agent reads the first at will and can deliver from the second into a room."""
    where = Path(os.path.realpath(token_file))
    return [
        f"the token file {token_file} is inside {root}, which the agent reads and can "
        "deliver from; keep it outside (docs/connect.md)"
        for root in roots
        if root.is_dir() and where.is_relative_to(os.path.realpath(root))
    ]


@connect.command("status")
@click.option(
    "--workspace-dir",
    type=click.Path(path_type=Path),
    help="The Worker's folder (default: the one `connect` uses for this hub and token).",
)
@hub_options
@json_option
def status(workspace_dir: Path | None, hub: str, token: str | None, as_json: bool) -> None:
    """What the Worker of WORKSPACE_DIR is doing: agent, sessions, cursor, last Turns."""
    from agentpost.connect.status import read_status
    from agentpost.connect.workspace import WorkspaceError

    if workspace_dir is None:
        if not token:
            fail(
                as_json,
                "not_configured",
                "give --workspace-dir (the Worker's folder), or the agent's token to find it "
                "(AGENTPOST_TOKEN_FILE, --token-file or AGENTPOST_TOKEN)",
                False,
                EXIT_FINAL,
            )
        workspace_dir = _default_workspace(hub, token, 30.0, wait=False, as_json=as_json)

    if not workspace_dir.is_dir():
        fail(
            as_json,
            "no_worker_folder",
            f"{workspace_dir} is not a folder: no Worker has run there (pass the "
            "--workspace-dir a Worker was started with)",
            False,
            EXIT_FINAL,
        )
    try:
        data = read_status(workspace_dir)
    except WorkspaceError as exc:
        fail(as_json, "no_worker_folder", str(exc), False, EXIT_FINAL)
    names = {} if as_json else _room_names(data.get("hub") or hub, token)

    def room(room_id: str) -> str:
        name = names.get(room_id)
        return f"{name} ({room_id})" if name else room_id

    def plain(line: str) -> None:
        console.print(line, markup=False, highlight=False)

    def when(entry: dict[str, Any]) -> str:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(entry["first_seen"]))

    def line(*fields: str) -> None:
        """Fields of one line: two spaces apart on a terminal, a tab apart when piped
        (docs/cli.md "The contract", rule 6)."""
        if console.is_terminal:
            plain("  ".join(fields))
        else:
            sys.stdout.write("\t".join(fields) + "\n")  # rich would turn a tab into spaces

    def value(v: Any) -> str:
        return cell(v) or "-"  # a Worker that never ran has no pid: "-", never "None"

    def human() -> None:
        agent = data.get("agent", {})
        line(f"worker {value(data.get('worker_id'))}", f"running: {cell(data['running'])}")
        line(f"member {value(data.get('member'))}", f"owner {value(data.get('owner'))}")
        line(
            f"agent alive: {cell(agent.get('alive'))}",
            f"pid {value(agent.get('pid'))}",
            f"restarts {value(agent.get('restarts'))}",
            f"last failure: {agent.get('last_failure') or '-'}",
        )
        failed = agent.get("last_session_error") or {}
        if failed:  # session/new refused: the agent runs, but that Session has no Turns
            at = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(failed.get("at", 0)))
            said = f": {failed['message']}" if failed.get("message") else ""
            plain(
                f"last session error ({failed.get('session')}, {at}): {failed.get('error')}{said}"
            )
        lease = data.get("lease") or {}
        if lease:
            other = lease.get("holder") or {}
            fields = [f"lease: {lease.get('state')}", f"fence {lease.get('fence')}"]
            if lease.get("state") in ("standby", "lost") and other:
                fields.append(
                    f"(held by host {other.get('host')}, pid {other.get('pid')}, "
                    f"since {other.get('since')})"
                )
            line(*fields)
        inbox = data.get("inbox", {})
        line(f"inbox acked {value(inbox.get('acked'))}", f"seen {value(inbox.get('seen'))}")
        seen = data.get("presence") or {}
        if "online" in seen:  # as the hub saw this member at the Worker's last heartbeat
            said = "online" if seen["online"] else "offline"
            last_seen = f"last seen {seen.get('last_seen') or 'never'}"
            if data.get("running"):
                checked = time.strftime("%H:%M:%S", time.gmtime(seen["checked_at"]))
                line(f"on the hub: {said}", last_seen, f"(asked at {checked})")
            else:
                # The hub stays the judge, but its word is as old as the Worker's last
                # heartbeat: said with its age, never as if it were now.
                age = _age(time.time() - float(seen["checked_at"]))
                line(
                    f"on the hub {age} ago: {said}",
                    last_seen,
                    "(the Worker is stopped: the hub said this at its last heartbeat)",
                )
        plain("sessions:")
        table(
            ["room", "who", "session"],
            [[room(s["room"]), s["who"], s["session_id"]] for s in data.get("sessions", [])],
        )
        d = data.get("delivery") or {}
        why = d.get("reason") or "-"
        on = f"enabled ({why})" if d.get("enabled") else f"not enabled: {why}"
        outcomes = " ".join(f"{k}={v}" for k, v in sorted((d.get("by_outcome") or {}).items()))
        plain(f"delivery (_ag2/deliver): {on}")
        plain(f"deliveries by outcome: {outcomes or 'none'}")
        if "ledger_error" in d:
            plain(f"the ledger cannot be read: {d['ledger_error']}")
        plain("bindings:")
        table(
            ["binding", "room", "who", "expires", "revoked"],
            [
                [
                    b["binding"],
                    room(b["room"]),
                    b["who"],
                    time.strftime("%Y-%m-%d %H:%M", time.gmtime(b["expires_at"])),
                    (b.get("revoked_reason") or "yes") if b.get("revoked") else "",
                ]
                for b in d.get("bindings", [])
            ],
        )
        plain("deliveries in progress:")
        table(
            ["delivery", "binding", "room", "posted", "first seen"],
            [
                [e["id"], e["binding"], room(e["room"]), f"{e['posted']} of {e['parts']}", when(e)]
                for e in d.get("in_progress", [])
            ],
        )
        plain("recent deliveries:")
        table(
            ["delivery", "binding", "room", "outcome", "first seen"],
            [
                [e["id"], e["binding"], room(e["room"]), e["outcome"] or e["state"], when(e)]
                for e in d.get("deliveries", [])
            ],
        )
        plain("recent Turns:")
        table(
            ["trigger", "sender", "outcome", "reply_kind", "reply", "ended"],
            [
                [
                    t["trigger"],
                    t["sender"],
                    t["outcome"],
                    t["reply_kind"] or "",
                    t["reply_event"] or "-",
                    time.strftime("%H:%M:%S", time.gmtime(t["ended_at"])),
                ]
                for t in data.get("turns", [])
            ],
        )

    emit(as_json, data, human)


def _age(seconds: float) -> str:
    """How long ago, in the unit a person reads it in: 40 s, 12 min, 3 h, 2 d."""
    seconds = max(0.0, seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{int(seconds // size)} {unit}"
    return f"{int(seconds)} s"


def _room_names(hub: str, token: str | None) -> dict[str, str]:
    """Room id → name, as the hub says for this token; none when it cannot be asked (the
    status is read from the Worker's folder and stays readable with the hub down)."""
    if not token:
        return {}
    from agentpost.cli.inbox import room_names
    from agentpost.client import HubClient, HubError

    try:
        with HubClient(hub, token, 5.0) as c:
            return room_names(c)
    except HubError:
        return {}
