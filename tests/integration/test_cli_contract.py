"""docs/cli.md "The contract", checked for every command of the click tree.

The tree is walked (`agentpost.cli.app.main`, every group down to its leaves), so a new
command is in this test from the day it exists: until it has a row in `TABLE` the test fails
and says to add one. Each command meets the rows that apply to it: no hub, a wrong token, a
bad option, each with and without `--json`; piped output; `| head -1`. A row that does not
apply says why in the table. The commands run as real processes against one real hub for
the module, many at once (tests/clibatch.py), so the whole walk costs a few Python starts.
"""

from __future__ import annotations

import importlib
import json
import re
import socket
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click
import pytest

from clirun import agentpost, agentpost_batch
from hubproc import HubProcess, Setup, fresh_workspace, make_setup

MEMBER = "member"
ADMIN = "admin"


@dataclass(frozen=True)
class Row:
    """How to run one command. `args`: a command line that gets as far as the hub (or, for
    a command that never talks to one, as far as its own refusal). `token`: which token it
    needs (None: none). `ok`: a command line that succeeds, for the piped and `head -1`
    rows, `{row}` standing for the row's name (two runs must not collide). `skip`: the rows
    that do not apply, each with the reason. `codes`: a row's code where the command's own
    documented set names it otherwise."""

    args: str
    token: str | None = MEMBER
    ok: str | None = None
    skip: dict[str, str] = field(default_factory=dict)
    codes: dict[str, str] = field(default_factory=dict)


NO_HUB_ROWS = {
    "no_hub": "talks to no hub",
    "wrong_token": "takes no token",
}
LOCAL_DB = {**NO_HUB_ROWS, "piped": "reads the database itself: tests/integration/test_db_ops.py"}
LOCAL_MAIL = {**NO_HUB_ROWS, "piped": "needs a mail remote: tests/mail/"}
# docs/threads.md "Codes": a closed set, in which an unknown token is `permission_denied`.
THREADS = {"wrong_token": "permission_denied"}
SERVER = "a server: it runs until it is stopped, nothing to pipe"

# Every command of the tree: `agentpost ARGS`. In `args` and `ok`: {ws} the workspace,
# {ev} an event of alice's, {media} a file posted in the room, {tmp} a folder of this test's.
TABLE: dict[str, Row] = {
    "admin member add": Row("admin member add {ws} x1", ADMIN, "admin member add {ws} add{row}"),
    "admin member list": Row("admin member list {ws}", ADMIN, "admin member list {ws}"),
    "admin member remove": Row(
        "admin member remove {ws} carol", ADMIN, "admin member remove {ws} gone{row}"
    ),
    "admin member set-owner": Row(
        "admin member set-owner {ws} bot --owner alice",
        ADMIN,
        "admin member set-owner {ws} bot --owner alice",
    ),
    "admin member token": Row(
        "admin member token {ws} carol", ADMIN, "admin member token {ws} carol"
    ),
    "admin workspace create": Row(
        "admin workspace create wx", ADMIN, "admin workspace create {ws}{row}"
    ),
    "admin workspace export": Row(
        "admin workspace export {ws} -o {tmp}/wsx/",
        ADMIN,
        "admin workspace export {ws} -o {tmp}/x{row}/",
    ),
    "admin workspace list": Row("admin workspace list", ADMIN, "admin workspace list"),
    "admin workspace retention": Row(
        "admin workspace retention {ws}", ADMIN, "admin workspace retention {ws}"
    ),
    "capabilities": Row(
        "capabilities",
        None,
        "capabilities",
        skip={"wrong_token": "asks the hub without a token"},
    ),
    "connect": Row(
        "connect --agent true --repo {tmp}",
        MEMBER,
        skip={
            "no_hub": "a Worker waits for its hub to come (docs/connect.md), as a daemon does",
            "piped": "runs a Worker until it is stopped: tests/connect/",
        },
    ),
    "connect status": Row(
        "connect status",
        MEMBER,
        "connect status --workspace-dir {worker}",
        skip={"fields": "a report of several parts, each tab-separated: lines, then tables"},
    ),
    "db backup": Row("db backup {tmp}/backup", None, skip=LOCAL_DB),
    "db migrate": Row("db migrate", None, skip=LOCAL_DB),
    "db restore": Row("db restore {tmp}/nothing --data {tmp}/restored", None, skip=LOCAL_DB),
    "db verify": Row("db verify", None, skip=LOCAL_DB),
    "edit": Row("edit general {ev} -t edited", MEMBER, "edit general {ev} -t edited{row}"),
    "guard check": Row(
        "guard check --project p a.txt",
        MEMBER,
        skip={"piped": "a hook's check: silent when nothing is held, as `git diff --quiet`"},
    ),
    "guard edit-hook": Row(
        "guard edit-hook --project p",
        MEMBER,
        skip={
            "no_hub": "an agent's hook: it answers the agent on stdout whatever happens "
            "(tests/integration/test_reservations_cli.py)",
            "wrong_token": "an agent's hook, as above",
            "piped": "an agent's hook, as above",
        },
    ),
    "guard install": Row(
        "guard install --project p",
        None,
        skip={**NO_HUB_ROWS, "piped": "writes hooks into a repository: test_reservations_cli.py"},
    ),
    "inbox": Row("inbox", MEMBER, "inbox"),
    "inbox hook": Row(
        "inbox hook prompt",
        MEMBER,
        skip={
            "no_hub": "a coding agent's hook: always exits 0 (docs/mcp.md)",
            "wrong_token": "a coding agent's hook, as above",
            "piped": "a coding agent's hook, as above",
        },
    ),
    "mail compact": Row("mail compact", None, skip=LOCAL_MAIL),
    "mail forget": Row("mail forget m2", None, skip=LOCAL_MAIL),
    "mail hook": Row(
        "mail hook prompt", None, skip={**LOCAL_MAIL, "refused": "a hook: always exits 0"}
    ),
    "mail inbox": Row("mail inbox", None, skip=LOCAL_MAIL),
    "mail join": Row("mail join --name n", None, skip=LOCAL_MAIL),
    "mail outbox": Row("mail outbox", None, skip=LOCAL_MAIL),
    "mail rename-machine": Row("mail rename-machine m2", None, skip=LOCAL_MAIL),
    "mail repair": Row("mail repair", None, skip=LOCAL_MAIL),
    "mail send": Row("mail send --to n -t hi", None, skip=LOCAL_MAIL),
    "mail sync": Row("mail sync", None, skip=LOCAL_MAIL),
    "mail trust": Row("mail trust m2", None, skip=LOCAL_MAIL),
    "mcp": Row(
        "mcp",
        MEMBER,
        skip={
            "no_hub": "an MCP server on stdio: its errors are tool results (tests/mcp/)",
            "wrong_token": "an MCP server, as above",
            "piped": "an MCP server, as above",
        },
    ),
    "media get": Row("media get {media} -o -", MEMBER, "media get {media} -o {tmp}/m{row}"),
    "members": Row("members", MEMBER, "members"),
    "post": Row("post general -t hi", MEMBER, "post general -t hi"),
    "react": Row("react general {ev} 👍", MEMBER, "react general {ev} 👍"),
    "redact": Row("redact general {ev}", MEMBER, "redact general {gone{row}}"),
    "release": Row(
        "release rs_01M98KMTM5TGKNR4YQNWPPSAF6",
        MEMBER,
        skip={"piped": "frees what `reserve` made, once: test_reservations_cli.py"},
    ),
    "reservations": Row("reservations --project p", MEMBER, "reservations --project p"),
    "reserve": Row("reserve --project p a.txt", MEMBER, "reserve --project p{row} a.txt"),
    "room add": Row("room add general helper", MEMBER, "room add general helper"),
    "room archive": Row("room archive general", MEMBER, "room archive arch{row}"),
    "room create": Row("room create r1", MEMBER, "room create r{row}"),
    "room export": Row("room export general", MEMBER, "room export general"),
    "room list": Row("room list", MEMBER, "room list"),
    "room remove": Row("room remove general helper", MEMBER, "room remove rem{row} carol"),
    "room retention": Row("room retention general", MEMBER, "room retention general"),
    "room settings": Row("room settings general", MEMBER, "room settings general"),
    "room unarchive": Row("room unarchive general", MEMBER, "room unarchive general"),
    "search": Row("search hello", MEMBER, "search line"),
    "serve": Row(
        "serve --port 1 --data {tmp}/serve",
        None,
        skip={**NO_HUB_ROWS, "piped": SERVER},
    ),
    "status": Row("status {ev}", MEMBER, "status {ev}"),
    "tail": Row("tail general", MEMBER, "tail general"),
    "thread archive": Row("thread archive plan", MEMBER, "thread archive t{row}", codes=THREADS),
    "thread ensure": Row("thread ensure plan", MEMBER, "thread ensure new{row}"),
    "thread send": Row("thread send plan -t hi", MEMBER, "thread send plan -t hi", codes=THREADS),
    "thread unarchive": Row(
        "thread unarchive plan", MEMBER, "thread unarchive plan", codes=THREADS
    ),
    "whoami": Row("whoami", MEMBER, "whoami"),
}


def walk(group: click.Group, path: tuple[str, ...] = ()) -> Iterator[tuple[str, click.Command]]:
    """Every command of the tree; a group that runs by itself (`connect`) is one too."""
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        cmd = group.get_command(ctx, name)
        assert cmd is not None, name
        if isinstance(cmd, click.Group):
            if cmd.invoke_without_command:
                yield " ".join((*path, name)), cmd
            yield from walk(cmd, (*path, name))
        else:
            yield " ".join((*path, name)), cmd


def every_command() -> dict[str, click.Command]:
    from agentpost.cli.app import COMMANDS, main

    for module in sorted({m for ms in COMMANDS.values() for m in ms}):
        importlib.import_module(f"agentpost.cli.{module}")
    return dict(walk(main))


COMMANDS_NOW = every_command()
# The `ok` runs: piped and `| head -1`, each with and without --json ({row} in `ok`).
OK_ROWS = ("piped", "pipedjson", "head", "headjson")


def test_every_command_has_a_row() -> None:
    commands = COMMANDS_NOW
    missing = sorted(set(commands) - set(TABLE))
    assert not missing, (
        f"add a row for {missing} to TABLE in {Path(__file__).name}: how to run it, and why "
        "a row of the contract does not apply to it"
    )
    assert not sorted(set(TABLE) - set(commands)), "TABLE names a command that is gone"


@dataclass
class World:
    hub: HubProcess
    setup: Setup
    fill: dict[str, str]
    tmp: Path

    def argv(self, line: str, row: str) -> list[str]:
        return [a.replace("{row}", row).format(**self.fill) for a in line.split(" ")]

    def env(
        self, token: str | None, hub: str | None = None, admin: str | None = None
    ) -> dict[str, str]:
        env = {
            "AGENTPOST_HUB": hub or self.hub.url,
            "AGENTPOST_HOME": str(self.tmp / "home"),
            "AGENTPOST_ADMIN_TOKEN": admin or self.hub.admin_token,
        }
        if token == MEMBER:
            env["AGENTPOST_TOKEN"] = self.setup.tokens["alice"]
        return env


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def world(_shared_hubs: Any, tmp_path_factory: pytest.TempPathFactory) -> World:
    hub: HubProcess = _shared_hubs.get(None, None)
    ws = fresh_workspace()
    people = ["alice", "carol", *(f"gone{row}" for row in OK_ROWS)]
    setup = make_setup(hub, people, ["bot", "helper"], workspace=ws)
    tmp = tmp_path_factory.mktemp("contract")
    alice = setup.tokens["alice"]
    events = []
    with hub.client(alice) as c:
        # More than a page of output for `tail`, `search`, `room export`: `| head -1` closes
        # the pipe while they still write.
        for i in range(40):
            r = c.post(f"/v1/rooms/{setup.room}/messages", json={"text": f"line {i} " + "x" * 200})
            assert r.status_code in (200, 201), r.text
            events.append(r.json()["event"]["id"])
        for name in [f"{kind}{row}" for kind in ("arch", "rem") for row in OK_ROWS]:
            r = c.post(f"/v1/workspaces/{ws}/rooms", json={"name": name, "participants": ["carol"]})
            assert r.status_code == 201, r.text
    (tmp / "report.txt").write_text("a file\n")
    posted = agentpost(hub, "post", "general", "-f", str(tmp / "report.txt"), "--json", token=alice)
    media = json.loads(posted.stdout)["event"]["attachments"][0]["id"]
    agentpost(hub, "thread", "ensure", "plan", token=alice)
    for row in OK_ROWS:
        agentpost(hub, "thread", "ensure", f"t{row}", token=alice)
    worker = tmp / "worker"
    worker.mkdir()
    fill = {
        "ws": ws,
        "ev": events[0],
        **{f"gone{row}": events[1 + i] for i, row in enumerate(OK_ROWS)},
        "media": media,
        "tmp": str(tmp),
        "worker": str(worker),
    }
    return World(hub, setup, fill, tmp)


def one_error_line(r: dict[str, Any], code: str | None, exit_code: int) -> list[str]:
    """What is wrong with a result that should be `error CODE: …` alone on stderr."""
    wrong = []
    if r["rc"] != exit_code:
        wrong.append(f"exit {r['rc']}, not {exit_code}")
    lines = r["stderr"].splitlines()
    if len(lines) != 1 or not re.fullmatch(r"error [a-z_]+: \S.*", lines[0]):
        wrong.append(f"stderr is not one `error CODE: message` line: {r['stderr']!r}")
    elif code is not None and not lines[0].startswith(f"error {code}: "):
        wrong.append(f"code is not {code}: {lines[0]!r}")
    if r["stdout"]:
        wrong.append(f"stdout not empty: {r['stdout']!r}")
    return wrong


def json_error(r: dict[str, Any], code: str | None, exit_code: int) -> list[str]:
    """What is wrong with a result that should be the one JSON error object on stdout."""
    wrong = []
    if r["rc"] != exit_code:
        wrong.append(f"exit {r['rc']}, not {exit_code}")
    try:
        (line,) = r["stdout"].splitlines()
        body = json.loads(line)
        err = body["error"]
        assert set(body) == {"error"} and {"code", "message", "retryable"} <= set(err)
    except (ValueError, KeyError, AssertionError, TypeError):
        return [*wrong, f"stdout is not one JSON error object: {r['stdout']!r} {r['stderr']!r}"]
    if code is not None and err["code"] != code:
        wrong.append(f"code {err['code']!r}, not {code!r}: {err['message']!r}")
    if r["stderr"]:
        wrong.append(f"stderr not empty: {r['stderr']!r}")
    return wrong


# row → (what to change in the run, the code, the exit code)
ERROR_ROWS: dict[str, tuple[str | None, int]] = {
    "no_hub": ("hub_unreachable", 3),
    "wrong_token": ("unauthorized", 1),
    "bad_option": ("usage_error", 2),
}


def error_jobs(world: World, row: str) -> list[tuple[str, bool, dict[str, Any]]]:
    jobs = []
    for name, spec in sorted(TABLE.items()):
        if row in spec.skip:
            continue
        argv = world.argv(spec.args, row)
        env = world.env(spec.token)
        if row == "no_hub":
            env = world.env(spec.token, hub=f"http://127.0.0.1:{world.fill['closed']}")
        elif row == "wrong_token":
            if spec.token == ADMIN:
                env = world.env(None, admin="ap_admin_not_this_one")
            else:
                env["AGENTPOST_TOKEN"] = "ap_not_a_token_of_this_hub"
        elif row == "bad_option":
            argv = [*argv, "--no-such-option"]
        takes_json = "as_json" in {p.name for p in COMMANDS_NOW[name].params}
        for as_json in (False, True) if takes_json or row == "bad_option" else (False,):
            job = {"args": argv + (["--json"] if as_json else []), "env": env, "timeout": 20}
            jobs.append((name, as_json, job))
    return jobs


@pytest.mark.parametrize("row", sorted(ERROR_ROWS))
def test_every_command_fails_by_the_contract(world: World, row: str) -> None:
    world.fill.setdefault("closed", str(closed_port()))
    code, exit_code = ERROR_ROWS[row]
    jobs = error_jobs(world, row)
    results = agentpost_batch([j for _, _, j in jobs])
    wrong = []
    for (name_, as_json, job), r in zip(jobs, results, strict=True):
        check = json_error if as_json else one_error_line
        for w in check(r, TABLE[name_].codes.get(row, code), exit_code):
            wrong.append(f"agentpost {' '.join(job['args'])}: {w}")
    assert not wrong, f"{len(wrong)} breaches of docs/cli.md's contract:\n" + "\n".join(wrong)


TABLE_LINE = re.compile(r"[^\t ].*")


def piped_breaches(r: dict[str, Any], head: bool, report: bool) -> list[str]:
    wrong = []
    if r["rc"] != 0:
        wrong.append(f"exit {r['rc']}: {r['stderr'][-300:]!r}")
    elif r["stderr"]:
        wrong.append(f"stderr not empty: {r['stderr'][-300:]!r}")
    lines = r["stdout"].splitlines()
    if head:
        return wrong
    if not lines:
        wrong.append("printed nothing")
    fields = {line.count("\t") for line in lines if "\t" in line}
    if len(fields) > 1 and not report:
        wrong.append(f"lines with different numbers of fields: {sorted(fields)}")
    for line in lines:
        if re.search(r"\S {2,}\S|^ ", line):
            wrong.append(f"space-padded, not tab-separated: {line!r}")
            break
    return wrong


@pytest.mark.parametrize("row", ["piped", "head"])
def test_every_command_pipes_by_the_contract(world: World, row: str) -> None:
    jobs = []
    for name, spec in sorted(TABLE.items()):
        if spec.ok is None:
            assert "piped" in spec.skip, f"{name}: no `ok` command line and no reason"
            continue
        takes_json = "as_json" in {p.name for p in COMMANDS_NOW[name].params}
        for as_json in (False, True) if takes_json else (False,):
            variant = row + ("json" if as_json else "")
            argv = world.argv(spec.ok, variant) + (["--json"] if as_json else [])
            mode = "head" if row == "head" else "capture"
            jobs.append((name, {"args": argv, "env": world.env(spec.token), "mode": mode}))
    results = agentpost_batch([j for _, j in jobs])
    wrong = []
    for (name_, job), r in zip(jobs, results, strict=True):
        breaches = piped_breaches(r, head=row == "head", report="fields" in TABLE[name_].skip)
        if "--json" in job["args"] and row == "piped" and r["rc"] == 0:
            breaches = [b for b in breaches if "space-padded" not in b]
            for line in r["stdout"].splitlines():
                try:
                    json.loads(line)
                except ValueError:
                    breaches.append(f"--json printed a line that is not JSON: {line[:120]!r}")
                    break
        for w in breaches:
            wrong.append(f"agentpost {' '.join(job['args'])}: {w}")
    assert not wrong, f"{len(wrong)} breaches of docs/cli.md's contract:\n" + "\n".join(wrong)


# docs/cli.md "The contract", rule 8: the commands that take a text, and those that take a file.
TAKES_TEXT = ("post", "edit", "thread send", "mail send")
TAKES_FILE = ("post", "thread send", "mail send")


def test_text_and_files_come_in_one_way_everywhere() -> None:
    def spellings(name: str) -> set[str]:
        return {o for p in COMMANDS_NOW[name].params for o in p.opts}

    for name in TAKES_TEXT:
        assert {"-t", "--text"} <= spellings(name), name
    for name in TAKES_FILE:
        assert {"-f", "--file"} <= spellings(name), name


def test_no_text_and_no_file_is_a_usage_error_everywhere(tmp_path: Path) -> None:
    # Rule 4, "none where one is needed": the same refusal from every command that takes a
    # body, before a hub or a repository is looked at.
    lines = {
        "post": ["post", "general"],
        "thread send": ["thread", "send", "plan"],
        "mail send": ["mail", "send", "--to", "bob"],
    }
    env = {"AGENTPOST_HOME": str(tmp_path)}
    for name, argv in lines.items():
        for extra in ([], ["-t", "  "]):
            p = agentpost(None, *argv, *extra, env=env, check=False)
            assert p.returncode == 2, (name, p.stderr)
            assert p.stderr.startswith("error usage_error: nothing to "), (name, p.stderr)
            as_json = agentpost(None, *argv, *extra, "--json", env=env, check=False)
            assert json.loads(as_json.stdout)["error"]["code"] == "usage_error", name
            assert as_json.returncode == 2 and as_json.stderr == "", name
