"""Review of issue 25 (attack): files named as file:/// links in a reply's text
(turns.named_files) go through the egress judge. The judge holds (workspace, data home,
another Session's attachment, symlinks, `..`, percent-encoding are refused), but a mere
mention of the file the agent was sent makes the Worker post a "Not sent" notice that
spells the Worker's private path into the room."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from agentpost.connect import replies, turns
from agentpost.connect.acp import Update
from agentpost.egress import EgressRefused, EgressRoots


def _layout(tmp_path: Path) -> tuple[Path, Path, EgressRoots]:
    repo = tmp_path / "repo"
    ws = repo / ".agentpost-ws"  # a workspace inside the repo: still never egress
    mine = ws / "files" / "session-abc" / "ev_01"
    other = ws / "files" / "session-abcd" / "ev_02"
    for d in (mine, other):
        d.mkdir(parents=True)
    (mine / "med_1-in.txt").write_text("mine")
    (other / "med_2-theirs.txt").write_text("theirs")
    (ws / "token").write_text("ap_secret")
    (repo / "ok.txt").write_text("ok")
    return repo, ws, EgressRoots([repo], 1 << 20, never=[ws])


@pytest.mark.parametrize(
    "named",
    [
        "{ws}/files/session-abcd/ev_02/med_2-theirs.txt",  # another Session's attachment
        "{ws}/token",
        "{repo}/.agentpost-ws/files/session-abc/../session-abcd/ev_02/med_2-theirs.txt",
        "{repo}/%2eagentpost-ws/token",
        "{repo}/.agentpost-ws%2Ftoken",
    ],
)
def test_the_egress_judge_refuses_what_a_reply_text_names(tmp_path: Path, named: str) -> None:
    repo, ws, egress = _layout(tmp_path)
    text = "see file://" + named.format(ws=ws, repo=repo)
    links = turns.named_files(text, [])
    assert links, text
    for uri, _ in links:
        with pytest.raises(EgressRefused):
            egress.open(uri)


def test_mentioning_the_file_it_was_sent_posts_no_notice_with_the_private_path(
    tmp_path: Path,
) -> None:
    repo, ws, egress = _layout(tmp_path)
    sent = (ws / "files" / "session-abc" / "ev_01" / "med_1-in.txt").resolve().as_uri()
    c = turns.TurnCollector("s1")
    # What real agents write after reading the resource link the Worker gave them.
    c.add(Update("s1", "text", text=f"I read [in.txt]({sent}): it says mine.",
                 update="agent_message_chunk"))
    result = turns.ended(turns.END_TURN, {}, c)
    assert [u for u, _ in result.named] == [sent]
    refused: list[str] = []
    named = frozenset(u for u, _ in result.named)
    files = asyncio.run(replies._open_files(
        "mb_1", "ev_01", [*result.links, *result.named], egress, refused, named))
    assert files == []
    assert refused == [], f"the room would be told: Not sent: {'; '.join(refused)}"
