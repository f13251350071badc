"""Request decoding: size cap, JSON, schema, nesting depth; each failure its own stable
code (docs/api.md "Limits of what a request may carry", "Error codes")."""

from __future__ import annotations

import re
from typing import Any, TypeVar

import msgspec
from starlette.requests import ClientDisconnect, Request
from starlette.types import Receive

from agentpost.core.errors import Code, RequestError
from agentpost.hub.schemas import RULES_IN_WORDS

T = TypeVar("T")

# How deep client metadata may nest (objects and arrays; the metadata object is level 1).
# Documented in docs/api.md; deeper values would only exhaust the stack of whoever walks them.
MAX_METADATA_DEPTH = 32


def check_declared(declared: str | None, max_bytes: int) -> None:
    """Refuse a body whose Content-Length is over the cap before reading any of it."""
    if declared is not None and declared.isdigit() and int(declared) > max_bytes:
        raise RequestError(Code.PAYLOAD_TOO_LARGE, f"body is over {max_bytes} bytes")


async def receive_body(receive: Receive, declared: str | None, max_bytes: int) -> bytes:
    """The body straight from ASGI `receive` (the thin post path), capped like `read_body`;
    `ClientDisconnect` when the client hung up before it all arrived."""
    check_declared(declared, max_bytes)
    chunks = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            raise ClientDisconnect()
        chunk: bytes = message.get("body", b"")
        size += len(chunk)
        if size > max_bytes:
            raise RequestError(Code.PAYLOAD_TOO_LARGE, f"body is over {max_bytes} bytes")
        chunks.append(chunk)
        if not message.get("more_body", False):
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)


async def read_body(request: Request, max_bytes: int) -> bytes:
    check_declared(request.headers.get("content-length"), max_bytes)
    chunks = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > max_bytes:
            raise RequestError(Code.PAYLOAD_TOO_LARGE, f"body is over {max_bytes} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


_INT_FROM_FLOAT = re.compile(r"^Expected `int(?: \| null)?`, got `float` - at `(\$[^`]*)`$")
_PATH_STEP = re.compile(r"\.([A-Za-z_][A-Za-z0-9_]*)|\[(\d+)\]")


def _with_integral_floats(raw: bytes, type_: type[T], exc: msgspec.ValidationError) -> T | None:
    """JSON has one number type: `35.0` is a valid JSON Schema integer (and what fuzzers and
    some clients send). Where the decoder wants an `int` and finds an integral float, take
    it as that int, at that place only (a float elsewhere, in metadata say, is kept)."""
    value: Any = None
    for _ in range(16):
        wants_int = _INT_FROM_FLOAT.match(str(exc))
        if wants_int is None:
            return None
        path = wants_int.group(1)
        if value is None:
            value = msgspec.json.decode(raw)
        steps = _PATH_STEP.findall(path[1:]) if path.startswith("$") else []
        if not steps or "".join(f".{n}" if n else f"[{i}]" for n, i in steps) != path[1:]:
            return None
        parent, last = value, steps[-1]
        try:
            for name, index in steps[:-1]:
                parent = parent[name] if name else parent[int(index)]
            where: Any = last[0] if last[0] else int(last[1])
            found = parent[where]
        except (KeyError, IndexError, TypeError):
            return None
        if not isinstance(found, float) or not found.is_integer() or abs(found) >= 2**63:
            return None  # (the JSON decoder refuses ints outside int64; so do we)
        parent[where] = int(found)
        try:
            return msgspec.convert(value, type=type_)
        except msgspec.ValidationError as again:
            exc = again
    return None


_UNKNOWN_FIELD = re.compile(r"Object contains unknown field `([^`]*)`")


def decode_json(raw: bytes, type_: type[T]) -> T:
    try:
        return msgspec.json.decode(raw, type=type_)
    except msgspec.ValidationError as exc:
        fixed = _with_integral_floats(raw, type_, exc)
        if fixed is not None:
            return fixed
        text = str(exc)
        field = text.rsplit("at `", 1)[1].rstrip("`") if "at `" in text else None
        unknown = _UNKNOWN_FIELD.match(text)
        if unknown:  # name the field itself, not the object holding it
            field = f"{field or '$'}.{unknown.group(1)}"
        for regex, words in RULES_IN_WORDS.items():
            text = text.replace(regex, words)
        raise RequestError(Code.INVALID_REQUEST, text, field=field) from exc
    except msgspec.DecodeError as exc:
        words = str(exc).removeprefix("JSON is malformed: ")
        raise RequestError(Code.INVALID_JSON, f"malformed JSON: {words}") from exc
    except RecursionError as exc:  # msgspec refuses ~1000 levels before we can count them
        raise RequestError(
            Code.INVALID_REQUEST,
            f"the JSON nests too deeply (metadata: at most {MAX_METADATA_DEPTH} levels)",
        ) from exc


def within_depth(value: object, limit: int) -> bool:
    """True when `value` nests objects and arrays at most `limit` levels deep. Iterative:
    a deep value must not exhaust the stack of the check meant to refuse it."""
    stack: list[tuple[dict[Any, Any] | list[Any], int]] = (
        [(value, 1)] if isinstance(value, dict | list) else []
    )
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return False
        children = item.values() if isinstance(item, dict) else item
        stack.extend((c, depth + 1) for c in children if isinstance(c, dict | list))
    return True


async def read_json(request: Request, type_: type[T], max_bytes: int) -> T:
    # The body is JSON whatever Content-Type says (curl -d sends a form type by default).
    return decode_json(await read_body(request, max_bytes), type_)
