"""A hole in the mail log stops every command until `mail repair` (docs/mail.md: fail closed).

Skipping an unreadable line in the middle of the log could drop a sent note from the
outbox, and the next publish would then withdraw it from the remote unseen.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .conftest import Clone


def _corrupt_sent_line(clone: Clone, msg_id: str) -> None:
    log = clone.mail_dir / "log.jsonl"
    lines = log.read_bytes().splitlines()
    hits = [i for i, line in enumerate(lines) if msg_id.encode() in line]
    assert len(hits) == 1
    lines[hits[0]] = lines[hits[0]][:40] + b"\x00garbage"
    log.write_bytes(b"\n".join(lines) + b"\n")


def test_a_corrupt_line_in_the_middle_of_the_log_stops_sync_and_send_until_repaired(
    two_machines: tuple[Clone, Clone],
) -> None:
    a, b = two_machines
    first = a.send("bob", "the note in the damaged line")
    second = a.send("bob", "written after it")
    _corrupt_sent_line(a, first["id"])

    for args in (("sync", "--json"), ("send", "--to", "bob", "--text", "more", "--json")):
        refused = a.mail(*args, check=False)
        assert refused.code == 75
        error = refused.json["error"]
        assert error["code"] == "state_unreadable"
        assert "agentpost mail repair" in error["message"]
    hook = a.mail("hook", "prompt")
    assert hook.code == 0 and "agentpost mail repair" in hook.stderr
    offered = {e["id"] for e in json.loads(a.git("log", "-1", "--format=%B", "refs/agentpost/mail/ma"))["outbox"]}
    assert offered == {first["id"], second["id"]}, "nothing was withdrawn from the remote"

    repaired = a.mail("repair", "--json").json
    assert repaired["lines_set_aside"] == 1
    assert repaired["recovered_sends"] == 1, "the note comes back from this machine's own ref"
    aside = repaired["set_aside_to"]
    assert b"garbage" in Path(aside).read_bytes(), "the damaged line is kept, not deleted"

    assert a.sync()["published"] in (True, False)
    assert sorted(m["id"] for m in a.outbox()) == sorted([first["id"], second["id"]])
    assert b.sync()["imported"] == 2
    assert a.sync()["acked"] == 2
    assert a.mail("repair", "--json").json["lines_set_aside"] == 0
