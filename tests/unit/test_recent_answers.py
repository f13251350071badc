"""The memory of committed answers (hub/idempotency.py): bounded, oldest out, never past
the key's TTL."""

from __future__ import annotations

from agentpost.hub.idempotency import Known, RecentAnswers


def _known(body: bytes, created_at: int = 1000) -> Known:
    return Known("fp", 201, body, created_at)


def test_an_expired_answer_is_forgotten_and_never_served() -> None:
    recent = RecentAnswers()
    recent.put(("m", "k"), _known(b"x", created_at=1000))
    assert recent.get(("m", "k"), cutoff=1000) is not None  # created at the cutoff: live
    assert recent.get(("m", "k"), cutoff=1001) is None
    assert len(recent) == 0


def test_the_oldest_go_first_past_the_entry_bound() -> None:
    recent = RecentAnswers(max_entries=3)
    for i in range(5):
        recent.put(("m", f"k{i}"), _known(b"x"))
    assert [recent.get(("m", f"k{i}"), 0) is not None for i in range(5)] == [
        False,
        False,
        True,
        True,
        True,
    ]


def test_bodies_are_bounded_in_bytes_and_a_replaced_answer_counts_once() -> None:
    recent = RecentAnswers(max_bytes=100)
    recent.put(("m", "a"), _known(b"a" * 60))
    recent.put(("m", "a"), _known(b"a" * 60))  # the same slot again: 60 bytes, not 120
    assert recent.get(("m", "a"), 0) is not None
    recent.put(("m", "b"), _known(b"b" * 60))  # 120 > 100: "a" goes
    assert recent.get(("m", "a"), 0) is None
    assert recent.get(("m", "b"), 0) is not None
    recent.put(("m", "huge"), _known(b"h" * 500))  # alone over the bound: nothing kept
    assert len(recent) == 0


def test_prune_forgets_the_expired_answers_oldest_first() -> None:
    recent = RecentAnswers()
    for i in range(5):
        recent.put(("m", f"k{i}"), Known("fp", 201, b"x" * 10, created_at=100 + i))
    assert recent.prune(cutoff=103) == 3  # made at 100, 101, 102: expired
    assert len(recent) == 2
    assert recent.get(("m", "k3"), cutoff=103) is not None
    assert recent.get(("m", "k0"), cutoff=103) is None
    assert recent.prune(cutoff=103) == 0
