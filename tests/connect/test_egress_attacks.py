"""Egress attacks (docs/connect.md): a `resource_link` may only send a regular, singly linked
file under a Turn egress root, judged on the opened descriptor. One test per trick, then
the same tricks end to end through a real Worker: refused with a one-line notice."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agentpost.connect.egress import EgressRefused, EgressRoots
from conftest import AGENTS, Connected, agent_cmd, wait_for
from hubproc import HubProcess


# One hub per engine for this module: its tests never stop the hub or set its flags, and
# each gets a workspace of its own (`connected`).
@pytest.fixture
def hub(shared_hub: HubProcess) -> HubProcess:
    return shared_hub


TRICK = AGENTS / "trick_agent.py"


@pytest.fixture
def tree(tmp_path: Path) -> tuple[Path, Path]:
    root = tmp_path / "repo"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "ok.txt").write_text("fine")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    return root, outside


def _uri(p: Path | str) -> str:
    return "file://" + str(p)


def test_a_regular_file_under_a_root_opens_and_reads_from_the_descriptor(tree) -> None:  # noqa: ANN001
    root, _ = tree
    opened = EgressRoots([root], 1000).open(_uri(root / "sub" / "ok.txt"))
    try:
        assert (opened.name, opened.size, os.read(opened.fd, 100)) == ("ok.txt", 4, b"fine")
    finally:
        os.close(opened.fd)


def test_a_file_outside_the_roots_is_refused(tree) -> None:  # noqa: ANN001
    root, outside = tree
    with pytest.raises(EgressRefused, match="outside the egress roots"):
        EgressRoots([root], 1000).open(_uri(outside / "secret.txt"))


def test_dot_dot_is_refused_even_when_it_lands_inside(tree) -> None:  # noqa: ANN001
    root, outside = tree
    with pytest.raises(EgressRefused, match=r"'\.\.'"):
        EgressRoots([root], 1000).open(_uri(f"{root}/sub/../../outside/secret.txt"))
    with pytest.raises(EgressRefused, match=r"'\.\.'"):
        EgressRoots([root], 1000).open(_uri(f"{root}/sub/../sub/ok.txt"))


def test_a_symlinked_file_is_refused(tree) -> None:  # noqa: ANN001
    root, outside = tree
    (root / "link.txt").symlink_to(outside / "secret.txt")
    with pytest.raises(EgressRefused, match="symlink"):
        EgressRoots([root], 1000).open(_uri(root / "link.txt"))


def test_a_symlinked_directory_on_the_way_is_refused(tree) -> None:  # noqa: ANN001
    root, outside = tree
    (root / "out").symlink_to(outside)
    with pytest.raises(EgressRefused, match="symlink"):
        EgressRoots([root], 1000).open(_uri(root / "out" / "secret.txt"))


def test_a_hard_link_to_a_file_elsewhere_is_refused(tree) -> None:  # noqa: ANN001
    root, outside = tree
    os.link(outside / "secret.txt", root / "hard.txt")
    with pytest.raises(EgressRefused, match="2 hard links"):
        EgressRoots([root], 1000).open(_uri(root / "hard.txt"))


def test_a_fifo_is_refused_without_blocking(tree) -> None:  # noqa: ANN001
    root, _ = tree
    os.mkfifo(root / "pipe")
    with pytest.raises(EgressRefused, match="not a regular file"):
        EgressRoots([root], 1000).open(_uri(root / "pipe"))


def test_a_directory_and_an_oversized_file_are_refused(tree) -> None:  # noqa: ANN001
    root, _ = tree
    with pytest.raises(EgressRefused, match="not a regular file"):
        EgressRoots([root], 1000).open(_uri(root / "sub"))
    (root / "big.bin").write_bytes(b"x" * 2000)
    with pytest.raises(EgressRefused, match="over 1000 bytes"):
        EgressRoots([root], 1000).open(_uri(root / "big.bin"))


def test_a_look_alike_prefix_is_not_inside(tree) -> None:  # noqa: ANN001
    root, _ = tree
    twin = root.parent / (root.name + "-evil")
    twin.mkdir()
    (twin / "x.txt").write_text("x")
    with pytest.raises(EgressRefused, match="outside"):
        EgressRoots([root], 1000).open(_uri(twin / "x.txt"))


def test_other_schemes_and_hosts_are_refused(tree) -> None:  # noqa: ANN001
    root, _ = tree
    for uri in ["https://example.com/x", f"file://evil.example{root}/sub/ok.txt", "file:rel"]:
        with pytest.raises(EgressRefused):
            EgressRoots([root], 1000).open(uri)


# -- end to end: a real Worker, a real agent returning the link ---------------------------


def test_worker_posts_a_file_from_the_repo_as_media(connected: Connected) -> None:
    repo = connected.tmp / "repo-bot"
    repo.mkdir(exist_ok=True)
    (repo / "report.txt").write_text("the report")
    connected.worker(agent_cmd(TRICK))
    e1 = connected.say("alice", f"@bot link {_uri(repo / 'report.txt')}")
    reply = connected.wait_reply(e1["id"])
    assert reply["text"] == "linked"
    media = [e for e in connected.events() if e["type"] == "media" and e["sender"] == "bot"]
    assert [m["attachments"][0]["name"] for m in media] == ["report.txt"]
    with connected.hub.client(connected.setup.tokens["alice"]) as c:
        body = c.get(f"/v1/media/{media[0]['attachments'][0]['id']}").content
    assert body == b"the report"


@pytest.mark.parametrize("trick", ["outside", "symlink", "hardlink", "fifo", "dotdot"])
def test_worker_refuses_the_trick_with_a_one_line_notice(connected: Connected, trick: str) -> None:
    repo = connected.tmp / "repo-bot"
    repo.mkdir(exist_ok=True)
    secret = connected.tmp / "secret.txt"
    secret.write_text("secret")
    target = {
        "outside": secret,
        "symlink": repo / "s.txt",
        "hardlink": repo / "h.txt",
        "fifo": repo / "p",
        "dotdot": f"{repo}/../secret.txt",
    }[trick]
    if trick == "symlink":
        (repo / "s.txt").symlink_to(secret)
    elif trick == "hardlink":
        os.link(secret, repo / "h.txt")
    elif trick == "fifo":
        os.mkfifo(repo / "p")
    connected.worker(agent_cmd(TRICK))
    e1 = connected.say("alice", f"@bot link {_uri(target)}")
    connected.wait_reply(e1["id"])
    notices = wait_for(
        lambda: [e for e in connected.events() if e["text"].startswith("Not sent: ")]
    )
    assert len(notices) == 1 and "\n" not in notices[0]["text"]
    assert not [e for e in connected.events() if e["type"] == "media"]
