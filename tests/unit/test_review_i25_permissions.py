"""Review of issue 25 (attack): the default policy's one exception, a `read` strictly
inside this Turn's attachment folder (connect/permissions.py, acp._paths_of)."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

from agentpost.connect.acp import PermissionAsk, PermissionOption, _paths_of
from agentpost.connect.permissions import PermissionPolicy
from agentpost.connect.runner import attachment_file_name

OPTIONS = (
    PermissionOption("proceed_once", "allow_once", "Allow once"),
    PermissionOption("cancel", "reject_once", "Deny"),
)


def _ask(tool_call: SimpleNamespace) -> PermissionAsk:
    return PermissionAsk("s1", tool_call.title, tool_call.kind, _paths_of(tool_call), OPTIONS)


def _turn_folder(tmp_path: Path, name: str) -> tuple[Path, Path]:
    folder = tmp_path / "files" / "session-abc" / "ev_01"
    folder.mkdir(parents=True)
    f = folder / attachment_file_name("med_1", name)  # named as the runner names it
    f.write_text("x")
    return folder, f


def test_gemini_may_read_an_attachment_whose_name_holds_a_colon_and_space(tmp_path: Path) -> None:
    # Gemini CLI asks "Allow access to absolute path: P" (no locations) for a linked file
    # outside its workspace; P is the Worker's own file, named after the sender's file name.
    folder, f = _turn_folder(tmp_path, "minutes: draft.txt")
    call = SimpleNamespace(title=f"Allow access to absolute path: {f}", kind="read",
                           locations=[], raw_input=None)
    assert _paths_of(call) == (str(f),), "the title's path is cut at its last ': '"
    assert PermissionPolicy([]).choose(_ask(call), folder).allowed


def test_a_read_whose_raw_input_is_a_shell_command_is_not_the_attachment_exception(
    tmp_path: Path,
) -> None:
    # A `read` tool call is judged by its locations; a shell command labelled `read` (as
    # Codex's adapter does for commands it parses as reads) can read more than it locates.
    folder, f = _turn_folder(tmp_path, "in.txt")
    call = SimpleNamespace(
        title=f"Read {f.name}",
        kind="read",
        locations=[SimpleNamespace(path=str(f))],
        raw_input={"command": ["bash", "-lc", f"cat {f} ~/.ssh/id_rsa"], "cwd": "/repo"},
    )
    assert not PermissionPolicy([]).choose(_ask(call), folder).allowed


def test_an_attachment_link_is_a_path_gemini_can_open(tmp_path: Path) -> None:
    # runner._attachments links `dest.resolve().as_uri()`; Gemini CLI 0.61 takes a file
    # resource_link's path as `uri.slice("file://".length)`, without percent-decoding
    # (bundle/gemini-*.js #resolvePrompt), so the saved name must need no escaping.
    _, f = _turn_folder(tmp_path, "Meeting notes.txt")
    uri = f.resolve().as_uri()
    assert os.path.exists(uri[len("file://"):]), f"Gemini would look for {uri[7:]}"
