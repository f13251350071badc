"""What a Worker says when it starts (issue 28): an agent with no owner and no
collaborators is answered by no one's messages, so its Worker says so at once."""

from __future__ import annotations

from conftest import Connected, wait_for


def test_a_worker_for_an_ownerless_agent_says_it_answers_no_one(connected: Connected) -> None:
    ws = connected.setup.workspace
    with connected.hub.client(connected.hub.admin_token) as admin:
        r = admin.post(
            f"/v1/admin/workspaces/{ws}/members", json={"name": "stray", "kind": "agent"}
        )
        assert r.status_code == 201, r.text
        assert r.json()["member"]["owner"] is None
        connected.setup.tokens["stray"] = r.json()["token"]
    lonely = connected.worker(member="stray")
    wait_for(lambda: "answers no one" in lonely.log())
    assert "stray has no owner and no collaborators: this Worker answers no one" in lonely.log()
    assert "--owner PERSON" in lonely.log() and "--collaborator NAME" in lonely.log()

    lonely.stop()
    told = connected.worker(None, "--collaborator", "alice", member="stray", log_name="told")
    assert "answers no one" not in told.log()
    owned = connected.worker(log_name="owned")  # bot, owned by alice
    assert "answers no one" not in owned.log()
