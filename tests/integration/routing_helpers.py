"""Small helpers for the routing tests: post as a member, read who was woken."""

from __future__ import annotations

from typing import Any

import httpx

from hubproc import HubProcess, Setup


class Room:
    def __init__(self, hub: HubProcess, tokens: dict[str, str], room_id: str) -> None:
        self.hub, self.tokens, self.id = hub, tokens, room_id

    def post(self, who: str, text: str, **body: Any) -> httpx.Response:
        with self.hub.client(self.tokens[who]) as c:
            return c.post(f"/v1/rooms/{self.id}/messages", json={"text": text, **body})

    def say(self, who: str, text: str, **body: Any) -> dict[str, Any]:
        r = self.post(who, text, **body)
        assert r.status_code == 201, r.text
        event: dict[str, Any] = r.json()["event"]
        return event

    def event(self, who: str, event_id: str) -> dict[str, Any]:
        with self.hub.client(self.tokens[who]) as c:
            evs = c.get(f"/v1/rooms/{self.id}/events", params={"limit": 1000}).json()["events"]
        return next(e for e in evs if e["id"] == event_id)

    def events(self, who: str) -> list[dict[str, Any]]:
        with self.hub.client(self.tokens[who]) as c:
            out: list[dict[str, Any]] = c.get(
                f"/v1/rooms/{self.id}/events", params={"limit": 1000}
            ).json()["events"]
            return out

    def settings(self, who: str, **changes: Any) -> httpx.Response:
        with self.hub.client(self.tokens[who]) as c:
            return c.patch(f"/v1/rooms/{self.id}", json=changes)


def member_id(room: Room, who: str) -> str:
    """The member id of `who` (what `delegated_to_ids` and `sender_id` carry)."""
    with room.hub.client(room.tokens[who]) as c:
        found: str = c.get("/v1/me").json()["member"]["id"]
    return found


def inbox(hub: HubProcess, token: str) -> list[str]:
    """Event ids in the member's inbox (all of it, from cursor 0)."""
    with hub.client(token) as c:
        items = c.get("/v1/inbox", params={"after": 0, "limit": 1000}).json()["items"]
    return [i["event"]["id"] for i in items]


def remove(hub: HubProcess, name: str, how: str, room: Room | None = None) -> None:
    """Remove a member the three ways: soft, hard, or out of the room only."""
    with hub.client(hub.admin_token) as admin:
        if how == "soft":
            assert admin.delete(f"/v1/admin/workspaces/acme/members/{name}").status_code == 200
        elif how == "hard":
            r = admin.delete(f"/v1/admin/workspaces/acme/members/{name}", params={"hard": "true"})
            assert r.status_code == 200
        else:
            assert room is not None
            assert admin.delete(f"/v1/rooms/{room.id}/participants/{name}").status_code == 200


def room_of(setup: Setup) -> Room:
    return Room(setup.hub, setup.tokens, setup.room)
