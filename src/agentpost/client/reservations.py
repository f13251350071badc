"""File reservations in the client (docs/reservations.md): reserve, list, check, renew and
release, typed. A refusal for a conflict is `HubRefused` `reservation_conflict` whose
`body["conflicts"]` names each holder; `conflicts_of` reads them back as `Conflict`s."""

from __future__ import annotations

from typing import Any

import msgspec

from agentpost.client.calls import HubCalls
from agentpost.client.errors import HubError
from agentpost.client.paths import segment


class Reservation(msgspec.Struct, frozen=True):
    id: str
    project: str
    paths: list[str]
    exclusive: bool
    holder: str
    holder_id: str
    fence: int
    reason: str
    room: str | None
    since: str
    renewed_at: str
    expires_at: str
    state: str  # held, released, forced, expired, removed
    ended_at: str | None = None


class Conflict(msgspec.Struct, frozen=True):
    """Another member's reservation in the way: its patterns that collide (`paths`) and
    the asked ones they collide with (`requested`)."""

    id: str
    holder: str
    holder_id: str
    paths: list[str]
    requested: list[str]
    exclusive: bool
    reason: str
    expires_at: str


def _headers(key: str | None) -> dict[str, str] | None:
    return {"Idempotency-Key": key} if key is not None else None


def _one(data: Any) -> Reservation:
    return msgspec.convert(data["reservation"], Reservation)


def conflicts_of(exc: HubError) -> list[Conflict]:
    """The conflicts a `reservation_conflict` refusal names (none for any other error)."""
    return msgspec.convert(exc.body.get("conflicts") or [], list[Conflict])


async def reserve(
    hub: HubCalls,
    workspace: str,
    project: str,
    paths: list[str],
    *,
    exclusive: bool = True,
    ttl_seconds: int = 3600,
    reason: str = "",
    room: str | None = None,
    key: str | None = None,
) -> Reservation:
    body: dict[str, Any] = {
        "project": project,
        "paths": paths,
        "exclusive": exclusive,
        "ttl_seconds": ttl_seconds,
        "reason": reason,
    }
    if room is not None:
        body["room"] = room
    path = f"/v1/workspaces/{segment(workspace)}/reservations"
    resp = await hub.request("POST", path, json=body, headers=_headers(key))
    return _one(resp.json())


async def reservations(hub: HubCalls, workspace: str, project: str | None) -> list[Reservation]:
    path = f"/v1/workspaces/{segment(workspace)}/reservations"
    params = {"project": project} if project is not None else None
    resp = await hub.request("GET", path, params=params)
    return msgspec.convert(resp.json()["reservations"], list[Reservation])


async def check(hub: HubCalls, workspace: str, project: str, paths: list[str]) -> list[Conflict]:
    path = f"/v1/workspaces/{segment(workspace)}/reservations/check"
    resp = await hub.request("POST", path, json={"project": project, "paths": paths})
    return msgspec.convert(resp.json()["conflicts"], list[Conflict])


async def renew(
    hub: HubCalls, reservation_id: str, ttl_seconds: int, key: str | None = None
) -> Reservation:
    path = f"/v1/reservations/{segment(reservation_id)}/renew"
    resp = await hub.request("POST", path, json={"ttl_seconds": ttl_seconds}, headers=_headers(key))
    return _one(resp.json())


async def release(hub: HubCalls, reservation_id: str, key: str | None = None) -> Reservation:
    path = f"/v1/reservations/{segment(reservation_id)}"
    return _one((await hub.request("DELETE", path, headers=_headers(key))).json())
