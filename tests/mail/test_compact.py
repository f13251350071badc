"""`mail compact`: the log shrinks to what outbox, acks, dedup and pins still need."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .conftest import Clone


def _lines(clone: Clone) -> int:
    return len((clone.mail_dir / "log.jsonl").read_bytes().splitlines())


def test_compact_drops_settled_history_and_keeps_outbox_acks_and_dedup(
    two_machines: tuple[Clone, Clone],
) -> None:
    a, b = two_machines
    for i in range(5):
        a.send("bob", f"settled {i}")
    b.sync()
    a.sync()  # all five acked
    b.sync()  # bob retires his acks
    open_id = a.send("bob", "still open")["id"]

    result = a.mail("compact", "--json").json
    assert result["lines_after"] == _lines(a) < result["lines_before"]
    assert [m["id"] for m in a.outbox()] == [open_id]

    b_result = b.mail("compact", "--json").json
    assert b_result["lines_after"] <= b_result["lines_before"]
    report = b.sync()
    assert report["imported"] == 1, "only the open note; the settled five stay deduplicated"
    kinds = [json.loads(line)["t"] for line in (b.mail_dir / "log.jsonl").read_bytes().splitlines()]
    assert kinds.count("imported") == 6, "dedup keeps every id until its envelope expires"
    assert a.sync()["acked"] == 1
    assert a.outbox() == []


def test_sync_compacts_a_log_bloated_with_settled_lines(two_machines: tuple[Clone, Clone]) -> None:
    a, b = two_machines
    a.send("bob", "kept")
    b.sync()
    settled = "".join(
        json.dumps({"t": "acked", "id": f"ml_OLD{i:05d}", "by": "mx", "at": "t"}) + "\n"
        for i in range(2100)
    )
    with open(b.mail_dir / "log.jsonl", "a") as log:
        log.write(settled)
    assert _lines(b) > 2100
    b.sync()
    assert _lines(b) < 10
    assert b.sync()["imported"] == 0, "dedup survived the compaction"
    assert [m["body"] for m in b.inbox("--all")] == ["kept"]
