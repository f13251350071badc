"""The page as a chat app (issue 27, docs/web.md): the newest message in view, a compact
timeline with delivery detail on demand, a phone layout, a composer where Enter sends and
that replies, completes @-names, edits and deletes, rooms made and managed from the page,
unread counts since you last read a room, and presence pushed by the room's stream.

Every test drives headless Chromium by accessible names against a real hub process."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import Page, expect
from webhelp import events, open_room, post, sign_in

from hubproc import Setup, poll


def _gap(page: Page) -> float:
    """How far the timeline is from its bottom, in px (0: the newest is in view)."""
    gap: float = page.locator("#timeline-box").evaluate(
        "b => b.scrollHeight - b.scrollTop - b.clientHeight"
    )
    return gap


def _at_bottom(page: Page) -> None:
    poll(lambda: _gap(page) <= 2, timeout=10)


def _fully_shown(page: Page) -> int:
    """Messages whose whole line is inside the timeline's visible area."""
    n: int = page.evaluate(
        """() => {
          const box = document.getElementById('timeline-box').getBoundingClientRect();
          return [...document.querySelectorAll('[data-event-id]')].filter(e => {
            if (e.hidden) return false;
            const r = e.getBoundingClientRect();
            return r.height > 0 && r.top >= box.top - 1 && r.bottom <= box.bottom + 1;
          }).length;
        }"""
    )
    return n


def _room(setup: Setup, token: str, room: str) -> dict[str, Any]:
    with setup.hub.client(token) as c:
        r = c.get(f"/v1/rooms/{room}")
        assert r.status_code == 200, r.text
        found: dict[str, Any] = r.json()["room"]
        return found


def test_the_newest_message_is_in_view_on_open_send_and_arrival_and_a_pill_when_scrolled_up(
    page: Page, setup: Setup
) -> None:
    for i in range(80):
        post(setup.hub, setup.tokens["carol"], setup.room, f"line {i}")
    sign_in(page, setup.hub, setup.tokens["alice"])
    open_room(page, "general")
    _at_bottom(page)
    page.get_by_label("Message").fill("mine")
    page.keyboard.press("Enter")
    expect(page.get_by_role("status").filter(has_text="Posted.")).to_be_visible()
    expect(page.locator("[data-event-id]").last).to_contain_text("mine")
    _at_bottom(page)
    post(setup.hub, setup.tokens["carol"], setup.room, "arrives while at the bottom")
    expect(page.locator("[data-event-id]").last).to_contain_text("arrives while at the bottom")
    _at_bottom(page)

    page.locator("#timeline-box").evaluate("b => { b.scrollTop = b.scrollHeight / 2; }")
    poll(lambda: _gap(page) > 100)
    top = page.locator("#timeline-box").evaluate("b => b.scrollTop")
    post(setup.hub, setup.tokens["carol"], setup.room, "arrives while reading back")
    pill = page.get_by_role("button", name="1 new message below")
    expect(pill).to_be_visible()
    assert page.locator("#timeline-box").evaluate("b => b.scrollTop") == top  # no jump
    pill.click()
    _at_bottom(page)
    expect(pill).to_be_hidden()
    expect(page.get_by_label("Message")).to_be_focused()


def test_at_375_px_your_sent_message_is_in_view_and_six_lines_show_with_the_composer(
    page: Page, setup: Setup
) -> None:
    page.set_viewport_size({"width": 375, "height": 667})
    for i in range(30):
        post(setup.hub, setup.tokens["bot"], setup.room, f"step {i} done")
    sign_in(page, setup.hub, setup.tokens["alice"])
    rooms = page.get_by_role("button", name="Rooms")
    expect(rooms).to_have_attribute("aria-expanded", "true")  # no room yet: the list first
    page.get_by_role("button", name="general", exact=True).click()
    expect(rooms).to_have_attribute("aria-expanded", "false")
    expect(page.get_by_role("button", name="general", exact=True)).to_be_hidden()
    expect(page.get_by_role("status").filter(has_text="Live")).to_be_visible()
    expect(page.get_by_role("searchbox", name="Search")).to_be_hidden()
    _at_bottom(page)
    assert _fully_shown(page) >= 6, _fully_shown(page)
    box = page.get_by_label("Message")
    one_row = box.bounding_box()
    assert one_row is not None and one_row["height"] < 48, one_row  # one row when empty
    box.fill("from a phone")
    page.keyboard.press("Shift+Enter")
    page.keyboard.type("second line")
    grown = box.bounding_box()
    assert grown is not None and grown["height"] > one_row["height"], (grown, one_row)
    page.keyboard.press("Enter")
    expect(page.get_by_role("status").filter(has_text="Posted.")).to_be_visible()
    mine = page.locator("[data-event-id]").last
    expect(mine).to_contain_text("from a phone")
    expect(mine).to_be_in_viewport()
    _at_bottom(page)
    assert page.evaluate("document.documentElement.scrollWidth") <= 375
    for control in (page.get_by_role("button", name="Send"), page.locator("label.file-label")):
        where = control.bounding_box()
        assert where is not None and where["x"] >= 0 and where["x"] + where["width"] <= 375
    rooms.click()
    expect(page.get_by_role("searchbox", name="Search")).to_be_visible()
    page.keyboard.press("Escape")
    expect(rooms).to_have_attribute("aria-expanded", "false")


def test_compact_by_default_details_on_demand_and_the_choice_is_remembered(
    page: Page, setup: Setup
) -> None:
    asked = post(setup.hub, setup.tokens["alice"], setup.room, "@bot look at the logs")
    for i in range(40):
        post(setup.hub, setup.tokens["carol"], setup.room, f"short note {i}")
    sign_in(page, setup.hub, setup.tokens["alice"])
    open_room(page, "general")
    _at_bottom(page)
    assert _fully_shown(page) >= 20, _fully_shown(page)  # about one line a message at 800 px
    page.locator("#timeline-box").evaluate("b => { b.scrollTop = 0; }")  # loads the older page
    item = page.locator(f'[data-event-id="{asked["id"]}"]')
    expect(item).to_have_count(1)
    expect(item.get_by_text("Woke bot")).to_be_hidden()
    item.get_by_role("button", name=f"Delivery details of #{asked['seq']}").click()
    expect(item.get_by_text("Woke bot")).to_be_visible()
    toggle = page.get_by_role("button", name="Show delivery details")
    expect(toggle).to_have_attribute("aria-pressed", "false")
    toggle.click()
    expect(toggle).to_have_attribute("aria-pressed", "true")
    expect(page.get_by_text("Woke no one").first).to_be_visible()
    page.reload()
    expect(page.get_by_role("status").filter(has_text="Live")).to_be_visible()
    expect(page.get_by_role("button", name="Show delivery details")).to_have_attribute(
        "aria-pressed", "true"
    )
    expect(page.get_by_text("Woke no one").first).to_be_visible()


def test_enter_sends_shift_enter_is_a_new_line_and_the_placeholder_says_so(
    page: Page, setup: Setup
) -> None:
    sign_in(page, setup.hub, setup.tokens["alice"])
    open_room(page, "general")
    box = page.get_by_label("Message")
    expect(box).to_have_attribute(
        "placeholder", "Message — Enter sends, Shift+Enter for a new line"
    )
    box.click()
    page.keyboard.type("line one")
    page.keyboard.press("Shift+Enter")
    page.keyboard.type("line two")
    expect(page.locator("[data-event-id]")).to_have_count(0)
    page.keyboard.press("Enter")
    expect(page.get_by_role("status").filter(has_text="Posted.")).to_be_visible()
    expect(box).to_have_value("")
    stored = events(setup.hub, setup.tokens["alice"], setup.room)
    assert [e["text"] for e in stored] == ["line one\nline two"]
    page.keyboard.press("Enter")  # an empty box sends nothing
    expect(page.get_by_role("status")).to_contain_text(["Type a message or choose a file first."])
    assert len(events(setup.hub, setup.tokens["alice"], setup.room)) == 1


def test_reply_answers_a_message_and_reports_back_on_a_delegation_to_you(
    page: Page, setup: Setup
) -> None:
    """Delegations go to agents (docs/delegation.md), so the receipt kinds are offered to
    whoever signs in with the agent's token: here helper, asked by bot."""
    plain = post(setup.hub, setup.tokens["carol"], setup.room, "lunch at noon?")
    asked = post(setup.hub, setup.tokens["bot"], setup.room, "@helper please approve the deploy")
    assert asked["metadata"]["delegated_to"] == ["helper"], asked
    sign_in(page, setup.hub, setup.tokens["helper"])
    open_room(page, "general")

    page.get_by_role("button", name=f"Reply to carol #{plain['seq']}").click()
    expect(page.get_by_text(f"Replying to carol #{plain['seq']}: lunch at noon?")).to_be_visible()
    expect(page.get_by_label("Report as")).to_be_hidden()  # not a delegation to helper
    expect(page.get_by_label("Message")).to_be_focused()
    page.keyboard.type("yes")
    page.keyboard.press("Enter")
    expect(page.get_by_role("status").filter(has_text="Posted.")).to_be_visible()
    expect(page.get_by_text("Replying to")).to_be_hidden()

    page.get_by_role("button", name=f"Reply to bot #{asked['seq']}").click()
    page.get_by_label("Report as").select_option("result")
    page.get_by_label("Message").fill("approved")
    page.keyboard.press("Enter")
    expect(page.get_by_role("status").filter(has_text="Posted.")).to_be_visible()
    stored = {e["text"]: e for e in events(setup.hub, setup.tokens["helper"], setup.room)}
    assert stored["yes"]["in_reply_to"] == plain["id"]
    assert stored["yes"]["reply_kind"] is None
    assert stored["approved"]["in_reply_to"] == asked["id"]
    assert stored["approved"]["reply_kind"] == "result"
    assert stored["approved"]["route"] == "receipt" and stored["approved"]["targets"] == ["bot"]
    receipt = page.locator(f'[data-event-id="{stored["approved"]["id"]}"]')
    expect(receipt.locator("[data-reply-kind]")).to_have_text("returned")
    expect(receipt.get_by_role("link", name=f"Answers #{asked['seq']}")).to_be_visible()
    expect(page.locator(f'[data-event-id="{asked["id"]}"]')).to_contain_text(
        "Reported back — helper: returned"
    )

    page.get_by_role("button", name=f"Reply to carol #{plain['seq']}").click()
    page.get_by_role("button", name="Cancel reply").click()
    expect(page.get_by_text("Replying to")).to_be_hidden()


def test_at_completes_names_of_the_rooms_members_by_keyboard(page: Page, setup: Setup) -> None:
    sign_in(page, setup.hub, setup.tokens["alice"])
    open_room(page, "general")
    expect(page.get_by_role("list", name="Who is here").get_by_role("listitem")).to_have_count(4)
    box = page.get_by_label("Message")
    box.click()
    page.keyboard.type("thanks @h")
    options = page.get_by_role("listbox", name="Mention someone").get_by_role("option")
    expect(options).to_have_text(["@helper"])
    expect(box).to_have_attribute("aria-expanded", "true")
    page.keyboard.press("Enter")  # picks; does not send
    expect(box).to_have_value("thanks @helper ")
    expect(options).to_have_count(0)
    page.keyboard.type("and @")
    expect(options).to_have_text(["@bot", "@carol", "@helper"])  # not alice herself
    page.keyboard.press("ArrowDown")
    expect(options.nth(1)).to_have_attribute("aria-selected", "true")
    page.keyboard.press("Tab")
    expect(box).to_have_value("thanks @helper and @carol ")
    page.keyboard.press("Enter")
    expect(page.get_by_role("status").filter(has_text="Posted.")).to_be_visible()
    stored = events(setup.hub, setup.tokens["alice"], setup.room)
    assert stored[-1]["text"] == "thanks @helper and @carol"  # the hub trims the end
    assert sorted(stored[-1]["targets"]) == ["carol", "helper"]  # both mentions wake


def test_you_edit_and_delete_your_own_messages_and_no_one_elses(page: Page, setup: Setup) -> None:
    theirs = post(setup.hub, setup.tokens["carol"], setup.room, "carol's words")
    sign_in(page, setup.hub, setup.tokens["alice"])
    open_room(page, "general")
    page.get_by_label("Message").fill("teh plan")
    page.keyboard.press("Enter")
    expect(page.get_by_role("status").filter(has_text="Posted.")).to_be_visible()
    mine = events(setup.hub, setup.tokens["alice"], setup.room)[-1]
    other = page.locator(f'[data-event-id="{theirs["id"]}"]')
    expect(other.get_by_role("button", name=f"Edit #{theirs['seq']}")).to_have_count(0)
    expect(other.get_by_role("button", name=f"Delete #{theirs['seq']}")).to_have_count(0)

    page.get_by_label("Message").fill("a draft kept aside")
    page.get_by_role("button", name=f"Edit #{mine['seq']}").click()
    box = page.get_by_label("Message")
    expect(box).to_have_value("teh plan")
    expect(page.get_by_text(f"Editing your message #{mine['seq']}")).to_be_visible()
    box.fill("the plan")
    page.keyboard.press("Enter")
    expect(page.get_by_role("status").filter(has_text="Edited.")).to_be_visible()
    expect(box).to_have_value("a draft kept aside")  # the draft comes back
    item = page.locator(f'[data-event-id="{mine["id"]}"]')
    expect(item.locator(".text")).to_have_text("the plan (edited)")
    with setup.hub.client(setup.tokens["carol"]) as c:
        served = c.get(f"/v1/events/{mine['id']}").json()["event"]
    assert served["text"] == "the plan" and served["edited"] is True

    page.once("dialog", lambda d: d.dismiss())
    page.get_by_role("button", name=f"Delete #{mine['seq']}").click()
    expect(item.locator(".text")).to_have_text("the plan (edited)")  # dismissed: nothing
    page.once("dialog", lambda d: d.accept())
    page.get_by_role("button", name=f"Delete #{mine['seq']}").click()
    expect(item.get_by_text("Message deleted")).to_be_visible()
    with setup.hub.client(setup.tokens["carol"]) as c:
        served = c.get(f"/v1/events/{mine['id']}").json()["event"]
    assert served["redacted"] is True and served["text"] == ""


def test_a_person_creates_a_room_invites_removes_and_archives_it_from_the_page(
    page: Page, setup: Setup
) -> None:
    sign_in(page, setup.hub, setup.tokens["alice"])
    page.get_by_role("button", name="New room").click()
    page.get_by_label("Room name").fill("ops")
    page.get_by_label("People (names, comma-separated)").fill("bot, @carol")
    page.get_by_role("button", name="Create room").click()
    expect(page.get_by_role("heading", name="ops")).to_be_visible()
    expect(page.get_by_role("status").filter(has_text="Live")).to_be_visible()
    expect(page.get_by_text("This is the start of #ops. No messages yet")).to_be_visible()
    with setup.hub.client(setup.tokens["alice"]) as c:
        rooms = c.get(f"/v1/workspaces/{setup.workspace}/rooms").json()["rooms"]
    ops = next(r for r in rooms if r["name"] == "ops")
    assert sorted(ops["participants"]) == ["alice", "bot", "carol"]

    page.get_by_role("button", name="People and settings").click()
    page.get_by_label("Add someone").fill("helper")
    page.get_by_role("button", name="Add", exact=True).click()
    expect(page.get_by_text("helper takes part now.")).to_be_visible()
    page.get_by_role("button", name="Remove carol from the room").click()
    expect(page.get_by_text("carol no longer takes part.")).to_be_visible()
    assert sorted(_room(setup, setup.tokens["alice"], ops["id"])["participants"]) == [
        "alice",
        "bot",
        "helper",
    ]
    page.get_by_label("Add someone").fill("nobody-here")
    page.get_by_role("button", name="Add", exact=True).click()
    expect(page.get_by_text("Not changed:")).to_contain_text("member_not_found")

    page.get_by_role("button", name="Archive room").click()
    expect(page.get_by_role("heading", name="ops (archived)")).to_be_visible()
    assert _room(setup, setup.tokens["alice"], ops["id"])["archived"] is True

    page.get_by_role("button", name="New room").click()
    page.get_by_label("Room name").fill("ops")
    page.get_by_role("button", name="Create room").click()
    expect(page.get_by_text("Not created:")).to_contain_text("room_exists")


def test_a_room_you_are_removed_from_leaves_the_list_at_once(page: Page, setup: Setup) -> None:
    sign_in(page, setup.hub, setup.tokens["alice"])
    open_room(page, "general")
    with setup.hub.client(setup.tokens["carol"]) as c:
        assert c.delete(f"/v1/rooms/{setup.room}/participants/alice").status_code == 200
    expect(page.get_by_role("button", name="general", exact=True)).to_have_count(0)
    expect(page.get_by_role("status").filter(has_text="no longer a participant of general"))
    expect(page.get_by_label("Message")).to_be_hidden()


def test_unread_counts_messages_since_you_last_read_and_the_tab_title_says_how_many(
    page: Page, setup: Setup
) -> None:
    with setup.hub.client(setup.tokens["bot"]) as c:
        body = {"name": "builds", "participants": ["alice"]}
        r = c.post(f"/v1/workspaces/{setup.workspace}/rooms", json=body)
        assert r.status_code == 201, r.text
        builds = r.json()["room"]["id"]
    sign_in(page, setup.hub, setup.tokens["alice"])
    open_room(page, "general")
    for i in range(3):
        post(setup.hub, setup.tokens["bot"], builds, f"build {i} passed")  # wakes no one
    post(setup.hub, setup.tokens["bot"], builds, "@alice build 3 failed")
    button = page.get_by_role("button", name="builds", exact=True)
    expect(button).to_have_accessible_description("4 unread 1 for you", timeout=30_000)
    expect(page).to_have_title("(4) agentpost · general")
    open_room(page, "builds")
    expect(button).to_have_accessible_description("")
    expect(page).to_have_title("agentpost · builds")
    last = events(setup.hub, setup.tokens["alice"], builds)[-1]["seq"]
    poll(lambda: _room(setup, setup.tokens["alice"], builds)["read_seq"] == last)
    assert _room(setup, setup.tokens["alice"], builds)["unread"] == 0


def test_presence_is_pushed_by_the_stream_and_unknown_while_the_hub_is_down(
    page: Page, setup: Setup
) -> None:
    with setup.hub.client(setup.hub.admin_token) as c:
        assert c.delete(f"/v1/admin/workspaces/{setup.workspace}/members/carol").status_code == 200
    asked_members: list[str] = []
    page.on(
        "request", lambda r: asked_members.append(r.url) if r.url.endswith("/members") else None
    )
    sign_in(page, setup.hub, setup.tokens["alice"])
    open_room(page, "general")
    people = page.get_by_role("list", name="Who is here").get_by_role("listitem")
    expect(people).to_have_count(3)  # carol was removed: not listed
    expect(people.filter(has_text="helper")).to_have_text("helper never seen")
    post(setup.hub, setup.tokens["helper"], setup.room, "hello")
    expect(people.filter(has_text="helper")).to_have_text("helper online")
    assert asked_members == []  # pushed, not polled
    setup.hub.kill()
    expect(page.get_by_role("status").filter(has_text="Hub unreachable")).to_be_visible()
    expect(people.filter(has_text="alice")).to_have_text("alice unknown")


def test_a_wake_up_raises_a_browser_notification_when_asked_for(page: Page, setup: Setup) -> None:
    page.context.grant_permissions(["notifications"], origin=setup.hub.url)
    page.add_init_script(
        """(() => {
          const Real = window.Notification;
          window.__shown = [];
          class Recorded extends Real {
            constructor(title, options) { super(title, options); window.__shown.push(title); }
          }
          window.Notification = Recorded;
        })()"""
    )
    with setup.hub.client(setup.tokens["bot"]) as c:
        body = {"name": "builds", "participants": ["alice"]}
        builds = c.post(f"/v1/workspaces/{setup.workspace}/rooms", json=body).json()["room"]["id"]
    sign_in(page, setup.hub, setup.tokens["alice"])
    open_room(page, "general")
    notify = page.get_by_role("button", name="Notify me of wake-ups")
    notify.click()
    expect(notify).to_have_attribute("aria-pressed", "true")
    post(setup.hub, setup.tokens["bot"], builds, "@alice nightly failed")
    post(setup.hub, setup.tokens["bot"], builds, "no mention: no wake-up")
    poll(lambda: page.evaluate("window.__shown.length") >= 1, timeout=40)
    assert page.evaluate("window.__shown") == ["bot in #builds"]


CONTRAST = """(selectors) => {
  const rgb = (c) => c.match(/[\\d.]+/g).map(Number);
  const lum = ([r, g, b]) => {
    const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; };
    return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b);
  };
  const background = (el) => {
    for (let at = el; at; at = at.parentElement) {
      const c = rgb(getComputedStyle(at).backgroundColor);
      if (c.length < 4 || c[3] > 0) return c;
    }
    return [255, 255, 255];
  };
  const out = {};
  for (const sel of selectors) {
    const el = document.querySelector(sel);
    if (!el) { out[sel] = null; continue; }
    const a = lum(rgb(getComputedStyle(el).color)), b = lum(background(el));
    out[sel] = (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
  }
  return out;
}"""


def test_every_action_is_reachable_by_keyboard_and_text_meets_aa_contrast(
    page: Page, setup: Setup
) -> None:
    asked = post(setup.hub, setup.tokens["bot"], setup.room, "@helper check", reply_kind=None)
    post(
        setup.hub,
        setup.tokens["helper"],
        setup.room,
        "ok",
        in_reply_to=asked["id"],
        reply_kind="result",
    )
    sign_in(page, setup.hub, setup.tokens["alice"])
    open_room(page, "general")
    page.get_by_label("Message").fill("mine")
    page.keyboard.press("Enter")
    expect(page.get_by_role("status").filter(has_text="Posted.")).to_be_visible()
    page.get_by_role("button", name="Show delivery details").focus()
    reached: list[str] = []
    for _ in range(40):
        page.keyboard.press("Tab")
        label = page.evaluate("document.activeElement.getAttribute('aria-label') || ''")
        reached.append(label)
        if label.startswith("Delete #"):
            break
    assert any(r.startswith("Reply to bot #") for r in reached), reached
    assert reached[-1].startswith("Delete #"), reached
    opacity = page.evaluate("getComputedStyle(document.activeElement.parentElement).opacity")
    assert opacity == "1"  # the focused message shows its actions
    ratios = page.evaluate(
        CONTRAST,
        [
            ".sender",
            ".time",
            ".text",
            ".badge-result",
            "button.quiet",
            ".room-status",
            ".composer-status",
            "#whoami",
            ".room-button",
        ],
    )
    low = {sel: r for sel, r in ratios.items() if r is None or r < 4.5}
    assert not low, ratios


def test_delete_works_where_crypto_random_uuid_is_missing(page: Page, setup: Setup) -> None:
    """Outside a secure context (a hub reached over plain http by a LAN address) browsers
    have no crypto.randomUUID: keys come from getRandomValues, which they do have."""
    page.add_init_script("delete Crypto.prototype.randomUUID")
    mine = post(setup.hub, setup.tokens["alice"], setup.room, "to be deleted")
    sign_in(page, setup.hub, setup.tokens["alice"])
    open_room(page, "general")
    assert page.evaluate("typeof crypto.randomUUID") == "undefined"
    page.once("dialog", lambda d: d.accept())
    page.get_by_role("button", name=f"Delete #{mine['seq']}").click()
    item = page.locator(f'[data-event-id="{mine["id"]}"]')
    expect(item.get_by_text("Message deleted")).to_be_visible()
