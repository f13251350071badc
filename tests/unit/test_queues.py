"""take_batch: the group-commit step of the store writer and the ledger writer."""

from __future__ import annotations

import queue

from agentpost.core.queues import take_batch


def test_takes_what_is_waiting_up_to_the_cap() -> None:
    q: queue.SimpleQueue[int | None] = queue.SimpleQueue()
    for i in range(5):
        q.put(i)
    assert take_batch(q, 3) == ([0, 1, 2], False)
    assert take_batch(q, 3) == ([3, 4], False)


def test_a_stop_ends_the_batch_and_is_reported() -> None:
    q: queue.SimpleQueue[int | None] = queue.SimpleQueue()
    for item in (1, 2, None, 3):
        q.put(item)
    assert take_batch(q, 10) == ([1, 2], True)
    assert q.get_nowait() == 3  # nothing after the stop was taken


def test_a_stop_first_is_an_empty_batch() -> None:
    q: queue.SimpleQueue[int | None] = queue.SimpleQueue()
    q.put(None)
    assert take_batch(q, 10) == ([], True)
