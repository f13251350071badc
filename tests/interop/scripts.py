"""The fake models' one script, shared by every vendor: the room message carries what the
model should do, as `fake:VERB ARGS` (the last one in the newest user message wins).

- `fake:say TEXT`       answers TEXT
- `fake:run CMD`        says "Let me do that.", runs CMD with the agent's shell tool, then
                        answers "fake-model: tool done: <output>"
- `fake:read PATH`      reads PATH with the agent's read tool, then answers
                        "fake-model: read: <content>"
- `fake:read-attachment` reads the first file the prompt links (`file://…`) the same way
- `fake:write PATH TEXT` writes TEXT to PATH with the agent's write tool, then answers
                        "fake-model: wrote PATH"
- `fake:calls T ARGS || T ARGS …` calls the offered tools whose names end in T (an MCP
                        server's tools come prefixed: `mcp__agentpost__post_message`) with the
                        JSON ARGS, one per round, then answers "fake-model: results: r1 || r2"
- `fake:slow N`         the server waits N seconds before it answers (a Turn to /stop)
- anything else         answers "fake-model: <the first line>"
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from urllib.parse import unquote

from fakes.base import Conversation, Step, Text, ToolCall

DIRECTIVE = re.compile(r"fake:(say|run|read-attachment|read|write|slow|calls)\b[ \t]*([^\n]*)")
FILE_URI = re.compile(r"file://(/[^\s)\]>\"']+)")

# Each vendor's tools for the verbs, by the names its client offers.
TOOLS: dict[str, dict[str, Callable[[str], ToolCall]]] = {
    "claude": {
        "run": lambda a: ToolCall("Bash", {"command": a, "description": "run it"}),
        "read": lambda a: ToolCall("Read", {"file_path": a}),
        "write": lambda a: ToolCall(
            "Write", {"file_path": a.split(" ", 1)[0], "content": a.split(" ", 1)[1]}
        ),
    },
    "codex": {
        # Codex asks for approval only for a command that leaves its sandbox.
        "run": lambda a: ToolCall(
            "exec_command",
            {"cmd": a, "sandbox_permissions": "require_escalated", "justification": "run it"},
        ),
        "read": lambda a: ToolCall("exec_command", {"cmd": f"cat {_q(a)}"}),
        # A write in its repo is unasked in `workspace-write`; escalated, it is asked in any
        # mode where Codex asks at all.
        "write": lambda a: ToolCall(
            "exec_command",
            {
                "cmd": f"printf %s {_q(a.split(' ', 1)[1])} > {_q(a.split(' ', 1)[0])}",
                "sandbox_permissions": "require_escalated",
                "justification": "write it",
            },
        ),
    },
    "gemini": {
        "run": lambda a: ToolCall("run_shell_command", {"command": a}),
        "read": lambda a: ToolCall("read_file", {"file_path": a}),
        "write": lambda a: ToolCall(
            "write_file", {"file_path": a.split(" ", 1)[0], "content": a.split(" ", 1)[1]}
        ),
    },
}


def _q(s: str) -> str:
    return "'" + s.replace("'", "'\\''") + "'"


def offered(conv: Conversation, name: str) -> str:
    """The name the client gave tool `name` (MCP tools come prefixed with the server's)."""
    for tool in conv.tools:
        if tool == name or tool.endswith(("__" + name, "_" + name, "::" + name)):
            return tool
    raise LookupError(f"no tool {name} among {conv.tools}")


SEARCH = "ToolSearch"


def deferred(conv: Conversation, name: str) -> str:
    """The full name of a tool Claude Code listed as deferred in its prompt."""
    found = re.findall(r"mcp__\w+?__" + re.escape(name) + r"\b", json.dumps(conv.raw))
    if not found:
        raise LookupError(f"no deferred tool {name}")
    return str(found[0])


def directive(conv: Conversation) -> tuple[str, str] | None:
    found = None
    for text in conv.user_texts[-3:]:
        for m in DIRECTIVE.finditer(text):
            found = (m.group(1), m.group(2).strip())
    return found


def script_for(vendor: str) -> Callable[[Conversation], Step]:
    def script(conv: Conversation) -> Step:
        d = directive(conv)
        if d and d[0] == "calls":
            calls = [c.strip() for c in d[1].split("||")]
            done = [n for n in conv.called if n not in (SEARCH, "tool_search")]
            if len(done) < len(calls):
                name, _, args = calls[len(done)].partition(" ")
                try:
                    return [ToolCall(offered(conv, name), json.loads(args or "{}"))]
                except LookupError:
                    # Claude Code defers MCP tools: a model loads them with ToolSearch first.
                    if "tool_search" in conv.tools and conv.called[-1:] != ["tool_search"]:
                        # Codex defers MCP tools too, behind its own client-run search.
                        return [ToolCall("tool_search", {"query": name, "limit": 8})]
                    if SEARCH not in conv.tools or conv.called[-1:] == [SEARCH]:
                        raise
                    return [ToolCall(SEARCH, {"query": f"select:{deferred(conv, name)}",
                                              "max_results": 5})]
            answered = [r for n, r in zip(conv.called, conv.tool_results, strict=False)
                        if n not in (SEARCH, "tool_search")]
            return [Text("fake-model: results: " + " || ".join(answered))]
        if conv.tool_results:
            out = conv.tool_results[-1]
            verb = d[0] if d else "run"
            if verb in ("read", "read-attachment"):
                return [Text(f"fake-model: read: {out.strip()}")]
            if verb == "write":
                return [Text(f"fake-model: wrote {d[1].split(' ', 1)[0] if d else ''}")]
            return [Text(f"fake-model: tool done: {out.strip()}")]
        if d is None:
            first = (conv.last_user.strip().splitlines() or [""])[0]
            return [Text(f"fake-model: {first[:200]}")]
        verb, arg = d
        if verb == "read-attachment":
            paths = [unquote(m.group(1)) for t in conv.user_texts for m in FILE_URI.finditer(t)]
            if not paths:
                # Gemini CLI reads a linked file itself and puts its text in the prompt.
                return [Text("fake-model: read: " + conv.last_user[-2000:])]
            verb, arg = "read", paths[0]
        if verb == "say":
            return [Text(arg)]
        if verb == "slow":
            return [Text("fake-model: slow answer")]
        return [Text("Let me do that."), TOOLS[vendor][verb](arg)]

    return script


def delay_for(conv: Conversation) -> float:
    d = directive(conv)
    if d and d[0] == "slow" and not conv.tool_results:
        return float(d[1] or 30)
    return 0.0
