"""Attack file for the page (CONVENTIONS "Attack files per threat"): text, file names and
links that look like HTML or script are shown literally and run nothing; the page itself
carries a strict CSP and no inline code.

One hub per engine serves this module's tests, each in a workspace of its own."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Dialog, Page, expect
from webhelp import open_room, post, sign_in

from hubproc import HubProcess, Setup


@pytest.fixture
def hub(shared_hub: HubProcess) -> HubProcess:
    return shared_hub


@pytest.fixture
def setup(shared_setup: Setup) -> Setup:
    return shared_setup

HOSTILE = [
    "<img src=x onerror=alert(1)>",
    "<script>window.__pwned = 1</script>",
    '"><svg onload=alert(2)>',
    "javascript:alert(3)",
    'see https://example.com/a"><img src=x onerror=alert(4)> now',
]


def test_html_looking_text_is_shown_literally_and_runs_nothing(page: Page, setup: Setup) -> None:
    dialogs: list[str] = []

    def on_dialog(d: Dialog) -> None:
        dialogs.append(d.message)
        d.dismiss()

    page.on("dialog", on_dialog)
    sign_in(page, setup.hub, setup.tokens["alice"])
    open_room(page, "general")
    posted = [post(setup.hub, setup.tokens["bot"], setup.room, text) for text in HOSTILE]
    # The same text typed into the composer.
    page.get_by_label("Message").fill(HOSTILE[0])
    page.get_by_role("button", name="Send").click()
    expect(page.get_by_role("status").filter(has_text="Posted.")).to_be_visible()
    with setup.hub.client(setup.tokens["bot"]) as c:
        files = {"file": ("<img src=x onerror=alert(5)>.txt", b"hi", "text/html")}
        r = c.post(f"/v1/rooms/{setup.room}/media", files=files, data={"text": HOSTILE[1]})
        assert r.status_code == 201, r.text
        media_event = r.json()["event"]

    expect(page.locator("[data-event-id]")).to_have_count(len(HOSTILE) + 2)
    for ev in posted:
        text = page.locator(f'[data-event-id="{ev["id"]}"] .text')
        assert text.text_content() == ev["text"]
    item = page.locator(f'[data-event-id="{media_event["id"]}"]')
    expect(item.get_by_role("link", name="<img src=x onerror=alert(5)>.txt")).to_be_visible()
    expect(item.locator(".text")).to_have_text(HOSTILE[1])

    timeline = page.locator("#timeline")
    assert timeline.locator("img, script, svg, iframe").count() == 0
    # Only http(s) becomes a link, and it ends where the URL ends.
    hrefs = timeline.locator(".text a").evaluate_all("as => as.map(a => a.href)")
    assert hrefs == ["https://example.com/a"]
    assert page.evaluate("window.__pwned") is None
    assert dialogs == []


def test_the_page_sends_a_strict_csp_and_has_no_inline_code(hub: HubProcess) -> None:
    with hub.client() as c:
        r = c.get("/")
        assert r.status_code == 200
        csp = r.headers["content-security-policy"]
        assert "script-src 'self'" in csp and "default-src 'none'" in csp
        assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
        assert "frame-ancestors 'none'" in csp
        assert r.headers["x-content-type-options"] == "nosniff"
        html = r.text
        assert not re.search(r"<script(?![^>]*\bsrc=)[^>]*>", html), "inline script"
        assert " style=" not in html and "<style" not in html
        assert not re.search(r"\son[a-z]+=", html), "inline handler"
        for src in re.findall(r'(?:src|href)="(/web/[^"]+)"', html):
            asset = c.get(src)
            assert asset.status_code == 200, src
            assert asset.headers["content-security-policy"] == csp
        for name in ["app.js", "api.js", "composer.js", "inbox.js", "stream.js", "timeline.js"]:
            js = c.get(f"/web/{name}")
            assert js.headers["content-type"].startswith("text/javascript"), name
            assert "innerHTML" not in js.text and "insertAdjacentHTML" not in js.text, name
            assert "eval(" not in js.text and "document.write" not in js.text, name
        assert c.get("/web/../hub/app.py").status_code == 404
        assert c.get("/web/%2e%2e%2fapp.py").status_code == 404


def test_no_csp_violation_while_the_page_is_used(page: Page, setup: Setup) -> None:
    violations: list[str] = []
    page.on(
        "console",
        lambda m: violations.append(m.text) if "Content Security Policy" in m.text else None,
    )
    sign_in(page, setup.hub, setup.tokens["alice"])
    open_room(page, "general")
    page.get_by_label("Message").fill("hello")
    page.get_by_role("button", name="Send").click()
    expect(page.get_by_role("status").filter(has_text="Posted.")).to_be_visible()
    assert violations == []
