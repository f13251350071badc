"""The page's search box (docs/search.md): hits from the rooms you take
part in only, the matched words marked from the hub's offsets (as text, never markup), and
choosing a hit opens its room at that event, paging back to it when it is old."""

from __future__ import annotations

from playwright.sync_api import Page, expect
from webhelp import sign_in

from hubproc import HubProcess, make_setup


def test_search_lists_my_hits_marked_and_opens_the_room_at_the_event(
    page: Page, hub: HubProcess
) -> None:
    s = make_setup(hub, ["alice", "carol"], ["bot"])
    with hub.client(s.tokens["alice"]) as alice:
        old = alice.post(
            f"/v1/rooms/{s.room}/messages", json={"text": "🎉 Ünï: the quasar manual is here"}
        ).json()["event"]
        for n in range(60):  # the old hit is beyond the first page the room shows
            alice.post(f"/v1/rooms/{s.room}/messages", json={"text": f"filler {n}"})
        r = alice.post("/v1/workspaces/acme/rooms", json={"name": "lab"})
        lab = r.json()["room"]["id"]
        alice.post(
            f"/v1/rooms/{lab}/messages", json={"text": "<img src=x onerror=alert(1)> quasar"}
        )
    with hub.client(s.tokens["carol"]) as carol:
        r = carol.post("/v1/workspaces/acme/rooms", json={"name": "carols"})
        carol.post(f"/v1/rooms/{r.json()['room']['id']}/messages", json={"text": "quasar secret"})

    sign_in(page, hub, s.tokens["alice"])
    page.get_by_label("Search", exact=True).fill("quasar")
    page.get_by_role("button", name="Find").click()
    results = page.get_by_role("list", name="Search results")
    hits = results.get_by_role("button")
    expect(hits).to_have_count(2)
    expect(hits.nth(0)).to_contain_text("lab · alice")
    expect(hits.nth(0)).to_contain_text("<img src=x onerror=alert(1)> quasar")
    expect(results.locator("img")).to_have_count(0)
    expect(results.locator("mark")).to_have_text(["quasar", "quasar"])
    expect(hits.nth(1)).to_contain_text("general · alice")
    expect(page.get_by_role("status").filter(has_text="2 found")).to_be_visible()
    assert "secret" not in results.inner_text()

    hits.nth(1).click()
    expect(page.get_by_role("heading", name="general")).to_be_visible()
    event = page.locator(f'[data-event-id="{old["id"]}"]')
    expect(event).to_be_focused()
    expect(event).to_contain_text("the quasar manual is here")

    page.get_by_label("Search", exact=True).fill('"quasar')
    page.get_by_role("button", name="Find").click()
    expect(page.get_by_role("status").filter(has_text="closing quote")).to_be_visible()
    expect(hits).to_have_count(0)
