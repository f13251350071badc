"""Derived keys of the MCP posting tools (agentpost/mcp/keys.py, docs/mcp.md)."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from agentpost.mcp.keys import DERIVED, GIVEN, derived_key, key_for

HUB_KEY = re.compile(r"^[\x21-\x7e]{1,255}$")  # what the hub accepts (docs/api.md "Idempotency")
texts = st.text(max_size=200)
args = st.dictionaries(st.sampled_from(["room", "text", "event_id", "reply_kind"]), texts)


@given(st.text(min_size=1, max_size=40), st.sampled_from(["post_message", "reply"]), args)
def test_a_derived_key_is_a_valid_hub_key_and_the_same_for_the_same_call(
    session: str, tool: str, arguments: dict[str, str]
) -> None:
    key = derived_key(session, tool, arguments)
    assert HUB_KEY.match(key) and key.startswith("mcp_")
    assert derived_key(session, tool, dict(reversed(list(arguments.items())))) == key


@given(texts, texts)
def test_other_arguments_another_session_or_another_tool_is_another_key(a: str, b: str) -> None:
    one = derived_key("s1", "post_message", {"room": "rm_1", "text": a})
    if a != b:
        assert derived_key("s1", "post_message", {"room": "rm_1", "text": b}) != one
    assert derived_key("s2", "post_message", {"room": "rm_1", "text": a}) != one
    assert derived_key("s1", "reply", {"room": "rm_1", "text": a}) != one


def test_a_given_key_is_used_as_given() -> None:
    assert key_for("s", "post_message", "build-42", {"text": "x"}) == ("build-42", GIVEN)
    key, source = key_for("s", "post_message", None, {"text": "x"})
    assert source == DERIVED and key == derived_key("s", "post_message", {"text": "x"})
