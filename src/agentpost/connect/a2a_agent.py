"""A remote A2A agent as the Worker's ACP agent (`agentpost connect --a2a URL`,
docs/architecture.md#a2a, docs/a2a.md "A2A agents as members").

The Worker runs this module as its agent process, so the remote agent gets every rule of
an ACP agent (one Worker, the lease, the Turn journal, never silent). Each prompt is one
A2A `SendMessage` over the JSON-RPC binding, with `messageId` = the waking event's id (the
Worker sends it in the prompt's `_meta`): a Turn run again after a crash sends the same
message, which a remote that deduplicates answers as the same task, and any other remote
sees as a duplicate it must tolerate. The task is then followed with `GetTask` to a
terminal state (or INPUT_REQUIRED), and its result becomes the Turn's reply: artifacts'
text, and their files written into the Session's folder and named as links (which the
Worker posts as files). A file the Worker hands over (a trigger's attachment) goes as a
file part. A `/stop` in the room is a `CancelTask`.

    python -m agentpost.connect.a2a_agent URL [--token-file FILE]

URL is the remote agent's base URL (its card at URL/.well-known/agent-card.json) or the
card's own URL. FILE holds a bearer token for the remote (mode 0600, yours).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import binascii
import json
import logging
import re
import sys
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import httpx
from acp import PROTOCOL_VERSION, RequestError, run_agent, text_block, update_agent_message
from acp.helpers import resource_link_block
from acp.schema import InitializeResponse, NewSessionResponse, PromptResponse

from agentpost.connect.acp import AGENT_META, EVENT_META

REPLY_KIND_META = "ag2/reply_kind"
CAUSE_META = "agentpost/cause"  # hub/a2a/wire.py CAUSE_META: the call's cause
CARD_PATH = "/.well-known/agent-card.json"
TERMINAL = {
    "TASK_STATE_COMPLETED",
    "TASK_STATE_FAILED",
    "TASK_STATE_CANCELED",
    "TASK_STATE_REJECTED",
}
STOPPED = TERMINAL | {"TASK_STATE_INPUT_REQUIRED", "TASK_STATE_AUTH_REQUIRED"}
POLL_START, POLL_MAX = 0.2, 2.0
SEND_TRIES = 5
MAX_FILE_BYTES = 64 * 1024 * 1024

log = logging.getLogger("agentpost.a2a_agent")


class RemoteError(Exception):
    """The remote refused or failed in a way a retry cannot mend: said in the reply."""


class Remote:
    """The remote agent's JSON-RPC endpoint, found from its card."""

    def __init__(self, url: str, token: str | None) -> None:
        self.url = url
        self.rpc_url = ""
        self.token = token
        self.http = httpx.AsyncClient(headers={"A2A-Version": "1.0"}, timeout=30.0)

    def auth(self, url: str) -> dict[str, str]:
        """The bearer token, for a URL of the remote's own origin only (the one `--a2a`
        names): never for a card's or an artifact's URL elsewhere."""
        if not self.token or _origin(url) != _origin(self.url):
            return {}
        return {"Authorization": f"Bearer {self.token}"}

    async def resolve(self) -> None:
        card_url = self.url if self.url.endswith(CARD_PATH) else self.url.rstrip("/") + CARD_PATH
        try:
            r = await self.http.get(card_url, headers=self.auth(card_url))
            r.raise_for_status()
            card = r.json()
        except (httpx.HTTPError, ValueError) as exc:
            raise RemoteError(f"no Agent Card at {card_url}: {_brief(exc)}") from exc
        for iface in card.get("supportedInterfaces") or []:
            version = str(iface.get("protocolVersion") or "1.0")
            if iface.get("protocolBinding") == "JSONRPC" and version.startswith("1."):
                self.rpc_url = str(iface["url"])
                return
        raise RemoteError(f"the Agent Card at {card_url} offers no JSON-RPC interface of A2A 1.x")

    async def call(self, method: str, params: dict[str, Any]) -> Any:
        """One JSON-RPC call; a transport failure or a 5xx is retried by the caller, a
        JSON-RPC error is the remote's answer (`RemoteError`)."""
        body = {"jsonrpc": "2.0", "id": uuid.uuid4().hex, "method": method, "params": params}
        r = await self.http.post(self.rpc_url, json=body, headers=self.auth(self.rpc_url))
        if r.status_code >= 500:
            raise httpx.HTTPStatusError(f"HTTP {r.status_code}", request=r.request, response=r)
        if r.status_code >= 400:
            raise RemoteError(f"the remote agent answered HTTP {r.status_code}: {r.text[:300]}")
        answer = r.json()
        if "error" in answer:
            err = answer["error"]
            raise RemoteError(f"the remote agent refused ({err.get('code')}): {err.get('message')}")
        return answer.get("result")

    async def call_until_answered(self, method: str, params: dict[str, Any]) -> Any:
        """The call, again after a transport failure (safe: SendMessage repeats its
        messageId, GetTask and CancelTask are reads or idempotent)."""
        wait = 0.5
        for attempt in range(1, SEND_TRIES + 1):
            try:
                return await self.call(method, params)
            except (httpx.TransportError, httpx.HTTPStatusError) as exc:
                if attempt == SEND_TRIES:
                    raise RemoteError(
                        f"the remote agent did not answer {method} ({_brief(exc)})"
                    ) from exc
                log.warning("%s to the remote failed (%s); again in %.1f s", method, exc, wait)
                await asyncio.sleep(wait)
                wait = min(wait * 2, 8.0)
        raise AssertionError("unreachable")


class A2AAgent:
    """The ACP side: sessions, prompts and cancels, each prompt one remote task."""

    def __init__(self, remote: Remote) -> None:
        self.remote = remote
        self.conn: Any = None
        self.cwd: dict[str, Path] = {}
        self.context: dict[str, str] = {}  # session → the remote's contextId
        self.running: dict[str, str] = {}  # session → the remote task being followed
        self.cancelled: dict[str, asyncio.Event] = {}

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def initialize(self, protocol_version: int, **kwargs: Any) -> InitializeResponse:
        return InitializeResponse(protocol_version=PROTOCOL_VERSION)

    async def new_session(self, cwd: str, **kwargs: Any) -> NewSessionResponse:
        if not self.remote.rpc_url:
            try:
                await self.remote.resolve()
            except RemoteError as exc:
                raise RequestError(-32000, str(exc)) from exc
        session_id = uuid.uuid4().hex
        self.cwd[session_id] = Path(cwd)
        self.cancelled[session_id] = asyncio.Event()
        return NewSessionResponse(session_id=session_id)

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        self.cancelled.setdefault(session_id, asyncio.Event()).set()
        task_id = self.running.get(session_id)
        if task_id:
            try:
                await self.remote.call_until_answered("CancelTask", {"id": task_id})
            except RemoteError as exc:
                log.warning("CancelTask of %s: %s", task_id, exc)

    async def say(self, session_id: str, block: Any, meta: dict[str, Any] | None = None) -> None:
        update = update_agent_message(block)
        if meta:
            update.field_meta = meta
        await self.conn.session_update(session_id=session_id, update=update)

    async def prompt(self, prompt: list[Any], session_id: str, **kwargs: Any) -> PromptResponse:
        cancelled = self.cancelled.setdefault(session_id, asyncio.Event())
        cancelled.clear()
        message_id = str(kwargs.get(EVENT_META) or "")
        if not message_id:  # no event to name it by: this prompt cannot be repeated safely
            message_id = "turn-" + uuid.uuid4().hex
            log.warning("a prompt without %s: messageId %s", EVENT_META, message_id)
        message: dict[str, Any] = {
            "messageId": message_id,
            "role": "ROLE_USER",
            "parts": _without_mention(_parts_of(prompt), str(kwargs.get(AGENT_META) or "")),
        }
        if kwargs.get(EVENT_META):
            # The call's cause: a hub that this call reaches (this one, or another agentpost)
            # counts what it wakes against that chain, so the Worker never wakes itself
            # anew through a remote (docs/delegation.md "Cause").
            message["metadata"] = {CAUSE_META: message_id}
        if session_id in self.context:
            message["contextId"] = self.context[session_id]
        try:
            # Answered at once (not held open until the task ends): a long task would outlast
            # any timeout, and a resend after one is a duplicate to a remote that keeps none.
            sent = {"message": message, "configuration": {"returnImmediately": True}}
            task = await self._task_of(await self.remote.call_until_answered("SendMessage", sent))
            self.context[session_id] = str(task.get("contextId") or "")
            self.running[session_id] = str(task.get("id") or "")
            task = await self._follow(task, cancelled)
        except RemoteError as exc:
            await self.say(session_id, text_block(str(exc)))
            return PromptResponse(stop_reason="refusal")
        finally:
            self.running.pop(session_id, None)
        return await self._answer(session_id, task)

    async def _task_of(self, result: Any) -> dict[str, Any]:
        """The task of a SendMessage result; a direct answer (`message`) as a finished one."""
        if isinstance(result, dict) and isinstance(result.get("task"), dict):
            return dict(result["task"])
        if isinstance(result, dict) and isinstance(result.get("message"), dict):
            said = result["message"]
            return {
                "id": "",
                "contextId": said.get("contextId", ""),
                "status": {"state": "TASK_STATE_COMPLETED"},
                "artifacts": [{"parts": said.get("parts") or []}],
            }
        raise RemoteError(f"the remote agent's answer to SendMessage is no task: {result!r:.200}")

    async def _follow(self, task: dict[str, Any], cancelled: asyncio.Event) -> dict[str, Any]:
        wait = POLL_START
        while _state(task) not in STOPPED:
            try:
                await asyncio.wait_for(cancelled.wait(), wait)
            except TimeoutError:
                pass
            wait = min(wait * 1.5, POLL_MAX)
            task = dict(await self.remote.call_until_answered("GetTask", {"id": task["id"]}))
        return task

    async def _answer(self, session_id: str, task: dict[str, Any]) -> PromptResponse:
        state = _state(task)
        status = task.get("status") or {}
        said = status.get("message") or {}
        parts: list[dict[str, Any]] = [
            p for a in task.get("artifacts") or [] for p in a.get("parts") or []
        ]
        if state != "TASK_STATE_COMPLETED" or not parts:
            parts = [*(said.get("parts") or []), *parts]
        for block in await self._blocks(session_id, parts):
            await self.say(session_id, block)
        if state == "TASK_STATE_COMPLETED":
            return PromptResponse(stop_reason="end_turn")
        if state == "TASK_STATE_INPUT_REQUIRED":
            return PromptResponse(
                stop_reason="end_turn", field_meta={REPLY_KIND_META: "needs_input"}
            )
        if state == "TASK_STATE_CANCELED":
            return PromptResponse(stop_reason="cancelled")
        if not parts:
            await self.say(session_id, text_block(f"the remote agent ended the task: {state}"))
        return PromptResponse(stop_reason="refusal")

    async def _blocks(self, session_id: str, parts: list[dict[str, Any]]) -> list[Any]:
        """ACP content of A2A parts: text as text, data as JSON text, files saved in the
        Session's folder and named by link."""
        out: list[Any] = []
        for part in parts:
            if isinstance(part.get("text"), str):
                out.append(text_block(part["text"]))
            elif "data" in part:
                out.append(text_block(json.dumps(part["data"], ensure_ascii=False)))
            elif "raw" in part or "url" in part:
                saved = await self._save(session_id, part)
                if saved is not None:
                    out.append(resource_link_block(saved.name, saved.resolve().as_uri()))
        return out

    async def _download(self, url: str) -> bytes:
        """A file part's URL, read up to MAX_FILE_BYTES (then refused, not read on)."""
        if urlsplit(url).scheme not in ("http", "https"):
            raise RemoteError(f"not an http(s) URL: {url[:100]}")
        got = bytearray()
        async with self.remote.http.stream("GET", url, headers=self.remote.auth(url)) as r:
            r.raise_for_status()
            async for chunk in r.aiter_bytes():
                got += chunk
                if len(got) > MAX_FILE_BYTES:
                    raise RemoteError("over 64 MiB")
        return bytes(got)

    async def _save(self, session_id: str, part: dict[str, Any]) -> Path | None:
        name = _safe_name(str(part.get("filename") or "file"))
        try:
            if "raw" in part:
                data = base64.b64decode(str(part["raw"]), validate=True)
            else:
                data = await self._download(str(part["url"]))
        except (binascii.Error, httpx.HTTPError, RemoteError) as exc:
            await self.say(
                session_id, text_block(f"(the file {name} could not be read: {_brief(exc)})")
            )
            return None
        if len(data) > MAX_FILE_BYTES:
            await self.say(session_id, text_block(f"(the file {name} is over 64 MiB; not kept)"))
            return None
        folder = self.cwd[session_id] / "a2a-files"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / name
        path.write_bytes(data)
        return path


def _without_mention(parts: list[dict[str, Any]], me: str) -> list[dict[str, Any]]:
    """The text parts without `@me`, the mention that woke this Worker's own agent: sent on
    to a remote that posts it in a room, it would wake that agent again."""
    if not me:
        return parts
    mention = re.compile(rf"(?<![\w@])@{re.escape(me)}(?![a-z0-9_-])\s?")
    return [{**p, "text": mention.sub("", p["text"])} if "text" in p else p for p in parts]


def _parts_of(prompt: list[Any]) -> list[dict[str, Any]]:
    """A2A parts of an ACP prompt: its text, and each linked local file as raw bytes."""
    parts: list[dict[str, Any]] = []
    for block in prompt:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append({"text": block.text})
        elif kind == "resource_link":
            uri = urlsplit(str(block.uri))
            if uri.scheme != "file":
                parts.append({"text": f"(a link: {block.uri})"})
                continue
            path = Path(unquote(uri.path))
            try:
                data = path.read_bytes()
            except OSError as exc:
                parts.append({"text": f"(the file {block.name} could not be read: {exc.strerror})"})
                continue
            part = {"raw": base64.b64encode(data).decode(), "filename": str(block.name)}
            if getattr(block, "mime_type", None):
                part["mediaType"] = str(block.mime_type)
            parts.append(part)
    return parts or [{"text": ""}]


def _state(task: dict[str, Any]) -> str:
    return str((task.get("status") or {}).get("state") or "TASK_STATE_UNSPECIFIED")


def _safe_name(name: str) -> str:
    base = re.sub(r"[^\w.-]", "_", Path(name.replace("\\", "/")).name)[:120]
    return "file" if base.strip(".") == "" else base


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        port = -1
    return parts.scheme, (parts.hostname or ""), port


def _brief(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:300]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m agentpost.connect.a2a_agent")
    parser.add_argument("url")
    parser.add_argument("--token-file", type=Path)
    args = parser.parse_args(argv)
    token = args.token_file.read_text().strip() if args.token_file else None
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    # The SDK's `Agent` protocol names every optional method too; the SDK answers those this
    # agent leaves out with method_not_found.
    agent: Any = A2AAgent(Remote(args.url, token))
    asyncio.run(run_agent(agent))


if __name__ == "__main__":
    main()
