"""`_ag2/deliver` through a real Worker, a real hub and a real ACP agent (docs/deliver.md):
one test per rule and failure case that is built; the agent sends the request and says
the result back in the room as JSON."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path

import pytest

from agentpost.connect.ledger import CAP, KEEP_SECONDS
from conftest import AGENTS, Connected, agent_cmd, wait_for
from hubproc import HubProcess, poll


# One hub per engine for this module: its tests never stop the hub or set its flags, and
# each gets a workspace of its own (`connected`).
@pytest.fixture
def hub(shared_hub: HubProcess) -> HubProcess:
    return shared_hub


TRICK = AGENTS / "trick_agent.py"


def _deliver(c: Connected, request: dict, who: str = "alice") -> dict:  # type: ignore[type-arg]
    e = c.say(who, "@bot deliver " + json.dumps(request))
    text = c.wait_reply(e["id"])["text"]
    assert text.startswith("{"), text
    return json.loads(text)  # type: ignore[no-any-return]


def _parts(export: str, name: str = "a.txt") -> list[dict]:  # type: ignore[type-arg]
    return [{"type": "text", "text": "the text"}, {"type": "file", "path": f"{export}/{name}"}]


def _binding(c: Connected) -> dict:  # type: ignore[type-arg]
    e = c.say("alice", "@bot binding")
    return json.loads(c.wait_reply(e["id"])["text"])  # type: ignore[no-any-return]


def test_example_agent_delivers_a_file_and_a_text_once_after_three_sends(c_echo: Connected) -> None:
    w = c_echo.workers[0]
    e = c_echo.say("alice", "@bot later out.txt")
    assert c_echo.wait_reply(e["id"])["text"] == "out.txt will follow"
    wait_for(lambda: w.log().count("delivery later-out.txt") == 3)
    evs = c_echo.events()
    media = [x for x in evs if x["type"] == "media"]
    texts = [x for x in evs if x["text"] == "out.txt is ready"]
    assert [m["attachments"][0]["name"] for m in media] == ["out.txt"]
    assert len(texts) == 1
    assert evs.index(media[0]) < evs.index(texts[0])  # files first, then text
    assert "delivery (_ag2/deliver): enabled" in w.log()


def test_example_agent_delivers_each_later_asked_not_only_the_first(c_echo: Connected) -> None:
    # A delivery id names one piece of work for the Worker's whole ledger: the example agent
    # makes one per `later`, so the same NAME asked again is delivered again (it was once).
    w = c_echo.workers[0]
    for _ in range(2):
        e = c_echo.say("alice", "@bot later twice.txt")
        assert c_echo.wait_reply(e["id"])["text"] == "twice.txt will follow"
    wait_for(lambda: w.log().count("delivery later-twice.txt-") == 6)
    texts = [x for x in c_echo.events() if x["text"] == "twice.txt is ready"]
    assert len(texts) == 2


def test_delivered_covers_every_part_files_first_with_expires_at(c_trick: Connected) -> None:
    b = _binding(c_trick)
    Path(b["export_dir"], "a.txt").write_text("A")
    r = _deliver(c_trick, {"binding": "$BINDING", "id": "d1", "parts": _parts("$EXPORT")})
    assert r["status"] == "delivered"
    assert r["delivered"] == [1, 0]
    assert len(r["event_ids"]) == 2 and r["expires_at"].endswith("Z")
    again = _deliver(c_trick, {"binding": "$BINDING", "id": "d1", "parts": _parts("$EXPORT")})
    assert again == r  # a resend is answered from the ledger
    assert len([x for x in c_trick.events() if x["text"] == "the text"]) == 1


def test_same_id_under_another_binding_is_conflict_naming_the_recorded_one(
    c_trick: Connected,
) -> None:
    b = _binding(c_trick)
    Path(b["export_dir"], "a.txt").write_text("A")
    _deliver(c_trick, {"binding": "$BINDING", "id": "d2", "parts": _parts("$EXPORT")})
    other = b["binding"].split(".")[0] + ".0000000000000000"
    r = _deliver(c_trick, {"binding": other, "id": "d2", "parts": _parts("$EXPORT")})
    assert (r["status"], r["reason"], r["data"]) == ("final", "conflict", {"binding": b["binding"]})


def test_a_known_id_with_other_parts_is_conflict_and_posts_nothing(c_trick: Connected) -> None:
    green = [{"type": "text", "text": "build 41 is green"}]
    red = [{"type": "text", "text": "build 42 is RED"}]
    first = _deliver(c_trick, {"binding": "$BINDING", "id": "builds", "parts": green})
    assert first["status"] == "delivered"
    r = _deliver(c_trick, {"binding": "$BINDING", "id": "builds", "parts": red})
    assert (r["status"], r["reason"]) == ("final", "conflict")
    assert r["data"]["why"] == "this delivery id was used for other parts"
    texts = [x["text"] for x in c_trick.events()]
    assert "build 42 is RED" not in texts and texts.count("build 41 is green") == 1


def test_an_oversize_text_part_is_rejected_never_cut(c_trick: Connected) -> None:
    parts = [{"type": "text", "text": "$BIG"}]
    r = _deliver(c_trick, {"binding": "$BINDING", "id": "big", "parts": parts})
    assert (r["status"], r["reason"]) == ("final", "rejected")
    assert r["data"]["part"] == 0 and "70,000 characters" in r["data"]["why"]
    assert not [x for x in c_trick.events() if x["text"].startswith("xxxxxxxxxx")]


def test_another_workers_binding_is_not_mine(c_trick: Connected) -> None:
    r = _deliver(c_trick, {"binding": "f" * 32 + ".abc", "id": "d3", "parts": _parts("/x")})
    assert (r["status"], r["reason"]) == ("final", "not_mine")


def test_this_workers_unknown_binding_is_rejected(c_trick: Connected) -> None:
    wid = (c_trick.tmp / "ws-bot" / "worker-id").read_text().strip()
    r = _deliver(c_trick, {"binding": f"{wid}.nope", "id": "d4", "parts": _parts("/x")})
    assert (r["status"], r["reason"]) == ("final", "rejected")
    assert r["expires_at"] is not None


def test_file_tricks_in_the_export_folder_are_rejected(c_trick: Connected) -> None:
    b = _binding(c_trick)
    export = Path(b["export_dir"])
    secret = c_trick.tmp / "secret.txt"
    secret.write_text("s")
    (export / "link.txt").symlink_to(secret)
    os.link(secret, export / "hard.txt")
    os.mkfifo(export / "pipe")
    other = export.parent / "someone-else"
    other.mkdir()
    (other / "x.txt").write_text("x")
    paths = [
        f"{export}/link.txt",
        f"{export}/hard.txt",
        f"{export}/pipe",
        f"{export}/../someone-else/x.txt",
        f"{other}/x.txt",
        str(secret),
    ]
    for i, path in enumerate(paths):
        r = _deliver(
            c_trick, {"binding": "$BINDING", "id": f"t{i}", "parts": [{"type": "file", "path": path}]}
        )
        assert (r["status"], r["reason"]) == ("final", "rejected"), (path, r)
    assert not [x for x in c_trick.events() if x["type"] == "media"]


def test_a_final_after_a_posted_part_posts_one_notice(c_trick: Connected) -> None:
    b = _binding(c_trick)
    Path(b["export_dir"], "ok.txt").write_text("ok")
    parts = [
        {"type": "file", "path": f"{b['export_dir']}/ok.txt"},
        {"type": "file", "path": f"{b['export_dir']}/missing.txt"},
    ]
    r = _deliver(c_trick, {"binding": "$BINDING", "id": "p1", "parts": parts})
    assert (r["status"], r["reason"], r["data"]["part"]) == ("final", "rejected", 1)
    _deliver(c_trick, {"binding": "$BINDING", "id": "p1", "parts": parts})
    notices = [x for x in c_trick.events() if x["text"].startswith("Part of a delivery")]
    assert len(notices) == 1 and "could not be sent" in notices[0]["text"]


def test_a_malformed_request_is_invalid_params_and_records_nothing(c_trick: Connected) -> None:
    e = c_trick.say("alice", '@bot deliver {"binding": "$BINDING", "id": "", "parts": []}')
    assert c_trick.wait_reply(e["id"])["text"] == "deliver error -32602"


def test_an_accepted_delivery_runs_to_completion_when_the_agent_goes_away(
    c_trick: Connected,
) -> None:
    """docs/architecture.md#deferred-delivery: the agent writes its request and exits at once; the
    Worker still posts every part once and records `delivered`, which a resend (from the
    restarted agent) is answered with."""
    b = _binding(c_trick)
    Path(b["export_dir"], "gone.txt").write_text("G")
    parts = [{"type": "text", "text": "sent by a gone agent"},
             {"type": "file", "path": f"{b['export_dir']}/gone.txt"}]
    request = {"binding": "$BINDING", "id": "gone1", "parts": parts}
    w = c_trick.workers[0]
    started = w.log().count("agent started")
    asked = c_trick.say("alice", "@bot deliver-and-exit " + json.dumps(request))
    lost = poll(  # its Turn was lost with the agent: said in the room
        lambda: [r for r in c_trick.replies_to(asked["id"]) if "stopped mid-Turn" in r["text"]],
        timeout=60,
    )
    assert len(lost) == 1
    wait_for(lambda: "delivery gone1 under" in w.log())
    assert "delivery gone1 under " + b["binding"] + ": delivered" in w.log()
    wait_for(lambda: w.log().count("agent started") > started)  # before the next Turn
    assert "was not sent" in w.log()  # the answer found the agent gone
    again = _deliver(c_trick, request)  # from the agent the Worker started again
    assert again["status"] == "delivered" and again["delivered"] == [1, 0]
    evs = c_trick.events()
    assert set(again["event_ids"]) <= {x["id"] for x in evs}
    assert len([x for x in evs if x["text"] == "sent by a gone agent"]) == 1
    assert [m["attachments"][0]["name"] for m in evs if m["type"] == "media"] == ["gone.txt"]


def test_extension_requests_without_params_or_with_a_list_are_judged_by_method(
    c_trick: Connected,
) -> None:
    """An unknown `_…` method is -32601 even without params; `_ag2/deliver` with params
    that are not an object is -32602 (JSON-RPC frames the SDK never sends, written raw)."""
    e = c_trick.say("alice", "@bot rawext")
    assert c_trick.wait_reply(e["id"])["text"] == "rawext -32601 -32602"


def test_unreadable_ledger_answers_retry_with_null_expires_at(connected: Connected) -> None:
    ws = connected.tmp / "ws-bot"
    ws.mkdir()
    (ws / "worker-id").write_text("a" * 32 + "\n")
    (ws / "deliveries.sqlite3").write_bytes(b"this is not a database at all" * 100)
    w = connected.worker(agent_cmd(TRICK))
    assert "not enabled: the ledger cannot be read" in w.log()
    r = _deliver(connected, {"binding": "a" * 32 + ".x", "id": "u1", "parts": _parts("/x")})
    assert (r["status"], r["expires_at"]) == ("retry", None)


def test_worker_id_deleted_with_a_ledger_present_is_not_enabled(c_trick: Connected) -> None:
    b = _binding(c_trick)
    Path(b["export_dir"], "a.txt").write_text("A")
    _deliver(c_trick, {"binding": "$BINDING", "id": "w1", "parts": _parts("$EXPORT")})
    w = c_trick.workers[0]
    w.stop()
    ws = c_trick.tmp / "ws-bot"
    old = (ws / "worker-id").read_text()
    (ws / "worker-id").unlink()
    w.start()
    assert "not enabled: worker-id is missing; a new one is never minted" in w.log()
    assert not (ws / "worker-id").exists()
    e = c_trick.say("alice", "@bot still answering")
    assert c_trick.wait_reply(e["id"])["text"] == "trick: @bot still answering"
    assert old


def test_an_egress_root_containing_the_workspace_keeps_delivery_and_sends_none_of_it(
    connected: Connected,
) -> None:
    """The workspace (with its export folders) is never Turn egress, whatever the layout,
    so delivery stays enabled with an egress root around it (docs/connect.md)."""
    w = connected.worker(agent_cmd(TRICK), "--egress-root", str(connected.tmp))
    assert "delivery (_ag2/deliver): enabled" in w.log()
    b = _binding(connected)
    Path(b["export_dir"], "ready.txt").write_text("for a delivery, not a Turn")
    e = connected.say("alice", f"@bot link {Path(b['export_dir'], 'ready.txt').as_uri()}")
    connected.wait_reply(e["id"])
    assert [x for x in connected.events() if x["type"] == "media"] == []
    assert any("the Worker's private folder" in x["text"] for x in connected.events())
    r = _deliver(connected, {"binding": "$BINDING", "id": "e1", "parts": [
        {"type": "file", "path": "ready.txt"}]})  # relative: in the binding's export folder
    assert r["status"] == "delivered", r


def test_connect_status_shows_delivery_bindings_and_outcomes(c_trick: Connected) -> None:
    b = _binding(c_trick)
    Path(b["export_dir"], "a.txt").write_text("A")
    _deliver(c_trick, {"binding": "$BINDING", "id": "s1", "parts": _parts("$EXPORT")})
    ws = c_trick.tmp / "ws-bot"

    def status() -> dict:  # type: ignore[type-arg]
        out = subprocess.run(
            [sys.executable, "-m", "agentpost", "connect", "status", "--workspace-dir", str(ws), "--json"],
            capture_output=True, text=True, timeout=60, check=True,
        ).stdout
        return json.loads(out)  # type: ignore[no-any-return]

    # The status file is rewritten every 2 s: wait for one written after the delivery ended.
    d = wait_for(lambda: (s := status())["delivery"].get("by_outcome", {}).get("delivered") and s)[
        "delivery"
    ]
    assert d["enabled"] is True
    assert [x["binding"] for x in d["bindings"]] == [b["binding"]]
    assert [(x["id"], x["outcome"]) for x in d["deliveries"]] == [("s1", "delivered")]
    assert d["by_outcome"] == {"delivered": 1}
    assert (ws / "export").stat().st_mode & 0o777 == 0o700
    assert Path(b["export_dir"]).stat().st_mode & 0o777 == 0o700


def test_a_live_worker_applies_the_ledger_retention_again_while_it_runs(
    connected: Connected,
) -> None:
    """docs/architecture.md#ledger: retention runs at start and then every hour (here every
    second, by AGENTPOST_CONNECT_PRUNE_EVERY). Entries written before the start that turn
    30 days old only after it are dropped by a later prune of the running Worker; an entry
    in progress (written while it runs: one left at start is resumed and finished) and a
    delivery finished just now stay; the cap drops the oldest finished entries first."""
    w = connected.worker(agent_cmd(TRICK), env={"AGENTPOST_CONNECT_PRUNE_EVERY": "1"})
    young = _deliver(
        connected, {"binding": "$BINDING", "id": "young", "parts": [{"type": "text", "text": "y"}]}
    )
    assert young["status"] == "delivered"
    w.stop()
    ws = connected.tmp / "ws-bot"
    wid = (ws / "worker-id").read_text().strip()
    ledger = ws / "deliveries.sqlite3"

    def row(i: str, state: str, first_seen: float) -> tuple:  # type: ignore[type-arg]
        finished = state == "finished"
        result = json.dumps({"status": "delivered"}) if finished else None
        return (
            i, f"{wid}.old", "rm_x", wid, "[]", "{}", state, result,
            first_seen, first_seen + 60 if finished else None,
        )

    def ids() -> set[str]:
        with closing(sqlite3.connect(ledger)) as db:
            return {r[0] for r in db.execute("SELECT id FROM deliveries")}

    def write(rows: list[tuple]) -> None:  # type: ignore[type-arg]
        with closing(sqlite3.connect(ledger)) as db, db:
            db.executemany("INSERT INTO deliveries VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)

    margin = 20.0  # they turn 30 days old this long after being written, once the Worker runs
    aging = {f"aging{i}" for i in range(5)}
    turns_old = time.time() - KEEP_SECONDS + margin  # one instant: one prune drops them all
    write([row(i, "finished", turns_old) for i in sorted(aging)])
    w.start()
    assert aging <= ids(), "the start's prune ran after they turned 30 days old: no proof"
    write([row("inprogress", "in_progress", time.time() - 31 * 86400)])
    pruned = w.log().count("ledger retention:")
    wait_for(lambda: not aging & ids(), timeout=margin + 30)
    # The log line follows the commit the rows vanished by: wait for it, too.
    wait_for(lambda: w.log().count("ledger retention: 5 finished entries dropped") == 1)
    assert {"young", "inprogress"} <= ids()
    now = time.time()
    write([row(f"a{i}", "finished", now - 2 * 86400 - i) for i in range(CAP + 50)])
    wait_for(lambda: len(ids()) == CAP, timeout=30)
    kept = ids()
    assert {"young", "inprogress"} <= kept
    assert {f"a{i}" for i in range(CAP + 50 - 52, CAP + 50)}.isdisjoint(kept)  # oldest went
    assert {f"a{i}" for i in range(CAP + 50 - 52)} <= kept
    wait_for(lambda: w.log().count("ledger retention: 52 finished entries dropped") == 1)
    assert w.log().count("ledger retention:") == pruned + 2
