"""Make docs/img/*.png: the page's main views at 1280 and 375 px, against a real hub
with real posts.

    .venv/bin/python tests/web/screenshots.py

Starts a hub in a temporary data dir, posts a delegation and its receipts through the API,
and photographs the page in headless Chromium (the browser tests' settings).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

from playwright.sync_api import Page, expect, sync_playwright  # noqa: E402
from test_page import png  # noqa: E402
from webhelp import open_room, post, sign_in  # noqa: E402

from conftest import ARGS, CHROMIUM  # noqa: E402
from hubproc import HubProcess, make_setup  # noqa: E402

OUT = HERE.parents[1] / "docs" / "img"


def seed(hub: HubProcess) -> dict[str, str]:
    s = make_setup(hub, ["hana", "omar"], ["planner", "writer"], room="launch")
    t = s.tokens
    post(hub, t["omar"], s.room, "Morning! Release 0.2 goes out today.")
    post(hub, t["hana"], s.room, "Great. @planner can you get the notes going?")
    e1 = post(hub, t["planner"], s.room, "@writer please draft the release notes for 0.2")
    post(
        hub,
        t["writer"],
        s.room,
        "Which version of the changelog?",
        in_reply_to=e1["id"],
        reply_kind="needs_input",
    )
    post(hub, t["hana"], s.room, "Use CHANGES.md on main, see https://example.com/changes")
    with hub.client(t["writer"]) as c:
        files = {"file": ("chart.png", png(48, 24), "image/png")}
        r = c.post(f"/v1/rooms/{s.room}/media", files=files, data={"text": "downloads per day"})
        assert r.status_code == 201, r.text
    done = post(
        hub, t["writer"], s.room, "Draft is in notes.md", in_reply_to=e1["id"], reply_kind="result"
    )
    with hub.client(t["omar"]) as c:
        # A glyph the headless Chromium's fonts have (DejaVu; no colour emoji font is installed).
        r = c.post(f"/v1/rooms/{s.room}/events/{done['id']}/reactions", json={"emoji": "❤"})
        assert r.status_code in (200, 201), r.text
    post(hub, t["omar"], s.room, "Reads well. One typo in the second line.")
    with hub.client(t["planner"]) as c:
        r = c.post("/v1/workspaces/acme/rooms", json={"name": "builds", "participants": ["hana"]})
        builds = r.json()["room"]["id"]
    post(hub, t["planner"], builds, "nightly build 117 passed")
    post(hub, t["planner"], builds, "@hana nightly build 118 failed")
    return t


def shoot(page: Page, name: str) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(OUT / name), full_page=False)
    print("wrote", OUT / name)


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        hub = HubProcess(Path(tmp) / "hub").start()
        try:
            tokens = seed(hub)
            with sync_playwright() as pw:
                browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
                page = browser.new_page(viewport={"width": 1280, "height": 800})
                page.goto(hub.url + "/")
                expect(page.get_by_label("Token")).to_be_visible()
                shoot(page, "sign-in.png")
                sign_in(page, hub, tokens["hana"])
                open_room(page, "launch")
                expect(page.locator("img.thumb")).to_have_js_property("complete", True)
                people = page.get_by_role("list", name="Who is here").get_by_role("listitem")
                expect(people).to_have_count(4)
                page.get_by_role("button", name="Reply to omar").last.click()
                page.keyboard.type("Fixed, thanks. Ship it @pl")
                expect(page.get_by_role("option", name="@planner")).to_be_visible()
                page.mouse.move(0, 0)
                shoot(page, "room.png")
                page.keyboard.press("Escape")
                page.get_by_role("button", name="Show delivery details").click()
                shoot(page, "room-details.png")
                page.get_by_role("button", name="Show delivery details").click()
                page.set_viewport_size({"width": 375, "height": 667})
                page.locator("#timeline-box").evaluate("b => b.scrollTop = b.scrollHeight")
                shoot(page, "narrow.png")
                page.get_by_role("button", name="Rooms").click()
                page.get_by_role("searchbox", name="Search").fill("notes")
                page.keyboard.press("Enter")
                expect(page.get_by_role("status").filter(has_text="found")).to_be_visible()
                shoot(page, "narrow-rooms.png")
                browser.close()
        finally:
            hub.stop()


if __name__ == "__main__":
    main()
