"""The post route's own ASGI path (hub/routes/thin.py) answers exactly like the framework:
size caps, 404/405 around it, first header wins, metrics, against a real hub process."""

from __future__ import annotations

import re
from collections.abc import Iterator

import httpx
import pytest

from hubproc import Setup


# One hub per engine for this module; each test makes its own workspace on it.
@pytest.fixture
def setup(shared_setup: Setup) -> Setup:
    return shared_setup

CAP = 1024 * 1024  # HubConfig.max_json_bytes
ROUTE = "POST /v1/rooms/{room}/messages"


def _posts_counted(c: httpx.Client, outcome: str) -> float:
    text = c.get("/metrics").text
    series = f'agentpost_posts_total{{outcome="{outcome}",route="{ROUTE}"}}'
    m = re.search(re.escape(series) + r" (\S+)", text)
    return float(m.group(1)) if m else 0.0


def _events(c: httpx.Client, room: str) -> list[dict]:
    return c.get(f"/v1/rooms/{room}/events", params={"limit": 1000}).json()["events"]


def test_body_over_the_cap_is_refused_declared_or_streamed(setup: Setup) -> None:
    big = b'{"text": "' + b"x" * CAP + b'"}'

    def chunks() -> Iterator[bytes]:  # no Content-Length: the cap applies while reading
        for i in range(0, len(big), 65536):
            yield big[i : i + 65536]

    with setup.hub.client(setup.tokens["alice"]) as c:
        url = f"/v1/rooms/{setup.room}/messages"
        declared = c.post(url, content=big, headers={"Idempotency-Key": "big1"})
        streamed = c.post(url, content=chunks(), headers={"Idempotency-Key": "big2"})
        for r in (declared, streamed):
            assert (r.status_code, r.json()["error"]["code"]) == (413, "payload_too_large")
        assert _events(c, setup.room) == []
        # Neither key was spent: both post now.
        for key in ("big1", "big2"):
            ok = c.post(url, json={"text": "small"}, headers={"Idempotency-Key": key})
            assert ok.headers["idempotency-status"] == "created"


def test_other_methods_and_paths_around_the_route_answer_as_before(setup: Setup) -> None:
    with setup.hub.client(setup.tokens["alice"]) as c:
        r = c.get(f"/v1/rooms/{setup.room}/messages")
        assert (r.status_code, r.json()["error"]["code"]) == (405, "method_not_allowed")
        assert r.headers["allow"] == "POST"
        for path in ("/v1/rooms//messages", f"/v1/rooms/{setup.room}/x/messages"):
            r = c.post(path, json={"text": "hi"})
            assert (r.status_code, r.json()["error"]["code"]) == (404, "not_found"), path
        r = c.post("/v1/rooms/rm_nope/messages", json={"text": "hi"})
        assert (r.status_code, r.json()["error"]["code"]) == (404, "room_not_found")
        assert _events(c, setup.room) == []


def test_the_first_header_of_a_name_counts_as_in_starlette(setup: Setup) -> None:
    url = f"/v1/rooms/{setup.room}/messages"
    with setup.hub.client() as c:
        headers = [
            ("Authorization", f"Bearer {setup.tokens['alice']}"),
            ("Authorization", "Bearer not-a-token"),
            ("Idempotency-Key", "first"),
            ("Idempotency-Key", "second"),
            ("Content-Type", "application/json"),
        ]
        r = c.post(url, content=b'{"text": "twice"}', headers=headers)
        assert r.status_code == 201, r.text
        assert r.json()["event"]["sender"] == "alice"
    with setup.hub.client(setup.tokens["alice"]) as c:
        again = c.post(url, json={"text": "twice"}, headers={"Idempotency-Key": "first"})
        assert again.headers["idempotency-status"] == "replayed"
        assert again.content == r.content


def test_unauthorized_and_bad_key_answer_with_their_codes_and_headers(setup: Setup) -> None:
    url = f"/v1/rooms/{setup.room}/messages"
    with setup.hub.client() as c:
        r = c.post(url, json={"text": "hi"})
        assert (r.status_code, r.json()["error"]["code"]) == (401, "unauthorized")
        assert r.headers["www-authenticate"] == "Bearer"
        assert r.headers["content-type"] == "application/json"
    with setup.hub.client(setup.tokens["alice"]) as c:
        r = c.post(url, json={"text": "hi"}, headers={"Idempotency-Key": "bad key"})
        assert (r.status_code, r.json()["error"]["code"]) == (400, "invalid_idempotency_key")
        assert _events(c, setup.room) == []


def test_posts_are_counted_by_outcome(setup: Setup) -> None:
    url = f"/v1/rooms/{setup.room}/messages"
    with setup.hub.client(setup.tokens["alice"]) as c:
        before = {o: _posts_counted(c, o) for o in ("created", "replayed", "idempotency_conflict")}
        c.post(url, json={"text": "one"}, headers={"Idempotency-Key": "m1"})
        c.post(url, json={"text": "one"}, headers={"Idempotency-Key": "m1"})
        c.post(url, json={"text": "two"}, headers={"Idempotency-Key": "m1"})
        after = {o: _posts_counted(c, o) for o in before}
    assert {o: after[o] - before[o] for o in before} == {
        "created": 1.0,
        "replayed": 1.0,
        "idempotency_conflict": 1.0,
    }
