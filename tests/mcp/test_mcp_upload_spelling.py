"""upload_file's derived key names the file, not the path as typed (mcp/keys.py, docs/mcp.md):
every spelling of one file with the same bytes is one upload in a session; new bytes at the
same path are a new upload."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from mcp import Client
from mcphelpers import McpServer, call, events_of, mcp_server  # noqa: F401 (a fixture)

from hubproc import Setup


def test_every_spelling_of_one_file_is_one_upload(
    setup: Setup, mcp_server: Callable[..., McpServer], tmp_path: Path
) -> None:
    root = tmp_path / "work"
    (root / "sub").mkdir(parents=True)
    small = root / "small.txt"
    small.write_bytes(b"the same bytes\n")
    spellings = [
        "small.txt",
        "./small.txt",
        str(small),
        f"{root}//small.txt",
        f"{root}/./small.txt",
        "sub/../small.txt",  # `..` is refused by the egress judge: not an upload either
    ]
    server = mcp_server(roots=[root], cwd=root)

    async def scenario(c: Client) -> Any:
        got = [await call(c, "upload_file", {"room": "general", "path": p}) for p in spellings]
        small.write_bytes(b"new bytes\n")
        changed = await call(c, "upload_file", {"room": "general", "path": "./small.txt"})
        again = await call(c, "upload_file", {"room": "general", "path": str(small)})
        return got, changed, again

    got, (changed_err, changed), (again_err, again) = server.run(scenario)
    *same, dotdot = got
    assert all(not err for err, _ in same), same
    first = same[0][1]
    assert first["delivery"] == "sent"
    assert [body["delivery"] for _, body in same[1:]] == ["replayed"] * (len(same) - 1)
    assert {body["event"] for _, body in same} == {first["event"]}
    assert dotdot[0] and dotdot[1]["error"]["code"] == "path_parent_reference"
    assert not changed_err and changed["delivery"] == "sent" and changed["event"] != first["event"]
    assert not again_err and again["delivery"] == "replayed" and again["event"] == changed["event"]
    media = [e for e in events_of(setup) if e["type"] == "media"]
    assert len(media) == 2
    with setup.hub.client(setup.tokens["alice"]) as alice:
        bodies = [alice.get(f"/v1/media/{e['attachments'][0]['id']}").content for e in media]
    assert bodies == [b"the same bytes\n", b"new bytes\n"]
