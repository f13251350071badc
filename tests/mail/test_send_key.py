"""`mail send --idempotency-key K`: the same key from the same session is one note
(docs/mail.md "Retrying a send").

The key and its fingerprint ride in the log line of the send itself, so a send that was
killed after that line was fsync'd — before it printed anything — is answered as
`replayed` on retry, and nothing is sent twice.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .conftest import Clone, Network


def _keyed(clone: Clone, key: str, text: str, to: str = "bob", check: bool = True) -> object:
    return clone.mail("send", "--to", to, "--text", text, "--idempotency-key", key, "--json", check=check)


def test_the_same_key_from_the_same_session_is_one_note_answered_replayed(
    two_machines: tuple[Clone, Clone],
) -> None:
    a, b = two_machines
    first = _keyed(a, "k-1", "once").json  # type: ignore[attr-defined]
    again = _keyed(a, "k-1", "once").json  # type: ignore[attr-defined]
    assert first["delivery"] == "sent" and again["delivery"] == "replayed"
    assert again["id"] == first["id"] and again["to"] == first["to"]
    assert again["published"] is True
    assert [m["id"] for m in a.outbox()] == [first["id"]]
    assert b.sync()["imported"] == 1
    assert [m["body"] for m in b.inbox()] == ["once"]


def test_the_same_key_with_another_body_is_a_conflict_and_sends_nothing(
    two_machines: tuple[Clone, Clone],
) -> None:
    a, _ = two_machines
    first = _keyed(a, "k-1", "one thing").json  # type: ignore[attr-defined]
    other = _keyed(a, "k-1", "another thing", check=False)
    assert other.code == 1  # type: ignore[attr-defined]
    error = other.json["error"]  # type: ignore[attr-defined]
    assert (error["code"], error["id"]) == ("idempotency_conflict", first["id"])
    assert [m["id"] for m in a.outbox()] == [first["id"]]


def test_the_same_key_from_another_session_is_another_note(network: Network) -> None:
    a = network.clone("ma")
    carol = a.join("carol")
    alice = a.join("alice")
    b = network.clone("mb")
    b.join("bob")
    one = a.mail("send", "--to", "bob", "--text", "hi", "--idempotency-key", "k", "--json",
                 env={"AGENTPOST_INSTANCE_ID": alice}).json
    two = a.mail("send", "--to", "bob", "--text", "hi", "--idempotency-key", "k", "--json",
                 env={"AGENTPOST_INSTANCE_ID": carol}).json
    assert one["id"] != two["id"] and two["delivery"] == "sent"
    assert b.sync()["imported"] == 2


def test_an_empty_or_oversized_key_is_refused(two_machines: tuple[Clone, Clone]) -> None:
    a, _ = two_machines
    for key in ("", "k" * 256):
        bad = _keyed(a, key, "x", check=False)
        assert bad.json["error"]["code"] == "invalid_idempotency_key"  # type: ignore[attr-defined]
    assert a.outbox() == []


def test_a_key_outlives_the_ack_and_the_compaction_of_its_note(
    two_machines: tuple[Clone, Clone],
) -> None:
    a, b = two_machines
    first = _keyed(a, "k-2", "settled").json  # type: ignore[attr-defined]
    b.sync()
    assert a.sync()["acked"] == 1
    a.mail("compact", "--json")
    again = _keyed(a, "k-2", "settled").json  # type: ignore[attr-defined]
    assert (again["id"], again["delivery"], again["published"]) == (first["id"], "replayed", True)
    assert a.outbox() == []
    assert b.sync()["imported"] == 0


def test_a_send_killed_before_it_printed_is_replayed_by_its_retry_never_sent_twice(
    network: Network, two_machines: tuple[Clone, Clone]
) -> None:
    a, b = two_machines
    a.sync()  # bob is known: the send goes straight to its push
    release = network.root / "release-push"
    hook = network.remote / "hooks" / "pre-receive"
    # The push waits until the test has killed the sender, then is refused: the
    # first attempt never learns anything and prints nothing.
    hook.write_text(
        f"#!/bin/sh\nwhile [ ! -e {release} ]; do sleep 0.05; done\nexit 1\n"
    )
    hook.chmod(0o755)
    env = dict(a.env, AGENTPOST_MACHINE="ma", AGENTPOST_INSTANCE_ID=a.instance_id or "")
    cmd = [sys.executable, "-m", "agentpost", "mail", "send", "--to", "bob", "--text",
           "exactly once", "--idempotency-key", "deploy-42", "--json"]
    proc = subprocess.Popen(cmd, cwd=a.path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    log = a.mail_dir / "log.jsonl"
    deadline = time.monotonic() + 120
    while b"deploy-42" not in (log.read_bytes() if log.exists() else b""):
        assert proc.poll() is None, "the send ended before its log line was written"
        assert time.monotonic() < deadline, "the send never logged its note"
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL and out == b""
    release.touch()

    retry = a.mail("send", "--to", "bob", "--text", "exactly once",
                   "--idempotency-key", "deploy-42", "--json", check=False)
    hook.unlink()
    assert retry.code == 0, retry.stderr
    assert retry.json["delivery"] == "replayed"
    assert [m["id"] for m in a.outbox()] == [retry.json["id"]]
    a.sync()
    assert b.sync()["imported"] == 1
    assert [m["body"] for m in b.inbox()] == ["exactly once"]
    assert Path(log).read_bytes().count(b"deploy-42") == 1
