"""A fake Gemini API (`models/{model}:generateContent` and `:streamGenerateContent?alt=sse`,
`:countTokens`) as far as Gemini CLI needs: text and function calls from the test's script."""

from __future__ import annotations

import json
from typing import Any

from .base import Conversation, FakeServer, Recorded, Text, ToolCall, json_answer


def conversation(body: dict[str, Any]) -> Conversation:
    contents = body.get("contents") or []
    user_texts = [
        "".join(p.get("text", "") for p in c.get("parts") or [] if "text" in p)
        for c in contents
        if c.get("role", "user") == "user"
    ]
    results: list[str] = []
    rounds = 0
    called: list[str] = []
    for c in contents:
        if c.get("role") == "model":
            called += [p["functionCall"].get("name", "") for p in c.get("parts") or []
                       if "functionCall" in p]
        if c.get("role", "user") != "user":
            continue
        answered = [
            json.dumps(p["functionResponse"].get("response"))
            for p in c.get("parts") or []
            if "functionResponse" in p
        ]
        if answered:
            results += answered
            rounds += 1
        else:
            results, rounds, called = [], 0, []
    tools = [
        f.get("name", "")
        for t in body.get("tools") or []
        for f in t.get("functionDeclarations") or []
    ]
    return Conversation([t for t in user_texts if t], results, tools, body, rounds, called)


def _properties(body: dict[str, Any], name: str) -> dict[str, Any]:
    for t in body.get("tools") or []:
        for f in t.get("functionDeclarations") or []:
            if f.get("name") == name:
                schema = f.get("parametersJsonSchema") or f.get("parameters") or {}
                props: dict[str, Any] = schema.get("properties") or {}
                return props
    return {}


def _usage() -> dict[str, int]:
    return {"promptTokenCount": 100, "candidatesTokenCount": 10, "totalTokenCount": 110}


class FakeGemini(FakeServer):
    def handle(self, rec: Recorded) -> tuple[int, dict[str, str], list[bytes]]:
        path = rec.path.split("?")[0]
        body = rec.body if isinstance(rec.body, dict) else {}
        if path.endswith(":countTokens"):
            return json_answer(200, {"totalTokens": 100})
        if not path.endswith((":generateContent", ":streamGenerateContent")):
            return json_answer(404, {"error": {"code": 404, "message": f"fake: no {path}",
                                               "status": "NOT_FOUND"}})
        conv = conversation(body)
        config = body.get("generationConfig") or {}
        if not conv.tools:
            # The client's own side questions (is it the user's turn, a summary...): a JSON
            # answer where it asked for JSON, else a plain one.
            if config.get("responseMimeType") == "application/json":
                parts: list[dict[str, Any]] = [{"text": json.dumps({
                    "reasoning": "fake", "next_speaker": "user",
                    "complexity_reasoning": "fake", "complexity_score": 1})}]
            else:
                parts = [{"text": "Untitled"}]
        else:
            parts = []
            for part in self.answer(conv):
                if isinstance(part, Text):
                    parts.append({"text": part.text})
                elif isinstance(part, ToolCall):
                    args = dict(part.args)
                    if "wait_for_previous" in _properties(body, part.name):
                        # Gemini CLI adds this to every tool, and its models fill it in.
                        args.setdefault("wait_for_previous", True)
                    parts.append({"functionCall": {"name": part.name, "args": args}})
        if path.endswith(":generateContent"):
            return json_answer(200, {"candidates": [{"content": {"role": "model", "parts": parts},
                                                     "finishReason": "STOP", "index": 0}],
                                     "usageMetadata": _usage()})
        chunks = []
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            cand: dict[str, Any] = {"content": {"role": "model", "parts": [part]}, "index": 0}
            if last:
                cand["finishReason"] = "STOP"
            chunk: dict[str, Any] = {"candidates": [cand]}
            if last:
                chunk["usageMetadata"] = _usage()
            chunks.append(f"data: {json.dumps(chunk)}\r\n\r\n".encode())
        return 200, {"Content-Type": "text/event-stream"}, chunks
