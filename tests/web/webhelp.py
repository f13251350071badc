"""What the browser tests share: signing in as a person would, reading the timeline."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import Page, expect

from hubproc import HubProcess


def sign_in(page: Page, hub: HubProcess, token: str) -> None:
    page.goto(hub.url + "/")
    page.get_by_label("Token").fill(token)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("button", name="Sign out")).to_be_visible()


def open_room(page: Page, name: str) -> None:
    page.get_by_role("button", name=name, exact=True).click()
    expect(page.get_by_role("status").filter(has_text="Live")).to_be_visible()


def timeline(page: Page) -> list[dict[str, Any]]:
    """Every drawn event: id, seq, text, in the order shown."""
    out: list[dict[str, Any]] = page.eval_on_selector_all(
        "[data-event-id]",
        """els => els.map(e => ({id: e.dataset.eventId, seq: Number(e.dataset.seq),
                                 text: (e.querySelector('.text') || {}).textContent || ''}))""",
    )
    return out


def post(hub: HubProcess, token: str, room: str, text: str, **body: Any) -> dict[str, Any]:
    with hub.client(token) as c:
        r = c.post(f"/v1/rooms/{room}/messages", json={"text": text, **body})
        assert r.status_code == 201, r.text
        event: dict[str, Any] = r.json()["event"]
        return event


def events(hub: HubProcess, token: str, room: str) -> list[dict[str, Any]]:
    with hub.client(token) as c:
        r = c.get(f"/v1/rooms/{room}/events", params={"limit": 1000})
        assert r.status_code == 200, r.text
        found: list[dict[str, Any]] = r.json()["events"]
        return found
