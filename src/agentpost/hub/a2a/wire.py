"""The A2A 1.x wire (protocol `1.0`, the JSON-RPC binding): what comes in, checked, and the
JSON shapes that go out (the proto's JSON form: camelCase names, enum names as strings,
timestamps as RFC 3339). docs/architecture.md#a2a, docs/a2a.md."""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any
from urllib.parse import urlsplit

import msgspec

from agentpost.core.ids import IDEMPOTENCY_KEY

PROTOCOL_VERSION = "1.0"
BINDING = "JSONRPC"
# A message's metadata key naming the event whose Turn made the call (`connect --a2a`):
# the call's cause (docs/delegation.md "Cause"). Read and removed by the hub.
CAUSE_META = "agentpost/cause"

# Task states (a2a.proto TaskState) and roles.
SUBMITTED = "TASK_STATE_SUBMITTED"
WORKING = "TASK_STATE_WORKING"
COMPLETED = "TASK_STATE_COMPLETED"
FAILED = "TASK_STATE_FAILED"
CANCELED = "TASK_STATE_CANCELED"
INPUT_REQUIRED = "TASK_STATE_INPUT_REQUIRED"
REJECTED = "TASK_STATE_REJECTED"
TERMINAL = (COMPLETED, FAILED, CANCELED, REJECTED)
ROLE_USER = "ROLE_USER"
ROLE_AGENT = "ROLE_AGENT"

# JSON-RPC error codes (JSON-RPC 2.0, and a2a's own, a2a/utils/errors.py of the SDK).
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
TASK_NOT_FOUND = -32001
TASK_NOT_CANCELABLE = -32002
PUSH_NOT_SUPPORTED = -32003
UNSUPPORTED_OPERATION = -32004
CONTENT_TYPE_NOT_SUPPORTED = -32005

_ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"


class RpcError(Exception):
    """A JSON-RPC error answer: its A2A code, and the hub's stable `code` (`reason`) both
    leading the message and as an ErrorInfo in `data` (where the SDK's client looks)."""

    def __init__(self, code: int, message: str, reason: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = reason

    def body(self) -> dict[str, Any]:
        info: dict[str, Any] = {
            "@type": _ERROR_INFO,
            "reason": self.reason.upper(),
            "domain": "agentpost",
            "metadata": {"code": self.reason},
        }
        return {"code": self.code, "message": f"{self.reason}: {self.message}", "data": [info]}


class Request(msgspec.Struct):
    """A JSON-RPC 2.0 request."""

    jsonrpc: str
    method: str
    id: str | int | None = None
    params: dict[str, Any] = {}


class PartIn(msgspec.Struct, rename="camel"):
    text: str | None = None
    raw: str | None = None
    url: str | None = None
    data: Any = None
    filename: str = ""
    media_type: str = ""
    metadata: dict[str, Any] = {}


class MessageIn(msgspec.Struct, rename="camel"):
    message_id: str
    parts: list[PartIn]
    role: str = ROLE_USER
    context_id: str = ""
    task_id: str = ""
    metadata: dict[str, Any] = {}
    extensions: list[str] = []
    reference_task_ids: list[str] = []


class SendIn(msgspec.Struct, rename="camel"):
    message: MessageIn
    configuration: dict[str, Any] = {}
    metadata: dict[str, Any] = {}
    tenant: str = ""


class TaskIdIn(msgspec.Struct, rename="camel"):
    id: str
    history_length: int | None = None
    metadata: dict[str, Any] = {}
    tenant: str = ""


class AuthIn(msgspec.Struct, rename="camel"):
    scheme: str = ""
    credentials: str = ""


class PushConfigIn(msgspec.Struct, rename="camel"):
    """TaskPushNotificationConfig (a2a.proto)."""

    url: str
    task_id: str = ""
    id: str = ""
    token: str = ""
    authentication: AuthIn | None = None
    tenant: str = ""


class PushConfigIdIn(msgspec.Struct, rename="camel"):
    task_id: str
    id: str = ""
    tenant: str = ""
    page_size: int = 0
    page_token: str = ""


_VISIBLE = re.compile(r"[\x21-\x7e]*")
_SPACED = re.compile(r"[\x20-\x7e]*")


def push_config(got: PushConfigIn) -> tuple[str, str, str, str, str]:
    """(url, id, token, auth scheme, auth credentials) of a push config the sender can use
    as given, or InvalidParams naming what is wrong: an absolute http(s) URL with a host, a
    valid port and no user:password in it, at most 2,048 characters; an id of at most 128
    and a token of at most 512 visible ASCII characters (both go into headers); a scheme
    and credentials without control characters."""
    url, auth = got.url, got.authentication or AuthIn()
    try:
        parts = urlsplit(url)
        port_ok = parts.port is None or parts.port > 0
    except ValueError:
        parts, port_ok = urlsplit(""), False
    why = ""
    if (
        len(url) > 2048
        or not _VISIBLE.fullmatch(url)
        or parts.scheme not in ("http", "https")
        or not parts.hostname
        or not port_ok
    ):
        why = "url must be an absolute http(s) URL with a host (at most 2,048 characters)"
    elif parts.username is not None or parts.password is not None:
        why = "url must not carry a user or password: use authentication"
    elif len(got.id) > 128 or not _VISIBLE.fullmatch(got.id):
        why = "id must be at most 128 visible ASCII characters"
    elif len(got.token) > 512 or not _VISIBLE.fullmatch(got.token):
        why = "token must be at most 512 visible ASCII characters"
    elif (
        len(auth.scheme) > 64
        or len(auth.credentials) > 4096
        or not _VISIBLE.fullmatch(auth.scheme)
        or not _SPACED.fullmatch(auth.credentials)
    ):
        why = "authentication must be a scheme and credentials in printable ASCII"
    if why:
        raise RpcError(INVALID_PARAMS, why, "invalid_request")
    return url, got.id or "default", got.token, auth.scheme, auth.credentials


def params(raw: dict[str, Any], shape: type[Any]) -> Any:
    """The params of a call as `shape`, or InvalidParams naming what is wrong."""
    try:
        return msgspec.convert(raw, shape)
    except msgspec.ValidationError as exc:
        raise RpcError(INVALID_PARAMS, f"invalid params: {exc}", "invalid_request") from None


def key_of(message_id: str) -> str:
    """The Idempotency-Key of a `SendMessage`: its `messageId`, scoped per caller by the
    hub's key rules (keys are per member)."""
    key = "a2a:" + message_id
    if not message_id or not IDEMPOTENCY_KEY.fullmatch(key):
        raise RpcError(
            INVALID_PARAMS,
            "messageId must be 1-251 visible ASCII characters (it is the Idempotency-Key)",
            "invalid_idempotency_key",
        )
    return key


class FileIn(msgspec.Struct, frozen=True):
    """A file part's bytes, decoded, with its name and media type as given."""

    name: str
    media_type: str
    data: bytes


def contents_of(message: MessageIn, max_bytes: int) -> tuple[str, list[Any], list[FileIn]]:
    """A message's text parts (joined by blank lines), data parts and file parts. A file
    goes as bytes (`raw`); a `url` part is refused: the hub fetches nothing a caller names."""
    texts: list[str] = []
    data: list[Any] = []
    files: list[FileIn] = []
    for part in message.parts:
        if part.url is not None:
            raise RpcError(
                CONTENT_TYPE_NOT_SUPPORTED,
                "a file part by url is not fetched: send its bytes (raw)",
                "unsupported_part",
            )
        if part.raw is not None:
            try:
                raw = base64.b64decode(part.raw, validate=True)
            except binascii.Error:
                raise RpcError(
                    INVALID_PARAMS, "a file part's raw is not base64", "invalid_request"
                ) from None
            if len(raw) > max_bytes:
                raise RpcError(
                    INVALID_PARAMS, f"a file part is over {max_bytes} bytes", "payload_too_large"
                )
            files.append(FileIn(part.filename or "file", part.media_type, raw))
        elif part.text is not None:
            texts.append(part.text)
        elif part.data is not None:
            data.append(part.data)
    if not texts and not data and not files:
        raise RpcError(
            INVALID_PARAMS, "the message has no text, data or file part", "invalid_request"
        )
    return "\n\n".join(texts), data, files


def ok(rpc_id: str | int | None, result: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rpc_id, "result": result}


def error(rpc_id: str | int | None, exc: RpcError) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rpc_id, "error": exc.body()}


def agent_message(
    message_id: str, task_id: str, context_id: str, parts: list[dict[str, Any]]
) -> dict[str, Any]:
    return {
        "messageId": message_id,
        "taskId": task_id,
        "contextId": context_id,
        "role": ROLE_AGENT,
        "parts": parts,
    }


def text_part(text: str) -> dict[str, Any]:
    return {"text": text}


def file_part(url: str, filename: str, media_type: str) -> dict[str, Any]:
    return {"url": url, "filename": filename, "mediaType": media_type}


def card(
    base_url: str, workspace: str, name: str, description: str, skills: list[dict[str, Any]]
) -> dict[str, Any]:
    """The Agent Card of an agent member (AgentCard, a2a.proto)."""
    url = f"{base_url}/a2a/{workspace}/{name}"
    return {
        "name": name,
        "description": description,
        "supportedInterfaces": [
            {"url": url, "protocolBinding": BINDING, "protocolVersion": PROTOCOL_VERSION}
        ],
        "provider": {"organization": "agentpost", "url": base_url},
        "version": PROTOCOL_VERSION,
        "capabilities": {"streaming": True, "pushNotifications": True},
        "securitySchemes": {
            "bearer": {
                "httpAuthSecurityScheme": {
                    "scheme": "Bearer",
                    "description": "a member token of the agent's workspace (the caller's own)",
                }
            }
        },
        "securityRequirements": [{"schemes": {"bearer": {"list": []}}}],
        "defaultInputModes": ["text/plain", "application/json"],
        "defaultOutputModes": ["text/plain"],
        "skills": skills,
    }
