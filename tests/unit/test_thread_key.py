"""The command id of a thread send (docs/threads.md): one key names one message per
(thread, sender, acting_for), and nothing else."""

from __future__ import annotations

import hashlib
import re
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentpost.core.thread_key import InvalidKey, check_key, command_id, length_delimited
from agentpost.hub.idempotency import check_key as hub_check_key

keys = st.text(min_size=1).filter(lambda k: 0 < len(k.encode("utf-8")) <= 255)
fields = st.text()


def reference(key: str, thread: str, sender: str, acting_for: str) -> str:
    """docs/threads.md "Sending once" spelled out once more: u32 big-endian byte length + UTF-8
    bytes, per field."""
    data = b"".join(
        struct.pack(">I", len(f.encode("utf-8"))) + f.encode("utf-8")
        for f in (key, thread, sender, acting_for)
    )
    return "cmd_" + hashlib.sha256(data).hexdigest()


def test_known_vector() -> None:
    data = b"\x00\x00\x00\x06wake-7\x00\x00\x00\x05rm_01\x00\x00\x00\x07budicek\x00\x00\x00\x00"
    expected = "cmd_" + hashlib.sha256(data).hexdigest()
    assert command_id("wake-7", "rm_01", "budicek", "") == expected
    assert command_id("wake-7", "rm_01", "budicek") == expected


@given(keys, fields, fields, fields)
def test_matches_the_reference_and_is_a_valid_hub_key(
    key: str, thread: str, sender: str, acting_for: str
) -> None:
    cid = command_id(key, thread, sender, acting_for)
    assert cid == reference(key, thread, sender, acting_for)
    assert re.fullmatch(r"cmd_[0-9a-f]{64}", cid)
    assert hub_check_key(cid) == cid


@given(st.tuples(keys, fields, fields, fields), st.tuples(keys, fields, fields, fields))
def test_other_fields_name_another_command(
    a: tuple[str, str, str, str], b: tuple[str, str, str, str]
) -> None:
    assert (command_id(*a) == command_id(*b)) == (a == b)


@given(st.lists(fields, max_size=5), st.lists(fields, max_size=5))
def test_length_delimiting_is_unambiguous(a: list[str], b: list[str]) -> None:
    # A plain join would make ("ab", "c") equal ("a", "bc").
    assert (length_delimited(*a) == length_delimited(*b)) == (a == b)


def test_same_key_for_another_thread_sender_or_principal_is_another_command() -> None:
    base = command_id("wake-7", "rm_a", "budicek", "")
    assert command_id("wake-7", "rm_b", "budicek", "") != base
    assert command_id("wake-7", "rm_a", "helper", "") != base
    assert command_id("wake-7", "rm_a", "budicek", "alice") != base
    assert command_id("wake-7", "rm_a", "budicek", "") == base


@pytest.mark.parametrize("bad", ["", "x" * 256, "é" * 128])
def test_empty_or_over_255_bytes_is_refused(bad: str) -> None:
    with pytest.raises(InvalidKey):
        check_key(bad)
    with pytest.raises(InvalidKey):
        command_id(bad, "rm_a", "bot")


def test_255_bytes_and_any_unicode_are_accepted() -> None:
    assert check_key("x" * 255) == "x" * 255
    assert check_key("é" * 127 + "x") == "é" * 127 + "x"
    assert command_id("budíček: úkol doběhl", "rm_a", "bot").startswith("cmd_")
