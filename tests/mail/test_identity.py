"""A clone is one machine: its name is remembered at first use (docs/mail.md).

A shell that forgets AGENTPOST_MACHINE, a renamed host, a copied clone: each is refused
loudly, with the command that renames on purpose, instead of publishing a second
presence with the same key and sessions. `rename-machine` moves the refs; `forget`
drops a stale peer; `name@machine` names one session wherever a recipient is named.
"""

from __future__ import annotations

import json
import socket
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .conftest import Clone, Network

NO_VARIABLE = {"AGENTPOST_MACHINE": ""}


def _own_refs(clone: Clone) -> list[str]:
    out = clone.git("for-each-ref", "--format=%(refname)", "refs/agentpost/")
    return sorted(out.split())


def test_a_sync_without_the_variable_is_refused_and_publishes_no_second_presence(
    network: Network,
) -> None:
    box = network.clone("buildbox")
    box.join("bob")
    host = socket.gethostname()
    assert host != "buildbox"
    result = box.mail("sync", "--json", env=NO_VARIABLE, check=False)
    assert result.code == 1
    error = result.json["error"]
    assert error["code"] == "machine_changed"
    assert "export AGENTPOST_MACHINE=buildbox" in error["message"]
    assert f"agentpost mail rename-machine {host}" in error["message"]
    assert [r for r in network.remote_refs() if "presence" in r] == [
        "refs/agentpost/presence/buildbox"
    ]
    hook = box.mail("hook", "prompt", env=NO_VARIABLE)
    assert hook.code == 0 and "machine_changed" in hook.stderr
    assert box.sync()["published"] is False, "with the variable back, all is as before"


def test_another_machine_name_in_the_variable_is_refused(network: Network) -> None:
    box = network.clone("buildbox")
    box.join("bob")
    result = box.mail("send", "--to", "bob", "--text", "x", "--json",
                      env={"AGENTPOST_MACHINE": "other"}, check=False)
    assert result.json["error"]["code"] == "machine_changed"
    assert "agentpost mail rename-machine other" in result.json["error"]["message"]
    assert json.loads((box.mail_dir / "machine.json").read_text())["machine"] == "buildbox"


def test_a_clone_from_before_names_were_remembered_adopts_the_name_it_published(
    network: Network,
) -> None:
    box = network.clone("buildbox")
    box.join("bob")
    (box.mail_dir / "machine.json").unlink()  # as the previous version left it
    refused = box.mail("sync", "--json", env=NO_VARIABLE, check=False)
    assert refused.json["error"]["code"] == "machine_changed"
    assert json.loads((box.mail_dir / "machine.json").read_text())["machine"] == "buildbox"
    assert "refs/agentpost/presence/" + socket.gethostname() not in network.remote_refs()


def test_rename_machine_moves_both_refs_deletes_the_old_ones_and_mail_follows(
    network: Network, two_machines: tuple[Clone, Clone]
) -> None:
    a, b = two_machines
    b.sync()
    note = b.send("alice", "before the rename")
    assert a.sync()["imported"] == 1  # a now owes mb an ack, published under ma
    in_flight = b.send("alice", "addressed to ma, sent after")

    renamed = a.mail("rename-machine", "laptop", "--json").json
    assert renamed == {"machine": "laptop", "former": "ma", "published": True, "withdrawn": []}
    a.machine = "laptop"
    refs = network.remote_refs()
    assert "refs/agentpost/presence/laptop" in refs and "refs/agentpost/mail/laptop" in refs
    assert not [r for r in refs if r.endswith("/ma")], "the old refs are gone from the remote"
    assert not [r for r in _own_refs(a) if r.endswith("/ma")], "and from the clone"
    assert network.remote_document("refs/agentpost/mail/laptop")["acks"] == [f"mb/{note['id']}"]

    assert b.sync()["acked"] == 1, "the ack, now under laptop (same key), is taken"
    assert [m["id"] for m in b.outbox()] == [in_flight["id"]]
    assert a.sync()["imported"] == 1, "a note addressed to the former name still arrives"
    assert b.sync()["acked"] == 1
    reply = b.send("alice", "after the rename")
    assert reply["to"]["machine"] == "laptop", "no ambiguity between ma and laptop"
    assert a.sync()["imported"] == 1
    old_env = a.mail("inbox", "--json", env={"AGENTPOST_MACHINE": "ma"}, check=False)
    assert old_env.json["error"]["code"] == "machine_changed"


def test_a_rename_with_no_mail_to_move_says_it_published(
    network: Network, two_machines: tuple[Clone, Clone]
) -> None:
    a, _ = two_machines  # a never sent or acked: only its presence is on the remote
    assert "refs/agentpost/mail/ma" not in network.remote_refs()
    renamed = a.mail("rename-machine", "laptop", "--json").json
    assert renamed["published"] is True
    refs = network.remote_refs()
    assert "refs/agentpost/presence/laptop" in refs and "refs/agentpost/presence/ma" not in refs


def test_rename_waits_for_unacknowledged_notes_unless_forced(
    two_machines: tuple[Clone, Clone],
) -> None:
    a, b = two_machines
    sent = a.send("bob", "still in flight")
    blocked = a.mail("rename-machine", "laptop", "--json", check=False)
    assert blocked.code == 1
    assert blocked.json["error"]["code"] == "rename_blocked"
    assert blocked.json["error"]["pending"] == [sent["id"]]
    assert json.loads((a.mail_dir / "machine.json").read_text())["machine"] == "ma"
    forced = a.mail("rename-machine", "laptop", "--force", "--json")
    assert forced.json["withdrawn"] == [sent["id"]]
    assert "may not have been read" in forced.stderr
    a.machine = "laptop"
    assert a.outbox() == []


def test_name_at_machine_picks_one_session_and_an_unknown_pair_is_refused(
    network: Network, two_machines: tuple[Clone, Clone]
) -> None:
    a, b = two_machines
    other = network.clone("mc")
    other.join("bob")
    ambiguous = a.mail("send", "--to", "bob", "--text", "?", "--json", check=False)
    assert ambiguous.json["error"]["code"] == "ambiguous_recipient"
    sent = a.send("bob@mc", "for the bob on mc")
    assert sent["to"]["machine"] == "mc"
    assert other.sync()["imported"] == 1 and b.sync()["imported"] == 0
    for bad in ("bob@nowhere", "carol@mb"):
        refused = a.mail("send", "--to", bad, "--text", "x", "--json", check=False)
        assert refused.json["error"]["code"] == "unknown_recipient"
    invalid = a.mail("send", "--to", "bob@../x", "--text", "x", "--json", check=False)
    assert invalid.json["error"]["code"] == "invalid_name"
    local = a.send("alice@ma", "to myself, by full name")
    assert local["published"] is False
    shown = other.mail("hook", "prompt").stdout
    assert "Reply with: agentpost mail send --to alice@ma" in shown


def test_forget_drops_a_stale_peer_from_addressing_and_the_remote_keeping_its_pin(
    network: Network, two_machines: tuple[Clone, Clone]
) -> None:
    a, b = two_machines
    stale = network.clone("mc")
    stale.join("bob")  # a second "bob" that then goes away for good
    a.sync()
    assert a.mail("send", "--to", "bob", "--text", "?", "--json", check=False).json["error"][
        "code"
    ] == "ambiguous_recipient"

    forgot = a.mail("forget", "mc", "--json").json
    assert forgot == {"machine": "mc", "removed": ["refs/agentpost/presence/mc"], "kept": [],
                      "unpinned": False}
    assert "refs/agentpost/presence/mc" not in network.remote_refs()
    assert a.send("bob", "the real bob")["to"]["machine"] == "mb"
    assert b.sync()["imported"] == 1

    # The pin is kept: mc coming back with another key is still refused loudly.
    (stale.mail_dir / "machine.key").unlink()
    stale.join("bob")
    report = a.mail("sync", "--json")
    assert "WARNING machine mc now presents a different public key" in report.stderr
    unpinned = a.mail("forget", "mc", "--unpin", "--json").json
    assert unpinned["unpinned"] is True
    stale.send("alice", "hello again")  # republishes mc's presence too
    got = a.mail("sync", "--json")
    assert got.json["imported"] == 1, "the new key was pinned anew on first sight"
    assert "different public key" not in got.stderr


def test_forget_keeps_a_peer_mail_ref_that_still_offers_notes(
    network: Network, two_machines: tuple[Clone, Clone]
) -> None:
    a, b = two_machines
    stale = network.clone("mc")
    stale.join("carol")
    pending = stale.send("bob", "not yet imported by bob")
    forgot = a.mail("forget", "mc", "--json").json
    assert forgot["removed"] == []
    assert [k["ref"] for k in forgot["kept"]] == [
        "refs/agentpost/mail/mc",
        "refs/agentpost/presence/mc",
    ]
    assert "unexpired" in forgot["kept"][0]["reason"]
    assert "need its key" in forgot["kept"][1]["reason"]
    assert b.sync()["imported"] == 1, "bob, who never saw mc, still pins its key and imports"
    assert [m["id"] for m in b.inbox()] == [pending["id"]]


def test_forget_refuses_this_clone_itself(two_machines: tuple[Clone, Clone]) -> None:
    a, _ = two_machines
    refused = a.mail("forget", "ma", "--json", check=False)
    assert refused.json["error"]["code"] == "invalid_name"
    assert "rename-machine" in refused.json["error"]["message"]


def test_a_rename_whose_push_failed_deletes_the_old_refs_at_the_next_sync(
    network: Network, two_machines: tuple[Clone, Clone]
) -> None:
    a, b = two_machines
    hook = network.remote / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho 'refusing for the test' >&2\nexit 1\n")
    hook.chmod(0o755)
    renamed = a.mail("rename-machine", "laptop", "--json").json
    assert renamed["published"] is False
    assert "refs/agentpost/presence/ma" in network.remote_refs()
    hook.unlink()
    a.machine = "laptop"
    a.sync()
    refs = network.remote_refs()
    assert "refs/agentpost/presence/laptop" in refs
    assert not [r for r in refs if r.endswith("/ma")]
    assert b.send("alice", "found under the new name")["to"]["machine"] == "laptop"
    assert a.sync()["imported"] == 1


def test_after_a_rename_the_hook_suggests_the_new_address_and_the_old_one_says_where_it_went(
    two_machines: tuple[Clone, Clone],
) -> None:
    a, b = two_machines
    b.sync()
    note = a.send("bob", "written as alice@ma")
    assert b.sync()["imported"] == 1  # imported, not yet read
    assert a.sync()["acked"] == 1  # the outbox is empty: the rename needs no --force
    a.mail("rename-machine", "laptop", "--json")
    a.machine = "laptop"

    shown = b.mail("hook", "prompt").stdout
    assert "- from alice@ma (now alice@laptop) at " in shown
    assert f"(id {note['id']})" in shown
    assert "Reply with: agentpost mail send --to alice@laptop --text" in shown
    assert "--to alice@ma " not in shown

    # The old name is no alias (docs/mail.md, Addressing): refused, naming the new one.
    old = b.mail("send", "--to", "alice@ma", "--text", "x", "--json", check=False)
    assert old.code == 1
    assert old.json["error"]["code"] == "machine_renamed"
    assert old.json["error"]["renamed_to"] == "laptop"
    assert "alice@laptop" in old.json["error"]["message"]
    plain = b.mail("send", "--to", "alice@ma", "--text", "x", check=False)
    assert plain.code == 1 and plain.stdout == ""
    assert plain.stderr.startswith("error machine_renamed: ") and "alice@laptop" in plain.stderr
    assert b.outbox() == [], "nothing was sent"

    b.send("alice@laptop", "the suggested reply")
    assert a.sync()["imported"] == 1


def test_forget_of_a_machine_never_seen_is_refused_and_changes_nothing(
    network: Network, two_machines: tuple[Clone, Clone]
) -> None:
    a, _ = two_machines
    a.sync()
    log_before = (a.mail_dir / "log.jsonl").read_bytes()
    refs_before = network.remote_refs()
    for unpin in ([], ["--unpin"]):
        refused = a.mail("forget", "nosuch", *unpin, "--json", check=False)
        assert refused.code == 1
        assert refused.json["error"]["code"] == "unknown_machine"
        assert "nosuch" in refused.json["error"]["message"]
    plain = a.mail("forget", "nosuch", check=False)
    assert plain.code == 1 and plain.stdout == ""
    assert plain.stderr.startswith("error unknown_machine: no machine nosuch is known")
    assert plain.stderr.count("\n") == 1
    assert (a.mail_dir / "log.jsonl").read_bytes() == log_before
    assert network.remote_refs() == refs_before
    trusted = a.mail("trust", "nosuch", "--json", check=False)
    assert trusted.json["error"]["code"] == "unknown_machine", "one code for a machine not seen"
    assert a.mail("forget", "mb", "--json").json["machine"] == "mb", "a known peer still goes"
