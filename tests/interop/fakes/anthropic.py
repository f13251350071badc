"""A fake Anthropic Messages API (`POST /v1/messages`, streaming and not) as far as Claude
Code and its ACP adapter need: text and tool_use blocks from the test's script."""

from __future__ import annotations

import itertools
import json
from typing import Any

from .base import Conversation, FakeServer, Recorded, Text, ToolCall, json_answer, sse

_ids = itertools.count(1)


def _texts(content: Any) -> tuple[list[str], list[str]]:
    """User texts and tool results of one message's content."""
    if isinstance(content, str):
        return [content], []
    texts: list[str] = []
    results: list[str] = []
    for block in content or []:
        if block.get("type") == "text":
            texts.append(block.get("text", ""))
        elif block.get("type") == "tool_result":
            inner = block.get("content")
            if isinstance(inner, list):
                inner = "".join(b.get("text", "") for b in inner if isinstance(b, dict))
            results.append(str(inner or ""))
    return texts, results


def conversation(body: dict[str, Any]) -> Conversation:
    user_texts: list[str] = []
    results: list[str] = []
    rounds = 0
    called: list[str] = []
    for msg in body.get("messages", []):
        if msg.get("role") == "assistant" and isinstance(msg.get("content"), list):
            called += [b.get("name", "") for b in msg["content"] if b.get("type") == "tool_use"]
        if msg.get("role") != "user":
            continue
        texts, answered = _texts(msg.get("content"))
        user_texts += texts
        if answered:
            results += answered
            rounds += 1
        else:  # the user spoke: a new request
            results, rounds, called = [], 0, []
    tools = [t.get("name", "") for t in body.get("tools") or []]
    return Conversation(user_texts, results, tools, body, rounds, called)


class FakeAnthropic(FakeServer):
    def handle(self, rec: Recorded) -> tuple[int, dict[str, str], list[bytes]]:
        path = rec.path.split("?")[0]
        if rec.method == "POST" and path.endswith("/v1/messages/count_tokens"):
            return json_answer(200, {"input_tokens": 100})
        if not (rec.method == "POST" and path.endswith("/v1/messages")):
            return json_answer(404, {"type": "error", "error": {"type": "not_found_error",
                                                                 "message": f"fake: no {path}"}})
        body = rec.body if isinstance(rec.body, dict) else {}
        conv = conversation(body)
        # Side requests (titles, summaries) carry no tools: answer them plainly.
        step = self.answer(conv) if conv.tools else [Text("Untitled")]
        blocks: list[dict[str, Any]] = []
        for part in step:
            if isinstance(part, Text):
                blocks.append({"type": "text", "text": part.text})
            elif isinstance(part, ToolCall):
                blocks.append({"type": "tool_use", "id": f"toolu_{next(_ids):020d}",
                               "name": part.name, "input": part.args})
        stop = "tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn"
        msg_id = f"msg_{next(_ids):020d}"
        model = body.get("model", "claude-fake")
        usage = {"input_tokens": 100, "output_tokens": 10, "cache_creation_input_tokens": 0,
                 "cache_read_input_tokens": 0}
        if not body.get("stream"):
            return json_answer(200, {"id": msg_id, "type": "message", "role": "assistant",
                                     "model": model, "content": blocks, "stop_reason": stop,
                                     "stop_sequence": None, "usage": usage})
        out = [sse("message_start", {"type": "message_start", "message": {
            "id": msg_id, "type": "message", "role": "assistant", "model": model, "content": [],
            "stop_reason": None, "stop_sequence": None, "usage": usage}})]
        for i, block in enumerate(blocks):
            if block["type"] == "text":
                out.append(sse("content_block_start", {"type": "content_block_start", "index": i,
                                                       "content_block": {"type": "text", "text": ""}}))
                text = block["text"]
                for j in range(0, len(text), 16):  # streamed in small pieces, as a model does
                    out.append(sse("content_block_delta", {"type": "content_block_delta", "index": i,
                                                           "delta": {"type": "text_delta",
                                                                     "text": text[j:j + 16]}}))
            else:
                start = dict(block, input={})
                out.append(sse("content_block_start", {"type": "content_block_start", "index": i,
                                                       "content_block": start}))
                out.append(sse("content_block_delta", {"type": "content_block_delta", "index": i,
                                                       "delta": {"type": "input_json_delta",
                                                                 "partial_json": json.dumps(block["input"])}}))
            out.append(sse("content_block_stop", {"type": "content_block_stop", "index": i}))
        out.append(sse("message_delta", {"type": "message_delta",
                                         "delta": {"stop_reason": stop, "stop_sequence": None},
                                         "usage": {"output_tokens": 10}}))
        out.append(sse("message_stop", {"type": "message_stop"}))
        return 200, {"Content-Type": "text/event-stream"}, out
