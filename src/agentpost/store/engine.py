"""The engine interface every store domain talks through (docs/deploy.md).

Domain modules (`members`, `rooms`, `events`, `keys`, `inbox`, `media`) are plain
functions over a `Db`; an engine decides how those functions run: reads directly,
writes inside one group-committed transaction per batch. SQL lives only in `store/`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

T = TypeVar("T")
Row = tuple[Any, ...]
Params = Sequence[object]

# A runner's answer per item: (result, wake-up keys), or None to run the item's own job.
Runner = Callable[[Any, list[Any]], list[tuple[Any, list[str]] | None]]


@dataclass(frozen=True, slots=True)
class AsData:
    """A job's write as data for `runner`, which writes many such items at once (the group
    commit writer, store/batch.py, runs consecutive ones of a batch together)."""

    runner: Runner
    item: Any

log = logging.getLogger("agentpost.store")


class Db(Protocol):
    """A connection as the domain modules see it. SQL uses `?` placeholders."""

    dialect: str

    def one(self, sql: str, params: Params = ()) -> Row | None: ...

    def all(self, sql: str, params: Params = ()) -> list[Row]: ...

    def run(self, sql: str, params: Params = ()) -> int: ...

    def pipeline(self) -> AbstractContextManager[None]:
        """Statements inside do not depend on each other's results: PostgreSQL sends them
        in one round trip (pipeline mode), errors raising at the block's end; SQLite runs
        them one by one as always. `run` may not be relied on for a row count inside."""
        ...


class Tx(Db, Protocol):
    """A write transaction: a `Db` plus wake-ups published when (and only if) it commits."""

    def notify(self, key: str) -> None:
        """Wake whoever waits on `key` (a room's stream, a member's inbox) in every hub
        process, once this transaction has committed."""
        ...

    def defer(self, key: tuple[str, ...], step: Callable[[Db], None]) -> None:
        """Run `step` at the end of the batch, after every job, sorted by `key` with the other jobs'
        steps: for locks that must be taken in one global order (docs/architecture.md#store)."""
        ...


class UndoJob(Exception):
    """Raised by a write job: undo everything it wrote, then run `then` in its place, in the same
    transaction. For a refusal that is itself recorded (a rejected key,
    docs/architecture.md#one-key-one-event): the refused job's other writes, the room's `seq` above
    all, never commit with the record, so seqs stay gap-free (docs/architecture.md#data-model)
    whichever check refused. `then` may not raise `UndoJob` again."""

    def __init__(self, then: Callable[[Tx], Any]) -> None:
        super().__init__("undo the job's writes, then record its refusal")
        self.then = then


class Engine(Protocol):
    """What the hub needs from a store engine."""

    dialect: str
    shared: bool  # True when other processes may write the same database

    async def read(self, fn: Callable[[Db], T]) -> T: ...

    async def read_stream(self, fn: Callable[[Db], T]) -> T:
        """A read for a stream's page: where the engine has a pool, on connections of its
        own, so a room's readers never make a request wait for a connection."""
        ...

    async def write(
        self, fn: Callable[[Tx], T], order: str = "", as_data: AsData | None = None
    ) -> T:
        """Run `fn` in a write transaction; `order` is the room it locks (lock ordering).
        With `as_data`, the writer may write it with like items at once (store/batch.py);
        the answer is then what `fn` would have answered."""
        ...

    def written_as_data(self) -> int:
        """How many write jobs the writers wrote as data with others (store/batch.py)."""
        ...

    def on_notify(self, callback: Callable[[str], None]) -> None:
        """Set the function that receives committed wake-up keys on the event loop."""
        ...

    async def close(self) -> None: ...


class CrashPoints:
    """Named crash points for tests: `AGENTPOST_CRASH_POINT=before_commit|after_commit[:N]`.

    The process `os._exit`s the N-th time (default 1st) it reaches the named point, so a
    test can kill the hub exactly before or after a commit (issue: kill -9 at any moment).
    """

    def __init__(self, spec: str | None = None) -> None:
        spec = os.environ.get("AGENTPOST_CRASH_POINT", "") if spec is None else spec
        self.name, _, count = spec.partition(":")
        self.remaining = int(count) if count else 1

    def reach(self, name: str) -> None:
        if self.name != name:
            return
        self.remaining -= 1
        if self.remaining <= 0:
            log.critical("crash point %s reached: exiting now", name)
            os._exit(137)
