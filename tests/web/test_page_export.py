"""Exporting the open room from the page (docs/web.md "Export"), in headless Chromium against
a real hub: the download is the hub's export, fetched with the token in a header."""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import Page, Request, expect
from webhelp import open_room, post, sign_in

from hubproc import Setup


@pytest.fixture
def setup(shared_setup: Setup) -> Setup:
    return shared_setup


def test_the_room_downloads_as_markdown_and_jsonl(page: Page, setup: Setup) -> None:
    post(setup.hub, setup.tokens["carol"], setup.room, "minutes of <today>")
    asked: list[Request] = []
    page.on("request", lambda r: asked.append(r) if "/export?" in r.url else None)
    sign_in(page, setup.hub, setup.tokens["alice"])
    open_room(page, "general")

    page.get_by_role("button", name="Export").click()
    with page.expect_download() as got:
        page.get_by_role("button", name="Download Markdown").click()
    md = got.value
    assert md.suggested_filename == "general.md"
    path = md.path()
    assert path is not None
    text = path.read_text()
    assert text.startswith("# general\n") and "minutes of &lt;today&gt;" in text
    expect(page.get_by_role("status").filter(has_text="Saved general.md.")).to_be_visible()

    with page.expect_download() as got:
        page.get_by_role("button", name="Download JSONL").click()
    path = got.value.path()
    assert path is not None
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert lines[0]["export"] == "agentpost-room" and lines[-1]["end"] == "agentpost-room"
    assert [line["text"] for line in lines[1:-1] if "seq" in line] == ["minutes of <today>"]

    assert len(asked) == 2
    for request in asked:  # the token travels in the header, never in the URL
        assert setup.tokens["alice"] not in request.url
        assert request.headers["authorization"] == f"Bearer {setup.tokens['alice']}"
