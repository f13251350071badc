#!/usr/bin/env python3
"""A purpose-built ACP agent (SDK only) that misbehaves on request, for the Worker's
failure tests. Start flag: `--crash-at-start`. The first word of the prompt text (after
"<sender> in room <room>: ", mentions skipped) picks what it does:
  leak       print a fake API key on stderr, then exit mid-Turn
  crash      say something, then exit mid-Turn          junk    print non-JSON lines (one
             nested 200,000 deep) and a malformed session/update first
  bigframe   write one 60 MB line to stdout              stderr  write 1 MB to stderr first
  hang       never answer (ignores cancel)               slow N  answer after N s (ignores cancel)
  link URI   return URI as a resource_link               perm    ask for permission, report
  ext        call an unknown `_x/unknown`, report error  env     report what the env holds
  deliver J  send `_ag2/deliver` with the JSON J ($BINDING, $EXPORT, $TURN — this prompt's
             `turn` — replaced, $BIG: 70,000 characters; `sessionId` this session's unless J
             names one, "$NONE": none, "@SESSION_OF_BINDING": the session that got J's
             binding; `turn` only when J names one, "@TURN_OF_BINDING": the `turn` of the
             latest prompt that came with J's binding), reply its result
  binding    reply the Session's `_meta["ag2/delivery"]` with this prompt's `turn` (or "none")
  deliver-and-exit J  write the `_ag2/deliver` frame for J on stdout, then exit at once
  tools      stream "Let me do that." in chunks, a tool call and its update, "done",
             a mode update mid-word, a tool call, "\nLast." (text around tool calls)
  permstop   ask to run a command; when refused, say so and end the Turn `cancelled`
  permhang   ask to run a command, then wait for session/cancel; end the Turn `cancelled`
  attach     report (JSON) the session's additionalDirectories and _meta.additionalRoots,
             what its folder holds, and the outcome of read permissions for each file
             linked in the prompt (as Claude asks: locations; as Gemini asks: the path in
             the title), for an edit of the first, and for a file of another Session
  rawext     send `_x/unknown` with no params and `_ag2/deliver` with params a list, as raw
             frames; reply the two error codes
Every prompt first writes `$TRICK_MARKER_DIR/prompt-<n>` when that variable is set.
While the file `$TRICK_REFUSE_SESSIONS` exists, session/new is answered with ACP's
auth_required error (-32000), its message quoting a fake API key.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from acp import PROTOCOL_VERSION, RequestError, run_agent, text_block, update_agent_message
from acp.helpers import (
    resource_link_block,
    start_tool_call,
    update_current_mode,
    update_tool_call,
)
from acp.schema import (
    AgentCapabilities,
    InitializeResponse,
    NewSessionResponse,
    PermissionOption,
    PromptResponse,
    ToolCallLocation,
    ToolCallUpdate,
)


def mark() -> None:
    folder = os.environ.get("TRICK_MARKER_DIR")
    if folder:
        n = len(list(Path(folder).glob("prompt-*"))) + 1
        (Path(folder) / f"prompt-{n}").write_text(str(os.getpid()))


class TrickAgent:
    def __init__(self) -> None:
        self.conn: Any = None
        self.delivery: dict[str, Any] = {}
        self.turns: dict[str, str] = {}  # binding → the `turn` of its latest prompt
        self.roots: dict[str, dict[str, Any]] = {}
        self.cancels: dict[str, asyncio.Event] = {}

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def initialize(self, protocol_version: int, **kwargs: Any) -> InitializeResponse:
        caps = AgentCapabilities(field_meta={"ag2/deliver": True})
        return InitializeResponse(protocol_version=PROTOCOL_VERSION, agent_capabilities=caps)

    async def new_session(self, cwd: str, **kwargs: Any) -> NewSessionResponse:
        refuse = os.environ.get("TRICK_REFUSE_SESSIONS")
        if refuse and os.path.exists(refuse):
            raise RequestError(-32000, "Authentication required (key sk-ant-" + "FAKE" * 10 + ")")
        session_id = uuid.uuid4().hex
        self.roots[session_id] = {
            "dirs": kwargs.get("additional_directories"),
            "roots": kwargs.get("additionalRoots"),
        }
        if isinstance(kwargs.get("ag2/delivery"), dict):
            self.delivery[session_id] = kwargs["ag2/delivery"]
        return NewSessionResponse(session_id=session_id)

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        self.cancels.setdefault(session_id, asyncio.Event()).set()

    async def say(self, session_id: str, text: str) -> None:
        await self.conn.session_update(
            session_id=session_id, update=update_agent_message(text_block(text))
        )

    async def ask(self, session_id: str, title: str, kind: str, paths: list[str]) -> str:
        """Ask a permission as a tool call of `kind` naming `paths`; the option chosen."""
        resp = await self.conn.request_permission(
            session_id=session_id,
            tool_call=ToolCallUpdate(
                tool_call_id=uuid.uuid4().hex,
                title=title,
                kind=kind,
                locations=[ToolCallLocation(path=p) for p in paths] or None,
            ),
            options=[
                PermissionOption(option_id="opt-yes-v2", name="Yes", kind="allow_once"),
                PermissionOption(option_id="opt-no-v2", name="No", kind="reject_once"),
            ],
        )
        return str(getattr(resp.outcome, "option_id", None) or resp.outcome.outcome)

    async def attach(self, session_id: str, prompt: list[Any]) -> None:
        roots = self.roots.get(session_id, {})
        dirs = roots.get("dirs") or []
        files = [
            unquote(urlparse(b.uri).path)
            for b in prompt
            if getattr(b, "type", "") == "resource_link"
        ]
        folder = Path(dirs[0]) if dirs else None
        others = [
            str(p)
            for p in (folder.parent.glob("*/*/*") if folder else [])
            if p.is_file() and folder not in p.parents
        ]
        report = {
            **roots,
            "holds": sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())
            if folder
            else [],
            "inside": [bool(folder and folder in Path(f).parents) for f in files],
            "read": [await self.ask(session_id, f"Read {f}", "read", [f]) for f in files],
            "read_by_title": [
                await self.ask(session_id, f"Allow access to absolute path: {f}", "read", [])
                for f in files
            ],
            "edit": [await self.ask(session_id, f"Edit {f}", "edit", [f]) for f in files[:1]],
            "read_other": [
                await self.ask(session_id, f"Read {o}", "read", [o]) for o in others[:1]
            ],
            "read_outside": await self.ask(session_id, "Read /etc/hostname", "read", ["/etc/hostname"]),
        }
        await self.say(session_id, json.dumps(report, sort_keys=True))

    async def prompt(self, prompt: list[Any], session_id: str, **kwargs: Any) -> PromptResponse:
        mark()
        meta = kwargs.get("ag2/delivery") if isinstance(kwargs.get("ag2/delivery"), dict) else {}
        turn = str(meta.get("turn", ""))
        if meta.get("binding") and turn:
            self.turns[meta["binding"]] = turn
        said = "".join(b.text for b in prompt if getattr(b, "type", "") == "text")
        text = said.split(": ", 1)[1] if ": " in said else said
        words = [w for w in text.split() if not w.startswith("@")]
        word = words[0] if words else ""
        if word == "leak":  # a failing agent's stderr, as real ones print it
            sys.stderr.write("Error: 401 invalid x-api-key sk-ant-" + "FAKE" * 10 + "\n")
            sys.stderr.flush()
            await self.say(session_id, "about to fail")
            await asyncio.sleep(0.2)
            os._exit(5)
        if word == "crash":
            await self.say(session_id, "about to crash")
            await asyncio.sleep(0.2)
            os._exit(7)
        if word == "junk":
            os.write(1, b"this is not json\n[1, 2, 3]\n")
            os.set_blocking(1, True)
            os.write(1, b"[" * 200_000 + b"\n")  # too deep for a JSON parser's recursion
            os.write(1, b'{"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": 5}}\n')
            await self.say(session_id, "after junk")
        elif word == "bigframe":
            chunk = b"x" * (1024 * 1024)
            os.set_blocking(1, True)  # the SDK made stdout non-blocking; we want it all out
            os.write(1, b'{"jsonrpc": "2.0", "method": "x", "params": "')
            for _ in range(60):
                os.write(1, chunk)
            os.write(1, b'"}\n')
            await self.say(session_id, "after bigframe")
        elif word == "stderr":
            line = b"e" * 1023 + b"\n"
            os.set_blocking(2, True)
            for _ in range(1024):
                os.write(2, line)
            await self.say(session_id, "after stderr")
        elif word == "hang":
            await asyncio.Event().wait()
        elif word == "slow":
            await asyncio.sleep(float(words[1]))
            await self.say(session_id, f"slow done {words[1]}")
        elif word == "link":
            await self.say(session_id, "linked")
            link = resource_link_block(words[1].rsplit("/", 1)[-1] or "x", words[1])
            await self.conn.session_update(session_id=session_id, update=update_agent_message(link))
        elif word == "perm":
            resp = await self.conn.request_permission(
                session_id=session_id,
                tool_call=ToolCallUpdate(tool_call_id="t1", title="write a file"),
                options=[
                    PermissionOption(option_id="opt-yes-v2", name="Yes", kind="allow_once"),
                    PermissionOption(option_id="opt-no-v2", name="No", kind="reject_once"),
                ],
            )
            outcome = resp.outcome
            chosen = getattr(outcome, "option_id", None) or outcome.outcome
            await self.say(session_id, f"permission: {chosen}")
        elif word == "tools":
            async def send(update: Any) -> None:
                await self.conn.session_update(session_id=session_id, update=update)

            for chunk in ("Let me ", "do that."):
                await self.say(session_id, chunk)
            await send(start_tool_call("c1", "run a tool", kind="execute", status="pending"))
            await send(update_tool_call("c1", status="completed"))
            await self.say(session_id, "done and dus")
            await send(update_current_mode("code"))  # about the session: no break
            await self.say(session_id, "ted.\n")
            await send(start_tool_call("c2", "another", kind="read", status="completed"))
            await self.say(session_id, "\nLast.")
        elif word == "permstop":
            chosen = await self.ask(session_id, "run rm -rf build", "execute", [])
            if chosen != "opt-yes-v2":
                await self.say(session_id, "I could not do it.")
                return PromptResponse(stop_reason="cancelled")
            await self.say(session_id, "done it")
        elif word == "permhang":
            await self.ask(session_id, "run make", "execute", [])
            await self.say(session_id, "waiting")
            await self.cancels.setdefault(session_id, asyncio.Event()).wait()
            return PromptResponse(stop_reason="cancelled")
        elif word == "attach":
            await self.attach(session_id, prompt)
        elif word == "ext":
            try:
                result = await self.conn.ext_method("x/unknown", {"a": 1})
                await self.say(session_id, f"ext answered: {result!r}")
            except RequestError as exc:
                await self.say(session_id, f"ext error {exc.code}")
        elif word == "binding":
            found = self.delivery.get(session_id)
            await self.say(session_id, json.dumps({**found, "turn": turn} if found else "none"))
        elif word == "rawext":
            # Raw frames the SDK would never send; their answers come back to its connection,
            # which resolves the futures registered here under their ids.
            rpc = self.conn._conn
            codes = []
            for rid, frame in (
                ("raw-1", {"jsonrpc": "2.0", "id": "raw-1", "method": "_x/unknown"}),
                ("raw-2", {"jsonrpc": "2.0", "id": "raw-2", "method": "_ag2/deliver", "params": [1]}),
            ):
                fut = asyncio.get_running_loop().create_future()
                rpc._pending[rid] = fut
                sys.stdout.buffer.write(json.dumps(frame).encode() + b"\n")
                sys.stdout.buffer.flush()
                try:
                    codes.append(f"ok {await asyncio.wait_for(fut, 30)!r}")
                except RequestError as exc:
                    codes.append(str(exc.code))
            await self.say(session_id, "rawext " + " ".join(codes))
        elif word == "deliver-and-exit":
            d = self.delivery.get(session_id) or {"binding": "", "export_dir": ""}
            raw = text.split("deliver-and-exit", 1)[1].strip()
            raw = raw.replace("$BINDING", d["binding"]).replace("$EXPORT", d["export_dir"])
            params = {"sessionId": session_id, **json.loads(raw.replace("$TURN", turn))}
            frame = {"jsonrpc": "2.0", "id": 9999, "method": "_ag2/deliver", "params": params}
            sys.stdout.buffer.write(json.dumps(frame).encode() + b"\n")
            sys.stdout.buffer.flush()
            os._exit(0)  # gone before any answer can come back
        elif word == "deliver":
            d = self.delivery.get(session_id) or {"binding": "", "export_dir": ""}
            raw = text.split("deliver", 1)[1].strip()
            raw = raw.replace("$BINDING", d["binding"]).replace("$EXPORT", d["export_dir"])
            raw = raw.replace("$BIG", "x" * 70000).replace("$TURN", turn)
            request = json.loads(raw)
            if request.get("turn") == "@TURN_OF_BINDING":
                # Work of an earlier Turn finishing now echoes that Turn's `turn`.
                request["turn"] = self.turns.get(request["binding"], "no-such-turn")
            if request.get("sessionId") == "$NONE":
                del request["sessionId"]
            elif request.get("sessionId") == "@SESSION_OF_BINDING":
                # Work of an earlier Turn finishing now: it delivers from the session that
                # got the binding, whichever Turn runs at the moment.
                request["sessionId"] = next(
                    (sid for sid, d in self.delivery.items() if d["binding"] == request["binding"]),
                    "no-such-session",
                )
            else:  # the session it asks from, unless the test names another
                request.setdefault("sessionId", session_id)
            try:
                result = await self.conn.ext_method("ag2/deliver", request)
                await self.say(session_id, json.dumps(result, sort_keys=True))
            except RequestError as exc:
                await self.say(session_id, f"deliver error {exc.code}")
        elif word == "env":
            token = "present" if "AGENTPOST_TOKEN" in os.environ else "absent"
            admin = "present" if "AGENTPOST_ADMIN_TOKEN" in os.environ else "absent"
            custom = os.environ.get("TRICK_CUSTOM", "-")
            await self.say(session_id, f"token:{token} admin:{admin} custom:{custom}")
        else:
            await self.say(session_id, f"trick: {text}")
        return PromptResponse(stop_reason="end_turn")


if __name__ == "__main__":
    if "--crash-at-start" in sys.argv:
        sys.stderr.write("trick agent: crashing at start as asked\n")
        sys.exit(3)
    asyncio.run(run_agent(TrickAgent()))
