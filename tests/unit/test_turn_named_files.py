"""Files a real agent names as `file:///…` links in its reply text (connect/turns.py)."""

from __future__ import annotations

from agentpost.connect import turns
from agentpost.connect.acp import Update
from agentpost.connect.turns import TurnCollector, named_files


def test_links_in_prose_and_markdown_are_found_once_without_trailing_punctuation() -> None:
    text = (
        "Wrote [report](file:///repo/out/report.md). See also file:///repo/a%20b.txt, "
        "and again file:///repo/out/report.md!"
    )
    assert named_files(text, []) == [
        ("file:///repo/out/report.md", "report.md"),
        ("file:///repo/a%20b.txt", "a b.txt"),
    ]


def test_a_file_already_sent_as_a_resource_link_is_not_named_twice() -> None:
    assert named_files("here: file:///repo/x.txt", [("file:///repo/x.txt", "x.txt")]) == []


def test_only_absolute_file_links_count() -> None:
    assert named_files("see ./x.txt, /repo/y.txt, https://e.com/z, file://host/etc", []) == []


def test_a_turn_names_its_text_links_beside_its_resource_links_capped() -> None:
    c = TurnCollector("s1")
    many = " ".join(f"file:///repo/f{i}.txt" for i in range(turns.MAX_LINKS + 3))
    c.add(Update("s1", "link", uri="file:///repo/first.bin", name="first.bin",
                 update="agent_message_chunk"))
    c.add(Update("s1", "text", text=many, update="agent_message_chunk"))
    result = turns.ended(turns.END_TURN, {}, c)
    assert result.links == [("file:///repo/first.bin", "first.bin")]
    assert len(result.links) + len(result.named) == turns.MAX_LINKS
    assert result.named[0] == ("file:///repo/f0.txt", "f0.txt")
    assert result.dropped_links == 4
