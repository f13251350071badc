"""The append-only log: fsync'd lines, torn tails tolerated, compaction by atomic replace."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentpost.mail.errors import StateUnreadable, StorageFailed
from agentpost.mail.log import Acked, Join, MailLog, Pinned


def test_records_read_back_in_order(tmp_path: Path) -> None:
    log = MailLog(tmp_path / "agentpost" / "log.jsonl")
    assert not log.exists()
    recs = [Join("in_1", "alice", "t1"), Pinned("mb", "k", "t2"), Acked("ml_1", "mb", "t3")]
    log.append(recs[:1])
    log.append(recs[1:])
    read = log.read()
    assert read.records == recs
    assert (read.lines, read.skipped) == (3, 0)
    assert (log.path.stat().st_mode & 0o777) == 0o600


def test_a_line_torn_by_a_crash_is_skipped_and_the_next_append_cuts_it_off(
    tmp_path: Path,
) -> None:
    log = MailLog(tmp_path / "log.jsonl")
    log.append([Join("in_1", "alice", "t1")])
    with open(log.path, "ab") as f:
        f.write(b'{"t":"join","instance_id":"in_2","na')
    assert log.read().skipped == 1, "a torn last line was never acted on"
    log.append([Join("in_3", "carol", "t3")])
    read = log.read()
    assert [r.instance_id for r in read.records if isinstance(r, Join)] == ["in_1", "in_3"]
    assert read.skipped == 0, "the fragment is gone, so it cannot become a hole"


def test_a_complete_record_missing_only_its_newline_is_kept_by_the_next_append(
    tmp_path: Path,
) -> None:
    log = MailLog(tmp_path / "log.jsonl")
    log.append([Join("in_1", "alice", "t1")])
    log.path.write_bytes(log.path.read_bytes().rstrip(b"\n"))
    log.append([Join("in_2", "bob", "t2")])
    assert [r.instance_id for r in log.read().records if isinstance(r, Join)] == ["in_1", "in_2"]


def test_a_corrupt_line_in_the_middle_fails_closed_naming_the_line_and_the_repair(
    tmp_path: Path,
) -> None:
    log = MailLog(tmp_path / "log.jsonl")
    log.append([Join("in_1", "alice", "t1")])
    with open(log.path, "ab") as f:
        f.write(b"#### not json ####\n")
    log.append([Join("in_2", "bob", "t2")])
    with pytest.raises(StateUnreadable) as err:
        log.read()
    assert err.value.code == "state_unreadable"
    assert "line 2 of" in err.value.message
    assert "agentpost mail repair" in err.value.message
    good, bad = log.split_readable()
    assert (len(good), bad) == (2, [(2, b"#### not json ####")])


def test_a_record_of_a_kind_this_version_does_not_know_fails_closed(tmp_path: Path) -> None:
    log = MailLog(tmp_path / "log.jsonl")
    log.path.write_bytes(b'{"t":"from-the-future","x":1}\n')
    log.append([Join("in_1", "alice", "t1")])
    with pytest.raises(StateUnreadable):
        log.read()


def test_existing_lines_are_never_rewritten_by_append(tmp_path: Path) -> None:
    log = MailLog(tmp_path / "log.jsonl")
    log.append([Join("in_1", "alice", "t1")])
    before = log.path.read_bytes()
    log.append([Join("in_2", "bob", "t2")])
    assert log.path.read_bytes().startswith(before)


def test_replace_swaps_in_exactly_the_kept_records(tmp_path: Path) -> None:
    log = MailLog(tmp_path / "log.jsonl")
    log.append([Join("in_1", "alice", "t1"), Acked("ml_1", "mb", "t2")])
    log.replace([Join("in_1", "alice", "t1")])
    assert log.read().records == [Join("in_1", "alice", "t1")]
    assert [p.name for p in tmp_path.iterdir()] == ["log.jsonl"], "no temp file left behind"


def test_an_append_that_cannot_be_made_durable_is_an_error_with_a_code(tmp_path: Path) -> None:
    blocked = tmp_path / "not-a-dir"
    blocked.write_text("a file where the mail dir should be")
    with pytest.raises(StorageFailed) as err:
        MailLog(blocked / "log.jsonl").append([Join("in_1", "alice", "t1")])
    assert err.value.code == "storage_failed"


@settings(max_examples=40, deadline=None)
@given(
    names=st.lists(st.from_regex(r"[a-z][a-z0-9-]{0,12}", fullmatch=True), min_size=1, max_size=6),
    cut=st.integers(min_value=1, max_value=200),
)
def test_any_crash_cut_of_the_last_line_keeps_every_earlier_record(
    tmp_path_factory: pytest.TempPathFactory, names: list[str], cut: int
) -> None:
    log = MailLog(tmp_path_factory.mktemp("log") / "log.jsonl")
    records = [Join(f"in_{i}", name, "t") for i, name in enumerate(names)]
    log.append(records)
    data = log.path.read_bytes()
    last_start = data.rstrip(b"\n").rfind(b"\n") + 1
    cut_at = min(len(data) - 1, last_start + cut % max(1, len(data) - last_start - 1))
    log.path.write_bytes(data[:cut_at])
    assert log.read().records[: len(records) - 1] == records[:-1]
    log.append([Join("in_new", "after", "t")])
    assert log.read().records[-1] == Join("in_new", "after", "t")
