"""hub/relations.py called in process, as the AG2 profile's routes call it
(docs/architecture.md#relations): the same events, keys and refusals as the HTTP routes, on both
engines."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.testclient import TestClient

from agentpost.core.errors import AgentpostError
from agentpost.hub import auth, relations
from agentpost.hub.app import create_app
from agentpost.hub.config import HubConfig
from agentpost.hub.state import Hub
from agentpost.store.models import Member


class InProcess:
    def __init__(self, app: Starlette, client: TestClient, data: Path) -> None:
        self.client = client
        self.hub: Hub = app.state.hub
        admin = {"Authorization": "Bearer " + (data / "admin.token").read_text().strip()}
        made = client.post("/v1/admin/workspaces", json={"name": "acme"}, headers=admin)
        assert made.status_code == 201, made.text
        self.auth: dict[str, dict[str, str]] = {}
        for name, kind in [("alice", "human"), ("carol", "human"), ("bot", "agent")]:
            body = {"name": name, "kind": kind, "owner": "alice" if kind == "agent" else None}
            r = client.post("/v1/admin/workspaces/acme/members", json=body, headers=admin)
            self.auth[name] = {"Authorization": "Bearer " + r.json()["token"]}
        r = client.post(
            "/v1/workspaces/acme/rooms",
            json={"name": "general", "participants": ["carol", "bot"]},
            headers=self.auth["alice"],
        )
        self.room: str = r.json()["room"]["id"]

    def member(self, name: str) -> Member:
        """The member behind a bearer token, as a profile's route authenticates it."""

        async def find() -> Member:
            return await auth.member_of(self.auth[name]["Authorization"], self.hub)

        return self.client.portal.call(find)  # type: ignore[union-attr]

    def call(self, fn: Any, *args: Any, **kwargs: Any) -> relations.Posted:
        async def run() -> relations.Posted:
            posted: relations.Posted = await fn(self.hub, *args, **kwargs)
            return posted

        return self.client.portal.call(run)  # type: ignore[union-attr]

    def say(self, who: str, text: str) -> dict[str, Any]:
        r = self.client.post(
            f"/v1/rooms/{self.room}/messages", json={"text": text}, headers=self.auth[who]
        )
        ev: dict[str, Any] = r.json()["event"]
        return ev

    def shown(self, event_id: str) -> dict[str, Any]:
        r = self.client.get(f"/v1/events/{event_id}", headers=self.auth["alice"])
        ev: dict[str, Any] = r.json()["event"]
        return ev


@pytest.fixture
def proc(tmp_path: Path, engine: str | None) -> Iterator[InProcess]:
    app = create_app(HubConfig(data_dir=tmp_path, db_url=engine))
    with TestClient(app) as client:
        yield InProcess(app, client, tmp_path)


def test_the_placeholder_is_edited_into_the_answer(proc: InProcess) -> None:
    bot = proc.member("bot")
    placeholder = proc.say("bot", "⏳ On it…")
    posted = proc.call(relations.edit, bot, proc.room, placeholder["id"], "42", "ag2-edit:1")
    ev = posted.event
    assert ev is not None and not posted.replayed and posted.answer.status == 201
    assert (ev.type, ev.relates_to, ev.text, ev.targets) == ("edit", placeholder["id"], "42", [])
    assert proc.shown(placeholder["id"])["text"] == "42"
    again = proc.call(relations.edit, bot, proc.room, placeholder["id"], "42", "ag2-edit:1")
    assert again.replayed and again.event == ev


def test_react_and_redact_in_process(proc: InProcess) -> None:
    alice, carol = proc.member("alice"), proc.member("carol")
    target = proc.say("alice", "hello")
    r = proc.call(relations.react, carol, proc.room, target["id"], "👍", None)
    assert r.event is not None and r.event.metadata == {"emoji": "👍"}
    assert proc.shown(target["id"])["reactions"] == [
        {"emoji": "👍", "count": 1, "members": ["carol"]}
    ]
    off = proc.call(relations.react, carol, proc.room, target["id"], "👍", None, remove=True)
    assert off.event is not None and proc.shown(target["id"])["reactions"] == []
    red = proc.call(relations.redact, alice, proc.room, target["id"], "oops", "rd-1")
    assert red.event is not None and red.event.type == "redaction"
    assert proc.shown(target["id"])["redacted"] is True


def test_refusals_raise_with_their_code_and_change_nothing(proc: InProcess) -> None:
    carol = proc.member("carol")
    target = proc.say("alice", "mine")
    with pytest.raises(AgentpostError) as refused:
        proc.call(relations.edit, carol, proc.room, target["id"], "yours", "k1")
    assert refused.value.code == "not_event_sender"
    with pytest.raises(AgentpostError) as bad:
        proc.call(relations.react, carol, proc.room, target["id"], "no way", None)
    assert bad.value.code == "invalid_emoji"
    with pytest.raises(AgentpostError) as badkey:
        proc.call(relations.redact, carol, proc.room, target["id"], None, "bad key\n")
    assert badkey.value.code == "invalid_idempotency_key"
    assert proc.shown(target["id"]) == target
