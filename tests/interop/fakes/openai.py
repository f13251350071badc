"""A fake OpenAI Responses API (`POST /v1/responses`, streamed as server-sent events) as far
as Codex and its ACP adapter need: messages and function calls from the test's script."""

from __future__ import annotations

import itertools
import json
from typing import Any

from .base import Conversation, FakeServer, Recorded, Text, ToolCall, json_answer, sse

_ids = itertools.count(1)


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(
        c.get("text", "") for c in content or [] if isinstance(c, dict)
    )


def loaded_tools(items: list[dict[str, Any]]) -> list[str]:
    """Tools that Codex's tool search loaded, as `namespace::name`."""
    out = []
    for item in items:
        if item.get("type") == "tool_search_output":
            for ns in item.get("tools") or []:
                for tool in ns.get("tools") or []:
                    out.append(f"{ns.get('name')}::{tool.get('name')}")
    return out


def conversation(body: dict[str, Any]) -> Conversation:
    items = body.get("input") or []
    if isinstance(items, str):
        items = [{"type": "message", "role": "user", "content": items}]
    user_texts = [
        _text_of(i.get("content"))
        for i in items
        if i.get("role") == "user" and i.get("type", "message") == "message"
    ]
    results: list[str] = []
    rounds = 0
    previous = ""
    called: list[str] = []
    for item in items:
        kind = item.get("type", "message")
        if kind in ("function_call_output", "custom_tool_call_output", "tool_search_output"):
            out = item.get("output")
            results.append(out if isinstance(out, str) else json.dumps(out))
            if not previous.endswith("_output"):
                rounds += 1
        elif kind in ("function_call", "custom_tool_call"):
            ns = item.get("namespace")
            called.append(f"{ns}::{item.get('name', '')}" if ns else item.get("name", ""))
        elif kind == "tool_search_call":
            called.append("tool_search")
        elif kind == "message" and item.get("role") == "user":
            results, rounds, called = [], 0, []
        previous = kind
    tools = [t.get("name") or t.get("type", "") for t in body.get("tools") or []]
    tools += loaded_tools(items)
    return Conversation(user_texts, results, tools, body, rounds, called)


class FakeOpenAI(FakeServer):
    def handle(self, rec: Recorded) -> tuple[int, dict[str, str], list[bytes]]:
        path = rec.path.split("?")[0]
        if rec.method == "GET" and path.endswith("/models"):
            return json_answer(200, {"object": "list", "data": [], "models": []})
        if not (rec.method == "POST" and path.endswith("/responses")):
            return json_answer(404, {"error": {"message": f"fake: no {path}", "type": "not_found"}})
        body = rec.body if isinstance(rec.body, dict) else {}
        conv = conversation(body)
        step = self.answer(conv) if conv.tools else [Text("Untitled")]
        resp_id = f"resp_{next(_ids):020d}"
        out = [sse("response.created", {"type": "response.created",
                                        "response": {"id": resp_id, "status": "in_progress"}})]
        items: list[dict[str, Any]] = []
        for n, part in enumerate(step):
            if isinstance(part, Text):
                item_id = f"msg_{next(_ids):020d}"
                item = {"type": "message", "id": item_id, "role": "assistant", "status": "completed",
                        "content": [{"type": "output_text", "text": part.text, "annotations": []}]}
                out.append(sse("response.output_item.added", {
                    "type": "response.output_item.added", "output_index": n,
                    "item": dict(item, content=[], status="in_progress")}))
                for j in range(0, len(part.text), 16):
                    out.append(sse("response.output_text.delta", {
                        "type": "response.output_text.delta", "item_id": item_id,
                        "output_index": n, "content_index": 0, "delta": part.text[j:j + 16]}))
            elif isinstance(part, ToolCall) and part.name == "tool_search":
                # Codex's deferred tools: a client-run search whose output loads them.
                item = {"type": "tool_search_call", "id": f"ts_{next(_ids):020d}",
                        "call_id": f"call_{next(_ids):020d}", "execution": "client",
                        "arguments": part.args, "status": "completed"}
                out.append(sse("response.output_item.added", {
                    "type": "response.output_item.added", "output_index": n, "item": item}))
            elif isinstance(part, ToolCall):
                namespace, _, name = part.name.rpartition("::")
                item = {"type": "function_call", "id": f"fc_{next(_ids):020d}",
                        "call_id": f"call_{next(_ids):020d}", "name": name,
                        "arguments": json.dumps(part.args), "status": "completed"}
                if namespace:  # a tool a search loaded, named within its namespace
                    item["namespace"] = namespace
                out.append(sse("response.output_item.added", {
                    "type": "response.output_item.added", "output_index": n, "item": item}))
            out.append(sse("response.output_item.done", {
                "type": "response.output_item.done", "output_index": n, "item": item}))
            items.append(item)
        out.append(sse("response.completed", {"type": "response.completed", "response": {
            "id": resp_id, "status": "completed", "output": items,
            "usage": {"input_tokens": 100, "input_tokens_details": {"cached_tokens": 0},
                      "output_tokens": 10, "output_tokens_details": {"reasoning_tokens": 0},
                      "total_tokens": 110}}}))
        return 200, {"Content-Type": "text/event-stream"}, out
