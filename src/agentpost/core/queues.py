"""Taking a batch off a writer's queue: the group-commit step both writers share.

The hub's store writer (store/batch.py) and connect's ledger writer (connect/ledgerwriter.py)
each run one thread that blocks for a first job, then takes whatever else is already waiting
(up to a cap), so one commit serves them all. `None` on the queue means stop: it ends the
batch, and the writer returns after running what it took.
"""

from __future__ import annotations

import queue
from typing import TypeVar

T = TypeVar("T")


def take_batch(q: queue.SimpleQueue[T | None], max_batch: int) -> tuple[list[T], bool]:
    """Block for one job, then take those already waiting, up to `max_batch` in all.

    Returns the jobs and whether a stop (`None`) was seen; with no job before the stop, the
    list is empty.
    """
    first = q.get()
    if first is None:
        return [], True
    return take_waiting(q, [first], max_batch)


def take_waiting(
    q: queue.SimpleQueue[T | None], batch: list[T], max_batch: int
) -> tuple[list[T], bool]:
    """Add to `batch` the jobs already waiting (no wait), up to `max_batch` in all; also
    whether a stop (`None`) was seen."""
    while len(batch) < max_batch:
        try:
            nxt = q.get_nowait()
        except queue.Empty:
            break
        if nxt is None:
            return batch, True
        batch.append(nxt)
    return batch, False
