"""What a new user meets first on the page (docs/web.md): the sign-in card and its words for a
wrong token, and a room on a phone 375 px wide, asserted on the boxes the browser draws.

One hub per engine serves this module's tests, each in a workspace of its own."""

from __future__ import annotations

import pytest
from playwright.sync_api import Locator, Page, expect
from webhelp import open_room, post, sign_in

from hubproc import Setup

PHONE = {"width": 375, "height": 740}

# How many lines a box's text takes, counted from the rectangles of its rendered text.
LINES = """el => {
    const range = document.createRange();
    range.selectNodeContents(el);
    const tops = [...range.getClientRects()].filter(r => r.width > 1).map(r => Math.round(r.top));
    return new Set(tops).size;
}"""


@pytest.fixture
def setup(shared_setup: Setup) -> Setup:
    return shared_setup


def box(locator: Locator) -> dict[str, float]:
    found = locator.bounding_box()
    assert found is not None, locator
    return found


def overlap(a: dict[str, float], b: dict[str, float]) -> bool:
    return (
        a["x"] < b["x"] + b["width"]
        and b["x"] < a["x"] + a["width"]
        and a["y"] < b["y"] + b["height"]
        and b["y"] < a["y"] + a["height"]
    )


def test_a_first_wrong_token_is_said_to_be_refused_not_signed_out(
    page: Page, setup: Setup
) -> None:
    page.goto(setup.hub.url + "/")
    page.get_by_label("Token").fill("ap_not-a-real-token")
    page.get_by_role("button", name="Sign in").click()
    alert = page.get_by_role("alert")
    expect(alert).to_contain_text("That token was not accepted by this hub")
    expect(alert).not_to_contain_text("Signed out")
    expect(page.get_by_label("Token")).to_be_focused()


@pytest.mark.parametrize("viewport", [{"width": 1100, "height": 800}, PHONE])
def test_the_sign_in_card_is_as_tall_as_what_it_holds(
    page: Page, setup: Setup, viewport: dict[str, int]
) -> None:
    page.set_viewport_size(viewport)
    page.goto(setup.hub.url + "/")
    card = page.get_by_role("region", name="Sign in")
    expect(card).to_be_visible()
    last = card.get_by_text("Use a member token from")
    below = box(card)["y"] + box(card)["height"] - (box(last)["y"] + box(last)["height"])
    # Its padding and the hint's margin, not the rest of the window.
    assert 0 <= below < 60, below
    assert box(card)["y"] + box(card)["height"] < viewport["height"] - 150


def test_at_375_px_the_action_bar_never_covers_the_messages_text(
    page: Page, setup: Setup
) -> None:
    page.set_viewport_size(PHONE)
    text = "Great. @bot can you get the release notes going before lunch?"
    mine = post(setup.hub, setup.tokens["alice"], setup.room, text)
    sign_in(page, setup.hub, setup.tokens["alice"])
    open_room(page, "general")
    words = page.get_by_text(text)
    bar = page.get_by_role("group", name=f"Actions on #{mine['seq']}")

    words.hover()  # a mouse over the message, or a finger's tap
    expect(bar.get_by_role("button", name=f"Reply to alice #{mine['seq']}")).to_be_visible()
    assert not overlap(box(bar), box(words)), (box(bar), box(words))
    assert box(bar)["x"] >= 0 and box(bar)["x"] + box(bar)["width"] <= PHONE["width"]

    page.mouse.move(1, PHONE["height"] - 1)
    bar.get_by_role("button", name=f"Edit #{mine['seq']}").focus()  # reached with Tab
    assert not overlap(box(bar), box(words)), (box(bar), box(words))
    bar.get_by_role("button", name=f"Edit #{mine['seq']}").click()
    expect(page.get_by_label("Message")).to_have_value(text)


def test_at_375_px_who_you_are_and_the_rooms_name_are_not_cut(page: Page, setup: Setup) -> None:
    page.set_viewport_size(PHONE)
    name = "release-planning-for-the-spring-launch"
    with setup.hub.client(setup.tokens["alice"]) as c:
        r = c.post(f"/v1/workspaces/{setup.workspace}/rooms", json={"name": name})
        assert r.status_code == 201, r.text
    sign_in(page, setup.hub, setup.tokens["alice"])
    open_room(page, name)
    title = page.get_by_role("heading", name=name)
    whoami = page.get_by_text(f"alice (human) in {setup.workspace}")
    for part in (title, whoami):
        expect(part).to_be_visible()
        clipped = part.evaluate("el => el.scrollWidth > el.clientWidth")
        assert not clipped, part
        assert box(part)["x"] >= 0 and box(part)["x"] + box(part)["width"] <= PHONE["width"]
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]


def test_at_375_px_the_rooms_tools_keep_one_row_and_export_one_line(
    page: Page, setup: Setup
) -> None:
    page.set_viewport_size(PHONE)
    sign_in(page, setup.hub, setup.tokens["alice"])
    open_room(page, "general")
    names = ("Show delivery details", "People and settings", "Export", "Reserved files")
    tools = [page.get_by_role("button", name=n, exact=True) for n in names]
    for tool in tools:
        expect(tool).to_be_visible()
        assert tool.evaluate(LINES) == 1, tool
        assert box(tool)["x"] + box(tool)["width"] <= PHONE["width"], tool
    export = tools[2]
    assert {round(box(tool)["y"]) for tool in tools} == {round(box(export)["y"])}
    export.click()
    expect(page.get_by_role("button", name="Download Markdown")).to_be_visible()
