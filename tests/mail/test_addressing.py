"""Addressing through the CLI: local first, presence, senders of received mail, ambiguity."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .conftest import Clone, Network


def test_recipient_on_this_machine_gets_the_note_directly_with_no_ref_and_no_push(
    network: Network,
) -> None:
    a = network.clone("ma")
    carol_id = a.join("carol")
    alice_id = a.join("alice")
    sent = a.send("carol", "same machine")
    assert sent["published"] is False
    assert sent["to"] == {"machine": "ma", "name": "carol", "instance_id": carol_id}
    assert "refs/agentpost/mail/ma" not in network.remote_refs()
    assert a.outbox() == []
    carol_inbox = a.mail("inbox", "--json", env={"AGENTPOST_INSTANCE_ID": carol_id}).json
    assert [m["body"] for m in carol_inbox["messages"]] == ["same machine"]
    assert carol_inbox["messages"][0]["from"]["instance_id"] == alice_id


def test_unknown_name_is_fetched_for_once_then_refused(two_machines: tuple[Clone, Clone]) -> None:
    a, _ = two_machines
    result = a.mail("send", "--to", "nobody", "--text", "hi", "--json", check=False)
    assert result.code == 1
    assert result.json["error"]["code"] == "unknown_recipient"


def test_a_name_seen_only_on_the_remote_is_found_by_fetching_presence(
    two_machines: tuple[Clone, Clone],
) -> None:
    a, b = two_machines  # a never fetched; bob is known only through the remote
    sent = a.send("bob", "found you")
    assert sent["to"]["machine"] == "mb"


def test_same_name_on_two_machines_is_ambiguous_and_needs_instance_id(
    network: Network, two_machines: tuple[Clone, Clone]
) -> None:
    a, b = two_machines
    other = network.clone("mc")
    other_bob = other.join("bob")
    result = a.mail("send", "--to", "bob", "--text", "which bob?", "--json", check=False)
    assert result.code == 1
    error = result.json["error"]
    assert error["code"] == "ambiguous_recipient"
    assert {c["machine"] for c in error["candidates"]} == {"mb", "mc"}
    sent = a.send("bob", "this bob", "--instance-id", other_bob)
    assert sent["to"]["machine"] == "mc"
    assert other.sync()["imported"] == 1
    assert b.sync()["imported"] == 0


def test_reply_reaches_a_sender_whose_machine_went_quiet(two_machines: tuple[Clone, Clone]) -> None:
    a, b = two_machines
    a.send("bob", "I am going offline")
    b.sync()
    a.git("push", "--quiet", "origin", ":refs/agentpost/presence/ma")
    b.sync()  # the fetch prunes ma's presence: only the received mail names alice now
    reply = b.send("alice", "see you later")
    assert reply["to"]["machine"] == "ma"
    assert a.sync()["imported"] == 1


def test_join_with_the_same_name_keeps_the_instance(network: Network) -> None:
    a = network.clone("ma")
    first = a.join("alice")
    assert a.join("alice") == first


def test_commands_need_a_joined_session(network: Network) -> None:
    a = network.clone("ma")
    result = a.mail("send", "--to", "bob", "--text", "hi", "--json", check=False)
    assert result.json["error"]["code"] == "not_joined"
    wrong = a.mail("inbox", "--json", env={"AGENTPOST_INSTANCE_ID": "in_nope"}, check=False)
    assert wrong.json["error"]["code"] == "not_joined"


def test_empty_or_oversized_body_is_refused_and_a_file_body_is_read(
    two_machines: tuple[Clone, Clone],
) -> None:
    a, b = two_machines
    empty = a.mail("send", "--to", "bob", "--text", "   ", "--json", check=False)
    assert empty.code == 2 and empty.json["error"]["code"] == "usage_error"  # as `post`
    empty_file = a.mail("send", "--to", "bob", "--file", "-", "--json", stdin="", check=False)
    assert empty_file.json["error"]["code"] == "invalid_body"
    huge = a.mail("send", "--to", "bob", "--file", "-", "--json", stdin="x" * 70000, check=False)
    assert huge.json["error"]["code"] == "invalid_body"
    sent = a.mail("send", "--to", "bob", "--file", "-", "--json", stdin="line one\nline two\n")
    assert sent.code == 0
    b.sync()
    assert [m["body"] for m in b.inbox()] == ["line one\nline two\n"]


def test_invalid_session_name_is_refused(network: Network) -> None:
    a = network.clone("ma")
    result = a.mail("join", "--name", "../etc", "--json", check=False)
    assert result.code == 1
    assert result.json["error"]["code"] == "invalid_name"
