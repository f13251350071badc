"""Edits, reactions and redactions on the page (docs/web.md), live from the room's stream, in
headless Chromium against a real hub: the latest text with an "edited" mark, reactions under
the message by their accessible names, "Message deleted" for a redaction."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect
from webhelp import open_room, post, sign_in

from hubproc import Setup


@pytest.fixture
def setup(shared_setup: Setup) -> Setup:
    return shared_setup


def relate(setup: Setup, who: str, event_id: str, kind: str, **body: object) -> None:
    with setup.hub.client(setup.tokens[who]) as c:
        r = c.post(f"/v1/rooms/{setup.room}/events/{event_id}/{kind}", json=body)
        assert r.status_code == 201, r.text


def test_an_edit_a_reaction_and_a_redaction_appear_live(page: Page, setup: Setup) -> None:
    sign_in(page, setup.hub, setup.tokens["alice"])
    open_room(page, "general")
    ev = post(setup.hub, setup.tokens["bot"], setup.room, "⏳ On it…")
    item = page.locator(f'[data-event-id="{ev["id"]}"]')
    expect(item).to_contain_text("⏳ On it…")

    relate(setup, "bot", ev["id"], "edits", text="build 42 is <b>green</b>")
    expect(item).to_contain_text("build 42 is <b>green</b> (edited)")
    expect(item.get_by_text("(edited)")).to_be_visible()
    expect(item).not_to_contain_text("On it")

    relate(setup, "carol", ev["id"], "reactions", emoji="🎉")
    relate(setup, "alice", ev["id"], "reactions", emoji="🎉")
    reactions = item.get_by_role("list", name="Reactions")
    expect(reactions.get_by_role("listitem", name="🎉 2: carol, alice")).to_have_text("🎉 2")
    relate(setup, "carol", ev["id"], "reactions", emoji="🎉", remove=True)
    expect(reactions.get_by_role("listitem", name="🎉 1: alice")).to_be_visible()

    relate(setup, "alice", ev["id"], "redactions")  # alice owns the agent bot
    expect(item.get_by_text("Message deleted")).to_be_visible()
    expect(item).not_to_contain_text("build 42")
    expect(item.get_by_role("list", name="Reactions")).to_have_count(0)
    # The relation events keep their places in the list, hidden; nothing else was drawn.
    assert page.locator("[data-event-id]:visible").count() == 1
    assert page.locator("[data-relates-to]").count() == 5
    assert page.locator("b").count() == 0  # text, never HTML


def test_a_reload_shows_the_message_as_it_reads_now(page: Page, setup: Setup) -> None:
    ev = post(setup.hub, setup.tokens["alice"], setup.room, "first draft")
    relate(setup, "alice", ev["id"], "edits", text="final text")
    relate(setup, "carol", ev["id"], "reactions", emoji="👍")
    sign_in(page, setup.hub, setup.tokens["carol"])
    open_room(page, "general")
    item = page.locator(f'[data-event-id="{ev["id"]}"]')
    expect(item).to_contain_text("final text (edited)")
    expect(item.get_by_role("listitem", name="👍 1: carol")).to_be_visible()
