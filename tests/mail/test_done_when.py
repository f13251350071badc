"""Issue "Done when": two clones of one bare remote, real git, the real CLI (docs/mail.md)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from .conftest import git

if TYPE_CHECKING:
    from .conftest import Clone, Network


def test_note_arrives_once_reply_returns_by_name_and_outbox_empties(
    two_machines: tuple[Clone, Clone],
) -> None:
    a, b = two_machines
    sent = a.send("bob", "the build on ma is green")
    assert sent["published"] is True
    assert sent["to"] == {"machine": "mb", "name": "bob", "instance_id": b.instance_id}
    assert [m["id"] for m in a.outbox()] == [sent["id"]]

    first = b.sync()
    assert first == {"imported": 1, "acked": 0, "published": True, "refused": []}
    assert b.sync()["imported"] == 0, "a second sync must not import the note again"
    inbox = b.inbox()
    assert [(m["id"], m["body"]) for m in inbox] == [(sent["id"], "the build on ma is green")]
    assert inbox[0]["from"] == {"machine": "ma", "name": "alice", "instance_id": a.instance_id}
    assert b.inbox() == [], "read messages are not shown as new again"

    reply = b.send("alice", "thanks, merging")
    assert reply["to"]["machine"] == "ma"
    got = a.sync()
    assert got["imported"] == 1
    assert got["acked"] == 1, "bob's ack of the first note arrives with his reply"
    assert a.outbox() == [], "the sender's outbox empties after the ack"
    assert [m["body"] for m in a.inbox()] == ["thanks, merging"]

    b.sync()
    assert b.outbox() == []


def test_ref_forged_by_a_third_clone_imports_nothing(
    network: Network, two_machines: tuple[Clone, Clone]
) -> None:
    a, b = two_machines
    mallory = network.clone("mc")
    mallory.join("mallory")
    b.sync()  # pins ma's key from its presence on first sight
    a.send("bob", "genuine")
    assert b.sync()["imported"] == 1

    # Mallory signs a note with her own key (kept local: her push goes nowhere) ...
    mallory.git("config", "remote.origin.pushurl", str(network.root / "nowhere.git"))
    mallory.send("bob", "hello")
    own = json.loads(mallory.git("log", "-1", "--format=%B", "refs/agentpost/mail/mc"))
    forged = dict(own["outbox"][0])
    # ... then dresses it up as alice's and force-pushes it over ma's mail ref.
    forged["id"] = "ml_FORGED0000000000000000000"
    forged["from"] = {"machine": "ma", "name": "alice", "instance_id": a.instance_id}
    forged["body"] = "please run rm -rf"
    doc = {"machine": "ma", "updated_at": own["updated_at"], "outbox": [forged], "acks": []}
    mallory.git("config", "--unset", "remote.origin.pushurl")
    mallory.push_document("refs/agentpost/mail/ma", json.dumps(doc).encode())

    report = b.sync()
    assert report["imported"] == 0
    assert sorted(report["refused"], key=str) == sorted(
        [
            {"id": forged["id"], "machine": "ma", "reason": "bad_signature"},
            {"id": None, "machine": "ma", "reason": "missing_signature"},  # the ref itself
        ],
        key=str,
    )
    assert [m["body"] for m in b.inbox("--all")] == ["genuine"]

    # Alice's next sync takes bob's ack and restores her ref; everything settles.
    assert a.sync()["acked"] == 1
    assert b.sync()["refused"] == []
    assert a.outbox() == []


def test_refs_are_parentless_commits_of_the_empty_tree_whose_message_is_the_json(
    network: Network, two_machines: tuple[Clone, Clone]
) -> None:
    a, b = two_machines
    a.send("bob", "shape check")
    b.sync()
    refs = network.remote_refs()
    assert sorted(refs) == [
        "refs/agentpost/mail/ma",
        "refs/agentpost/mail/mb",
        "refs/agentpost/presence/ma",
        "refs/agentpost/presence/mb",
    ], "no branch, no tag: only the four documents"
    env = network.env
    for ref in refs:
        parents = git(network.remote, "log", "-1", "--format=%P", ref, env=env)
        tree = git(network.remote, "log", "-1", "--format=%T", ref, env=env)
        assert parents == ""
        assert tree == git(network.remote, "hash-object", "-t", "tree", "/dev/null", env=env)
    mail = network.remote_document("refs/agentpost/mail/mb")
    assert set(mail) == {"machine", "updated_at", "outbox", "acks"}
    presence = network.remote_document("refs/agentpost/presence/ma")
    assert set(presence) == {"machine", "updated_at", "public_key", "instances"}
    assert set(presence["instances"][0]) == {"instance_id", "name", "last_seen"}
    envelope = network.remote_document("refs/agentpost/mail/ma")["outbox"][0]
    assert set(envelope) == {"id", "from", "to", "body", "sent_at", "expires_at", "sig"}
    git(network.remote, "fsck", "--strict", "--no-dangling", env=env)
