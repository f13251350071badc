"""kill -9 of the Worker at each step of a delivery (docs/deliver.md, bench/README.md): before
and after the first-seen write, after each part, with every part recorded and the result refused. On restart the delivery finishes under its stored key
and a resend is answered from the ledger: every part is in the room exactly once."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from conftest import AGENTS, Connected, agent_cmd, wait_for
from hubproc import HubProcess


# One hub per engine for this module: its tests never stop the hub or set its flags, and
# each gets a workspace of its own (`connected`).
@pytest.fixture
def hub(shared_hub: HubProcess) -> HubProcess:
    return shared_hub


TRICK = AGENTS / "trick_agent.py"


@pytest.mark.parametrize(
    "point", ["before_first_seen", "after_first_seen", "after_part_1", "after_part_0"]
)
def test_kill_9_during_a_delivery_then_resend_posts_each_part_once(
    connected: Connected, point: str
) -> None:
    w = connected.worker(agent_cmd(TRICK), env={"AGENTPOST_CONNECT_CRASH_POINT": point})
    e = connected.say("alice", "@bot binding")
    b = json.loads(connected.wait_reply(e["id"])["text"])
    Path(b["export_dir"], "f.txt").write_text("F")
    parts = [{"type": "text", "text": "crash text"}, {"type": "file", "path": "$EXPORT/f.txt"}]
    request = json.dumps({"binding": "$BINDING", "id": "k1", "parts": parts})
    connected.say("alice", "@bot deliver " + request)
    assert w.proc is not None
    assert w.proc.wait(60) == -9  # killed at the crash point, mid-delivery
    del w.env["AGENTPOST_CONNECT_CRASH_POINT"]
    w.start()
    if point != "before_first_seen":  # else nothing was recorded, so nothing resumes
        wait_for(lambda: "delivery k1 resumed at start: delivered" in w.log())
    again = connected.say("alice", "@bot deliver " + request)
    result = json.loads(connected.wait_reply(again["id"])["text"])
    assert result["status"] == "delivered" and result["delivered"] == [1, 0]
    evs = connected.events()
    assert len([x for x in evs if x["text"] == "crash text"]) == 1
    assert len([x for x in evs if x["type"] == "media"]) == 1
    assert sorted(result["event_ids"]) == sorted(
        x["id"] for x in evs if x["text"] == "crash text" or x["type"] == "media"
    )


def test_worker_id_deleted_after_a_kill_in_progress_entries_still_finish(
    connected: Connected,
) -> None:
    """docs/architecture.md#ledger: with a ledger and no worker-id, delivery is not enabled, yet
    the entry left in progress finishes under its stored worker id and key."""
    w = connected.worker(agent_cmd(TRICK), env={"AGENTPOST_CONNECT_CRASH_POINT": "after_part_1"})
    e = connected.say("alice", "@bot binding")
    b = json.loads(connected.wait_reply(e["id"])["text"])
    Path(b["export_dir"], "f.txt").write_text("F")
    parts = [{"type": "text", "text": "orphan text"}, {"type": "file", "path": "$EXPORT/f.txt"}]
    connected.say(
        "alice", "@bot deliver " + json.dumps({"binding": "$BINDING", "id": "o1", "parts": parts})
    )
    assert w.proc is not None
    assert w.proc.wait(60) == -9  # the file is posted, the text is not
    ws = connected.tmp / "ws-bot"
    (ws / "worker-id").unlink()
    del w.env["AGENTPOST_CONNECT_CRASH_POINT"]
    w.start()
    assert "not enabled: worker-id is missing; a new one is never minted" in w.log()
    wait_for(lambda: "delivery o1 resumed at start: delivered" in w.log())
    evs = connected.events()
    assert len([x for x in evs if x["text"] == "orphan text"]) == 1
    assert len([x for x in evs if x["type"] == "media"]) == 1
    assert not (ws / "worker-id").exists()


def test_kill_9_with_every_part_recorded_and_no_result_then_a_restart_past_23_hours(
    connected: Connected,
) -> None:
    """Every part posted and recorded, the result refused by the ledger (a trigger in the
    real ledger): the answer is `retry`, never `delivered` before the result is on disk.
    Killed, then restarted with the entry 24 h old: its parts are all recorded, so it
    finishes as `delivered` with their event ids (not `expired`: the ledger knows), and a
    resend gets that answer with nothing posted twice and no notice."""
    w = connected.worker(agent_cmd(TRICK))
    e = connected.say("alice", "@bot binding")
    b = json.loads(connected.wait_reply(e["id"])["text"])
    Path(b["export_dir"], "g.txt").write_text("G")
    parts = [{"type": "text", "text": "recorded text"}, {"type": "file", "path": "$EXPORT/g.txt"}]
    request = json.dumps({"binding": "$BINDING", "id": "k2", "parts": parts})
    ledger = connected.tmp / "ws-bot" / "deliveries.sqlite3"
    with closing(sqlite3.connect(ledger)) as db, db:
        db.execute(
            "CREATE TRIGGER no_result BEFORE UPDATE OF state ON deliveries"
            " WHEN NEW.id = 'k2' BEGIN SELECT RAISE(ABORT, 'the disk says no'); END"
        )
    first = connected.say("alice", "@bot deliver " + request)
    answer = json.loads(connected.wait_reply(first["id"])["text"])
    assert (answer["status"], answer["reason"]) == ("retry", "the delivery ledger cannot be written")

    def row() -> tuple[str, str, str | None]:
        with closing(sqlite3.connect(ledger)) as db:
            got = db.execute("SELECT state, posted, result FROM deliveries WHERE id = 'k2'")
            return got.fetchone()  # type: ignore[no-any-return]

    state, posted, result = row()
    assert state == "in_progress" and result is None and set(json.loads(posted)) == {"0", "1"}
    w.kill()
    with closing(sqlite3.connect(ledger)) as db, db:
        db.execute("DROP TRIGGER no_result")
        db.execute("UPDATE deliveries SET first_seen = first_seen - 86400 WHERE id = 'k2'")
    w.start()
    wait_for(lambda: "delivery k2 resumed at start: delivered" in w.log())
    done = json.loads(row()[2] or "null")
    assert done["status"] == "delivered" and done["delivered"] == [1, 0], done
    again = connected.say("alice", "@bot deliver " + request)
    assert json.loads(connected.wait_reply(again["id"])["text"]) == done
    evs = connected.events()
    assert len([x for x in evs if x["text"] == "recorded text"]) == 1
    assert len([x for x in evs if x["type"] == "media"]) == 1
    assert not [x for x in evs if "Part of a delivery" in (x["text"] or "")]
    assert done["event_ids"] == [
        next(x["id"] for x in evs if x["type"] == "media"),
        next(x["id"] for x in evs if x["text"] == "recorded text"),
    ]
