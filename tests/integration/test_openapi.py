"""`/openapi.json` is the real API: every route is in it, and schemathesis, fuzzing a real hub
process with real tokens, finds no 5xx, no undocumented status, body, header or content type
(docs/api.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from agentpost.hub.app import ROUTES
from agentpost.hub.openapi import document
from hubproc import HubProcess, Setup

# The whole fuzz run must stay well inside a minute (hub start and setup included).
MAX_EXAMPLES = 12
MAX_TIME_SECONDS = 40
HOOKS = Path(__file__).with_name("schemathesis_hooks.py")


def _route_pairs() -> set[tuple[str, str]]:
    pairs = set()
    for route in ROUTES:
        for method in route.methods or ():
            if method != "HEAD":  # Starlette adds HEAD to every GET
                pairs.add((route.path, method.lower()))
    return pairs


def test_every_route_is_documented_and_nothing_else() -> None:
    documented = {(path, m) for path, ops in document()["paths"].items() for m in ops}
    assert documented == _route_pairs()


def test_every_operation_names_its_auth_and_responses() -> None:
    for path, ops in document()["paths"].items():
        for method, op in ops.items():
            assert "security" in op, (method, path)
            assert any(s.startswith("2") for s in op["responses"]), (method, path)
            if path.startswith("/v1/admin/"):
                assert op["security"] == [{"adminToken": []}], (method, path)


def test_openapi_json_is_served(hub: HubProcess) -> None:
    with hub.client() as c:
        r = c.get("/openapi.json")
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("application/json")
    assert r.json() == document()
    assert r.json()["openapi"].startswith("3.1")


def _config(setup: Setup, media_id: str, event_ids: list[str]) -> str:
    """schemathesis.toml: real tokens per security scheme; real ids for path params most of
    the time (so the fuzzer gets past 404s), random ones the rest of the time."""

    def q(s: str) -> str:
        return json.dumps(s)

    return f"""
max-time = {MAX_TIME_SECONDS}
request-timeout = 5
max-stream-events = 2
warnings = false

[generation]
database = "none"
max-examples = {MAX_EXAMPLES}

[auth.openapi.memberToken]
bearer = {q(setup.tokens["alice"])}

[auth.openapi.adminToken]
bearer = {q(setup.hub.admin_token)}

[dictionaries.rooms]
values = [{q(setup.room)}]

[dictionaries.workspaces]
values = [{q(setup.workspace)}]

[dictionaries.names]
values = ["carol", "helper"]

[dictionaries.media]
values = [{q(media_id)}]

[dictionaries.events]
values = [{", ".join(q(e) for e in event_ids)}]

[parameters]
"path.room" = {{ dictionary = "rooms", probability = 0.8 }}
"path.ws" = {{ dictionary = "workspaces", probability = 0.7 }}
"path.name" = {{ dictionary = "names", probability = 0.5 }}
"path.media" = {{ dictionary = "media", probability = 0.7 }}
"path.event" = {{ dictionary = "events", probability = 0.7 }}

# A long poll would hold each case for up to 60 s; `wait` parsing has its own plain test.
[[operations]]
include-name = "GET /v1/inbox"
parameters = {{ "query.wait" = 0 }}

# Schema-valid bodies these routes refuse by rule or reference (400 `invalid_request`):
# an unknown owner (of an agent or a thread), participant, master, attachment or in_reply_to
# event; blank text; a master-mode room
# without a master (also when settings switch a room to master mode); a human with an owner,
# or an owner set on one; and `1.0` where JSON Schema's integer allows it. A search query with no word to find, an
# unclosed quote or too many terms (400 `search_query_invalid`), a `before` of no event.
[[operations]]
include-name = ["POST /v1/admin/workspaces/{{ws}}/members", "POST /v1/workspaces/{{ws}}/rooms",
                "POST /v1/rooms/{{room}}/messages", "POST /v1/inbox/ack",
                "PATCH /v1/rooms/{{room}}", "GET /v1/search",
                "POST /v1/workspaces/{{ws}}/threads/ensure", "POST /v1/rooms/{{room}}/read",
                "PUT /v1/admin/workspaces/{{ws}}/members/{{name}}/owner"]
checks.positive_data_acceptance.expected-statuses = ["2xx", "400", "401", "403", "404", "409"]

# Edits, reactions and redactions refuse schema-valid bodies by rule: another member's
# event (403 `not_event_sender`), a blank text or an emoji with a space (400), a redacted
# target (409 `event_redacted`), a relation event as target (422 `invalid_relation_target`).
[[operations]]
include-path-regex = "/(edits|reactions|redactions)$"
checks.positive_data_acceptance.expected-statuses = ["2xx", "400", "401", "403", "404", "409", "422"]

# A Markdown export links its files: `format=md` with `files=embed` (each value valid on its
# own) is 400 `invalid_request`.
[[operations]]
include-name = "GET /v1/rooms/{{room}}/export"
checks.positive_data_acceptance.expected-statuses = ["2xx", "400", "401", "403", "404"]

# Multipart fields are text on the wire: a "number" the fuzzer puts in `text` or `file`
# arrives as the string it is, which the route rightly takes.
[[operations]]
include-name = "POST /v1/rooms/{{room}}/media"
checks.negative_data_rejection.enabled = false

# An idle event stream only ends when the client stops reading: the timeout is that stop,
# and it is most of the run's time (a fuzzed `after` past the last event leaves the stream
# idle). The hub sends its headers within milliseconds; half a second leaves wide margin.
[[operations]]
include-path-regex = "/stream$"
request-timeout = 0.5
"""


def _seed(setup: Setup) -> tuple[str, list[str]]:
    """Give the room events (alice's, bot's), a media file and an inbox item; return the
    media id and the event ids."""
    with setup.hub.client(setup.tokens["alice"]) as alice:
        r = alice.post(f"/v1/rooms/{setup.room}/messages", json={"text": "hello @bot"})
        assert r.status_code == 201, r.text
        first: str = r.json()["event"]["id"]
        files = {"file": ("a.txt", b"hello", "text/plain")}
        r = alice.post(f"/v1/rooms/{setup.room}/media", files=files)
        assert r.status_code == 201, r.text
        media_id: str = r.json()["media"]["id"]
    with setup.hub.client(setup.tokens["bot"]) as bot:
        r = bot.post(f"/v1/rooms/{setup.room}/messages", json={"text": "hi @alice"})
        assert r.status_code == 201, r.text
        second: str = r.json()["event"]["id"]
    return media_id, [first, second]


def test_schemathesis_finds_no_mismatch(setup: Setup, tmp_path: Path) -> None:
    config = tmp_path / "schemathesis.toml"
    config.write_text(_config(setup, *_seed(setup)))
    cmd = [
        sys.executable,
        "-m",
        "schemathesis.cli",
        "--config-file",
        str(config),
        "--no-color",
        "run",
        f"{setup.hub.url}/openapi.json",
        "--checks",
        "all",
        "--phases",
        "examples,coverage,fuzzing,stateful",
        "--seed",
        "1",
        # One worker: hypothesis describes strategies with ast.parse, which is not
        # thread-safe on Python 3.11 ("AST constructor recursion depth mismatch").
        "--workers",
        "1",
    ]
    # The hooks tie each Idempotency-Key to one request: schemathesis reuses keys ("0")
    # across bodies, which the hub rightly refuses as `idempotency_conflict` (see the hook).
    env = {**os.environ, "SCHEMATHESIS_HOOKS": str(HOOKS)}
    started = time.monotonic()
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, timeout=120, env=env)
    took = time.monotonic() - started
    hub_log = setup.hub.log_path.read_text() if setup.hub.log_path else ""
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}\n--- hub log ---\n{hub_log}"
    assert "Traceback" not in hub_log, hub_log
    assert took < 60, f"schemathesis took {took:.1f} s"


def test_inbox_wait_is_parsed_and_capped(setup: Setup) -> None:
    with setup.hub.client(setup.tokens["carol"]) as carol:
        for bad in ["x", "-1", "nan", "inf", "1e999"]:
            r = carol.get("/v1/inbox", params={"wait": bad})
            assert r.status_code == 400, (bad, r.text)
            assert r.json()["error"]["code"] == "invalid_request"
        r = carol.get("/v1/inbox", params={"wait": "0.1"})
        assert r.status_code == 200


def test_the_document_cites_this_repositorys_docs_only() -> None:
    text = json.dumps(document())
    assert "DESIGN.md" not in text  # not in this repository
    assert "docs/api.md" in text
