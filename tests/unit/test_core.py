"""Pure core: ids, tokens, canonical JSON, keys and fingerprints."""

from __future__ import annotations

import json
import re

from hypothesis import given
from hypothesis import strategies as st

from agentpost.core.ids import new_id, new_token, token_hash, ulid
from agentpost.core.jcs import canonical, sha256_hex
from agentpost.hub.idempotency import check_key, fingerprint

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53) + 1, 2**53 - 1) | st.text(),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)


def test_ulid_is_26_crockford_chars_and_time_sortable() -> None:
    a, b = ulid(1_000), ulid(2_000)
    assert re.fullmatch(r"[0-9A-HJKMNP-TV-Z]{26}", a)
    assert a < b
    assert new_id("ev").startswith("ev_")


def test_tokens_are_random_and_hash_is_stable() -> None:
    t1, t2 = new_token(), new_token()
    assert t1 != t2 and len(t1) > 40
    assert token_hash(t1) == token_hash(t1) != token_hash(t2)


@given(json_values)
def test_canonical_form_round_trips_and_ignores_key_order(value: object) -> None:
    assert json.loads(canonical(value)) == value
    if isinstance(value, dict):
        reordered = dict(reversed(list(value.items())))
        assert canonical(reordered) == canonical(value)


@given(
    st.text(
        alphabet=st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1, max_size=255
    )
)
def test_visible_ascii_keys_are_accepted(key: str) -> None:
    assert check_key(key) == key


@given(json_values, json_values)
def test_fingerprint_differs_when_body_differs(a: object, b: object) -> None:
    same = canonical(a) == canonical(b)
    assert (fingerprint("r", "room", a) == fingerprint("r", "room", b)) == same
    assert fingerprint("r", "room", a) != fingerprint("r", "other", a)
    assert sha256_hex(a) == sha256_hex(json.loads(canonical(a)))


json_values_wide = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53) + 1, 2**53 - 1)
    | st.text()
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)


@given(json_values_wide)
def test_fast_canonical_path_equals_the_reference_jcs(value: object) -> None:
    import rfc8785

    assert canonical(value) == rfc8785.dumps(value)


def test_an_integral_float_is_taken_where_an_int_is_wanted_and_nowhere_else() -> None:
    """JSON has one number type: `3.0` is a valid JSON Schema integer (hub/decode.py)."""
    from agentpost.core.errors import RequestError
    from agentpost.hub.decode import decode_json
    from agentpost.hub.schemas import AckIn, MessageIn

    assert decode_json(b'{"cursor": 3.0, "fence": 2.0}', AckIn) == AckIn(cursor=3, fence=2)
    assert decode_json(b'{"text": "x", "metadata": {"a": 1.0}}', MessageIn).metadata == {"a": 1.0}
    for bad in (b'{"cursor": 3.5}', b'{"cursor": "3"}', b'{"cursor": 1e300}', b'{"cursor": -1.0}'):
        try:
            decode_json(bad, AckIn)
        except RequestError as exc:
            assert exc.code == "invalid_request"
        else:
            raise AssertionError(f"{bad!r} was taken")


def test_redact_hides_secrets_and_token_like_strings_and_keeps_ordinary_words() -> None:
    from agentpost.core.secrets import redact

    hidden = {
        "Authorization: Basic YWxpY2U6czNjcjN0": "YWxpY2U6",
        "postgresql://app:Hunter2x@db/x": "Hunter2x",
        "{'password': 'hunter22', 'api_key': 'abc123xyz'}": "hunter22",
        "--password hunter22 --token abcdefg1": "abcdefg1",
        "x-api-key sk-ant-api03-FAKEKEY0123456789012345678901234567": "FAKEKEY",
        "ANTHROPIC_API_KEY=abc12345": "abc12345",
        "AGENTPOST_TOKEN ap_" + "x" * 40: "xxxxxxxx",
        "Bearer abcdefghijkl": "abcdefgh",
    }
    for text, secret in hidden.items():
        assert secret not in redact(text), text
    for ordinary in ("token limit exceeded", "session 3f2a9c1e started", "at /usr/lib/x.py:3"):
        assert redact(ordinary) == ordinary


def test_redact_keeps_file_paths_and_hides_a_key_inside_one() -> None:
    from agentpost.core.secrets import redact

    for path in (
        "can't open file '/tmp/pytest-of-root/pytest-12/test_x0/work/examples/echo_agent.py'",
        "python3: can't open file 'examples/subfolder/another/echo_agent.py'",
        "cwd ../some/long/relative/path/of/folders/here/and/more",
    ):
        assert redact(path) == path
    key = "Zm9vYmFyYmF6cXV4cXV1eHF1dXhxdXV4cXV1eHF1"
    assert key not in redact(f"/home/me/{key}.txt")
    assert key not in redact(f"secret {key}/{key}")


def test_durations_are_said_in_the_largest_unit_that_divides_them() -> None:
    from agentpost.core.durations import in_words

    assert in_words(365 * 86400) == "365 days"
    assert in_words(86400) == "1 day"
    assert in_words(12 * 3600) == "12 hours"
    assert in_words(90 * 60) == "90 minutes"
    assert in_words(45) == "45 seconds"
    assert in_words(0) == "for ever"
