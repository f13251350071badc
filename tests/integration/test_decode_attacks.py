"""Attacks on the decode path (docs/api.md): deep nesting, malformed HTTP, refusals of every
kind. Each gets a clear JSON error, stores nothing, and leaves a healthy keep-alive
connection open for the client's next, valid request."""

from __future__ import annotations

import json
import socket
from urllib.parse import urlsplit

import httpx
import pytest

from hubproc import HubProcess, Setup


# One hub per engine for this module; each test makes its own workspace on it.
@pytest.fixture
def setup(shared_setup: Setup) -> Setup:
    return shared_setup


@pytest.fixture
def hub(shared_hub: HubProcess) -> HubProcess:
    return shared_hub


def nested(depth: int) -> bytes:
    """Metadata `{"m": [[…[]…]]}` nesting `depth` levels (the metadata object is level 1)."""
    return b'{"m": ' + b"[" * (depth - 1) + b"]" * (depth - 1) + b"}"


def message(metadata: bytes, text: str = "deep") -> bytes:
    return b'{"text": ' + json.dumps(text).encode() + b', "metadata": ' + metadata + b"}"


def local_port(r: httpx.Response) -> int:
    """The client side's port of the connection that carried `r`."""
    port: int = r.extensions["network_stream"].get_extra_info("client_addr")[1]
    return port


def events(c: httpx.Client, room: str) -> list[dict]:
    r = c.get(f"/v1/rooms/{room}/events")
    assert r.status_code == 200, r.text
    evs: list[dict] = r.json()["events"]
    return evs


def test_metadata_at_the_depth_limit_is_accepted(setup: Setup) -> None:
    with setup.hub.client(setup.tokens["alice"]) as c:
        r = c.post(f"/v1/rooms/{setup.room}/messages", content=message(nested(32)))
        assert r.status_code == 201, r.text
        assert r.json()["event"]["metadata"] == json.loads(nested(32))


@pytest.mark.parametrize("depth", [33, 400, 5000])
def test_deep_metadata_is_a_clear_400_that_stores_nothing_and_keeps_the_connection(
    setup: Setup, depth: int
) -> None:
    room = setup.room
    with setup.hub.client(setup.tokens["alice"]) as c:
        bad = c.post(
            f"/v1/rooms/{room}/messages",
            content=message(nested(depth)),
            headers={"Idempotency-Key": "deep"},
        )
        assert bad.status_code == 400, bad.text
        error = bad.json()["error"]
        assert error["code"] == "invalid_request"
        assert "nest" in error["message"]
        ok = c.post(
            f"/v1/rooms/{room}/messages", json={"text": "fine"}, headers={"Idempotency-Key": "deep"}
        )
        assert ok.status_code == 201, ok.text
        assert ok.headers["idempotency-status"] == "created"  # the refusal left the key unused
        assert local_port(ok) == local_port(bad)  # the same connection carried both
        assert [e["text"] for e in events(c, room)] == ["fine"]


def test_every_refusal_leaves_the_keep_alive_connection_usable(setup: Setup) -> None:
    room = setup.room
    posts = f"/v1/rooms/{room}/messages"
    with setup.hub.client(setup.tokens["alice"]) as c:
        first = c.post(posts, json={"text": "x"}, headers={"Idempotency-Key": "k"})
        assert first.status_code == 201
        refusals = [
            c.get("/v1/nowhere"),
            c.delete("/v1/capabilities"),
            c.get(f"/v1/rooms/{room}/events", headers={"Authorization": "Bearer nope"}),
            c.post(posts, content=b"{"),
            c.post(posts, content=b'{"text": 5}'),
            c.post(posts, content=message(nested(2000))),
            c.post(posts, content=b'{"text": "' + b"x" * 1_100_000 + b'"}'),
            c.post(posts, json={"text": "y"}, headers={"Idempotency-Key": "k"}),
            c.post(posts, json={"text": "x"}, headers={"Idempotency-Key": "a b"}),
            c.post(f"/v1/rooms/{room}/media", content=b"not multipart"),
            c.get("/v1/media/md_nope"),
        ]
        statuses = [r.status_code for r in refusals]
        assert statuses == [404, 405, 401, 400, 400, 400, 413, 422, 400, 400, 404]
        for r in refusals:
            assert r.headers["content-type"].startswith("application/json"), r.text
            assert r.json()["error"]["code"]
        ok = c.post(posts, json={"text": "after"})
        assert ok.status_code == 201
        assert {local_port(r) for r in [*refusals, ok]} == {local_port(ok)}
        assert [e["text"] for e in events(c, room)] == ["x", "after"]


def _raw(hub: HubProcess, request: bytes) -> bytes:
    url = urlsplit(hub.url)
    assert url.hostname is not None and url.port is not None
    with socket.create_connection((url.hostname, url.port), timeout=10) as sock:
        sock.sendall(request)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return answer


@pytest.mark.parametrize("value", [b"a\x01b", b"a\x7fb", b"a\x00b", b"a\rb"])
def test_control_character_in_a_header_gets_the_json_error(setup: Setup, value: bytes) -> None:
    body = b'{"text": "never"}'
    request = (
        f"POST /v1/rooms/{setup.room}/messages HTTP/1.1\r\nHost: x\r\n"
        f"Authorization: Bearer {setup.tokens['alice']}\r\nContent-Length: {len(body)}\r\n"
    ).encode() + b"Idempotency-Key: " + value + b"\r\n\r\n" + body
    answer = _raw(setup.hub, request)
    head, _, payload = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400"), answer[:300]
    assert b"content-type: application/json" in head.lower()
    assert json.loads(payload)["error"]["code"] == "invalid_request"
    with setup.hub.client(setup.tokens["alice"]) as c:
        assert events(c, setup.room) == []


def test_a_broken_request_line_gets_the_json_error(hub: HubProcess) -> None:
    answer = _raw(hub, b"GET /healthz HTTP/1.1 extra\r\nHost: x\r\n\r\n")
    head, _, payload = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400"), answer[:300]
    assert json.loads(payload)["error"]["code"] == "invalid_request"
