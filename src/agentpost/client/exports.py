"""Exports in the client (docs/api.md "Export"): a room's export written to a sink as it
arrives, and an operator's workspace export handed over line by line.

An export is whole only when it ends with its `end` line (core/export.py): one cut short
(the hub stopped, the connection broke) raises `HubUnavailable` `export_cut_short`, which is
safe to retry; one the hub ended with an `error` line raises that error, as the hub would
have answered it before the first byte.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any, BinaryIO

import httpx
import msgspec

from agentpost.client.calls import HubCalls
from agentpost.client.errors import HubError, HubRefused, HubUnavailable
from agentpost.client.paths import filename_of, segment
from agentpost.core import export as fmt

CUT_SHORT = "export_cut_short"
_TAIL = 64 * 1024  # an end line is far shorter: the tail of the bytes holds it whole
# The codes an `error` end line may carry are the hub's refusals of a reader.
_RETRYABLE = {"storage_unavailable", "internal"}


class Export(msgspec.Struct):
    """A room's export as written: the file name the hub gave it, its size in bytes, how
    many events it holds and up to which `seq`."""

    name: str
    size: int
    events: int
    last_seq: int


def _ended(fmt_name: str, tail: bytes, what: str) -> dict[str, Any]:
    """The end line of an export whose last bytes are `tail`; raises when it is cut or
    ended by an error."""
    last = tail.rstrip(b"\n").rsplit(b"\n", 1)[-1] if tail.endswith(b"\n") else b""
    end = fmt.parse_end(fmt_name, last)
    if end is None:
        raise HubUnavailable(
            CUT_SHORT, f"the export of {what} was cut short (no end line); export it again"
        )
    if "error" in end:
        raise error_of(end["error"])
    return end


def error_of(body: dict[str, Any]) -> HubError:
    code = str(body.get("code", "internal"))
    message = str(body.get("message", "the hub stopped the export"))
    if code in _RETRYABLE:
        return HubUnavailable(code, message)
    return HubRefused(code, message)


async def export_room(
    client: HubCalls, room_id: str, sink: BinaryIO, format: str, files: str
) -> Export:
    path = f"/v1/rooms/{segment(room_id, 'room id')}/export"
    size = 0
    tail = b""
    async with client.streamed(path, {"format": format, "files": files}) as resp:
        name = _disposition_name(resp) or fmt.room_file_name(room_id, format)
        async for chunk in resp.aiter_bytes():
            sink.write(chunk)
            size += len(chunk)
            tail = (tail + chunk)[-_TAIL:]
    end = _ended(format, tail, room_id)
    return Export(name, size, int(end.get("events", 0)), int(end.get("last_seq", 0)))


async def lines(resp: httpx.Response) -> AsyncIterator[bytes]:
    """The response's lines as bytes, each with its newline (the last one may lack it)."""
    pending = b""
    async for chunk in resp.aiter_bytes():
        pending += chunk
        *whole, pending = pending.split(b"\n")
        for line in whole:
            yield line + b"\n"
    if pending:
        yield pending


async def export_workspace(
    client: HubCalls, workspace: str, on_line: Callable[[bytes], None]
) -> dict[str, Any]:
    """Hand each line of the operator's export of `workspace` to `on_line`; the end line's
    object once it is whole."""
    path = f"/v1/admin/workspaces/{segment(workspace, 'workspace')}/export"
    last = b""
    async with client.streamed(path) as resp:
        async for line in lines(resp):
            on_line(line)
            last = line
    try:
        end = msgspec.json.decode(last) if last.endswith(b"\n") else None
    except msgspec.DecodeError:
        end = None
    if not isinstance(end, dict) or end.get("end") != fmt.WORKSPACE:
        raise HubUnavailable(
            CUT_SHORT, f"the export of {workspace} was cut short (no end line); export it again"
        )
    return end


def _disposition_name(resp: httpx.Response) -> str | None:

    found = filename_of(resp.headers.get("content-disposition", ""))
    return fmt.safe_file_name(found) if found else None
