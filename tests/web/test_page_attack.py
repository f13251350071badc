"""The chat page under attack (issue 27): a send whose answer comes after you switched
rooms, text typed while a send is on its way, an input method composing over the
@-completion list, the tab title while the tab is hidden, a message deleted in another tab
while this one deletes or edits it; and what held: an edit left by switching rooms, an edit
retried after a lost answer, the phone layout of the room forms.

Every test drives headless Chromium against a real hub process; a request held on its
way (Playwright's route) stands for a slow hub."""

from __future__ import annotations

from playwright.sync_api import Dialog, Page, Route, expect
from webhelp import events, open_room, post, sign_in

from hubproc import Setup, poll


def _second_room(setup: Setup, name: str = "second") -> str:
    with setup.hub.client(setup.tokens["alice"]) as c:
        body = {"name": name, "participants": ["carol"]}
        r = c.post(f"/v1/workspaces/{setup.workspace}/rooms", json=body)
        assert r.status_code == 201, r.text
        room_id: str = r.json()["room"]["id"]
        return room_id


def _hold_posts(page: Page) -> list[Route]:
    """Hold every POST of a message until the test lets it go (a slow hub)."""
    held: list[Route] = []

    def hold(route: Route) -> None:
        if route.request.method == "POST":
            held.append(route)
        else:
            route.continue_()

    page.route("**/v1/rooms/*/messages", hold)
    return held


def _wait_held(page: Page, held: list[Route]) -> None:
    """Until a request is held: each look is a call into Playwright, which runs the route
    handler (the sync API dispatches only while it is called)."""
    poll(lambda: page.evaluate("0") or held)


def test_a_message_sent_before_switching_rooms_does_not_come_back_as_a_draft(
    page: Page, setup: Setup
) -> None:
    _second_room(setup)
    sign_in(page, setup.hub, setup.tokens["alice"])
    open_room(page, "general")
    held = _hold_posts(page)
    page.get_by_label("Message").fill("sent from general")
    page.keyboard.press("Enter")
    _wait_held(page, held)
    open_room(page, "second")  # the answer comes while another room is open
    held[0].continue_()
    expect(page.get_by_role("status").filter(has_text="Posted.")).to_be_visible()
    page.unroute("**/v1/rooms/*/messages")
    assert [e["text"] for e in events(setup.hub, setup.tokens["alice"], setup.room)] == [
        "sent from general"
    ]
    open_room(page, "general")
    expect(page.locator("[data-event-id]").last).to_contain_text("sent from general")
    expect(page.get_by_label("Message")).to_have_value("")  # posted: no draft left behind
    page.reload()
    expect(page.get_by_role("status").filter(has_text="Live")).to_be_visible()
    expect(page.get_by_label("Message")).to_have_value("")


def test_text_typed_while_a_send_is_on_its_way_is_kept(page: Page, setup: Setup) -> None:
    sign_in(page, setup.hub, setup.tokens["alice"])
    open_room(page, "general")
    held = _hold_posts(page)
    box = page.get_by_label("Message")
    box.fill("first")
    page.keyboard.press("Enter")
    _wait_held(page, held)
    page.keyboard.press("Enter")  # again while on its way: not a second post
    box.fill("second, typed while the first was on its way")
    held[0].continue_()
    expect(page.get_by_role("status").filter(has_text="Posted.")).to_be_visible()
    expect(box).to_have_value("second, typed while the first was on its way")
    assert len(held) == 1
    page.unroute("**/v1/rooms/*/messages")
    page.keyboard.press("Enter")
    expect(page.locator("[data-event-id]").last).to_contain_text("second, typed while")
    texts = [e["text"] for e in events(setup.hub, setup.tokens["alice"], setup.room)]
    assert texts == ["first", "second, typed while the first was on its way"]


def test_enter_that_ends_an_input_method_composition_does_not_pick_a_mention(
    page: Page, setup: Setup
) -> None:
    sign_in(page, setup.hub, setup.tokens["alice"])
    open_room(page, "general")
    expect(page.get_by_role("list", name="Who is here").get_by_role("listitem")).to_have_count(4)
    box = page.get_by_label("Message")
    box.click()
    page.keyboard.type("@h")
    options = page.get_by_role("listbox", name="Mention someone").get_by_role("option")
    expect(options).to_have_text(["@helper"])
    # What an IME sends when Enter commits its text: a keydown with isComposing.
    box.evaluate(
        """b => b.dispatchEvent(new KeyboardEvent('keydown',
             {key: 'Enter', isComposing: true, bubbles: true, cancelable: true}))"""
    )
    expect(box).to_have_value("@h")
    expect(options).to_have_text(["@helper"])


def test_the_tab_title_counts_the_open_rooms_new_messages_while_the_tab_is_hidden(
    page: Page, setup: Setup
) -> None:
    sign_in(page, setup.hub, setup.tokens["alice"])
    open_room(page, "general")
    expect(page).to_have_title("agentpost · general")
    page.evaluate(
        """() => {
          Object.defineProperty(document, 'visibilityState', {get: () => 'hidden', configurable: true});
          document.dispatchEvent(new Event('visibilitychange'));
        }"""
    )
    post(setup.hub, setup.tokens["carol"], setup.room, "@bot while alice looks away")
    expect(page.locator("[data-event-id]").last).to_contain_text("while alice looks away")
    expect(page).to_have_title("(1) agentpost · general", timeout=5_000)  # not at the next poll
    page.evaluate(
        """() => {
          Object.defineProperty(document, 'visibilityState', {get: () => 'visible', configurable: true});
          document.dispatchEvent(new Event('visibilitychange'));
        }"""
    )
    expect(page).to_have_title("agentpost · general")
    last = events(setup.hub, setup.tokens["alice"], setup.room)[-1]["seq"]

    def read_up_to_last() -> bool:
        with setup.hub.client(setup.tokens["alice"]) as c:
            return bool(c.get(f"/v1/rooms/{setup.room}").json()["room"]["read_seq"] == last)

    poll(read_up_to_last)


def test_an_edit_left_by_switching_rooms_keeps_the_draft_and_is_no_draft(
    page: Page, setup: Setup
) -> None:
    _second_room(setup)
    mine = post(setup.hub, setup.tokens["alice"], setup.room, "teh plan")
    sign_in(page, setup.hub, setup.tokens["alice"])
    open_room(page, "general")
    box = page.get_by_label("Message")
    box.fill("my draft in general")
    page.get_by_role("button", name=f"Edit #{mine['seq']}").click()
    expect(box).to_have_value("teh plan")
    box.fill("the plan")
    open_room(page, "second")
    expect(box).to_have_value("")
    open_room(page, "general")
    expect(box).to_have_value("my draft in general")
    expect(page.get_by_text("Editing your message")).to_be_hidden()


def test_an_edit_retried_after_a_lost_answer_is_one_edit(page: Page, setup: Setup) -> None:
    mine = post(setup.hub, setup.tokens["alice"], setup.room, "teh plan")
    sign_in(page, setup.hub, setup.tokens["alice"])
    open_room(page, "general")
    lost: list[int] = []

    def lose(route: Route) -> None:
        route.fetch()
        lost.append(1)
        route.abort()

    page.route("**/edits", lose)
    page.get_by_role("button", name=f"Edit #{mine['seq']}").click()
    page.get_by_label("Message").fill("the plan")
    page.keyboard.press("Enter")
    expect(page.get_by_role("status").filter(has_text="No answer from the hub")).to_be_visible()
    page.unroute("**/edits")
    page.keyboard.press("Enter")
    expect(page.get_by_role("status").filter(has_text="Edited.")).to_be_visible()
    stored = events(setup.hub, setup.tokens["alice"], setup.room)
    assert len([e for e in stored if e.get("relates_to")]) == 1, stored


def test_deleting_or_editing_a_message_another_tab_deleted_says_it_is_deleted(
    page: Page, setup: Setup
) -> None:
    first = post(setup.hub, setup.tokens["alice"], setup.room, "oops")
    second = post(setup.hub, setup.tokens["alice"], setup.room, "teh plan")

    def delete_elsewhere(event: dict[str, str]) -> None:
        with setup.hub.client(setup.tokens["alice"]) as c:
            path = f"/v1/rooms/{setup.room}/events/{event['id']}/redactions"
            assert c.post(path, json={}).status_code in (200, 201)

    def other_tab_first(dialog: Dialog) -> None:
        delete_elsewhere(first)  # while this tab asks "Delete …?"
        dialog.accept()

    page.on("dialog", other_tab_first)
    sign_in(page, setup.hub, setup.tokens["alice"])
    open_room(page, "general")
    page.get_by_role("button", name=f"Delete #{first['seq']}").click()
    status = page.locator("#composer-status")
    expect(status).to_have_text("Deleted (it was deleted already).")
    expect(page.locator(f'[data-event-id="{first["id"]}"]')).to_contain_text("Message deleted")

    box = page.get_by_label("Message")
    box.fill("my draft")
    page.get_by_role("button", name=f"Edit #{second['seq']}").click()
    box.fill("the plan")
    page.route("**/edits", lambda route: (delete_elsewhere(second), route.continue_()))
    page.keyboard.press("Enter")
    expect(status).to_have_text("Not edited: the message was deleted meanwhile.")
    expect(page.get_by_text("Editing your message")).to_be_hidden()
    expect(box).to_have_value("my draft")


def test_at_375_px_the_new_room_form_and_the_manage_panel_fit(page: Page, setup: Setup) -> None:
    page.set_viewport_size({"width": 375, "height": 667})
    sign_in(page, setup.hub, setup.tokens["alice"])
    page.get_by_role("button", name="New room").click()
    page.get_by_label("Room name").fill("x" * 64)
    assert page.evaluate("document.documentElement.scrollWidth") <= 375
    page.get_by_role("button", name="general", exact=True).click()
    page.get_by_role("button", name="People and settings").click()
    expect(page.get_by_role("button", name="Remove helper from the room")).to_be_visible()
    assert page.evaluate("document.documentElement.scrollWidth") <= 375
    # One look at every button at once: a presence frame may draw the list again.
    poll(
        lambda: page.evaluate(
            """() => [...document.querySelectorAll('#manage-panel button')].every(b => {
                 const r = b.getBoundingClientRect();
                 return r.width > 0 && r.left >= 0 && r.right <= 375;
               })"""
        )
    )
