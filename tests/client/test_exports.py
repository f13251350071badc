"""How the client tells a whole export from one cut short or stopped by the hub
(client/exports.py): only an export whose last line is its end line is whole."""

from __future__ import annotations

import pytest

from agentpost.client import HubRefused, HubUnavailable
from agentpost.client.exports import CUT_SHORT, _ended
from agentpost.core import export as fmt

EVENT = b'{"id":"ev_1","seq":1,"text":"hi"}\n'
END = fmt.end_line(fmt.JSONL, {"end": fmt.ROOM, "events": 1, "last_seq": 1})


def test_an_export_that_ends_with_its_end_line_is_whole() -> None:
    assert _ended(fmt.JSONL, EVENT + END, "rm_1")["last_seq"] == 1
    md = b"# general\n\n" + fmt.end_line(
        fmt.MARKDOWN, {"end": fmt.ROOM, "events": 0, "last_seq": 0}
    )
    assert _ended(fmt.MARKDOWN, md, "rm_1")["events"] == 0


@pytest.mark.parametrize(
    "tail",
    [b"", EVENT, EVENT + END[:-1], EVENT + END[:20], END + EVENT, b'{"end":"other"}\n'],
)
def test_an_export_without_its_end_line_was_cut_short(tail: bytes) -> None:
    with pytest.raises(HubUnavailable) as cut:
        _ended(fmt.JSONL, tail, "rm_1")
    assert cut.value.code == CUT_SHORT and cut.value.retryable


def test_an_export_the_hub_stopped_raises_its_refusal() -> None:
    stopped = fmt.end_line(fmt.JSONL, {"error": {"code": "member_removed", "message": "gone"}})
    with pytest.raises(HubRefused) as refused:
        _ended(fmt.JSONL, EVENT + stopped, "rm_1")
    assert refused.value.code == "member_removed" and not refused.value.retryable
    md = fmt.end_line(fmt.MARKDOWN, {"error": {"code": "channel_membership_required"}})
    with pytest.raises(HubRefused):
        _ended(fmt.MARKDOWN, b"# general\n" + md, "rm_1")
