"""upload_file sends only regular single-link files inside --allow-root, reached without
symlinks or `..`, judged on the opened descriptor (agentpost/egress.py; docs/connect.md, docs/mcp.md).
One threat per case; every refusal uploads nothing."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mcp import Client
from mcphelpers import McpServer, call, events_of, mcp_server  # noqa: F401 (a fixture)

from hubproc import Setup


def test_a_file_inside_a_root_is_uploaded_once_and_its_bytes_arrive(
    setup: Setup, mcp_server: Callable[..., McpServer], tmp_path: Path
) -> None:
    root = tmp_path / "work"
    (root / "out").mkdir(parents=True)
    report = root / "out" / "report.txt"
    report.write_bytes(b"all 12 checks passed\n")
    server = mcp_server(roots=[root])

    async def scenario(c: Client) -> Any:
        args = {"room": "general", "path": str(report), "caption": "today's report"}
        first = await call(c, "upload_file", args)
        again = await call(c, "upload_file", args)
        report.write_bytes(b"a new run\n")  # the same call on changed content: a new upload
        changed = await call(c, "upload_file", args)
        return first, again, changed

    (e1, first), (e2, again), (e3, changed) = server.run(scenario)
    assert not (e1 or e2 or e3)
    assert (first["delivery"], again["delivery"], changed["delivery"]) == (
        "sent",
        "replayed",
        "sent",
    )
    assert again["event"] == first["event"] != changed["event"]
    assert first["media"]["name"] == "report.txt"
    assert first["media"]["mime_type"] == "text/plain"
    evs = events_of(setup)
    assert [(e["type"], e["text"]) for e in evs] == [
        ("media", "today's report"),
        ("media", "today's report"),
    ]
    with setup.hub.client(setup.tokens["alice"]) as alice:
        got = alice.get(f"/v1/media/{first['media']['id']}")
        assert got.content == b"all 12 checks passed\n"


def _attacks(tmp_path: Path) -> tuple[Path, dict[str, tuple[str, str]]]:
    """The root and {case: (path as the model gives it, expected code)}."""
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    secret = outside / "secret.txt"
    secret.write_text("do not send")
    (root / "sub" / "ok.txt").write_text("fine")
    os.symlink(secret, root / "link.txt")  # a symlink to a file outside
    os.symlink(outside, root / "linkdir")  # a symlinked directory component
    os.symlink(root / "sub" / "ok.txt", root / "inner-link.txt")  # even to a file inside
    os.link(secret, root / "hard.txt")  # a hard link to a file outside
    os.mkfifo(root / "pipe")
    (tmp_path / "root-evil").mkdir()
    (tmp_path / "root-evil" / "x.txt").write_text("look-alike prefix")
    big = root / "big.bin"
    big.write_bytes(b"\0" * 2048)
    cases = {
        "outside": (str(secret), "path_outside_roots"),
        "dotdot": (str(root / "sub" / ".." / ".." / "outside" / "secret.txt"), "path_parent_reference"),
        "dotdot_inside": (str(root / "sub" / ".." / "sub" / "ok.txt"), "path_parent_reference"),
        "dot_folds_away": (str(root / "sub") + "/./missing.txt", "path_not_found"),
        "symlink_file": (str(root / "link.txt"), "path_symlink"),
        "symlink_inside": (str(root / "inner-link.txt"), "path_symlink"),
        "symlink_dir": (str(root / "linkdir" / "secret.txt"), "path_symlink"),
        "hard_link": (str(root / "hard.txt"), "path_hard_link"),
        "fifo": (str(root / "pipe"), "path_not_regular"),
        "directory": (str(root / "sub"), "path_not_regular"),
        "the_root_itself": (str(root), "path_not_regular"),
        "lookalike_prefix": (str(tmp_path / "root-evil" / "x.txt"), "path_outside_roots"),
        "missing": (str(root / "nope.txt"), "path_not_found"),
        "relative_outside": ("../outside/secret.txt", "path_parent_reference"),
        "too_large": (str(big), "path_too_large"),
        "nul_byte": (str(root / "sub") + "/ok.txt\x00", "invalid_arguments"),
    }
    return root, cases


def test_every_path_trick_is_refused_and_uploads_nothing(
    setup: Setup, mcp_server: Callable[..., McpServer], tmp_path: Path
) -> None:
    root, cases = _attacks(tmp_path)
    server = mcp_server(roots=[root], extra_args=["--max-file-bytes", "1024"])

    async def scenario(c: Client) -> Any:
        out = {}
        for case, (path, _) in cases.items():
            out[case] = await call(c, "upload_file", {"room": "general", "path": path})
        ok = await call(c, "upload_file", {"room": "general", "path": str(root / "sub" / "ok.txt")})
        return out, ok

    results, ok = server.run(scenario)  # a server that waited on the FIFO would time out
    for case, (_, code) in cases.items():
        err, body = results[case]
        assert err, case
        assert body["error"]["code"] == code, (case, body)
        assert body["error"]["retryable"] is False, case
    assert not ok[0], ok
    assert [e["text"] for e in events_of(setup)] == [""]  # only ok.txt was sent


def test_without_allow_root_no_file_may_be_sent(
    setup: Setup, mcp_server: Callable[..., McpServer], tmp_path: Path
) -> None:
    f = tmp_path / "a.txt"
    f.write_text("x")

    async def scenario(c: Client) -> Any:
        return await call(c, "upload_file", {"room": "general", "path": str(f)})

    err, body = mcp_server().run(scenario)
    assert err and body["error"]["code"] == "path_outside_roots"
    assert "--allow-root" in body["error"]["message"]
    assert events_of(setup) == []


def test_a_symlink_swapped_in_after_the_first_upload_is_refused(
    setup: Setup, mcp_server: Callable[..., McpServer], tmp_path: Path
) -> None:
    root = tmp_path / "root"
    root.mkdir()
    outside = tmp_path / "secret.txt"
    outside.write_text("secret")
    target = root / "notes.txt"
    target.write_text("notes")

    async def scenario(c: Client) -> Any:
        first = await call(c, "upload_file", {"room": "general", "path": str(target)})
        target.unlink()
        os.symlink(outside, target)
        second = await call(c, "upload_file", {"room": "general", "path": str(target)})
        return first, second

    first, second = mcp_server(roots=[root]).run(scenario)
    assert not first[0]
    assert second[0] and second[1]["error"]["code"] == "path_symlink"
    assert len(events_of(setup)) == 1


def test_a_root_reached_through_a_link_may_be_named_either_way(
    setup: Setup, mcp_server: Callable[..., McpServer], tmp_path: Path
) -> None:
    real = tmp_path / "real-root"
    real.mkdir()
    (real / "a.txt").write_text("a")
    alias = tmp_path / "alias-root"
    os.symlink(real, alias)

    async def scenario(c: Client) -> Any:
        via_alias = await call(c, "upload_file", {"room": "general", "path": str(alias / "a.txt")})
        via_real = await call(c, "upload_file", {"room": "general", "path": str(real / "a.txt")})
        return via_alias, via_real

    via_alias, via_real = mcp_server(roots=[alias]).run(scenario)
    assert not via_alias[0] and not via_real[0]
    # Another spelling of the same file: the same derived key (mcp/keys.py), one upload.
    assert via_alias[1]["delivery"] == "sent" and via_real[1]["delivery"] == "replayed"
    assert via_real[1]["event"] == via_alias[1]["event"]
