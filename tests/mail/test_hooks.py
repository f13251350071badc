"""Hooks: silent on unused clones, throttled prompts, republishing stop (docs/mail.md)."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .conftest import Clone, Network


def _recording_git(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """A PATH whose `git` logs each call and then runs the real git."""
    real = shutil.which("git")
    assert real is not None
    bindir = tmp_path / "recording-bin"
    bindir.mkdir()
    calls = tmp_path / "git-calls.log"
    script = bindir / "git"
    script.write_text(f'#!/bin/sh\necho "$@" >> "{calls}"\nexec "{real}" "$@"\n')
    script.chmod(0o755)
    return {"PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}"}, calls


def test_hooks_on_a_clone_that_never_used_mail_do_no_git_work_and_create_no_files(
    network: Network, tmp_path: Path
) -> None:
    quiet = network.clone("mq")
    env, calls = _recording_git(tmp_path)
    before = sorted(p.name for p in (quiet.path / ".git").iterdir())
    for event in ("session-start", "prompt", "stop"):
        result = quiet.mail("hook", event, env=env)
        assert (result.code, result.stdout, result.stderr) == (0, "", "")
    assert not calls.exists(), "no git process was started"
    assert quiet.mail("compact", "--json").json == {"lines_before": 0, "lines_after": 0}
    assert quiet.mail("outbox", "--json").json == {"messages": []}
    assert quiet.mail("inbox", "--json", check=False).json["error"]["code"] == "not_joined"
    assert not quiet.mail_dir.exists()
    assert sorted(p.name for p in (quiet.path / ".git").iterdir()) == before
    assert network.remote_refs() == {}


def test_session_start_hook_prints_new_messages_once_in_a_short_block(
    two_machines: tuple[Clone, Clone],
) -> None:
    a, b = two_machines
    a.send("bob", "first line\nsecond line")
    shown = b.mail("hook", "session-start").stdout
    assert shown.startswith("agentpost mail: 1 new message for bob\n")
    assert "- from alice@ma at " in shown
    assert "    first line\n    second line\n" in shown
    assert "Reply with: agentpost mail send --to alice" in shown
    again = b.mail("hook", "session-start", now=str(time.time() + 60))
    assert again.stdout == "", "a message is shown once"


def test_prompt_hook_syncs_at_most_every_30_seconds(two_machines: tuple[Clone, Clone]) -> None:
    a, b = two_machines
    t0 = time.time()
    a.send("bob", "one")
    assert "one" in b.mail("hook", "prompt", now=str(t0)).stdout
    a.send("bob", "two")
    assert b.mail("hook", "prompt", now=str(t0 + 10)).stdout == "", "throttled: no fetch yet"
    assert "two" in b.mail("hook", "prompt", now=str(t0 + 31)).stdout


def test_stop_hook_republishes_while_unacked_at_least_every_10_minutes(
    network: Network, two_machines: tuple[Clone, Clone], tmp_path: Path
) -> None:
    a, b = two_machines
    t0 = time.time()
    a.sync(now=str(t0))
    a.send("bob", "are you there", now=str(t0))
    ref = "refs/agentpost/mail/ma"
    published = network.remote_refs()[ref]

    a.mail("hook", "stop", now=str(t0 + 5 * 60))
    assert network.remote_refs()[ref] == published, "not yet due"

    a.mail("hook", "stop", now=str(t0 + 11 * 60))
    assert network.remote_refs()[ref] != published, "republished after 10 minutes"
    doc = network.remote_document(ref)
    assert len(doc["outbox"]) == 1

    b.sync(now=str(t0 + 12 * 60))
    a.sync(now=str(t0 + 13 * 60))
    assert a.outbox() == []
    env, calls = _recording_git(tmp_path)
    a.mail("hook", "stop", now=str(t0 + 60 * 60), env=env)
    assert not calls.exists(), "nothing unacknowledged: the stop hook does no git work"


def test_prompt_hook_without_a_session_names_who_has_mail(network: Network) -> None:
    a = network.clone("ma")
    carol = a.join("carol")
    a.join("alice")
    a.send("carol", "psst")
    hint = a.mail("hook", "prompt", env={"AGENTPOST_INSTANCE_ID": ""}).stdout
    assert "unread messages for carol (1)" in hint
    shown = a.mail("hook", "prompt", env={"AGENTPOST_INSTANCE_ID": carol}).stdout
    assert "psst" in shown


def test_prompt_hook_shows_a_changed_key_warning_to_the_agent(
    network: Network, two_machines: tuple[Clone, Clone]
) -> None:
    a, b = two_machines
    b.sync()  # pin ma
    mallory = network.clone("mc")
    mallory.join("mallory")
    presence = network.remote_document("refs/agentpost/presence/ma")
    presence["public_key"] = network.remote_document("refs/agentpost/presence/mc")["public_key"]
    mallory.push_document("refs/agentpost/presence/ma", json.dumps(presence).encode())
    shown = b.mail("hook", "prompt", now=str(time.time() + 60)).stdout
    assert "WARNING machine ma presents a different key" in shown
    assert "agentpost mail trust ma" in shown
