"""The page keeps the promise (docs/web.md): an answer lost on the way back, then Send
again, is one event; a stream cut by a hub crash resumes with no gap and no duplicate; the
hub's refusals are shown as plain lines and post nothing.

The tests on the default hub share one per engine, each in a workspace of its own; the crash
and the flag tests start their own (`make_hub`)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from playwright.sync_api import Page, Request, Route, expect
from webhelp import events, open_room, post, sign_in, timeline

from hubproc import HubProcess, fresh_workspace, make_setup


def lose_answers(page: Page, pattern: str) -> list[int]:
    """Let requests reach the hub, then cut the connection before the page reads the answer
    (as a flaky network does). Returns the statuses the hub answered."""
    answered: list[int] = []

    def handler(route: Route) -> None:
        response = route.fetch()  # the hub handles the request for real
        answered.append(response.status)
        route.abort("connectionreset")

    page.route(pattern, handler)
    return answered


def keys_of(page: Page, suffix: str) -> list[str | None]:
    keys: list[str | None] = []

    def on_request(r: Request) -> None:
        if r.method == "POST" and r.url.endswith(suffix):
            keys.append(r.headers.get("idempotency-key"))

    page.on("request", on_request)
    return keys


def test_a_lost_answer_then_send_again_is_one_event(page: Page, shared_hub: HubProcess) -> None:
    hub = shared_hub
    s = make_setup(hub, ["alice"], ["bot"], workspace=fresh_workspace())
    sign_in(page, hub, s.tokens["alice"])
    open_room(page, "general")
    keys = keys_of(page, "/messages")
    answered = lose_answers(page, "**/v1/rooms/*/messages")
    page.get_by_label("Message").fill("ship it @bot")
    page.get_by_role("button", name="Send").click()
    expect(page.get_by_role("status").filter(has_text="not known whether")).to_be_visible()
    assert answered == [201]
    expect(page.get_by_label("Message")).to_have_value("ship it @bot")  # kept after the failure
    stored = events(hub, s.tokens["alice"], s.room)
    assert len(stored) == 1
    # The stream still draws what the hub stored, once.
    expect(page.locator(f'[data-event-id="{stored[0]["id"]}"]')).to_have_count(1)

    page.unroute("**/v1/rooms/*/messages")
    page.get_by_role("button", name="Send").click()
    expect(page.get_by_role("status").filter(has_text="not posted twice")).to_be_visible()
    expect(page.get_by_label("Message")).to_have_value("")
    assert len(keys) == 2 and keys[0] == keys[1]
    assert [e["id"] for e in events(hub, s.tokens["alice"], s.room)] == [stored[0]["id"]]
    expect(page.locator("[data-event-id]")).to_have_count(1)
    with hub.client(s.tokens["bot"]) as bot:
        woke = bot.get("/v1/inbox").json()["items"]
    assert [i["event"]["id"] for i in woke] == [stored[0]["id"]]  # woken once


def test_a_lost_upload_answer_then_a_reload_and_send_again_is_one_event(
    page: Page, shared_hub: HubProcess
) -> None:
    hub = shared_hub
    s = make_setup(hub, ["alice"], ["bot"], workspace=fresh_workspace())
    sign_in(page, hub, s.tokens["alice"])
    open_room(page, "general")
    answered = lose_answers(page, "**/v1/rooms/*/media")
    keys = keys_of(page, "/media")
    report = {"name": "report.txt", "mimeType": "text/plain", "buffer": b"all green\n"}
    page.get_by_label("Attach a file").set_input_files(report)
    page.get_by_label("Message").fill("the report")
    page.get_by_role("button", name="Send").click()
    expect(page.get_by_role("status").filter(has_text="not known whether")).to_be_visible()
    assert answered == [201]
    page.unroute("**/v1/rooms/*/media")

    # The draft and its key survive a reload; the file is chosen again.
    page.reload()
    expect(page.get_by_label("Message")).to_have_value("the report")
    page.get_by_label("Attach a file").set_input_files(report)
    page.get_by_role("button", name="Send").click()
    expect(page.get_by_role("status").filter(has_text="not posted twice")).to_be_visible()
    assert len(keys) == 2 and keys[0] == keys[1]
    stored = events(hub, s.tokens["alice"], s.room)
    assert len(stored) == 1 and stored[0]["attachments"][0]["name"] == "report.txt"
    expect(page.locator("[data-event-id]")).to_have_count(1)


def _restart(old: HubProcess) -> HubProcess:
    port = old.url.rsplit(":", 1)[1]
    return HubProcess(
        old.data_dir, env=old.env, extra_args=["--port", port], db_url=old.db_url
    ).start()


@pytest.mark.parametrize(
    ("ticket_seconds", "how"),
    [("60", "last_event_id"), ("1", "new_ticket")],
    ids=["browser-resumes-with-last-event-id", "expired-ticket-new-ticket-after-seq"],
)
def test_a_stream_cut_by_a_hub_crash_resumes_without_gaps_or_duplicates(
    page: Page, make_hub: Callable[..., HubProcess], ticket_seconds: str, how: str
) -> None:
    hub = make_hub(env={"AGENTPOST_STREAM_TICKET_SECONDS": ticket_seconds})
    s = make_setup(hub, ["alice"], ["bot"])
    opened: list[tuple[str, str | None]] = []
    tickets: list[str] = []

    def on_request(r: Request) -> None:
        if "/stream?" in r.url:
            opened.append((r.url, r.all_headers().get("last-event-id")))
        if r.url.endswith("/stream-ticket"):
            tickets.append(r.url)

    page.on("request", on_request)
    sign_in(page, hub, s.tokens["alice"])
    open_room(page, "general")
    for i in range(1, 4):
        post(hub, s.tokens["bot"], s.room, f"before {i}")
    expect(page.locator("[data-event-id]")).to_have_count(3)

    hub.kill()  # SIGKILL: the stream is cut, nothing is said to the browser
    expect(page.get_by_role("status").filter(has_text="reconnecting")).to_be_visible()
    again = _restart(hub)
    try:
        for i in range(4, 9):
            post(again, s.tokens["bot"], s.room, f"while away {i}")
        expect(page.locator("[data-event-id]")).to_have_count(8)
        expect(page.get_by_role("status").filter(has_text="Live")).to_be_visible()
        post(again, s.tokens["bot"], s.room, "after 9")
        expect(page.locator("[data-event-id]")).to_have_count(9)
        drawn = timeline(page)
        stored = events(again, s.tokens["alice"], s.room)
        assert [e["seq"] for e in drawn] == list(range(1, 10))
        assert [e["id"] for e in drawn] == [e["id"] for e in stored]
        assert len({e["id"] for e in drawn}) == 9
        resumed = opened[1:]
        assert resumed, opened
        if how == "last_event_id":
            assert len(tickets) == 1
            assert resumed[-1][1] == "3"
        else:
            assert len(tickets) >= 2
            assert "&after=3&" in resumed[-1][0] or resumed[-1][0].endswith("&after=3")
    finally:
        again.stop()


def test_refusals_are_shown_as_lines_and_post_nothing(
    page: Page, make_hub: Callable[..., HubProcess]
) -> None:
    hub = make_hub(extra_args=["--max-upload-bytes", "1000"])
    s = make_setup(hub, ["alice"], ["bot", "helper"])
    admin = hub.client(hub.admin_token)
    alice = hub.client(s.tokens["alice"])

    def try_to_post(text: str, line: str) -> None:
        page.get_by_label("Message").fill(text)
        page.get_by_role("button", name="Send").click()
        expect(page.get_by_role("status").filter(has_text=line)).to_be_visible()
        expect(page.get_by_label("Message")).to_have_value(text)

    # 413: a file over the hub's cap (streamed past it, and declared far past it).
    sign_in(page, hub, s.tokens["alice"])
    open_room(page, "general")
    for size in (5000, 200_000):
        big = {"name": "big.bin", "mimeType": "application/octet-stream", "buffer": b"x" * size}
        page.get_by_label("Attach a file").set_input_files(big)
        try_to_post("the big file", "413 payload_too_large")
    page.get_by_label("Attach a file").set_input_files([])

    # 409: the room was archived.
    assert alice.post(f"/v1/rooms/{s.room}/archive").status_code == 200
    try_to_post("into the archive", "409 room_archived")
    assert alice.post(f"/v1/rooms/{s.room}/unarchive").status_code == 200

    # 403: an agent no longer in the room.
    page.get_by_role("button", name="Sign out").click()
    sign_in(page, hub, s.tokens["bot"])
    open_room(page, "general")
    assert alice.delete(f"/v1/rooms/{s.room}/participants/bot").status_code == 200
    try_to_post("still here?", "403 channel_membership_required")

    # 403: an agent removed from the workspace.
    page.get_by_role("button", name="Sign out").click()
    sign_in(page, hub, s.tokens["helper"])
    open_room(page, "general")
    assert admin.delete("/v1/admin/workspaces/acme/members/helper").status_code == 200
    try_to_post("and me?", "403 agent_removed")

    assert events(hub, s.tokens["alice"], s.room) == []
    admin.close()
    alice.close()


def test_a_lost_answer_then_an_edited_text_is_told_and_posted_as_a_new_message(
    page: Page, shared_hub: HubProcess
) -> None:
    hub = shared_hub
    s = make_setup(hub, ["alice"], ["bot"], workspace=fresh_workspace())
    sign_in(page, hub, s.tokens["alice"])
    open_room(page, "general")
    keys = keys_of(page, "/messages")
    lose_answers(page, "**/v1/rooms/*/messages")
    page.get_by_label("Message").fill("release at 5")
    page.get_by_role("button", name="Send").click()
    expect(page.get_by_role("status").filter(has_text="not known whether")).to_be_visible()
    page.unroute("**/v1/rooms/*/messages")
    # The person edits the kept text: the same key with another text is refused (422) and
    # said so; nothing is posted until they press Send again, which takes a new key.
    page.get_by_label("Message").fill("release at 6")
    page.get_by_role("button", name="Send").click()
    expect(page.get_by_role("status").filter(has_text="earlier version")).to_be_visible()
    assert [e["text"] for e in events(hub, s.tokens["alice"], s.room)] == ["release at 5"]
    expect(page.get_by_label("Message")).to_have_value("release at 6")
    page.get_by_role("button", name="Send").click()
    expect(page.get_by_role("status").filter(has_text="Posted.")).to_be_visible()
    assert [e["text"] for e in events(hub, s.tokens["alice"], s.room)] == [
        "release at 5",
        "release at 6",
    ]
    assert len(keys) == 3 and keys[0] == keys[1] != keys[2]
    expect(page.locator("[data-event-id]")).to_have_count(2)


def test_a_refusal_for_content_keeps_the_text_and_the_next_send_is_a_new_key(
    page: Page, shared_hub: HubProcess
) -> None:
    hub = shared_hub
    s = make_setup(hub, ["alice"], ["bot"], workspace=fresh_workspace())
    with hub.client(s.tokens["alice"]) as alice:
        assert alice.patch(f"/v1/rooms/{s.room}", json={"sensitive_filter": True}).is_success
    sign_in(page, hub, s.tokens["alice"])
    open_room(page, "general")
    keys = keys_of(page, "/messages")
    page.get_by_label("Message").fill("the key is AKIAIOSFODNN7EXAMPLE")
    page.get_by_role("button", name="Send").click()
    expect(page.get_by_role("status").filter(has_text="422 command_rejected")).to_contain_text(
        "aws_access_key"
    )
    expect(page.get_by_label("Message")).to_have_value("the key is AKIAIOSFODNN7EXAMPLE")
    page.get_by_label("Message").fill("the key is in the vault")
    page.get_by_role("button", name="Send").click()
    expect(page.get_by_role("status").filter(has_text="Posted.")).to_be_visible()
    assert [e["text"] for e in events(hub, s.tokens["alice"], s.room)] == [
        "the key is in the vault"
    ]
    assert len(keys) == 2 and keys[0] != keys[1]
