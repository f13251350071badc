"""The web page in headless Chromium against a real hub (docs/web.md): signing in, rooms,
the live timeline, the composer, uploads, receipts, refusals, reloads, a narrow screen.

One hub per engine serves this module's tests, each in a workspace of its own (and a browser
context of its own)."""

from __future__ import annotations

import re
import struct
import zlib

import pytest
from playwright.sync_api import Page, expect
from webhelp import events, open_room, post, sign_in, timeline

from hubproc import Setup, poll


@pytest.fixture
def setup(shared_setup: Setup) -> Setup:
    return shared_setup


def png(width: int = 4, height: int = 3) -> bytes:
    """A real, tiny PNG (solid colour), so the thumbnail has pixels to draw."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    rows = b"".join(b"\x00" + b"\x1f\x4e\x79" * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def test_sign_in_with_the_keyboard_then_reload_keeps_you_signed_in(
    page: Page, setup: Setup
) -> None:
    page.goto(setup.hub.url + "/")
    expect(page.get_by_label("Token")).to_be_focused()
    page.keyboard.type(setup.tokens["alice"])
    page.keyboard.press("Enter")
    expect(page.get_by_text(f"alice (human) in {setup.workspace}")).to_be_visible()
    room = page.get_by_role("button", name="general", exact=True)
    expect(room).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name="general")).to_be_visible()
    expect(page.get_by_role("status").filter(has_text="Live")).to_be_visible()
    assert page.evaluate("sessionStorage.getItem('agentpost.token')") == setup.tokens["alice"]

    page.reload()
    expect(page.get_by_role("button", name="Sign out")).to_be_visible()
    expect(page.get_by_role("heading", name="general")).to_be_visible()
    expect(page.get_by_label("Token")).to_be_hidden()


def test_sign_out_clears_the_token(page: Page, setup: Setup) -> None:
    sign_in(page, setup.hub, setup.tokens["alice"])
    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_label("Token")).to_be_visible()
    expect(page.get_by_role("alert")).to_have_text("You signed out.")
    assert page.evaluate("sessionStorage.getItem('agentpost.token')") is None
    page.reload()
    expect(page.get_by_label("Token")).to_be_visible()


def test_a_wrong_token_is_refused_with_the_reason(page: Page, setup: Setup) -> None:
    page.goto(setup.hub.url + "/")
    page.get_by_label("Token").fill("ap_not-a-real-token")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_contain_text("unknown token")
    expect(page.get_by_label("Token")).to_be_visible()
    assert page.evaluate("sessionStorage.getItem('agentpost.token')") is None


def test_a_401_returns_to_sign_in_with_the_reason(page: Page, setup: Setup) -> None:
    sign_in(page, setup.hub, setup.tokens["alice"])
    open_room(page, "general")
    # The token stops being one the hub knows (as after a database reset): the next
    # request's 401 takes the page back to the sign-in form, saying why.
    page.evaluate("sessionStorage.setItem('agentpost.token', 'ap_revoked')")
    page.get_by_label("Message").fill("hello")
    page.get_by_role("button", name="Send").click()
    expect(page.get_by_label("Token")).to_be_visible()
    expect(page.get_by_role("alert")).to_contain_text("Signed out: unknown token")
    assert events(setup.hub, setup.tokens["alice"], setup.room) == []


def test_a_removed_member_is_sent_to_sign_in_with_the_reason(page: Page, setup: Setup) -> None:
    with setup.hub.client(setup.hub.admin_token) as admin:
        r = admin.delete(f"/v1/admin/workspaces/{setup.workspace}/members/carol")
        assert r.status_code == 200
    page.goto(setup.hub.url + "/")
    page.get_by_label("Token").fill(setup.tokens["carol"])
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_contain_text("was removed")
    assert page.evaluate("sessionStorage.getItem('agentpost.token')") is None


def test_a_message_from_another_client_appears_live(page: Page, setup: Setup) -> None:
    sign_in(page, setup.hub, setup.tokens["alice"])
    open_room(page, "general")
    ev = post(setup.hub, setup.tokens["bot"], setup.room, "build 42 is green")
    item = page.locator(f'[data-event-id="{ev["id"]}"]')
    expect(item).to_have_attribute("data-seq", "1")
    expect(item).to_contain_text("build 42 is green")
    expect(item).to_contain_text("bot")
    expect(item).to_contain_text("agent")
    expect(item.locator("time")).to_have_attribute("datetime", ev["created_at"])


def test_posting_sends_an_idempotency_key_and_makes_one_event(page: Page, setup: Setup) -> None:
    sign_in(page, setup.hub, setup.tokens["alice"])
    open_room(page, "general")
    keys: list[str | None] = []
    page.on(
        "request",
        lambda r: (
            keys.append(r.headers.get("idempotency-key"))
            if r.method == "POST" and r.url.endswith("/messages")
            else None
        ),
    )
    page.get_by_label("Message").fill("  deploy at noon @bot  ")
    page.get_by_role("button", name="Send").click()
    expect(page.get_by_role("status").filter(has_text="Posted.")).to_be_visible()
    expect(page.get_by_label("Message")).to_have_value("")
    stored = events(setup.hub, setup.tokens["alice"], setup.room)
    assert [(e["sender"], e["text"]) for e in stored] == [("alice", "deploy at noon @bot")]
    expect(page.locator(f'[data-event-id="{stored[0]["id"]}"]')).to_have_count(1)
    assert len(keys) == 1 and keys[0] and re.fullmatch(r"web-[0-9a-f]{32}", keys[0])
    with setup.hub.client(setup.tokens["alice"]) as c:
        sent = c.get(f"/v1/rooms/{setup.room}/sends", params={"key": keys[0]}).json()["send"]
    assert sent["event"]["id"] == stored[0]["id"]
    # The next message gets a new key.
    page.get_by_label("Message").fill("second")
    page.get_by_role("button", name="Send").click()
    poll(lambda: len(keys) == 2)
    assert keys[1] != keys[0]
    poll(lambda: len(events(setup.hub, setup.tokens["alice"], setup.room)) == 2)


def test_a_file_upload_shows_name_size_thumbnail_and_downloads(page: Page, setup: Setup) -> None:
    sign_in(page, setup.hub, setup.tokens["alice"])
    open_room(page, "general")
    image = png()
    page.get_by_label("Attach a file").set_input_files(
        {"name": "chart.png", "mimeType": "image/png", "buffer": image}
    )
    page.get_by_label("Message").fill("today's chart")
    page.get_by_role("button", name="Send").click()
    expect(page.get_by_role("status").filter(has_text="Posted.")).to_be_visible()
    stored = events(setup.hub, setup.tokens["alice"], setup.room)
    assert len(stored) == 1 and stored[0]["type"] == "media"
    item = page.locator(f'[data-event-id="{stored[0]["id"]}"]')
    expect(item).to_contain_text("today's chart")
    expect(item).to_contain_text(f"{len(image)} B")
    thumb = item.get_by_role("img", name="chart.png")
    expect(thumb).to_be_visible()
    poll(lambda: thumb.evaluate("img => img.complete && img.naturalWidth") == 4)
    with page.expect_download() as got:
        item.get_by_role("link", name="chart.png").click()
    download = got.value
    assert download.suggested_filename == "chart.png"
    path = download.path()
    assert path is not None and path.read_bytes() == image


def test_receipts_carry_badges_link_to_the_delegation_and_show_who_was_woken(
    page: Page, setup: Setup
) -> None:
    sign_in(page, setup.hub, setup.tokens["alice"])
    open_room(page, "general")
    words = {
        "result": "returned",
        "error": "failed",
        "needs_input": "needs input",
        "cancelled": "cancelled",
    }
    for kind, word in words.items():
        e1 = post(setup.hub, setup.tokens["bot"], setup.room, f"@helper please try {kind}")
        assert e1["metadata"]["delegated_to"] == ["helper"]
        receipt = post(
            setup.hub,
            setup.tokens["helper"],
            setup.room,
            f"done: {kind}",
            in_reply_to=e1["id"],
            reply_kind=kind,
        )
        assert receipt["route"] == "receipt" and receipt["targets"] == ["bot"]
        item = page.locator(f'[data-event-id="{receipt["id"]}"]')
        badge = item.locator("[data-reply-kind]")
        expect(badge).to_have_attribute("data-reply-kind", word)
        expect(badge).to_have_text(word)
        delegation = page.locator(f'[data-event-id="{e1["id"]}"]')
        expect(delegation).to_contain_text("Delegates to helper")
        expect(delegation).to_contain_text(f"Reported back — helper: {word}")
        expect(item.get_by_text("Woke bot")).to_be_hidden()  # compact: detail on demand
        details = item.get_by_role("button", name=f"Delivery details of #{receipt['seq']}")
        details.click()
        expect(details).to_have_attribute("aria-pressed", "true")
        item.get_by_text("Woke bot").click()
        expect(item.get_by_text("receipt — a receipt goes back to the delegator")).to_be_visible()
        item.get_by_role("link", name=f"Answers #{e1['seq']}").click()
        expect(delegation).to_be_focused()
    assert "completed" not in page.locator("#timeline").inner_text()


def test_a_delegations_depth_and_the_depth_limit_notice_are_shown(
    page: Page, setup: Setup
) -> None:
    with setup.hub.client(setup.tokens["alice"]) as c:
        r = c.patch(f"/v1/rooms/{setup.room}", json={"max_delegation_depth": 1})
        assert r.status_code == 200, r.text
    sign_in(page, setup.hub, setup.tokens["alice"])
    open_room(page, "general")
    bot, helper = setup.tokens["bot"], setup.tokens["helper"]
    e1 = post(setup.hub, bot, setup.room, "@helper please check")
    back = post(
        setup.hub, helper, setup.room, "@bot done", in_reply_to=e1["id"], reply_kind="result"
    )
    stopped = post(setup.hub, bot, setup.room, "@helper once more", in_reply_to=back["id"])
    assert stopped["route"] == "depth_limit"
    delegation = page.locator(f'[data-event-id="{e1["id"]}"]')
    expect(delegation.get_by_title("delegation depth 1 of at most 1 in this room")).to_have_text(
        "depth 1/1"
    )
    expect(page.locator(f'[data-event-id="{stopped["id"]}"]')).to_contain_text("depth 2/1")
    note = page.get_by_role("note").filter(has_text="Delegation depth limit")
    expect(note).to_be_visible()
    expect(note).to_contain_text("woke no one")


def test_older_pages_load_on_scroll(page: Page, setup: Setup) -> None:
    with setup.hub.client(setup.tokens["bot"]) as c:
        for i in range(1, 131):
            assert c.post(f"/v1/rooms/{setup.room}/messages", json={"text": f"m{i}"}).is_success
    sign_in(page, setup.hub, setup.tokens["alice"])
    open_room(page, "general")
    expect(page.locator("[data-event-id]")).to_have_count(50)
    assert [e["seq"] for e in timeline(page)] == list(range(81, 131))
    box = page.locator("#timeline-box")
    for shown in (100, 130):
        box.evaluate("b => { b.scrollTop = 0; b.dispatchEvent(new Event('scroll')); }")
        expect(page.locator("[data-event-id]")).to_have_count(shown)
    assert [e["seq"] for e in timeline(page)] == list(range(1, 131))
    expect(page.get_by_role("button", name="Load older messages")).to_be_hidden()


def test_wake_ups_for_you_come_from_the_inbox_and_clear_when_read(
    page: Page, setup: Setup
) -> None:
    with setup.hub.client(setup.tokens["bot"]) as c:
        body = {"name": "builds", "participants": ["alice"]}
        r = c.post(f"/v1/workspaces/{setup.workspace}/rooms", json=body)
        assert r.status_code == 201, r.text
        builds = r.json()["room"]["id"]
    sign_in(page, setup.hub, setup.tokens["alice"])
    open_room(page, "general")
    post(setup.hub, setup.tokens["bot"], builds, "@alice build 1 failed")
    post(setup.hub, setup.tokens["bot"], builds, "@alice build 2 failed")
    post(setup.hub, setup.tokens["bot"], setup.room, "@alice seen here, read at once")
    count = page.locator("li", has=page.get_by_role("button", name="builds", exact=True))
    expect(count.locator(".unread.mine")).to_have_text("2 for you")
    expect(page.get_by_role("button", name="builds", exact=True)).to_have_accessible_description(
        "2 unread 2 for you"
    )
    general = page.locator("li", has=page.get_by_role("button", name="general", exact=True))
    expect(general.locator(".unread.mine")).to_be_hidden()
    with setup.hub.client(setup.tokens["alice"]) as c:
        assert c.get("/v1/me").json()["inbox_cursor"] == 0  # general's item waits on builds'
    open_room(page, "builds")
    expect(count.locator(".unread.mine")).to_be_hidden()
    with setup.hub.client(setup.tokens["alice"]) as c:
        poll(lambda: c.get("/v1/me").json()["inbox_cursor"] == 3)


def test_usable_at_375_px(page: Page, setup: Setup) -> None:
    page.set_viewport_size({"width": 375, "height": 740})
    post(
        setup.hub,
        setup.tokens["bot"],
        setup.room,
        "a long line " * 40 + "https://example.com/" + "x" * 120,
    )
    sign_in(page, setup.hub, setup.tokens["alice"])
    open_room(page, "general")
    page.get_by_label("Message").fill("from a phone")
    send = page.get_by_role("button", name="Send")
    send.click()
    expect(page.get_by_role("status").filter(has_text="Posted.")).to_be_visible()
    assert page.evaluate("document.documentElement.scrollWidth") <= 375
    for name in ("Message", "Attach a file"):
        box = page.get_by_label(name).bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 375, (name, box)
    box = send.bounding_box()
    assert box is not None and box["x"] + box["width"] <= 375
    expect(page.locator("[data-event-id]")).to_have_count(2)


def test_a_receipts_link_loads_older_pages_until_the_delegation_is_shown(
    page: Page, setup: Setup
) -> None:
    e1 = post(setup.hub, setup.tokens["bot"], setup.room, "@helper please index the docs")
    with setup.hub.client(setup.tokens["alice"]) as c:
        for i in range(120):
            assert c.post(f"/v1/rooms/{setup.room}/messages", json={"text": f"chat {i}"}).is_success
    post(
        setup.hub,
        setup.tokens["helper"],
        setup.room,
        "indexed",
        in_reply_to=e1["id"],
        reply_kind="result",
    )
    sign_in(page, setup.hub, setup.tokens["alice"])
    open_room(page, "general")
    expect(page.locator("[data-event-id]")).to_have_count(50)
    page.get_by_role("link", name="Answers an earlier message").click()
    delegation = page.locator(f'[data-event-id="{e1["id"]}"]')
    expect(delegation).to_be_focused()
    expect(delegation).to_contain_text("Reported back — helper: returned")
    assert [e["seq"] for e in timeline(page)] == list(range(1, 123))


def test_a_workers_notice_is_shown_as_a_note(page: Page, setup: Setup) -> None:
    # What `agentpost connect` posts for a sender its agent does not answer (docs/connect.md).
    sign_in(page, setup.hub, setup.tokens["alice"])
    open_room(page, "general")
    plain = post(setup.hub, setup.tokens["bot"], setup.room, "a plain reply")
    text = "@bot answers only its owner (alice) and listed collaborators."
    # A member's imitation is no notice (the hub drops the mark)...
    post(setup.hub, setup.tokens["alice"], setup.room, text,
         metadata={"agentpost/notice": "not_admitted"})
    # ...the agent's Worker's is: it names the fence of the agent's lease.
    with setup.hub.client(setup.tokens["bot"]) as c:
        lease = {"worker_id": "f" * 32, "host": "h", "pid": 1}
        fence = c.post("/v1/worker/lease", json=lease).json()["lease"]["fence"]
        r = c.post(
            f"/v1/rooms/{setup.room}/messages",
            json={"text": text, "metadata": {"agentpost/notice": "not_admitted"}},
            headers={"Agentpost-Worker-Fence": str(fence)},
        )
        assert r.status_code == 201, r.text
        notice = r.json()["event"]
    note = page.get_by_role("note")
    expect(note).to_have_count(1)
    expect(note).to_have_attribute("data-event-id", notice["id"])
    expect(note).to_contain_text("agent · notice")
    expect(page.locator(f'[data-event-id="{plain["id"]}"]')).not_to_have_attribute("role", "note")
