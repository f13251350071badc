"""The client makes no URL from an id or name that could name another route (client/paths.py):
`/`, `?`, `#`, `%`, `..`, spaces, other scripts are refused as `invalid_request` before
anything is sent, whichever method is called, so no caller of the client (MCP, CLI, Worker)
can turn a post into an archive or a read of one room into another's."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agentpost.client import HubClient, HubRefused
from hubproc import HubProcess, Setup, make_setup


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    hub = HubProcess(tmp_path_factory.mktemp("paths") / "hub").start()
    try:
        yield make_setup(hub, ["alice", "carol"], ["bot"])
    finally:
        hub.stop()


def _bad_ids(room: str) -> list[str]:
    return [
        f"{room}/archive?",
        f"{room}/archive#",
        f"{room}/participants/carol",
        f"x/../{room}",
        f"{room}%2Farchive",
        "..",
        ".",
        "",
        f"{room} ",
        "général",
        "a" * 256,
        "x\n",
    ]


def _calls(c: HubClient, bad: str, room: str, tmp: Path) -> list[Callable[[], Any]]:
    return [
        lambda: c.post_message(bad, "injected"),
        lambda: c.upload(bad, tmp / "f.txt"),
        lambda: c.room(bad),
        lambda: c.events(bad),
        lambda: c.event(bad),
        lambda: c.delivery(bad),
        lambda: c.cancel(bad),
        lambda: c.set_archived(bad, True),
        lambda: c.set_participant(bad, "carol", False),
        lambda: c.set_participant(room, bad, False),
        lambda: c.rooms(bad),
        lambda: c.members(bad),
        lambda: c.member("acme", bad),
        lambda: c.create_room(bad, "x"),
        lambda: c.send_state(bad, "k"),
        lambda: c.ensure_thread(bad, "t"),
        lambda: c.download(bad, tmp / "out.bin", 10),
        lambda: c.resolve_room(bad),
    ]


def test_ids_that_could_name_another_route_are_refused_before_sending(
    setup: Setup, tmp_path: Path
) -> None:
    (tmp_path / "f.txt").write_text("f")
    refused: list[str] = []
    with HubClient(setup.hub.url, setup.tokens["alice"]) as c:
        for bad in _bad_ids(setup.room):
            for i, call in enumerate(_calls(c, bad, setup.room, tmp_path)):
                with pytest.raises(HubRefused) as got:
                    call()
                assert got.value.code == "invalid_request", (bad, i)
                assert "nothing was sent" in got.value.message
                refused.append(bad)
        with pytest.raises(HubRefused):
            c.request("POST", f"/v1/rooms/{setup.room}/archive?/messages")
        room = c.room(setup.room)
        events = c.events(setup.room)
    assert room.archived is False and "carol" in room.participants
    assert events == []
    assert refused
