"""Agents known by name (`connect --agent claude|codex|gemini`, docs/connect.md "Real agents"):
each name is expanded to its ACP adapter's command, found on PATH (or where an environment
variable says), and its needs are checked before anything starts, each missing one named
in one line. Any other `--agent` value is a command, split like a shell would.
"""

from __future__ import annotations

import os
import shlex
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class KnownAgent:
    name: str
    program: str  # the adapter's executable, as npm installs it
    args: tuple[str, ...]
    npm: str  # the npm package that provides `program`
    path_env: str  # the variable that names `program`'s path instead of PATH
    api_env: tuple[str, ...]  # the model API's variables the agent reads (docs only)
    # The package that provided `program` before the adapters moved (mid-2026): still run
    # when found, with a note that it is no longer maintained.
    legacy_npm: str = ""


KNOWN = {
    a.name: a
    for a in (
        KnownAgent(
            "claude",
            "claude-agent-acp",
            (),
            "@agentclientprotocol/claude-agent-acp",
            "AGENTPOST_CLAUDE_ACP",
            ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"),
            "@zed-industries/claude-agent-acp",
        ),
        KnownAgent(
            "codex",
            "codex-acp",
            (),
            "@agentclientprotocol/codex-acp",
            "AGENTPOST_CODEX_ACP",
            ("OPENAI_API_KEY",),
            "@zed-industries/codex-acp",
        ),
        KnownAgent(
            "gemini",
            "gemini",
            ("--acp",),
            "@google/gemini-cli",
            "AGENTPOST_GEMINI",
            ("GEMINI_API_KEY",),
        ),
    )
}


@dataclass(frozen=True)
class AgentCommand:
    """What `--agent` names: the argv to run, the known agent it expands (or None), and the
    needs found missing, one line each (empty: it can start)."""

    argv: list[str]
    known: KnownAgent | None
    problems: list[str]
    notes: list[str] = field(default_factory=list)  # said at start; nothing stops


def resolve(value: str, env: Mapping[str, str], euid: int) -> AgentCommand:
    """`--agent VALUE`: a known agent's command with its needs checked, or a command."""
    known = KNOWN.get(value.strip())
    if known is None:
        argv = shlex.split(value)
        if not argv or _which(argv[0], env) is None:
            return AgentCommand(argv, None, [f"agent command not found: {argv[0] if argv else value}"])
        return AgentCommand(argv, None, [])
    program, problem = _program(known, env)
    if program is None:
        return AgentCommand([known.program, *known.args], known, [problem])
    return AgentCommand(
        [program, *known.args], known, needs(known, program, env, euid), _notes(known, program)
    )


def _notes(known: KnownAgent, program: str) -> list[str]:
    """A legacy adapter found: it runs, but is said to be unmaintained (its package path
    names it: npm links `program` into the package's folder)."""
    if known.legacy_npm and f"{os.sep}{known.legacy_npm}{os.sep}" in os.path.realpath(program):
        return [
            f"{program} is {known.legacy_npm}, no longer maintained: install "
            f"`npm install -g {known.npm}` (the Worker runs either)"
        ]
    return []


def _program(known: KnownAgent, env: Mapping[str, str]) -> tuple[str | None, str]:
    named = env.get(known.path_env)
    if named:
        if os.path.isfile(named) and os.access(named, os.X_OK):
            return os.path.abspath(named), ""
        return None, f"{known.path_env}={named} is not an executable file"
    found = _which(known.program, env)
    if found is None:
        return None, (
            f"{known.program} (--agent {known.name}) is not on PATH: install it with "
            f"`npm install -g {known.npm}`, or set {known.path_env} to its path"
        )
    return found, ""


def needs(known: KnownAgent, program: str, env: Mapping[str, str], euid: int) -> list[str]:
    """The needs of a known agent that are missing, one line each."""
    problems = []
    interpreter = _node_interpreter(program)
    if interpreter is not None and not _runnable(interpreter, env):
        problems.append(
            f"{interpreter} not found: {known.program} (--agent {known.name}) is a Node.js "
            "program; install Node.js 20 or later"
        )
    if known.name == "claude" and euid == 0 and env.get("IS_SANDBOX") != "1":
        problems.append(
            "Claude Code refuses to run its tools unasked as root: set IS_SANDBOX=1 in the "
            "Worker's environment (only where the machine is a sandbox), or run as another user"
        )
    if known.name == "codex":
        if _which("bwrap", env) is None:
            problems.append(
                "bwrap not found on PATH: Codex's sandbox needs bubblewrap "
                "(apt-get install bubblewrap, or your system's package)"
            )
        tmpdir = env.get("TMPDIR", "")
        if not tmpdir or _is_tmp(tmpdir):
            # Seen with codex-acp 0.16: with TMPDIR /tmp itself, every sandboxed command
            # fails ("bwrap: execvp codex-linux-sandbox: No such file or directory"); a
            # folder of one's own, under /tmp or not, works (tests/interop).
            shown = f"TMPDIR={tmpdir}" if tmpdir else "TMPDIR is not set"
            problems.append(
                f"{shown}: Codex's sandbox needs a TMPDIR of its own, not /tmp itself "
                "(e.g. mkdir -p ~/.cache/tmp && export TMPDIR=~/.cache/tmp)"
            )
    return problems


def _which(program: str, env: Mapping[str, str]) -> str | None:
    return shutil.which(program, path=env.get("PATH", os.defpath))


def _node_interpreter(program: str) -> str | None:
    """`node` (or its path) when `program` is a script run by Node.js, else None (a native
    binary, a Python script)."""
    try:
        with open(program, "rb") as f:
            first = f.readline(256)
    except OSError:
        return None
    if not first.startswith(b"#!"):
        return None
    words = first[2:].decode("utf-8", "replace").split()
    if words and os.path.basename(words[0]) == "env":
        words = [w for w in words[1:] if not w.startswith("-")]
    if not words or not os.path.basename(words[0]).startswith("node"):
        return None
    return words[0]


def _runnable(interpreter: str, env: Mapping[str, str]) -> bool:
    if os.sep in interpreter:
        return os.path.isfile(interpreter) and os.access(interpreter, os.X_OK)
    return _which(interpreter, env) is not None


def _is_tmp(path: str) -> bool:
    return os.path.realpath(path) == "/tmp"
