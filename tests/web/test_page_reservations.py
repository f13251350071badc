"""Reserved files on the page (docs/reservations.md "On the page"), in headless Chromium
against a real hub: the workspace's live reservations — holder, exclusive or shared, the
patterns, the project, until when, why — read when the panel opens and again when a
reservation notice arrives in the open room."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import Page, expect
from webhelp import open_room, sign_in

from hubproc import Setup


@pytest.fixture
def setup(shared_setup: Setup) -> Setup:
    return shared_setup


def reserve(setup: Setup, who: str, paths: list[str], exclusive: bool, reason: str) -> Any:
    with setup.hub.client(setup.tokens[who]) as c:
        r = c.post(
            f"/v1/workspaces/{setup.workspace}/reservations",
            json={
                "project": "github.com/acme/app",
                "paths": paths,
                "exclusive": exclusive,
                "ttl_seconds": 3600,
                "reason": reason,
                "room": setup.room,
            },
        )
    assert r.status_code == 201, r.text
    return r.json()["reservation"]


def test_the_panel_lists_live_reservations_and_follows_the_room(page: Page, setup: Setup) -> None:
    mine = reserve(setup, "bot", ["src/auth/**"], True, "refactoring <auth>")
    sign_in(page, setup.hub, setup.tokens["alice"])
    open_room(page, "general")
    page.get_by_role("button", name="Reserved files").click()
    listed = page.get_by_role("list", name="Reservations").get_by_role("listitem")
    expect(listed).to_have_count(1)
    expect(listed.first).to_contain_text("bot holds exclusively src/auth/**")
    expect(listed.first).to_contain_text("in github.com/acme/app, until")
    expect(listed.first).to_contain_text("refactoring <auth>")  # text, never markup

    # Another grant announced in the room: its notice arrives live and the list follows.
    reserve(setup, "helper", ["docs/**"], False, "")
    expect(listed).to_have_count(2)
    expect(listed.filter(has_text="helper holds shared docs/**")).to_have_count(1)

    with setup.hub.client(setup.tokens["bot"]) as c:
        assert c.delete(f"/v1/reservations/{mine['id']}").status_code == 200
    expect(listed).to_have_count(1)
    expect(listed.first).to_contain_text("helper holds shared")
    expect(page.get_by_role("status").filter(has_text="1 live reservation")).to_be_visible()
