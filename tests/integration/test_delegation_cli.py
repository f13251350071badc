"""docs/delegation.md, run as written: the CLI against a real hub."""

from __future__ import annotations

import json

from test_cli import run

from hubproc import HubProcess


def test_delegation_walkthrough(hub: HubProcess) -> None:
    run(hub, "admin", "workspace", "create", "studio")
    tok = {
        n: json.loads(run(hub, "admin", "member", "add", "studio", n, *args, "--json").stdout)[
            "token"
        ]
        for n, args in [
            ("hana", ["--kind", "human"]),
            ("planner", ["--kind", "agent", "--owner", "hana"]),
            ("writer", ["--kind", "agent", "--owner", "hana"]),
        ]
    }
    run(
        hub,
        "room",
        "create",
        "launch",
        "-w",
        "studio",
        "-p",
        "planner",
        "-p",
        "writer",
        token=tok["hana"],
    )
    e1 = json.loads(
        run(
            hub, "post", "launch", "-t", "@writer please draft", "--json", token=tok["planner"]
        ).stdout
    )["event"]
    with hub.client(tok["writer"]) as c:
        writer_id = c.get("/v1/me").json()["member"]["id"]
    assert e1["metadata"] == {
        "delegated_by": "planner",
        "delegated_to": ["writer"],
        "delegated_to_ids": [writer_id],
        "delegation_depth": 1,
    }
    got = json.loads(run(hub, "inbox", "--json", token=tok["writer"]).stdout)
    assert [i["event"]["id"] for i in got["items"]] == [e1["id"]]
    r = json.loads(
        run(
            hub,
            "post",
            "launch",
            "-t",
            "Draft is in notes.md",
            "--in-reply-to",
            e1["id"],
            "--reply-kind",
            "result",
            "-k",
            "report-1",
            "--json",
            token=tok["writer"],
        ).stdout
    )
    assert (r["event"]["targets"], r["event"]["route"]) == (["planner"], "receipt")
    dup = run(
        hub,
        "post",
        "launch",
        "-t",
        "again",
        "--in-reply-to",
        e1["id"],
        "--reply-kind",
        "result",
        token=tok["writer"],
    ).stdout
    assert "woke no one (receipt_duplicate)" in dup
    inbox = json.loads(run(hub, "inbox", "--ack", "--json", token=tok["planner"]).stdout)
    assert [(i["event"]["id"], i["event"]["route"]) for i in inbox["items"]] == [
        (r["event"]["id"], "receipt")
    ]
    assert inbox["acked"] == inbox["cursor"]
    settings = json.loads(
        run(
            hub, "room", "settings", "launch", "--router", "none", "--json", token=tok["hana"]
        ).stdout
    )
    assert settings["room"]["router"] == "none"
    run(hub, "admin", "member", "remove", "studio", "writer")
    refused = run(
        hub, "post", "launch", "-t", "still here", "--json", token=tok["writer"], check=False
    )
    assert refused.returncode == 1
    assert json.loads(refused.stdout)["error"]["code"] == "agent_removed"
