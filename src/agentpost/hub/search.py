"""Search over the rooms a member takes part in (docs/search.md): the query parsed and
rebuilt safely (core/search.py), the hits read newest first (store/search.py), each with
where the query matched its text."""

from __future__ import annotations

import msgspec

from agentpost.core import search as syntax
from agentpost.core.errors import Code, RequestError
from agentpost.hub.routes.rooms import visible_room
from agentpost.store import search
from agentpost.store.engine import Db
from agentpost.store.models import Member

DEFAULT_LIMIT = 20
MAX_LIMIT = 100


class _Text(msgspec.Struct):
    text: str = ""


_text_of = msgspec.json.Decoder(_Text)


def find(db: Db, member: Member, q: str, f: search.Filters) -> bytes:
    """The answer body `{"hits": [{"event", "highlights"}], "next_before"}`."""
    query = syntax.parse(q)
    if f.room_id is not None:
        visible_room(db, f.room_id, member)
    before: int | str | None = None
    if f.before is not None:
        before = search.position(db, member.id, f.before)
        if before is None:
            raise RequestError(
                Code.INVALID_REQUEST,
                f"before: no event {f.before!r} in a room of yours (use a next_before you got)",
                field="before",
            )
    bodies = search.find(db, query, f, before)
    hits = [
        b'{"event":'
        + body
        + b',"highlights":'
        + msgspec.json.encode(syntax.highlights(query, _text_of.decode(body).text))
        + b"}"
        for body in bodies
    ]
    more = None
    if len(bodies) == f.limit and bodies:
        more = msgspec.json.decode(bodies[-1], type=dict)["id"]
    return b'{"hits":[' + b",".join(hits) + b'],"next_before":' + msgspec.json.encode(more) + b"}"
