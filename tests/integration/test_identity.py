"""Identity is the member id (docs/architecture.md#identity, docs/api.md "Identity") on both
engines: after a hard removal frees a name, a new member under that name edits, redacts and
owns nothing of the old one (its messages, its agents' messages, its agents, its threads),
answers none of its delegations, hears none of its receipts and none of the answers to its
questions; events and members carry ids; the admin names a new owner."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from hubproc import Setup


@pytest.fixture
def setup(shared_setup: Setup) -> Setup:
    return shared_setup


def code(r: httpx.Response) -> tuple[int, str]:
    return r.status_code, r.json()["error"]["code"]


class Workspace:
    """`shared_setup`'s workspace (alice, carol; bot and helper owned by alice; room
    general), driven through the real API."""

    def __init__(self, s: Setup) -> None:
        self.s = s

    def client(self, who: str) -> httpx.Client:
        return self.s.hub.client(self.s.tokens[who])

    def admin(self) -> httpx.Client:
        return self.s.hub.client(self.s.hub.admin_token)

    def say(self, who: str, text: str) -> dict[str, Any]:
        with self.client(who) as c:
            r = c.post(f"/v1/rooms/{self.s.room}/messages", json={"text": text})
        assert r.status_code == 201, r.text
        ev: dict[str, Any] = r.json()["event"]
        return ev

    def relate(self, who: str, event_id: str, kind: str, **body: Any) -> httpx.Response:
        with self.client(who) as c:
            return c.post(f"/v1/rooms/{self.s.room}/events/{event_id}/{kind}", json=body)

    def event(self, event_id: str, who: str = "carol") -> dict[str, Any]:
        with self.client(who) as c:
            r = c.get(f"/v1/events/{event_id}")
        assert r.status_code == 200, r.text
        ev: dict[str, Any] = r.json()["event"]
        return ev

    def member(self, name: str, who: str = "carol") -> dict[str, Any]:
        with self.client(who) as c:
            r = c.get(f"/v1/workspaces/{self.s.workspace}/members/{name}")
        assert r.status_code == 200, r.text
        m: dict[str, Any] = r.json()["member"]
        return m

    def me(self, who: str) -> dict[str, Any]:
        with self.client(who) as c:
            r = c.get("/v1/me")
        assert r.status_code == 200, r.text
        m: dict[str, Any] = r.json()["member"]
        return m

    def inbox(self, who: str) -> list[str]:
        """Event ids in the member's inbox (all of it)."""
        with self.client(who) as c:
            r = c.get("/v1/inbox", params={"after": 0, "limit": 1000})
        assert r.status_code == 200, r.text
        return [i["event"]["id"] for i in r.json()["items"]]

    def free_and_take(self, name: str, kind: str = "human") -> str:
        """Remove `name` hard, then add a new member under it (an agent: carol's), in the
        room; its member id."""
        ws = self.s.workspace
        body = {"name": name, "kind": kind, **({"owner": "carol"} if kind == "agent" else {})}
        with self.admin() as a:
            r = a.delete(f"/v1/admin/workspaces/{ws}/members/{name}", params={"hard": "true"})
            assert r.status_code == 200, r.text
            r = a.post(f"/v1/admin/workspaces/{ws}/members", json=body)
            assert r.status_code == 201, r.text
        self.s.tokens[name] = r.json()["token"]
        with self.client("carol") as c:
            r = c.put(f"/v1/rooms/{self.s.room}/participants/{name}")
            assert r.status_code == 200, r.text
        new_id: str = self.me(name)["id"]
        return new_id

    def set_owner(self, agent: str, owner: str | None) -> httpx.Response:
        with self.admin() as a:
            return a.put(
                f"/v1/admin/workspaces/{self.s.workspace}/members/{agent}/owner",
                json={"owner": owner},
            )


@pytest.fixture
def ws(setup: Setup) -> Workspace:
    return Workspace(setup)


def test_events_and_members_carry_member_ids(ws: Workspace) -> None:
    alice = ws.me("alice")
    ev = ws.say("alice", "hello")
    assert ev["sender_id"] == alice["id"]
    edit = ws.relate("alice", ev["id"], "edits", text="hello again")
    assert edit.status_code == 201 and edit.json()["event"]["sender_id"] == alice["id"]
    assert ws.event(ev["id"])["sender_id"] == alice["id"]
    bot = ws.member("bot")
    assert (bot["owner"], bot["owner_id"]) == ("alice", alice["id"])
    assert ws.me("bot")["owner_id"] == alice["id"]


def test_a_freed_name_cannot_edit_or_redact_the_old_members_messages(ws: Workspace) -> None:
    old = ws.say("alice", "pay to account 1111")
    new_alice = ws.free_and_take("alice")
    assert new_alice != old["sender_id"]
    assert code(ws.relate("alice", old["id"], "edits", text="pay to account 9999")) == (
        403,
        "not_event_sender",
    )
    assert code(ws.relate("alice", old["id"], "redactions")) == (403, "not_event_sender")
    shown = ws.event(old["id"])
    assert (shown["text"], shown["edited"], shown["redacted"]) == (
        "pay to account 1111",
        False,
        False,
    )
    # The new alice's own messages are hers to edit.
    mine = ws.say("alice", "a new start")
    assert ws.relate("alice", mine["id"], "edits", text="a fresh start").status_code == 201


def test_a_freed_name_cannot_redact_the_old_members_agents_messages(ws: Workspace) -> None:
    by_bot = ws.say("bot", "the build is green")
    ws.free_and_take("alice")
    assert code(ws.relate("alice", by_bot["id"], "redactions")) == (403, "not_event_sender")
    assert ws.event(by_bot["id"])["redacted"] is False


def test_a_hard_removal_leaves_the_agents_with_no_owner(ws: Workspace) -> None:
    ws.free_and_take("alice")
    for agent in ("bot", "helper"):
        m = ws.member(agent)
        assert (m["owner"], m["owner_id"]) == (None, None)
        assert ws.me(agent)["owner_id"] is None  # the agent's own view (a Worker's start)
    with ws.admin() as a:
        listed = a.get(f"/v1/admin/workspaces/{ws.s.workspace}/members").json()["members"]
    assert {m["name"]: m["owner_id"] for m in listed}["bot"] is None


def test_a_freed_name_does_not_inherit_a_thread(ws: Workspace) -> None:
    with ws.client("alice") as c:
        r = c.post(f"/v1/workspaces/{ws.s.workspace}/threads/ensure", json={"name": "notes"})
    assert r.status_code == 201, r.text
    thread = r.json()["thread_id"]
    with ws.client("alice") as c:
        said = c.post(f"/v1/rooms/{thread}/messages", json={"text": "private note"}).json()
    ws.free_and_take("alice")
    with ws.client("alice") as c:
        r = c.post(f"/v1/workspaces/{ws.s.workspace}/threads/ensure", json={"name": "notes"})
        assert code(r) == (409, "thread_conflict")
        assert "owner was removed" in r.json()["error"]["message"]
        # Not let in, and not its owner: the old thread stays out of reach.
        r = c.get(f"/v1/rooms/{thread}/events")
        assert r.status_code in (403, 404)
    with ws.client("carol") as c:
        assert c.get(f"/v1/events/{said['event']['id']}").status_code in (403, 404)


def test_the_admin_names_a_new_owner(ws: Workspace) -> None:
    by_bot = ws.say("bot", "deploy done")
    new_alice = ws.free_and_take("alice")
    r = ws.set_owner("bot", "alice")
    assert r.status_code == 200, r.text
    assert (r.json()["member"]["owner"], r.json()["member"]["owner_id"]) == ("alice", new_alice)
    assert ws.member("bot")["owner_id"] == new_alice
    assert ws.me("bot")["owner_id"] == new_alice  # a cached token sees it at once
    # Named by the admin, the new alice owns bot now: she may redact its messages.
    assert ws.relate("alice", by_bot["id"], "redactions").status_code == 201
    # Still none for helper, until named too; and an owner can be taken away.
    assert ws.member("helper")["owner_id"] is None
    r = ws.set_owner("bot", None)
    assert r.status_code == 200 and r.json()["member"]["owner_id"] is None


def test_set_owner_refusals_name_themselves(ws: Workspace) -> None:
    assert code(ws.set_owner("bot", "helper")) == (400, "invalid_request")  # not a person
    assert code(ws.set_owner("bot", "nobody")) == (400, "invalid_request")
    assert code(ws.set_owner("carol", "alice")) == (400, "invalid_request")  # not an agent
    assert code(ws.set_owner("ghost", "alice")) == (404, "member_not_found")
    with ws.admin() as a:
        r = a.put(f"/v1/admin/workspaces/{ws.s.workspace}/members/bot/owner", json={})
        assert code(r) == (400, "invalid_request")
        r = a.put("/v1/admin/workspaces/no-such-ws/members/bot/owner", json={"owner": "alice"})
        assert code(r) == (404, "no_workspace")
    with ws.client("alice") as c:  # the admin's alone
        r = c.put(
            f"/v1/admin/workspaces/{ws.s.workspace}/members/bot/owner", json={"owner": "carol"}
        )
        assert r.status_code == 401


def test_a_freed_name_cannot_answer_the_old_agents_delegation(ws: Workspace) -> None:
    e1 = ws.say("bot", "@helper please check the invoice")
    old_helper = ws.me("helper")["id"]
    new_helper = ws.free_and_take("helper", kind="agent")
    with ws.client("helper") as c:
        r = c.post(
            f"/v1/rooms/{ws.s.room}/messages",
            json={"text": "invoice is fine", "in_reply_to": e1["id"], "reply_kind": "result"},
        )
    assert r.status_code == 201, r.text
    ev = r.json()["event"]
    # No receipt: a plain agent message that mentions no one, and bot is not woken.
    assert (ev["targets"], ev["route"]) == ([], "no_mention")
    assert "receipt_from" not in ws.event(e1["id"])["metadata"]
    assert ev["id"] not in ws.inbox("bot")
    # The name is shown as it was; the id says who may answer.
    assert e1["metadata"]["delegated_to"] == ["helper"]
    assert e1["metadata"].get("delegated_to_ids") == [old_helper] != [new_helper]


def test_a_freed_name_does_not_hear_the_old_delegators_receipt(ws: Workspace) -> None:
    e1 = ws.say("bot", "@helper please check the invoice")
    assert e1["sender_id"] == ws.me("bot")["id"]
    ws.free_and_take("bot", kind="agent")
    with ws.client("helper") as c:
        r = c.post(
            f"/v1/rooms/{ws.s.room}/messages",
            json={"text": "invoice is fine", "in_reply_to": e1["id"], "reply_kind": "result"},
        )
    assert r.status_code == 201, r.text
    ev = r.json()["event"]
    assert (ev["targets"], ev["route"]) == ([], "receipt_undeliverable")
    assert ws.inbox("bot") == []


def test_a_freed_name_is_not_told_the_answer_to_the_old_persons_question(
    ws: Workspace,
) -> None:
    asked = ws.say("alice", "what is the balance of account 1111?")
    ws.free_and_take("alice")
    with ws.client("bot") as c:
        r = c.post(
            f"/v1/rooms/{ws.s.room}/messages",
            json={"text": "the balance is 42", "in_reply_to": asked["id"]},
        )
    assert r.status_code == 201, r.text
    ev = r.json()["event"]
    assert "alice" not in ev["targets"] and ev["route"] != "answer"
    assert ws.inbox("alice") == []
    # The new alice's own question is hers to be told.
    mine = ws.say("alice", "and account 2222?")
    with ws.client("bot") as c:
        r = c.post(f"/v1/rooms/{ws.s.room}/messages", json={"text": "7", "in_reply_to": mine["id"]})
    assert (r.json()["event"]["targets"], r.json()["event"]["route"]) == (["alice"], "answer")
