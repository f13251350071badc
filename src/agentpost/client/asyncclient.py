"""`AsyncHubClient`: every hub call, async, with typed results and typed errors
(docs/api.md)."""

from __future__ import annotations

import contextlib
import email.utils
import hashlib
import os
import ssl
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

import httpx
import msgspec

from agentpost.client import exports, reservations, threads
from agentpost.client.errors import (
    HubError,
    HubRefused,
    HubUnavailable,
    HubUnreachable,
    NotConfigured,
)
from agentpost.client.models import (
    Download,
    Event,
    InboxItem,
    InboxPage,
    Media,
    Member,
    NewMember,
    PostResult,
    ReadMarker,
    Room,
    SeenMember,
    SendState,
    Thread,
    ThreadSend,
)
from agentpost.client.paths import INVALID_REQUEST, checked_path, filename_of, segment
from agentpost.client.transport import PooledTransport
from agentpost.core.ids import (
    IDEMPOTENCY_KEY,
    IDEMPOTENCY_KEY_RULE,
    NAME,
    NAME_RULE,
    ROOM_ID,
    ROOM_ID_RULE,
)

T = TypeVar("T")
DEFAULT_HUB = "http://127.0.0.1:8470"
_MAX_URLS = 1024  # parsed hub URLs kept by one client
_DIRECT = frozenset({"headers", "timeout", "json", "params", "content", "data", "files"})


def hub_url_from_env() -> str:
    return os.environ.get("AGENTPOST_HUB", DEFAULT_HUB)


def checked_hub_url(hub: str) -> str:
    """The hub URL without its final `/`; `NotConfigured` unless it is an http(s) URL. A
    URL pasted with the API's `/v1` on its end names the same hub: the suffix is dropped
    (every route already starts with `/v1`)."""
    try:
        url = httpx.URL(hub)
    except (httpx.InvalidURL, TypeError) as exc:
        raise NotConfigured(f"the hub URL {hub!r} is not a URL: {exc}") from None
    if url.scheme not in ("http", "https") or not url.host:
        raise NotConfigured(
            f"the hub URL {hub!r} is not an http:// or https:// URL: set AGENTPOST_HUB "
            "(or --hub) to e.g. http://127.0.0.1:8470"
        )
    if url.port is not None and not 0 < url.port < 65536:
        raise NotConfigured(
            f"the hub URL {hub!r} names port {url.port}; a port is 1 to 65535 (the hub's "
            "default is 8470)"
        )
    bare = hub.rstrip("/")
    if bare.endswith("/v1"):
        bare = bare[: -len("/v1")]
    return bare


def unreachable(hub: str, exc: httpx.TransportError) -> HubError:
    """A transport failure in words a person acts on. TLS spoken to a plain-HTTP hub is a
    setting to fix (final), not an outage to wait out."""
    words = str(exc) or type(exc).__name__
    if hub.startswith("https://") and _tls_to_plain(exc):
        return NotConfigured(
            f"{hub} does not speak TLS (the hub serves plain HTTP unless a proxy in front "
            f"of it adds TLS): use {'http://' + hub[len('https://') :]}"
        )
    if isinstance(exc, httpx.TimeoutException):
        return HubUnreachable(f"no answer from {hub}: {words}; nothing is known to have happened")
    if "connection refused" in words:
        return HubUnreachable(
            f"nothing listens at {hub} (connection refused): is the hub running "
            "(`agentpost serve`), and is AGENTPOST_HUB (or --hub) its address?"
        )
    return HubUnreachable(f"no answer from {hub}: {words}")


def _tls_to_plain(exc: BaseException) -> bool:
    """A TLS handshake answered by a server that speaks plain HTTP."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ssl.SSLError) and (
            "WRONG_VERSION_NUMBER" in str(seen)
            or "record layer" in str(seen).lower()
            or "http request" in str(seen).lower()
        ):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


FENCE_HEADER = "Agentpost-Worker-Fence"
CAUSE_HEADER = "Agentpost-Cause"  # the event a Worker's post serves (docs/delegation.md)


def key_headers(key: str | None) -> dict[str, str]:
    """The Idempotency-Key header of a room post; a key the hub would refuse is refused
    here, before anything is sent (the same code and rule as the hub's,
    docs/api.md "Idempotency")."""
    if key is None:
        return {}
    if not IDEMPOTENCY_KEY.fullmatch(key):
        raise HubRefused(
            "invalid_idempotency_key",
            f"the idempotency key {key!r} is not {IDEMPOTENCY_KEY_RULE}; nothing was sent",
        )
    return {"Idempotency-Key": key}


# A 5xx that no retry mends: the file's bytes are lost from the hub's store (docs/api.md).
FINAL_5XX = {"media_missing"}


def error_from_response(resp: httpx.Response) -> HubError:
    """Translate a non-2xx answer into the client's error hierarchy."""
    err: dict[str, Any] = {}
    try:
        found = resp.json().get("error")
        if isinstance(found, dict) and isinstance(found.get("code"), str):
            err = found
    except (ValueError, AttributeError):
        pass
    if err:
        code, message = str(err["code"]), str(err.get("message", ""))
    else:
        # Not the hub's error body: a proxy's page, or not a hub at all. Its status line
        # says enough; a whole HTML page in a terminal says nothing.
        code = f"http_{resp.status_code}"
        try:
            where = resp.request.url
            at = f" from {where.host}" + (f":{where.port}" if where.port else "")
        except RuntimeError:  # a response built without its request
            at = ""
        message = (
            f"{resp.status_code} {resp.reason_phrase}{at} with no agentpost error in it "
            "(a proxy in front of the hub, or no hub at this address?)"
        )
    if code == "not_found" and message.startswith("no route /"):
        message = _no_route(resp, message)
    if code in FINAL_5XX:
        return HubRefused(code, message, resp.status_code, err)
    if resp.status_code >= 500 or resp.status_code == 429 or code == "idempotency_in_flight":
        return HubUnavailable(code, message, resp.status_code, err)
    return HubRefused(code, message, resp.status_code, err)


def _no_route(resp: httpx.Response, message: str) -> str:
    """The hub has no such route: when the hub URL carries a path of its own
    (`http://host:8470/foo`), that path is the mistake, so say so."""
    try:
        path = resp.request.url.path
    except RuntimeError:
        return message
    base = path.split("/v1/", 1)[0] if "/v1/" in path else ""
    if not base:
        return message
    return (
        f"the hub has no route {path}: AGENTPOST_HUB (or --hub) must be the hub's root URL, "
        f"http(s)://host:port, without the path {base}"
    )


class AsyncHubClient:
    """One member's (or the admin's) connection to a hub."""

    def __init__(
        self,
        hub: str | None = None,
        token: str | None = None,
        timeout: float = 30.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.hub = checked_hub_url(hub or hub_url_from_env())
        token = token if token is not None else os.environ.get("AGENTPOST_TOKEN")
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.has_token = bool(token)
        self._transport = transport or PooledTransport()
        self._http = httpx.AsyncClient(
            base_url=self.hub,
            headers=headers,
            timeout=timeout,
            transport=self._transport,
        )
        # With our own transport, a plain request skips httpx's client layers (URL merge,
        # cookies, auth and redirect handling: none of them apply to the hub's API); about
        # a third of the Worker's CPU per delivered part went there (bench/HISTORY.md).
        self._direct = isinstance(self._transport, PooledTransport)
        self._headers = dict(self._http.headers)
        self._timeout = httpx.Timeout(timeout).as_dict()
        # A Worker's lease fence (docs/connect.md "One Worker per agent"): sent with every
        # post, so the hub refuses the posts of a Worker whose lease another one took.
        self.fence: int | None = None
        self._skew = 0.0
        self._urls: dict[str, httpx.URL] = {}  # hub + path, parsed once (a room's posts)

    async def __aenter__(self) -> AsyncHubClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def request(self, method: str, path: str, **kw: Any) -> httpx.Response:
        """Send one request; 2xx comes back, anything else raises a `HubError`. A path that
        is not a plain route is refused before anything is sent (client/paths.py)."""
        checked_path(path)
        try:
            if self._direct and kw.keys() <= _DIRECT:
                resp = await self._send(method, path, **kw)
            else:
                resp = await self._http.request(method, path, **kw)
        except httpx.TransportError as exc:
            raise unreachable(self.hub, exc) from exc
        if resp.status_code >= 300:
            raise error_from_response(resp)
        return resp

    async def _send(
        self,
        method: str,
        path: str,
        *,
        headers: dict[str, str] | None = None,
        **body: Any,
    ) -> httpx.Response:
        """One request straight on the transport, read whole (what `httpx.AsyncClient`
        would send for it: the same headers, URL and timeouts; `timeout=None` is none)."""
        timeout = (
            httpx.Timeout(body.pop("timeout")).as_dict() if "timeout" in body else self._timeout
        )
        url = self._urls.get(path)
        if url is None:
            if len(self._urls) >= _MAX_URLS:
                self._urls.clear()
            url = self._urls[path] = httpx.URL(self.hub + path)
        req = httpx.Request(
            method,
            url,
            headers={**self._headers, **{k.lower(): v for k, v in headers.items()}}
            if headers
            else self._headers,
            extensions={"timeout": timeout},
            **body,
        )
        resp = await self._transport.handle_async_request(req)
        resp.request = req
        try:
            await resp.aread()
        finally:
            await resp.aclose()
        return resp

    async def _get(self, path: str, type_: type[T], key: str, **kw: Any) -> T:
        resp = await self.request("GET", path, **kw)
        return msgspec.convert(resp.json()[key], type_)

    # -- reading ----------------------------------------------------------------------

    async def capabilities(self) -> dict[str, Any]:
        resp = await self.request("GET", "/v1/capabilities")
        self._note_hub_clock(resp)
        data: dict[str, Any] = resp.json()
        return data

    def _note_hub_clock(self, resp: httpx.Response) -> None:
        """The hub's clock from its `Date` header (1 s resolution): rules about the hub's
        own times (a key's lifetime since an event's `created_at`) use it, not ours."""
        date = resp.headers.get("date")
        if not date:
            return
        try:
            hub_now = email.utils.parsedate_to_datetime(date).timestamp() + 0.5
        except (TypeError, ValueError):
            return
        skew = time.time() - hub_now
        self._skew = skew if abs(skew) > 2.0 else 0.0  # within the header's resolution: none

    def hub_clock_skew(self) -> float:
        """This machine's clock minus the hub's, as of the last capabilities probe."""
        return self._skew

    async def me(self) -> dict[str, Any]:
        data: dict[str, Any] = (await self.request("GET", "/v1/me")).json()
        return data

    async def room(self, room_id: str) -> Room:
        return await self._get(f"/v1/rooms/{segment(room_id, 'room id')}", Room, "room")

    async def rooms(self, workspace: str) -> list[Room]:
        return await self._get(
            f"/v1/workspaces/{segment(workspace, 'workspace')}/rooms", list[Room], "rooms"
        )

    async def mark_read(self, room_id: str, seq: int) -> ReadMarker:
        """Record that you have read the room up to `seq` (never moves back, never past the
        room's last event); where the marker stands now and how much is unread past it."""
        resp = await self.request(
            "POST", f"/v1/rooms/{segment(room_id, 'room id')}/read", json={"seq": seq}
        )
        return msgspec.convert(resp.json(), ReadMarker)

    async def resolve_room(self, room: str) -> str:
        """A room id from an id or a name in the caller's workspace; anything of neither
        shape is refused (`invalid_request`) before anything is sent."""
        if ROOM_ID.fullmatch(room):
            return room
        if not NAME.fullmatch(room):
            raise HubRefused(
                INVALID_REQUEST,
                f"{room[:80]!r} names no room: give a room id ({ROOM_ID_RULE}) or a room "
                f"name ({NAME_RULE}); nothing was sent",
            )
        me = await self.me()
        for r in await self.rooms(me["workspace"]["name"]):
            if r.name == room:
                return r.id
        raise HubRefused("room_not_found", f"no room named {room!r} that you take part in")

    async def event(self, event_id: str) -> Event:
        """One event by id, from a room you take part in (404 `event_not_found` otherwise)."""
        return await self._get(f"/v1/events/{segment(event_id, 'event id')}", Event, "event")

    async def events(self, room_id: str, after: int = 0, limit: int = 100) -> list[Event]:
        params = {"after": after, "limit": limit}
        return await self._get(
            f"/v1/rooms/{segment(room_id, 'room id')}/events", list[Event], "events", params=params
        )

    async def stream(self, room_id: str, after: int = 0) -> AsyncGenerator[Event, None]:
        """Events of the room after `after`, live; a stream the hub ends is resumed with
        Last-Event-ID; no answer at all raises `HubUnreachable` (the caller may resume
        from the last seq it got)."""
        async for body in self._sse(f"/v1/rooms/{segment(room_id, 'room id')}/stream", after):
            yield msgspec.json.decode(body, type=Event)

    async def inbox_stream(self, after: int | None = None) -> AsyncGenerator[InboxItem, None]:
        """The caller's inbox after cursor `after` (default: its acknowledged cursor), live."""
        async for body in self._sse("/v1/inbox/stream", after):
            yield msgspec.json.decode(body, type=InboxItem)

    async def _sse(self, path: str, after: int | None) -> AsyncIterator[bytes]:
        """The data of each frame of an SSE stream, reconnecting with Last-Event-ID after
        the last frame given when the hub ends the stream."""
        while True:
            headers = {"Accept": "text/event-stream"}
            if after is not None:
                headers["Last-Event-ID"] = str(after)
            try:
                async with self._http.stream("GET", path, headers=headers, timeout=None) as resp:
                    if resp.status_code >= 300:
                        await resp.aread()
                        raise error_from_response(resp)
                    async for frame_id, data in _sse_frames(resp):
                        if frame_id is not None:
                            after = frame_id
                        yield data
            except httpx.TransportError as exc:
                raise HubUnreachable(
                    f"stream from {self.hub} cut: {exc or type(exc).__name__}"
                ) from exc

    async def inbox(
        self, after: int | None = None, wait: float = 0.0, limit: int = 100
    ) -> InboxPage:
        params: dict[str, Any] = {"wait": wait, "limit": limit}
        if after is not None:
            params["after"] = after
        resp = await self.request("GET", "/v1/inbox", params=params, timeout=max(30.0, wait + 10.0))
        return msgspec.convert(resp.json(), InboxPage)

    async def delivery(self, event_id: str) -> dict[str, Any]:
        """Who got `event_id`, read it, acked it, answered it (docs/delivery.md)."""
        resp = await self.request("GET", f"/v1/events/{segment(event_id, 'event id')}/delivery")
        data: dict[str, Any] = resp.json()["delivery"]
        return data

    async def search(
        self,
        q: str,
        *,
        room: str | None = None,
        sender: str | None = None,
        before: str | None = None,
        limit: int | None = None,
    ) -> dict[str, Any]:
        """Events matching `q` in your rooms, newest first: `{"hits": [{"event",
        "highlights"}], "next_before"}`; pass `next_before` as `before` for the next page."""
        given = {"q": q, "room": room, "sender": sender, "before": before, "limit": limit}
        params = {k: v for k, v in given.items() if v is not None}
        data: dict[str, Any] = (await self.request("GET", "/v1/search", params=params)).json()
        return data

    async def member(self, workspace: str, name: str) -> SeenMember:
        """One member of your workspace (who owns an agent, whether it is active, when the
        hub last saw it)."""
        return await self._get(
            f"/v1/workspaces/{segment(workspace, 'workspace')}/members/{segment(name, 'name')}",
            SeenMember,
            "member",
        )

    async def members(self, workspace: str) -> list[SeenMember]:
        """Every member of your workspace with kind, owner, status and presence
        (docs/presence.md)."""
        return await self._get(
            f"/v1/workspaces/{segment(workspace, 'workspace')}/members", list[SeenMember], "members"
        )

    async def download(self, media_id: str, dest: Path, max_bytes: int) -> int:
        """Save a media file to `dest` (0600), checked like `fetch_media`; refuses one over
        `max_bytes`."""
        fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "wb") as f:
            return (await self.fetch_media(media_id, f, max_bytes)).size

    async def cancel(self, room_id: str, agent: str | None = None) -> Event:
        """Stop the running Turn of `agent` (or of every agent) in the room
        (docs/connect.md "Cancelling, permissions, time limits")."""
        body = {} if agent is None else {"agent": agent}
        resp = await self.request(
            "POST", f"/v1/rooms/{segment(room_id, 'room id')}/cancel", json=body
        )
        return msgspec.convert(resp.json()["event"], Event)

    def _post_headers(self, key: str | None, cause: str | None = None) -> dict[str, str]:
        headers = key_headers(key)
        if self.fence is not None:
            headers[FENCE_HEADER] = str(self.fence)
            if cause is not None:  # the hub takes it only beside the Worker's fence
                headers[CAUSE_HEADER] = cause
        return headers

    async def ack(self, cursor: int, fence: int | None = None) -> int:
        """Acknowledge the inbox up to `cursor`; a Worker names its lease's `fence`
        (409 `lease_lost` once another Worker took over)."""
        body: dict[str, Any] = {"cursor": cursor}
        if fence is not None:
            body["fence"] = fence
        resp = await self.request("POST", "/v1/inbox/ack", json=body)
        return int(resp.json()["cursor"])

    # -- the Worker lease (docs/connect.md "One Worker") ---------------------------------

    async def take_lease(
        self,
        worker_id: str,
        host: str,
        pid: int,
        takeover: bool = False,
        last_fence: int | None = None,
    ) -> dict[str, Any]:
        """`{"lease": {...}, "replaced": {...} | None}`; `HubRefused` `lease_held` (with
        the holder in `body`) while another Worker holds it. `last_fence`: the fence this
        workspace last held (a restart takes its own live lease back with it)."""
        body: dict[str, Any] = {
            "worker_id": worker_id,
            "host": host,
            "pid": pid,
            "takeover": takeover,
        }
        if last_fence is not None:
            body["last_fence"] = last_fence
        data: dict[str, Any] = (await self.request("POST", "/v1/worker/lease", json=body)).json()
        return data

    async def renew_lease(self, fence: int) -> dict[str, Any]:
        resp = await self.request("POST", "/v1/worker/lease/renew", json={"fence": fence})
        data: dict[str, Any] = resp.json()["lease"]
        return data

    async def release_lease(self, fence: int) -> None:
        await self.request("POST", "/v1/worker/lease/release", json={"fence": fence})

    async def lease(self) -> dict[str, Any] | None:
        data: dict[str, Any] | None = (await self.request("GET", "/v1/worker/lease")).json()[
            "lease"
        ]
        return data

    # -- posting ----------------------------------------------------------------------

    async def post_message(
        self,
        room_id: str,
        text: str,
        *,
        key: str | None = None,
        metadata: dict[str, Any] | None = None,
        in_reply_to: str | None = None,
        reply_kind: str | None = None,
        attachments: list[str] | None = None,
        cause: str | None = None,
    ) -> PostResult:
        """Post a message. `cause`: for a Worker, the event its post serves (a Turn's
        trigger), sent beside its lease's fence (docs/delegation.md "Cause")."""
        body: dict[str, Any] = {"text": text}
        if metadata:
            body["metadata"] = metadata
        if in_reply_to is not None:
            body["in_reply_to"] = in_reply_to
        if reply_kind is not None:
            body["reply_kind"] = reply_kind
        if attachments:
            body["attachments"] = attachments
        resp = await self.request(
            "POST",
            f"/v1/rooms/{segment(room_id, 'room id')}/messages",
            json=body,
            headers=self._post_headers(key, cause),
        )
        return PostResult(
            event=msgspec.convert(resp.json()["event"], Event),
            idempotency_status=resp.headers.get("idempotency-status"),
        )

    # -- relations (docs/api.md "Relations") ------------------------------------------

    async def edit(
        self, room_id: str, event_id: str, text: str, *, key: str | None = None
    ) -> PostResult:
        """Replace the text of your own message (or a media event's caption); the answer is
        the edit event, the message reads with the new text and `edited` from now on."""
        return await self._relate(room_id, event_id, "edits", {"text": text}, key)

    async def react(
        self,
        room_id: str,
        event_id: str,
        emoji: str,
        *,
        remove: bool = False,
        key: str | None = None,
    ) -> PostResult:
        """React to an event with `emoji` (`remove`: take your reaction back)."""
        body: dict[str, Any] = {"emoji": emoji}
        if remove:
            body["remove"] = True
        return await self._relate(room_id, event_id, "reactions", body, key)

    async def redact(
        self, room_id: str, event_id: str, reason: str | None = None, *, key: str | None = None
    ) -> PostResult:
        """Hide an event's text and files for good (yours, or one you may redact)."""
        body = {} if reason is None else {"reason": reason}
        return await self._relate(room_id, event_id, "redactions", body, key)

    async def _relate(
        self, room_id: str, event_id: str, kind: str, body: dict[str, Any], key: str | None
    ) -> PostResult:
        resp = await self.request(
            "POST",
            f"/v1/rooms/{segment(room_id, 'room id')}/events/{segment(event_id, 'event id')}"
            f"/{kind}",
            json=body,
            headers=self._post_headers(key),
        )
        return PostResult(
            event=msgspec.convert(resp.json()["event"], Event),
            idempotency_status=resp.headers.get("idempotency-status"),
        )

    async def upload(
        self,
        room_id: str,
        path: Path,
        *,
        caption: str = "",
        key: str | None = None,
        mime_type: str = "application/octet-stream",
    ) -> PostResult:
        with open(path, "rb") as f:
            return await self.upload_file(
                room_id, f, path.name, caption=caption, key=key, mime_type=mime_type
            )

    async def upload_file(
        self,
        room_id: str,
        f: BinaryIO,
        name: str,
        *,
        caption: str = "",
        key: str | None = None,
        mime_type: str = "application/octet-stream",
        cause: str | None = None,
    ) -> PostResult:
        """Upload from an open file (read from its start): egress checks the descriptor it opened,
        and the bytes come from that same descriptor (docs/architecture.md#egress)."""
        headers = self._post_headers(key, cause)
        f.seek(0)
        files = {"file": (name, f, mime_type)}
        data = {"text": caption} if caption else None
        resp = await self.request(
            "POST",
            f"/v1/rooms/{segment(room_id, 'room id')}/media",
            files=files,
            data=data,
            headers=headers,
        )
        payload = resp.json()
        return PostResult(
            event=msgspec.convert(payload["event"], Event),
            idempotency_status=resp.headers.get("idempotency-status"),
            media=msgspec.convert(payload["media"], Media),
        )

    # -- administration ---------------------------------------------------------------

    async def create_workspace(self, name: str) -> dict[str, str]:
        resp = await self.request("POST", "/v1/admin/workspaces", json={"name": name})
        ws: dict[str, str] = resp.json()["workspace"]
        return ws

    async def add_member(
        self, workspace: str, name: str, kind: str, owner: str | None = None
    ) -> NewMember:
        body: dict[str, Any] = {"name": name, "kind": kind}
        if owner is not None:
            body["owner"] = owner
        resp = await self.request(
            "POST", f"/v1/admin/workspaces/{segment(workspace, 'workspace')}/members", json=body
        )
        return msgspec.convert(resp.json(), NewMember)

    async def remove_member(self, workspace: str, name: str, hard: bool = False) -> Member:
        resp = await self.request(
            "DELETE",
            f"/v1/admin/workspaces/{segment(workspace, 'workspace')}/members/{segment(name, 'name')}",
            params={"hard": "true" if hard else "false"},
        )
        return msgspec.convert(resp.json()["member"], Member)

    async def create_room(
        self,
        workspace: str,
        name: str,
        participants: list[str] | None = None,
        mode: str = "dynamic",
        master: str | None = None,
    ) -> Room:
        body: dict[str, Any] = {"name": name, "participants": participants or [], "mode": mode}
        if master is not None:
            body["master"] = master
        resp = await self.request(
            "POST", f"/v1/workspaces/{segment(workspace, 'workspace')}/rooms", json=body
        )
        return msgspec.convert(resp.json()["room"], Room)

    async def list_workspaces(self) -> list[dict[str, str]]:
        resp = await self.request("GET", "/v1/admin/workspaces")
        found: list[dict[str, str]] = resp.json()["workspaces"]
        return found

    async def list_members(self, workspace: str) -> list[Member]:
        """Every member of the workspace, removed ones too (admin token)."""
        return await self._get(
            f"/v1/admin/workspaces/{segment(workspace, 'workspace')}/members",
            list[Member],
            "members",
        )

    async def reissue_token(self, workspace: str, name: str) -> NewMember:
        """A new token for the member; its older tokens stop working at once (admin token)."""
        resp = await self.request(
            "POST",
            f"/v1/admin/workspaces/{segment(workspace, 'workspace')}/members/{segment(name, 'name')}/token",
        )
        return msgspec.convert(resp.json(), NewMember)

    async def set_owner(self, workspace: str, name: str, owner: str | None) -> Member:
        """Make `owner` (a person; None: no one) the owner of agent `name` (admin token)."""
        resp = await self.request(
            "PUT",
            f"/v1/admin/workspaces/{segment(workspace, 'workspace')}/members/{segment(name, 'name')}/owner",
            json={"owner": owner},
        )
        return msgspec.convert(resp.json()["member"], Member)

    async def set_participant(self, room_id: str, name: str, present: bool) -> Room:
        """Add member `name` to the room (or take it out)."""
        method = "PUT" if present else "DELETE"
        resp = await self.request(
            method, f"/v1/rooms/{segment(room_id, 'room id')}/participants/{segment(name, 'name')}"
        )
        return msgspec.convert(resp.json()["room"], Room)

    async def fetch_media(
        self,
        media_id: str,
        sink: BinaryIO,
        max_bytes: int | None = None,
        workspace: str | None = None,
    ) -> Download:
        """Write the media's bytes to `sink`, checking them against the hub's sha256, with
        the file's name as the hub gives it; refuses one over `max_bytes` (`download` is
        the Worker's capped save to a path). With `workspace`, the operator's download of a
        file of that workspace (admin token; docs/api.md "Export")."""
        digest = hashlib.sha256()
        size = 0
        path = f"/media/{segment(media_id, 'media id')}"
        if workspace is not None:  # the operator's route for the same file
            path = f"/admin/workspaces/{segment(workspace, 'workspace')}{path}"
        try:
            async with self._http.stream("GET", "/v1" + path) as resp:
                if resp.status_code >= 300:
                    await resp.aread()
                    raise error_from_response(resp)
                async for chunk in resp.aiter_bytes():
                    if max_bytes is not None and size + len(chunk) > max_bytes:
                        raise HubRefused("payload_too_large", f"media is over {max_bytes} bytes")
                    sink.write(chunk)
                    digest.update(chunk)
                    size += len(chunk)
                expected = resp.headers.get("x-content-sha256")
                name = filename_of(resp.headers.get("content-disposition", ""))
        except httpx.TransportError as exc:
            raise HubUnreachable(
                f"download from {self.hub} cut: {exc or type(exc).__name__}"
            ) from exc
        if expected is not None and expected != digest.hexdigest():
            raise HubUnavailable(
                "download_corrupt", f"media {media_id}: the bytes do not match its sha256"
            )
        return Download(name=name or media_id, size=size, sha256=digest.hexdigest())

    async def retention(
        self, room_id: str | None = None, workspace: str | None = None, **change: int | None
    ) -> dict[str, Any]:
        """A room's (member token) or a workspace's (admin token) retention, after setting
        the given `events_seconds` / `media_seconds` when any (docs/operations.md)."""
        path = (
            f"/v1/rooms/{segment(room_id, 'room id')}/retention"
            if room_id is not None
            else f"/v1/admin/workspaces/{segment(workspace or '', 'workspace')}/retention"
        )
        if change:
            resp = await self.request("PUT", path, json=change)
        else:
            resp = await self.request("GET", path)
        out: dict[str, Any] = resp.json()["retention"]
        return out

    @contextlib.asynccontextmanager
    async def streamed(
        self, path: str, params: dict[str, str] | None = None
    ) -> AsyncIterator[httpx.Response]:
        """A GET whose body is read as it arrives (an export): a 2xx response, else the
        hub's error. A connection that breaks before the answer began is `HubUnreachable`;
        one that breaks in its body is `HubUnavailable` `export_cut_short` (retryable)."""
        checked_path(path)
        began = False
        try:
            async with self._http.stream("GET", path, params=params) as resp:
                if resp.status_code >= 300:
                    await resp.aread()
                    raise error_from_response(resp)
                began = True
                yield resp
        except httpx.TransportError as exc:
            why = f"{exc or type(exc).__name__}"
            if began:
                raise HubUnavailable(
                    exports.CUT_SHORT,
                    f"the export {path} from {self.hub} was cut short ({why}); export it again",
                ) from exc
            raise HubUnreachable(f"{path} from {self.hub} cut: {why}") from exc

    async def export_room(
        self, room_id: str, sink: BinaryIO, format: str = "jsonl", files: str = "paths"
    ) -> exports.Export:
        """Write the room's export to `sink` as it arrives; raises when it does not end
        whole (client/exports.py)."""
        return await exports.export_room(self, room_id, sink, format, files)

    async def export_workspace(
        self, workspace: str, on_line: Callable[[bytes], None]
    ) -> dict[str, Any]:
        """The operator's export of every room of `workspace`, line by line (admin token)."""
        return await exports.export_workspace(self, workspace, on_line)

    async def set_archived(self, room_id: str, archived: bool) -> Room:
        action = "archive" if archived else "unarchive"
        resp = await self.request("POST", f"/v1/rooms/{segment(room_id, 'room id')}/{action}")
        return msgspec.convert(resp.json()["room"], Room)

    # -- threads (docs/threads.md; the rules and codes are in client/threads.py) ---------

    async def ensure_thread(self, workspace: str, name: str, owner: str | None = None) -> Thread:
        """Make or return the thread `name` of `owner` (default: you); one even when asked
        at once from many places; an archived one comes back unarchived."""
        return await threads.ensure_thread(self, workspace, name, owner)

    async def archive_thread(self, thread: str) -> Room:
        return await threads.set_thread_archived(self, thread, True)

    async def unarchive_thread(self, thread: str) -> Room:
        return await threads.set_thread_archived(self, thread, False)

    async def thread_send(
        self, thread: str, text: str, *, key: str | None = None, acting_for: str | None = None
    ) -> ThreadSend:
        """Send `text` once per `key`; failures are `HubError`s with the codes of
        docs/threads.md "Codes"."""
        return await threads.thread_send(self, thread, text, key, acting_for)

    async def send_state(self, room_id: str, key: str) -> SendState | None:
        """What the hub recorded for the Idempotency-Key `key` in the room; None: unused."""
        return await threads.send_state(self, room_id, key)

    # -- file reservations (docs/reservations.md; the shapes are in client/reservations.py)

    async def reserve(
        self,
        workspace: str,
        project: str,
        paths: list[str],
        *,
        exclusive: bool = True,
        ttl_seconds: int = 3600,
        reason: str = "",
        room: str | None = None,
        key: str | None = None,
    ) -> reservations.Reservation:
        """Hold `paths` (gitignore-style globs) of `project`; `HubRefused`
        `reservation_conflict` names each holder in the way (`reservations.conflicts_of`)."""
        return await reservations.reserve(
            self,
            workspace,
            project,
            paths,
            exclusive=exclusive,
            ttl_seconds=ttl_seconds,
            reason=reason,
            room=room,
            key=key,
        )

    async def reservations(
        self, workspace: str, project: str | None = None
    ) -> list[reservations.Reservation]:
        return await reservations.reservations(self, workspace, project)

    async def check_paths(
        self, workspace: str, project: str, paths: list[str]
    ) -> list[reservations.Conflict]:
        """Others' exclusive reservations covering any of these concrete paths."""
        return await reservations.check(self, workspace, project, paths)

    async def renew_reservation(
        self, reservation_id: str, ttl_seconds: int = 3600, key: str | None = None
    ) -> reservations.Reservation:
        return await reservations.renew(self, reservation_id, ttl_seconds, key)

    async def release_reservation(
        self, reservation_id: str, key: str | None = None
    ) -> reservations.Reservation:
        return await reservations.release(self, reservation_id, key)


async def _sse_frames(resp: httpx.Response) -> AsyncIterator[tuple[int | None, bytes]]:
    """(id, data) of each SSE frame; comments (keep-alives) are skipped."""
    data: list[str] = []
    frame_id: int | None = None
    async for line in resp.aiter_lines():
        if line.startswith("data:"):
            data.append(line[5:].lstrip())
        elif line.startswith("id:"):
            value = line[3:].strip()
            frame_id = int(value) if value.isdigit() else None
        elif line == "" and data:
            yield frame_id, "\n".join(data).encode()
            data, frame_id = [], None
