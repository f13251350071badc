"""Envelope-id reuse: dedup, inbox and acks are keyed by (sender machine, id) (docs/mail.md).

Any machine on the remote can copy another's envelope id into its own, validly signed
note. Neither note may suppress the other, and only the recipient's ack of *this*
machine's note may drop it from this machine's outbox.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .conftest import Clone, Network


def _note_with_id(clone: Clone, msg_id: str, to: Clone, to_name: str, body: str) -> None:
    """`clone` signs its own note to `to_name` carrying `msg_id`, then publishes it."""
    script = (
        "import sys\n"
        "from agentpost.mail.context import MailContext\n"
        "from agentpost.mail import clock\n"
        "from agentpost.mail.envelope import Address, new_envelope, sign\n"
        "from agentpost.mail.log import Sent\n"
        "ctx = MailContext.discover()\n"
        "me = ctx.acting_instance(ctx.load_state())\n"
        "to = Address(sys.argv[2], sys.argv[3], sys.argv[4])\n"
        "raw = new_envelope(Address(ctx.machine, me.name, me.instance_id), to, sys.argv[5], clock.now())\n"
        "raw['id'] = sys.argv[1]\n"
        "ctx.log.append([Sent(sign(raw, ctx.key()))])\n"
    )
    env = dict(clone.env, AGENTPOST_MACHINE=clone.machine)
    env["AGENTPOST_INSTANCE_ID"] = clone.instance_id or ""
    args = [msg_id, to.machine, to_name, to.sessions[to_name], body]
    subprocess.run(
        [sys.executable, "-c", script, *args], cwd=clone.path, env=env, check=True, timeout=60
    )
    clone.sync()


def test_a_copied_id_from_another_machine_neither_suppresses_nor_acks_the_real_note(
    network: Network, two_machines: tuple[Clone, Clone]
) -> None:
    a, b = two_machines
    # "aa" sorts before "ma": its ref is read first, as in the reported attack.
    mallory = network.clone("aa")
    mallory.join("mallory")
    a.sync()
    real = a.send("bob", "the real note")
    _note_with_id(mallory, real["id"], b, "bob", "a decoy with the same id")

    report = b.sync()
    assert report["refused"] == []
    assert report["imported"] == 2, "each machine's note is its own message"
    got = {(m["from"]["machine"], m["id"], m["body"]) for m in b.inbox()}
    assert got == {("ma", real["id"], "the real note"), ("aa", real["id"], "a decoy with the same id")}

    acks = network.remote_document("refs/agentpost/mail/mb")["acks"]
    assert sorted(acks) == sorted([f"ma/{real['id']}", f"aa/{real['id']}"])
    assert a.sync()["acked"] == 1
    assert a.outbox() == []


def test_a_late_copy_of_an_imported_id_is_the_other_machines_own_note_and_is_warned_about(
    network: Network, two_machines: tuple[Clone, Clone]
) -> None:
    a, b = two_machines
    mallory = network.clone("aa")
    mallory.join("mallory")
    real = a.send("bob", "the real note")
    assert b.sync()["imported"] == 1
    _note_with_id(mallory, real["id"], b, "bob", "a late copy")

    result = b.mail("sync", "--json")
    assert result.json["imported"] == 1
    assert f"WARNING id {real['id']} from aa is also the id of a note from ma" in result.stderr
    got = sorted((m["from"]["machine"], m["body"]) for m in b.inbox("--all"))
    assert got == [("aa", "a late copy"), ("ma", "the real note")]
    assert b.sync()["imported"] == 0, "neither is imported twice"


def test_a_decoy_that_takes_the_last_inbox_slot_cannot_ack_or_suppress_the_real_note(
    network: Network, two_machines: tuple[Clone, Clone]
) -> None:
    a, b = two_machines
    mallory = network.clone("aa")
    mallory.join("mallory")
    a.sync()
    real = a.send("bob", "the real note")
    _note_with_id(mallory, real["id"], b, "bob", "a decoy")
    cap = {"AGENTPOST_MAIL_INBOX_CAPACITY": "1"}

    first = b.mail("sync", "--json", env=cap).json
    assert first["imported"] == 1
    assert first["refused"] == [{"id": real["id"], "machine": "ma", "reason": "inbox_full"}]
    assert a.sync()["acked"] == 0, "bob's ack of the decoy is not an ack of ma's note"
    assert [m["id"] for m in a.outbox()] == [real["id"]]

    assert [m["body"] for m in b.mail("inbox", "--json", env=cap).json["messages"]] == ["a decoy"]
    second = b.mail("sync", "--json", env=cap).json
    assert (second["imported"], second["refused"]) == (1, [])
    assert [m["body"] for m in b.mail("inbox", "--json", env=cap).json["messages"]] == [
        "the real note"
    ]
    assert a.sync()["acked"] == 1
    assert a.outbox() == []


def test_state_written_before_keyed_acks_is_read_on_upgrade_with_nothing_lost_or_doubled(
    network: Network, two_machines: tuple[Clone, Clone]
) -> None:
    a, b = two_machines
    first = a.send("bob", "first")
    assert b.sync()["imported"] == 1
    assert a.sync()["acked"] == 1
    assert b.sync()["imported"] == 0  # a no longer offers it: b retires its ack
    second = a.send("bob", "second")
    assert b.sync()["imported"] == 1

    # Turn b's state into what the previous version wrote: inbox files named by the
    # bare id and retirements without a machine.
    inbox_new = next((b.mail_dir / "inbox").iterdir()) / "new"
    for path in inbox_new.iterdir():
        path.rename(path.with_name(path.name.replace("@ma.json", ".json")))
    log = b.mail_dir / "log.jsonl"
    lines = []
    for line in log.read_text().splitlines():
        rec = json.loads(line)
        if rec["t"] == "retired":
            assert rec.pop("machine") == "ma"
        lines.append(json.dumps(rec))
    log.write_text("\n".join(lines) + "\n")
    assert sorted(p.name for p in inbox_new.iterdir()) == sorted(
        [f"{first['id']}.json", f"{second['id']}.json"]
    )

    assert b.sync()["imported"] == 0, "nothing is imported a second time"
    acks = network.remote_document("refs/agentpost/mail/mb")["acks"]
    assert acks == [f"ma/{second['id']}"], "the retired ack stays retired"
    assert a.sync()["acked"] == 1
    assert a.outbox() == []
    assert [m["body"] for m in b.inbox()] == ["first", "second"]
    assert sorted(p.name for p in (inbox_new.parent / "cur").iterdir()) == sorted(
        [f"{first['id']}@ma.json", f"{second['id']}@ma.json"]
    )
