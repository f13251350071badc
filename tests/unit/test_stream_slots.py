"""Pure parts of the stream bounds: the per-member slots, chunking, pages cut by size."""

from __future__ import annotations

import pytest

from agentpost.core.errors import AgentpostError, Code
from agentpost.hub.routes.sse import chunks
from agentpost.hub.streams import StreamSlots
from agentpost.store.events import fitting


def test_a_member_past_its_slots_is_refused_and_a_release_frees_one() -> None:
    slots = StreamSlots(per_member=2)
    first, _ = slots.take("m1"), slots.take("m1")
    with pytest.raises(AgentpostError) as refused:
        slots.take("m1")
    assert refused.value.code is Code.TOO_MANY_STREAMS
    assert refused.value.extra == {"limit": 2}
    slots.take("m2")  # another member has its own slots
    first()
    first()  # a second release of the same slot gives nothing back twice
    assert slots.held("m1") == 1
    slots.take("m1")
    assert slots.held("m1") == 2


def test_chunks_keep_order_and_size_and_never_split_a_frame() -> None:
    frames = [b"a" * 10, b"b" * 30, b"c" * 100, b"d" * 5, b"e" * 5]
    out = list(chunks(frames, size=40))
    assert out == [b"a" * 10 + b"b" * 30, b"c" * 100, b"d" * 5 + b"e" * 5]
    assert list(chunks([], size=40)) == []


def test_a_page_holds_what_fits_and_always_one() -> None:
    assert fitting([(10,), (20,), (30,)], 30) == 2
    assert fitting([(10,), (20,), (30,)], 60) == 3
    assert fitting([(100,), (1,)], 30) == 1  # a big first event still goes out alone
    assert fitting([], 30) == 0
