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


def test_a_page_says_whether_more_may_follow_it(tmp_path) -> None:  # noqa: ANN001
    """Full at its row limit or cut by its byte budget; not full when it ran out of rows,
    so a stream waits only when the store has nothing more for it."""
    import sqlite3

    from agentpost.store import events
    from agentpost.store.sqlite import SQLiteDb

    conn = sqlite3.connect(tmp_path / "t.sqlite3")
    conn.execute("CREATE TABLE events (room_id TEXT, seq INTEGER, id TEXT, body BLOB)")
    for seq, size in enumerate([10, 10, 50, 10], start=1):
        conn.execute("INSERT INTO events VALUES ('r', ?, ?, ?)", (seq, f"e{seq}", b"x" * size))
    db = SQLiteDb(conn)
    by_limit = events.page(db, "r", 0, 2, max_bytes=1000)
    assert ([s for s, _ in by_limit], by_limit.full) == ([1, 2], True)
    by_size = events.page(db, "r", 0, 10, max_bytes=30)
    assert ([s for s, _ in by_size], by_size.full) == ([1, 2], True)
    big_alone = events.page(db, "r", 2, 10, max_bytes=30)
    assert ([s for s, _ in big_alone], big_alone.full) == ([3], True)
    rest = events.page(db, "r", 3, 10, max_bytes=30)
    assert ([s for s, _ in rest], rest.full) == ([4], False)
    assert (events.page(db, "r", 4, 10, max_bytes=30), events.page(db, "r", 4, 10).full) == (
        [],
        False,
    )
    conn.close()
