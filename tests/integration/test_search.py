"""Search (docs/search.md) on both engines: only the caller's rooms, newest first, paged by
`before`, highlights as offsets, a safe query syntax whose errors are 400
`search_query_invalid`, and the index filled for events from before the migration.

alice takes part in `red`, carol in `blue`, bob in both; dave in neither."""

from __future__ import annotations

import json
import os
import sqlite3
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clirun import agentpost, run_doc_block
from hubproc import HubProcess, make_setup


@dataclass
class World:
    hub: HubProcess
    tokens: dict[str, str]
    red: str
    blue: str
    clients: dict[str, httpx.Client] = field(default_factory=dict)

    def say(self, who: str, room: str, text: str) -> dict[str, Any]:
        with self.hub.client(self.tokens[who]) as c:
            r = c.post(f"/v1/rooms/{room}/messages", json={"text": text})
        assert r.status_code == 201, r.text
        event: dict[str, Any] = r.json()["event"]
        return event

    def search(self, who: str, **params: Any) -> httpx.Response:
        if who not in self.clients:
            self.clients[who] = self.hub.client(self.tokens[who])
        return self.clients[who].get("/v1/search", params=params)

    def hits(self, who: str, **params: Any) -> list[dict[str, Any]]:
        r = self.search(who, **params)
        assert r.status_code == 200, r.text
        hits: list[dict[str, Any]] = r.json()["hits"]
        return hits


def _pg_schema(request: pytest.FixtureRequest) -> Iterator[str]:
    pg = request.getfixturevalue("postgres")
    if pg is None:
        if os.environ.get("AGENTPOST_REQUIRE_POSTGRES") == "1":
            pytest.fail("AGENTPOST_REQUIRE_POSTGRES=1 but AGENTPOST_TEST_PG_DSN is not set")
        pytest.skip("no PostgreSQL: set AGENTPOST_TEST_PG_DSN or install the server (initdb)")
    import psycopg

    from pgcluster import server_lock

    with server_lock(pg.dsn, exclusive=False):
        schema = "t_" + uuid.uuid4().hex[:16]
        with psycopg.connect(pg.dsn, autocommit=True) as conn:
            conn.execute(f"CREATE SCHEMA {schema}")
        try:
            yield pg.schema_dsn(schema)
        finally:
            with psycopg.connect(pg.dsn, autocommit=True) as conn:
                conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def world(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[World]:
    """One hub per engine for the module: the tests below only add events and read."""
    dsns = _pg_schema(request) if request.param == "postgres" else iter([None])
    dsn = next(dsns)
    hub = HubProcess(tmp_path_factory.mktemp("search"), db_url=dsn).start()
    w: World | None = None
    try:
        s = make_setup(hub, ["alice", "bob", "carol", "dave"], [], room="red")
        with hub.client(s.tokens["alice"]) as c:
            assert c.put(f"/v1/rooms/{s.room}/participants/bob").status_code in (200, 201)
            assert c.delete(f"/v1/rooms/{s.room}/participants/carol").status_code == 200
            assert c.delete(f"/v1/rooms/{s.room}/participants/dave").status_code == 200
        with hub.client(s.tokens["carol"]) as c:
            r = c.post("/v1/workspaces/acme/rooms", json={"name": "blue", "participants": ["bob"]})
            assert r.status_code == 201, r.text
            blue = r.json()["room"]["id"]
        w = World(hub, s.tokens, s.room, blue)
        yield w
    finally:
        for c in w.clients.values() if w else ():
            c.close()
        hub.stop()
        next(dsns, None)


def test_each_member_finds_only_their_rooms(world: World) -> None:
    red = world.say("alice", world.red, "launch the zeppelin from the red dock")
    blue = world.say("carol", world.blue, "launch the zeppelin from the blue dock")
    assert [h["event"]["id"] for h in world.hits("alice", q="zeppelin")] == [red["id"]]
    assert [h["event"]["id"] for h in world.hits("carol", q="zeppelin")] == [blue["id"]]
    assert [h["event"]["id"] for h in world.hits("bob", q="zeppelin")] == [blue["id"], red["id"]]
    assert world.hits("dave", q="zeppelin") == []
    # Naming the other's room, or paging from the other's event, tells nothing either.
    r = world.search("alice", q="zeppelin", room=world.blue)
    assert r.status_code == 403 and r.json()["error"]["code"] == "channel_membership_required"
    r = world.search("alice", q="zeppelin", before=blue["id"])
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_request"


def test_room_and_sender_narrow_the_hits(world: World) -> None:
    a = world.say("alice", world.red, "quokka census by alice")
    b = world.say("bob", world.red, "quokka census by bob")
    c = world.say("bob", world.blue, "quokka census in blue")
    assert [h["event"]["id"] for h in world.hits("bob", q="quokka")] == [c["id"], b["id"], a["id"]]
    assert [h["event"]["id"] for h in world.hits("bob", q="quokka", room=world.red)] == [
        b["id"],
        a["id"],
    ]
    assert [h["event"]["id"] for h in world.hits("bob", q="quokka", sender="alice")] == [a["id"]]


def test_phrases_prefixes_and_exclusions(world: World) -> None:
    one = world.say("alice", world.red, "the narwhal report is ready")
    two = world.say("alice", world.red, "ready the report, narwhal")
    ids = lambda q: [h["event"]["id"] for h in world.hits("alice", q=q)]  # noqa: E731
    assert ids('"narwhal report"') == [one["id"]]
    assert ids("narwhal report") == [two["id"], one["id"]]
    assert ids("narwh*") == [two["id"], one["id"]]
    assert ids("narwhal -ready") == []
    assert ids('narwhal -"narwhal report"') == [two["id"]]
    # FTS5 and tsquery operators are plain words here, never syntax.
    assert ids("narwhal OR NEAR AND NOT") == []
    assert ids("narwhal (report) ^ready") == [two["id"], one["id"]]
    assert ids("text:narwhal") == []  # the words "text narwhal", not a column filter


def test_pages_newest_first_until_next_before_is_null(world: World) -> None:
    posted = [world.say("alice", world.red, f"okapi sighting number {n}")["id"] for n in range(7)]
    seen: list[str] = []
    before = None
    pages = 0
    while True:
        params: dict[str, Any] = {"q": "okapi", "limit": 3}
        if before:
            params["before"] = before
        body = world.search("alice", **params).json()
        seen += [h["event"]["id"] for h in body["hits"]]
        pages += 1
        before = body["next_before"]
        if before is None:
            break
    assert seen == posted[::-1]
    assert pages == 3


def test_highlights_are_character_offsets_on_non_ascii_text(world: World) -> None:
    text = "🎉🎉 Ça coûte: CAFÉ, café et cafe — 東京タワー"
    world.say("alice", world.red, text)
    (hit,) = world.hits("alice", q="café 東京タワー")
    # Accents fold as in the index: the query's café is CAFÉ, café and cafe.
    assert [text[s:e] for s, e in hit["highlights"]] == ["CAFÉ", "café", "cafe", "東京タワー"]
    (hit,) = world.hits("alice", q='"coûte café"')
    assert [text[s:e] for s, e in hit["highlights"]] == ["coûte: CAFÉ"]


@pytest.mark.parametrize(
    ("q", "says"),
    [
        ('"never closed', "closing quote"),
        ("", "q is required"),
        ("   ", "q is required"),
        ("-alone", "nothing to search for"),
        ("!!! ??? ***", "nothing to search for"),
        ("x" * 1001, "too long"),
        (" ".join(f"w{n}" for n in range(17)), "too many"),
    ],
)
def test_a_bad_query_is_400_search_query_invalid(world: World, q: str, says: str) -> None:
    r = world.search("alice", q=q)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["code"] == "search_query_invalid" and says in err["message"]


def test_bad_paging_and_filters_are_400(world: World) -> None:
    for params in ({"limit": "0"}, {"limit": "x"}, {"before": "ev_nope"}):
        r = world.search("alice", q="okapi", **params)
        assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_request", r.text
    r = world.search("alice", q="okapi", room="rm_nope")
    assert r.status_code == 404 and r.json()["error"]["code"] == "room_not_found"
    with world.hub.client() as c:
        assert c.get("/v1/search", params={"q": "okapi"}).status_code == 401


_ATOMS = st.sampled_from(
    ['"', "-", "*", "(", ")", ":", "^", "+", "'", "\\", "&", "|", "!", "<->", "NEAR", "OR",
     "AND", "NOT", "\x00", "\x01", "\u200b", "\ufeff", "e\u0301", "🎉", "東京", "okapi",
     "zeppelin", " ", "\t", "\n", "%", "?", "{", "}", "[", "]", "text:", "rowid", "'';--"]
)  # fmt: skip
_QUERY = st.one_of(
    st.lists(_ATOMS, max_size=30).map("".join),
    st.text(max_size=60),
    st.builds(lambda a, n: _fit((a * n)[:n]), _ATOMS, st.integers(1000, 10_000)),
)


def _fit(q: str, url_bytes: int = 12_000) -> str:
    """`q` cut to fit a request line the HTTP server takes (a 10 KB query, percent-encoded)."""
    while len(quote(q)) > url_bytes:
        q = q[: len(q) * 3 // 4]
    return q


@settings(
    max_examples=80,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(q=_QUERY)
def test_fuzzed_queries_never_500_never_leak(world: World, q: str) -> None:
    r = world.search("alice", q=q)
    assert r.status_code in (200, 400), r.text
    if r.status_code == 400:
        assert r.json()["error"]["code"] == "search_query_invalid"
        return
    assert all(h["event"]["room"] == world.red for h in r.json()["hits"])
    for h in r.json()["hits"]:
        text = h["event"]["text"]
        assert all(0 <= s < e <= len(text) for s, e in h["highlights"])


def _downgrade(hub: HubProcess) -> None:
    """Make the stopped hub's database what a hub of schema 4 left: no search index."""
    if hub.db_url is None:
        conn = sqlite3.connect(Path(hub.data_dir) / "hub.sqlite3")
        conn.executescript(
            "DROP TABLE event_search; DROP VIEW event_texts;"
            " DELETE FROM schema_version WHERE version = 5;"
        )
        conn.close()
        return
    import psycopg

    with psycopg.connect(hub.db_url, autocommit=True) as conn:
        conn.execute("DROP INDEX events_search")
        conn.execute("ALTER TABLE events DROP COLUMN search")
        conn.execute("DELETE FROM schema_version WHERE version = 5")


def test_upgrading_a_hub_indexes_its_older_events(make_hub: Any) -> None:
    hub = make_hub()
    s = make_setup(hub, ["alice"], [])
    texts = ["an axolotl from before", "nul\x00axolotl", "a literal \\u0000 axolotl", "🎉"]
    with hub.client(s.tokens["alice"]) as c:
        ids = [
            c.post(f"/v1/rooms/{s.room}/messages", json={"text": t}).json()["event"]["id"]
            for t in texts
        ]
    hub.stop()
    _downgrade(hub)
    hub.start()
    with hub.client(s.tokens["alice"]) as c:
        hits = c.get("/v1/search", params={"q": "axolotl"}).json()["hits"]
        assert [h["event"]["id"] for h in hits] == ids[2::-1]
        assert [
            h["event"]["id"] for h in c.get("/v1/search", params={"q": "u0000"}).json()["hits"]
        ] == [ids[2]]
        # Events after the upgrade are indexed as they are posted.
        new = c.post(f"/v1/rooms/{s.room}/messages", json={"text": "axolotl after"}).json()
        hits = c.get("/v1/search", params={"q": "axolotl"}).json()["hits"]
        assert hits[0]["event"]["id"] == new["event"]["id"] and len(hits) == 4


ROOT = Path(__file__).resolve().parents[2]


def test_docs_search_md_runs_as_written(hub: HubProcess) -> None:
    p = run_doc_block(ROOT / "docs" / "search.md", hub)
    lines = p.stdout.strip().splitlines()
    last = json.loads(lines[-1])
    assert [h["event"]["text"] for h in last["hits"]] == ["deploy fixed: café hours are back"]
    assert last["hits"][0]["highlights"] == [[0, 6]] and last["next_before"] is None
    # The plain search listed hana's two deploys, newest first, and not olga's.
    table = "\n".join(lines[:-1])
    assert table.index("deploy fixed") < table.index("nightly deploy failed")
    assert "nobody else sees" not in p.stdout


def test_cli_search_pages_and_reports_a_bad_query(world: World) -> None:
    for n in range(3):
        world.say("bob", world.blue, f"dingo count {n}")
    bob = world.tokens["bob"]
    first = agentpost(
        world.hub, "search", "dingo", "--room", "blue", "--limit", "2", "--json", token=bob
    )
    page = json.loads(first.stdout)
    assert [h["event"]["text"] for h in page["hits"]] == ["dingo count 2", "dingo count 1"]
    more = agentpost(world.hub, "search", "dingo", "--before", page["next_before"], token=bob)
    assert "dingo count 0" in more.stdout and "more:" not in more.stdout
    bad = agentpost(world.hub, "search", '"dingo', "--json", token=bob, check=False)
    assert bad.returncode != 0
    assert json.loads(bad.stdout)["error"]["code"] == "search_query_invalid"
