"""Notices cannot be forged (docs/architecture.md#server-owned-metadata, docs/connect.md):
`agentpost/notice` marks a line as the hub's or an agent's Worker's, and the page shows it so. Only
a post that names the agent's current Worker lease keeps it; a person's, an agent token's without
the lease, the MCP server's are stripped like `delegated_by`. A real hub on both engines."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from hubproc import Setup

NOTICE = {"agentpost/notice": "not_admitted", "kept": 1}


@pytest.fixture
def setup(shared_setup: Setup) -> Setup:
    return shared_setup


def _post(c: httpx.Client, room: str, headers: dict[str, str] | None = None) -> httpx.Response:
    return c.post(
        f"/v1/rooms/{room}/messages",
        json={"text": "@bot answers only its owner (alice)", "metadata": NOTICE},
        headers=headers or {},
    )


def _metadata(r: httpx.Response) -> dict[str, Any]:
    assert r.status_code == 201, r.text
    md: dict[str, Any] = r.json()["event"]["metadata"]
    return md


def test_a_person_cannot_mark_a_notice(setup: Setup) -> None:
    with setup.hub.client(setup.tokens["alice"]) as c:
        md = _metadata(_post(c, setup.room))
        stored = c.get(f"/v1/rooms/{setup.room}/events").json()["events"][-1]["metadata"]
    assert "agentpost/notice" not in md and md["kept"] == 1
    assert "agentpost/notice" not in stored


def test_an_agent_token_without_its_workers_lease_cannot_mark_a_notice(setup: Setup) -> None:
    with setup.hub.client(setup.tokens["bot"]) as c:
        assert "agentpost/notice" not in _metadata(_post(c, setup.room))
        # A fence that is no lease at all is refused outright, nothing posted.
        r = _post(c, setup.room, {"Agentpost-Worker-Fence": "1"})
        assert r.status_code == 409 and r.json()["error"]["code"] == "lease_lost"


def test_the_agents_worker_marks_its_notices_and_an_old_fence_cannot(setup: Setup) -> None:
    with setup.hub.client(setup.tokens["bot"]) as c:
        lease = {"worker_id": "d" * 32, "host": "h", "pid": 1}
        fence = c.post("/v1/worker/lease", json=lease).json()["lease"]["fence"]
        md = _metadata(_post(c, setup.room, {"Agentpost-Worker-Fence": str(fence)}))
        assert md["agentpost/notice"] == "not_admitted"
        took = c.post("/v1/worker/lease", json={**lease, "worker_id": "e" * 32, "takeover": True})
        assert took.status_code == 200
        stale = _post(c, setup.room, {"Agentpost-Worker-Fence": str(fence)})
        assert stale.status_code == 409 and stale.json()["error"]["code"] == "lease_lost"


def test_a_person_cannot_mark_a_notice_even_with_a_fence_header(setup: Setup) -> None:
    with setup.hub.client(setup.tokens["alice"]) as c:
        r = _post(c, setup.room, {"Agentpost-Worker-Fence": "1"})
    # A person holds no lease: the fence names none of theirs.
    assert r.status_code == 409 and r.json()["error"]["code"] == "lease_lost"
