"""The issue's "Failure and bad input" list, one named test per case, real git throughout."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .conftest import Clone, Network

DAY = 86400.0


def _reject_pushes(network: Network) -> Path:
    hook = network.remote / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho 'refusing for the test' >&2\nexit 1\n")
    hook.chmod(0o755)
    return hook


def _doc(network: Network, machine: str) -> dict[str, Any]:
    doc: dict[str, Any] = network.remote_document(f"refs/agentpost/mail/{machine}")
    return doc


def test_push_rejected_leaves_the_message_queued_and_the_next_sync_republishes_it(
    network: Network, two_machines: tuple[Clone, Clone]
) -> None:
    a, b = two_machines
    a.sync()  # learn bob's presence
    hook = _reject_pushes(network)
    sent = a.mail("send", "--to", "bob", "--text", "queued", "--json")
    assert sent.code == 0
    assert sent.json["published"] is False
    assert "queued" in sent.stderr
    assert [m["id"] for m in a.outbox()] == [sent.json["id"]]
    assert b.sync()["imported"] == 0, "nothing reached the remote"

    hook.unlink()
    assert a.sync()["published"] is True
    assert [m["body"] for m in (b.sync(), b.inbox())[1]] == ["queued"]


def test_remote_unreachable_send_is_queued_and_the_stop_hook_republishes(
    two_machines: tuple[Clone, Clone],
) -> None:
    a, b = two_machines
    a.sync()
    url = a.git("remote", "get-url", "origin")
    a.git("remote", "set-url", "origin", str(a.path.parent / "no-such-remote.git"))
    sent = a.mail("send", "--to", "bob", "--text", "offline note", "--json")
    assert sent.json["published"] is False

    failed = a.mail("sync", "--json", check=False)
    assert failed.code == 3
    assert failed.json["error"]["code"] == "remote_unreachable"

    a.git("remote", "set-url", "origin", url)
    hook = a.mail("hook", "stop")
    assert hook.code == 0
    report = b.sync()
    assert report["imported"] == 1
    assert [m["id"] for m in b.inbox()] == [sent.json["id"]]


def test_a_remote_that_is_not_a_repository_is_named_with_what_to_check(
    two_machines: tuple[Clone, Clone],
) -> None:
    a, _ = two_machines
    a.sync()  # learn bob's presence
    missing = a.path.parent / "no-such-remote.git"
    a.git("remote", "set-url", "origin", str(missing))
    sent = a.mail("send", "--to", "bob", "--text", "offline note")
    failed = a.mail("sync", check=False)
    assert failed.code == 3
    for said in (sent.stderr, failed.stderr):
        (line,) = said.splitlines()
        assert f"remote origin ({missing})" in line
        assert "does not appear to be a git repository" in line
        assert "git remote set-url origin URL" in line
        assert "and the repository exists." not in line
    assert failed.stderr.startswith("error remote_unreachable: cannot fetch from remote origin")


def test_a_password_in_the_remote_url_is_not_shown(two_machines: tuple[Clone, Clone]) -> None:
    a, _ = two_machines
    a.git("remote", "set-url", "origin", "http://me:s3cret@127.0.0.1:1/mail.git")
    failed = a.mail("sync", "--json", check=False)
    message = failed.json["error"]["message"]
    assert "http://me:…@127.0.0.1:1/mail.git" in message and "s3cret" not in message
    assert "check that the server is up" in message


def test_crash_between_log_and_push_is_repaired_by_the_next_sync(
    two_machines: tuple[Clone, Clone],
) -> None:
    a, b = two_machines
    a.sync()
    # The state a crash right after the log fsync leaves: a Sent record, no ref, no push.
    script = (
        "from agentpost.mail.context import MailContext\n"
        "from agentpost.mail import clock\n"
        "from agentpost.mail.envelope import Address, new_envelope, sign\n"
        "from agentpost.mail.log import Sent\n"
        "ctx = MailContext.discover()\n"
        "state = ctx.load_state()\n"
        "me = ctx.acting_instance(state)\n"
        f"to = Address('mb', 'bob', {b.instance_id!r})\n"
        "raw = sign(new_envelope(Address('ma', me.name, me.instance_id), to, 'after crash', clock.now()), ctx.key())\n"
        "ctx.log.append([Sent(raw)])\n"
        "print(raw['id'])\n"
    )
    env = dict(a.env, AGENTPOST_MACHINE="ma", AGENTPOST_INSTANCE_ID=a.instance_id or "")
    msg_id = subprocess.run(
        [sys.executable, "-c", script],
        cwd=a.path,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert b.sync()["imported"] == 0
    assert a.sync()["published"] is True
    assert b.sync()["imported"] == 1
    assert [m["id"] for m in b.inbox()] == [msg_id]


def test_concurrent_syncs_in_two_terminals_import_each_note_once(
    two_machines: tuple[Clone, Clone],
) -> None:
    a, b = two_machines
    ids = {a.send("bob", f"note {i}")["id"] for i in range(3)}
    env = dict(b.env, AGENTPOST_MACHINE="mb", AGENTPOST_INSTANCE_ID=b.instance_id or "")
    cmd = [sys.executable, "-m", "agentpost", "mail", "sync", "--json"]
    procs = [
        subprocess.Popen(cmd, cwd=b.path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for _ in range(2)
    ]
    results = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0]
    imported = sum(json.loads(out)["imported"] for out, _ in results)
    assert imported == 3
    inbox = b.inbox()
    assert sorted(m["id"] for m in inbox) == sorted(ids)


def test_hook_skips_its_sync_while_another_terminal_holds_the_lock(
    two_machines: tuple[Clone, Clone],
) -> None:
    a, b = two_machines
    a.send("bob", "waiting")
    fd = os.open(b.mail_dir / "lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        held = b.mail("hook", "prompt")
        assert held.code == 0
        assert held.stdout == ""
    finally:
        os.close(fd)
    shown = b.mail("hook", "prompt")
    assert "waiting" in shown.stdout


def test_corrupt_ref_message_is_skipped_and_reported_and_others_still_import(
    network: Network, two_machines: tuple[Clone, Clone]
) -> None:
    a, b = two_machines
    mallory = network.clone("mc")
    mallory.push_document("refs/agentpost/mail/mc", b"{this is not json")
    a.send("bob", "still arrives")
    result = b.mail("sync", "--json")
    assert result.code == 0
    report = result.json
    assert report["imported"] == 1
    assert report["refused"] == [{"id": None, "machine": "mc", "reason": "corrupt_ref"}]
    assert "refused ref from mc: corrupt_ref" in result.stderr


def test_ref_naming_another_machine_is_refused(
    network: Network, two_machines: tuple[Clone, Clone]
) -> None:
    a, b = two_machines
    a.send("bob", "original")
    mallory = network.clone("mc")
    doc = _doc(network, "ma")  # a genuine document of ma, republished under mc's ref
    mallory.push_document("refs/agentpost/mail/mc", json.dumps(doc).encode())
    report = b.sync()
    assert {"id": None, "machine": "mc", "reason": "machine_mismatch"} in report["refused"]
    assert report["imported"] == 1, "the genuine copy from ma's own ref still imports"


def test_envelope_carried_by_a_ref_other_than_its_senders_is_refused(
    network: Network, two_machines: tuple[Clone, Clone]
) -> None:
    a, b = two_machines
    sent = a.send("bob", "replayed elsewhere")
    mallory = network.clone("mc")
    doc = _doc(network, "ma")
    doc["machine"] = "mc"
    mallory.push_document("refs/agentpost/mail/mc", json.dumps(doc).encode())
    report = b.sync()
    assert {"id": sent["id"], "machine": "mc", "reason": "sender_mismatch"} in report["refused"]
    assert [m["id"] for m in b.inbox()] == [sent["id"]]


def test_tampered_body_fails_the_signature_and_is_refused(
    network: Network, two_machines: tuple[Clone, Clone]
) -> None:
    a, b = two_machines
    b.sync()  # pin ma's key
    a.git("config", "remote.origin.pushurl", str(a.path.parent / "blocked.git"))
    sent = a.send("bob", "pay 10")
    a.git("config", "--unset", "remote.origin.pushurl")
    a.sync()
    doc = _doc(network, "ma")
    doc["outbox"][0]["body"] = "pay 10000"
    network.clone("mc").push_document("refs/agentpost/mail/ma", json.dumps(doc).encode())
    report = b.sync()
    assert report["imported"] == 0
    assert {"id": sent["id"], "machine": "ma", "reason": "bad_signature"} in report["refused"]
    assert b.inbox() == []


def test_missing_signature_is_refused(network: Network, two_machines: tuple[Clone, Clone]) -> None:
    a, b = two_machines
    b.sync()
    sent = a.send("bob", "unsigned")
    doc = _doc(network, "ma")
    del doc["outbox"][0]["sig"]
    network.clone("mc").push_document("refs/agentpost/mail/ma", json.dumps(doc).encode())
    report = b.sync()
    assert report["imported"] == 0
    assert {"id": sent["id"], "machine": "ma", "reason": "missing_signature"} in report["refused"]
    assert {"id": None, "machine": "ma", "reason": "missing_signature"} in report["refused"], (
        "the rewritten ref lacks the document signature too"
    )


def test_mail_from_a_machine_without_presence_is_refused_as_unknown_key(
    network: Network, two_machines: tuple[Clone, Clone]
) -> None:
    a, b = two_machines
    ghost = network.clone("md")
    ghost.join("ghost")
    sent = ghost.send("bob", "boo")
    ghost.git("push", "--quiet", "origin", ":refs/agentpost/presence/md")
    report = b.sync()
    assert report["refused"] == [{"id": sent["id"], "machine": "md", "reason": "unknown_key"}]


def test_changed_key_is_refused_loudly_until_the_owner_republishes(
    network: Network, two_machines: tuple[Clone, Clone]
) -> None:
    a, b = two_machines
    b.sync()  # first sight: pin ma's key
    mallory = network.clone("mc")
    mallory.join("mallory")
    presence = network.remote_document("refs/agentpost/presence/ma")
    presence["public_key"] = network.remote_document("refs/agentpost/presence/mc")["public_key"]
    a.git("config", "remote.origin.pushurl", str(a.path.parent / "blocked.git"))
    sent = a.send("bob", "genuine but unlucky")
    a.git("config", "--unset", "remote.origin.pushurl")
    mallory.push_document("refs/agentpost/presence/ma", json.dumps(presence).encode())
    a.git("push", "--quiet", "--force", "origin", "refs/agentpost/mail/ma:refs/agentpost/mail/ma")

    result = b.mail("sync", "--json")
    assert result.json["refused"] == [{"id": sent["id"], "machine": "ma", "reason": "key_changed"}]
    assert "WARNING machine ma now presents a different public key" in result.stderr

    repaired = a.mail("sync", "--json")  # a sees its presence overwritten and republishes it
    assert "another clone publishes under this machine name" in repaired.stderr
    assert b.sync()["imported"] == 1


def test_trust_repins_a_machine_after_a_deliberate_key_change(
    two_machines: tuple[Clone, Clone],
) -> None:
    a, b = two_machines
    b.sync()
    (a.mail_dir / "machine.key").unlink()  # ma reinstalled: a new key on next use
    sent = a.send("bob", "new key, same machine")
    assert b.sync()["refused"] == [{"id": sent["id"], "machine": "ma", "reason": "key_changed"}]
    pinned = b.mail("trust", "ma", "--json").json
    assert pinned["machine"] == "ma"
    assert b.sync()["imported"] == 1


def test_envelope_addressed_to_another_machine_is_ignored_here(
    network: Network, two_machines: tuple[Clone, Clone]
) -> None:
    a, b = two_machines
    carol = network.clone("mc")
    carol.join("carol")
    a.sync()
    sent = a.send("carol", "for carol only")
    assert b.sync() == {"imported": 0, "acked": 0, "published": False, "refused": []}
    assert "refs/agentpost/mail/mb" not in network.remote_refs(), "bob acks nothing"
    assert carol.sync()["imported"] == 1
    assert [m["id"] for m in carol.inbox()] == [sent["id"]]


def test_expired_envelope_is_refused_and_the_sender_drops_it_after_14_days(
    two_machines: tuple[Clone, Clone],
) -> None:
    a, b = two_machines
    t0 = time.time()
    a.sync(now=str(t0))
    sent = a.send("bob", "too late", now=str(t0))
    later = str(t0 + 15 * DAY)
    report = b.sync(now=later)
    assert report["imported"] == 0
    assert report["refused"] == [{"id": sent["id"], "machine": "ma", "reason": "expired"}]
    dropped = a.mail("sync", "--json", now=later)
    assert "expired after 14 days without an acknowledgement" in dropped.stderr
    assert a.outbox(now=later) == []
    assert b.sync(now=later)["refused"] == [], "the sender no longer offers it"


def test_huge_ref_is_refused_unread_and_others_still_import(
    network: Network, two_machines: tuple[Clone, Clone]
) -> None:
    a, b = two_machines
    big = {
        "machine": "mc",
        "updated_at": "2026-01-01T00:00:00Z",
        "outbox": [],
        "acks": ["x" * (5 << 20)],
    }
    network.clone("mc").push_document("refs/agentpost/mail/mc", json.dumps(big).encode())
    a.send("bob", "small and fine")
    report = b.sync()
    assert report["imported"] == 1
    assert report["refused"] == [{"id": None, "machine": "mc", "reason": "too_large"}]


def test_log_truncated_mid_line_by_a_crash_is_tolerated(two_machines: tuple[Clone, Clone]) -> None:
    a, b = two_machines
    first = a.send("bob", "before the crash")
    assert b.sync()["imported"] == 1
    with open(b.mail_dir / "log.jsonl", "ab") as log:
        log.write(b'{"t":"imported","id":"ml_01TORN')  # the crash cut this line short
    second = a.send("bob", "after the crash")
    result = b.mail("sync", "--json")
    assert result.code == 0
    assert result.json["imported"] == 1, "the first note is not imported twice"
    assert "skipped 1 unreadable line" in result.stderr
    assert [m["id"] for m in b.inbox("--all")] == [first["id"], second["id"]]
    last = (b.mail_dir / "log.jsonl").read_bytes().splitlines()[-1]
    assert json.loads(last)["t"] in {"imported", "pinned", "acked", "retired"}


def test_full_inbox_leaves_the_message_unacked_and_the_sender_keeps_offering_it(
    two_machines: tuple[Clone, Clone],
) -> None:
    a, b = two_machines
    cap = {"AGENTPOST_MAIL_INBOX_CAPACITY": "1"}
    one, two = a.send("bob", "one")["id"], a.send("bob", "two")["id"]
    report = b.mail("sync", "--json", env=cap).json
    assert report["imported"] == 1
    assert report["refused"] == [{"id": two, "machine": "ma", "reason": "inbox_full"}]
    assert a.sync()["acked"] == 1
    assert [m["id"] for m in a.outbox()] == [two]
    assert [m["id"] for m in b.mail("inbox", "--json", env=cap).json["messages"]] == [one]
    assert b.mail("sync", "--json", env=cap).json["imported"] == 1
    assert a.sync()["acked"] == 1
    assert a.outbox() == []


def test_sync_without_a_remote_is_a_clear_error(network: Network) -> None:
    lonely = network.clone("me")
    lonely.git("remote", "remove", "origin")
    result = lonely.mail("sync", "--json", check=False)
    assert result.code == 1
    assert result.json["error"]["code"] == "no_remote"


def test_join_without_a_remote_is_refused_saying_how_to_give_one(network: Network) -> None:
    lonely = network.clone("me")
    lonely.git("remote", "remove", "origin")
    result = lonely.mail("join", "--name", "alice", "--json", check=False)
    assert result.code == 1
    error = result.json["error"]
    assert error["code"] == "no_remote"
    assert "git remote add origin URL" in error["message"]
    assert "AGENTPOST_MAIL_REMOTE" in error["message"]
    plain = lonely.mail("join", "--name", "alice", check=False)
    assert plain.code == 1 and plain.stdout == ""
    assert plain.stderr.startswith("error no_remote: this repository has no remote")
    assert not lonely.mail_dir.exists(), "nothing was written: no session joined"
    wrong = lonely.mail("join", "--name", "alice", "--json",
                        env={"AGENTPOST_MAIL_REMOTE": "upstream"}, check=False)
    assert wrong.code == 1 and wrong.json["error"]["code"] == "no_remote"
    assert "set AGENTPOST_MAIL_REMOTE to one of them" in wrong.json["error"]["message"]


def test_outside_a_git_repository_commands_fail_and_hooks_stay_silent(
    network: Network, tmp_path: Path
) -> None:
    outside = tmp_path / "plain"
    outside.mkdir()
    env = dict(network.env, AGENTPOST_MACHINE="mx")
    cmd = [sys.executable, "-m", "agentpost", "mail"]
    run = subprocess.run(
        [*cmd, "sync", "--json"], cwd=outside, env=env, capture_output=True, text=True
    )
    assert run.returncode == 1
    assert json.loads(run.stdout)["error"]["code"] == "not_a_git_repo"
    hook = subprocess.run(
        [*cmd, "hook", "prompt"], cwd=outside, env=env, capture_output=True, text=True
    )
    assert (hook.returncode, hook.stdout, hook.stderr) == (0, "", "")


def test_a_reply_logged_while_the_remote_is_missing_is_queued_not_an_error(
    two_machines: tuple[Clone, Clone],
) -> None:
    a, b = two_machines
    a.send("bob", "reply when you can")
    b.sync()
    url = b.git("remote", "get-url", "origin")
    b.git("remote", "remove", "origin")
    reply = b.mail("send", "--to", "alice", "--text", "later", "--json")
    assert reply.code == 0
    assert reply.json["published"] is False
    assert "queued" in reply.stderr
    b.git("remote", "add", "origin", url)
    assert b.sync()["published"] is True
    assert [m["body"] for m in (a.sync(), a.inbox())[1]] == ["later"]


def test_a_hanging_remote_is_cut_off_by_the_git_timeout(two_machines: tuple[Clone, Clone]) -> None:
    a, _ = two_machines
    a.git("remote", "set-url", "origin", "ssh://git.example.invalid/repo.git")
    hang = {"GIT_SSH_COMMAND": "sleep 30; false", "AGENTPOST_MAIL_GIT_TIMEOUT": "1"}
    started = time.monotonic()
    result = a.mail("sync", "--json", env=hang, check=False)
    elapsed = time.monotonic() - started
    assert result.code == 3
    assert result.json["error"]["code"] == "remote_unreachable"
    assert "timed out after 1 s" in result.json["error"]["message"]
    assert elapsed < 15, f"the ssh helper was not stopped with git ({elapsed:.1f} s)"


def test_forged_ack_does_not_make_the_sender_drop_a_message(
    network: Network, two_machines: tuple[Clone, Clone]
) -> None:
    a, b = two_machines
    a.sync()  # pins mb's key
    sent = a.send("bob", "do not lose me")
    # Someone with push access publishes "mb acknowledges it" without mb's key.
    fake = {
        "machine": "mb",
        "updated_at": "2030-01-01T00:00:00.000Z",
        "outbox": [],
        "acks": [sent["id"]],
    }
    network.clone("mc").push_document("refs/agentpost/mail/mb", json.dumps(fake).encode())
    report = a.sync()
    assert report["acked"] == 0
    assert {"id": None, "machine": "mb", "reason": "missing_signature"} in report["refused"]
    assert [m["id"] for m in a.outbox()] == [sent["id"]], "still offered"
    assert b.sync()["imported"] == 1  # bob republishes his real, signed ref with the ack
    assert a.sync()["acked"] == 1
    assert a.outbox() == []


def test_local_send_cut_between_log_and_inbox_is_delivered_by_the_next_sync(
    network: Network,
) -> None:
    a = network.clone("ma")
    carol = a.join("carol")
    alice = a.join("alice")
    script = (
        "from agentpost.mail.context import MailContext\n"
        "from agentpost.mail import clock\n"
        "from agentpost.mail.envelope import Address, new_envelope, sign\n"
        "from agentpost.mail.log import Sent\n"
        "ctx = MailContext.discover()\n"
        f"me, to = Address('ma', 'alice', {alice!r}), Address('ma', 'carol', {carol!r})\n"
        "raw = sign(new_envelope(me, to, 'local, after crash', clock.now()), ctx.key())\n"
        "ctx.log.append([Sent(raw, local=True)])\n"
    )
    env = dict(a.env, AGENTPOST_MACHINE="ma")
    subprocess.run([sys.executable, "-c", script], cwd=a.path, env=env, check=True)
    as_carol = {"AGENTPOST_INSTANCE_ID": carol}
    assert a.mail("inbox", "--json", env=as_carol).json == {"messages": []}
    a.sync()
    delivered = a.mail("inbox", "--json", env=as_carol).json["messages"]
    assert [m["body"] for m in delivered] == ["local, after crash"]
    a.sync()
    assert a.mail("inbox", "--json", "--all", env=as_carol).json["messages"] == delivered
