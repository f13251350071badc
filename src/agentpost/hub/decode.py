"""Request decoding: size cap, JSON, schema; each failure its own stable code (§3)."""

from __future__ import annotations

from typing import TypeVar

import msgspec
from starlette.requests import Request

from agentpost.core.errors import Code, RequestError

T = TypeVar("T")


async def read_body(request: Request, max_bytes: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > max_bytes:
        raise RequestError(Code.PAYLOAD_TOO_LARGE, f"body is over {max_bytes} bytes")
    chunks = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > max_bytes:
            raise RequestError(Code.PAYLOAD_TOO_LARGE, f"body is over {max_bytes} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def decode_json(raw: bytes, type_: type[T]) -> T:
    try:
        return msgspec.json.decode(raw, type=type_)
    except msgspec.ValidationError as exc:
        text = str(exc)
        field = text.rsplit("at `", 1)[1].rstrip("`") if "at `" in text else None
        raise RequestError(Code.INVALID_REQUEST, text, field=field) from exc
    except msgspec.DecodeError as exc:
        raise RequestError(Code.INVALID_JSON, f"malformed JSON: {exc}") from exc


async def read_json(request: Request, type_: type[T], max_bytes: int) -> T:
    # The body is JSON whatever Content-Type says (curl -d sends a form type by default).
    return decode_json(await read_body(request, max_bytes), type_)
