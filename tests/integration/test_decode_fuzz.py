"""Property: whatever body a client sends to the post routes — nested, huge, unicode-edge,
wrongly typed, not JSON at all, a multipart body torn anywhere — the hub answers without a
5xx, on the same keep-alive connection, and a 4xx stores nothing: no event, no media, the
key unused (docs/api.md)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hubproc import Setup


# One hub per engine for this module; each test makes its own workspace on it.
@pytest.fixture
def setup(shared_setup: Setup) -> Setup:
    return shared_setup


FUZZ = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    database=None,
)

EDGE_TEXT = st.text(
    st.characters(codec=None, exclude_categories=()),  # lone surrogates, controls, NUL, …
    max_size=40,
) | st.sampled_from(["", " ", "\u0000", "\ufeff", "\u202e", "\U0010ffff", "a" * 70_000])
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | EDGE_TEXT
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(EDGE_TEXT, inner, max_size=4),
    max_leaves=20,
)
FIELDS = ["text", "metadata", "in_reply_to", "reply_kind", "attachments", "extra"]


def _dump(value: Any) -> bytes:
    # surrogatepass: lone surrogates reach the hub as the invalid UTF-8 a client could send.
    return json.dumps(value).encode("utf-8", "surrogatepass")


@st.composite
def bodies(draw: st.DrawFn) -> bytes:
    kind = draw(st.sampled_from(["fields", "value", "deep", "huge", "bytes"]))
    if kind == "fields":  # the right keys, any values
        chosen = draw(st.lists(st.sampled_from(FIELDS), unique=True, max_size=len(FIELDS)))
        return _dump({k: draw(VALUES) for k in chosen})
    if kind == "value":
        return _dump(draw(VALUES))
    if kind == "deep":
        depth = draw(st.integers(min_value=1, max_value=3000))
        opener, closer = draw(st.sampled_from([(b"[", b"]"), (b'{"a":', b"}")]))
        inner = opener * depth + b"1" + closer * depth
        return b'{"text": "deep", "metadata": {"m": ' + inner + b"}}"
    if kind == "huge":
        size = draw(st.sampled_from([65_536, 65_537, 1_048_000, 1_048_577, 1_300_000]))
        return b'{"text": "' + b"x" * size + b'"}'
    return draw(st.binary(max_size=200))


KEYS = st.none() | st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=300)


def _port(r: httpx.Response) -> int:
    port: int = r.extensions["network_stream"].get_extra_info("client_addr")[1]
    return port


def _last_seq(c: httpx.Client, room: str) -> int:
    seq: int = c.get(f"/v1/rooms/{room}").json()["room"]["last_seq"]
    return seq


def _check(c: httpx.Client, room: str, r: httpx.Response, key: str | None, before: int) -> None:
    assert r.status_code < 500, r.text
    after = _last_seq(c, room)
    if r.status_code >= 400:
        assert r.headers["content-type"].startswith("application/json"), r.text
        assert r.json()["error"]["code"]
        assert after == before, f"a {r.status_code} stored an event"
        if key is not None and 0 < len(key) <= 255 and " " not in key:
            sent = c.get(f"/v1/rooms/{room}/sends", params={"key": key})
            assert sent.status_code == 404, f"a {r.status_code} consumed the key"
    else:
        assert r.status_code == 201 and after == before + 1


def test_fuzzed_json_bodies_never_500_never_drop_the_connection_store_nothing_on_4xx(
    setup: Setup,
) -> None:
    room = setup.room
    with setup.hub.client(setup.tokens["alice"], timeout=30) as c:
        first = c.get("/healthz")
        seen: set[int] = {_port(first)}
        n = [0]

        @FUZZ
        @given(body=bodies(), key=KEYS)
        def one(body: bytes, key: str | None) -> None:
            n[0] += 1
            # Unique per example; never ending in white space, which the client itself refuses.
            key = None if key is None else f"fz{n[0]}-{key}|"
            before = _last_seq(c, room)
            headers = {"Idempotency-Key": key} if key is not None else {}
            r = c.post(f"/v1/rooms/{room}/messages", content=body, headers=headers)
            seen.add(_port(r))
            _check(c, room, r, key, before)

        one()
        assert seen == {_port(first)}, "a request was answered on a new connection"


BOUNDARY = "fzb0undary"
WHOLE = (
    f"--{BOUNDARY}\r\n".encode()
    + b'Content-Disposition: form-data; name="text"\r\n\r\ncaption\r\n'
    + f"--{BOUNDARY}\r\n".encode()
    + b'Content-Disposition: form-data; name="file"; filename="f.bin"\r\n'
    + b"Content-Type: application/octet-stream\r\n\r\n"
    + b"0123456789" * 50
    + f"\r\n--{BOUNDARY}--\r\n".encode()
)


@st.composite
def multipart_bodies(draw: st.DrawFn) -> bytes:
    """The whole body torn at some point, with bytes spliced in or not."""
    cut = draw(st.integers(min_value=0, max_value=len(WHOLE)))
    splice = draw(st.binary(max_size=30))
    rest = draw(st.booleans())
    return WHOLE[:cut] + splice + (WHOLE[cut:] if rest else b"")


def test_fuzzed_multipart_bodies_never_500_and_store_nothing_on_4xx(setup: Setup) -> None:
    room = setup.room
    tmp = setup.hub.data_dir / "blobs" / "tmp"
    headers = {"Content-Type": f"multipart/form-data; boundary={BOUNDARY}"}
    with setup.hub.client(setup.tokens["alice"], timeout=30) as c:
        first = c.get("/healthz")
        seen: set[int] = {_port(first)}
        n = [0]

        @FUZZ
        @given(body=multipart_bodies())
        def one(body: bytes) -> None:
            n[0] += 1
            key = f"mp{n[0]}"
            before = _last_seq(c, room)
            r = c.post(
                f"/v1/rooms/{room}/media", content=body, headers={**headers, "Idempotency-Key": key}
            )
            seen.add(_port(r))
            _check(c, room, r, key, before)
            assert [p for p in tmp.iterdir() if p.is_file()] == []

        one()
        assert seen == {_port(first)}, "a request was answered on a new connection"
