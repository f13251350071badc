"""The `llm` router policy against a local fake OpenAI-compatible endpoint (docs/delegation.md):
the model picks a live candidate or `stop`; anything else, or a timeout, is `stop`."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from routing_helpers import Room, remove

from hubproc import HubProcess, make_setup


class FakeModel:
    """Answers chat completions with `answer(request)`; records every request."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.answer: Callable[[dict[str, Any]], str] = lambda req: "stop"
        self.release = threading.Event()
        self.hang = False
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                body["_path"] = self.path
                body["_auth"] = self.headers.get("Authorization")
                fake.requests.append(body)
                if fake.hang:
                    fake.release.wait(30)
                out = json.dumps(
                    {"choices": [{"message": {"role": "assistant", "content": fake.answer(body)}}]}
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def model() -> Iterator[FakeModel]:
    m = FakeModel()
    yield m
    m.close()


@pytest.fixture
def room(make_hub: Callable[..., HubProcess], model: FakeModel) -> Room:
    hub = make_hub(
        env={
            "AGENTPOST_ROUTER_URL": model.url,
            "AGENTPOST_ROUTER_MODEL": "fake-1",
            "AGENTPOST_ROUTER_KEY": "sk-test",
            "AGENTPOST_ROUTER_TIMEOUT": "1",
        }
    )
    s = make_setup(hub, ["hana"], ["a", "b", "c"])
    r = Room(hub, s.tokens, s.room)
    assert r.settings("hana", router="llm").json()["room"]["router"] == "llm"
    return r


def test_model_choice_among_live_candidates_is_woken(room: Room, model: FakeModel) -> None:
    model.answer = lambda req: "b"
    ev = room.say("hana", "who can summarise the thread?")
    assert (ev["targets"], ev["route"]) == (["b"], "router")
    req = model.requests[-1]
    assert req["_path"] == "/v1/chat/completions" and req["model"] == "fake-1"
    assert req["_auth"] == "Bearer sk-test"
    assert req["messages"][-1]["content"] == "who can summarise the thread?"


def test_candidates_are_live_agents_only(room: Room, model: FakeModel) -> None:
    remove(room.hub, "c", "soft")
    model.answer = lambda req: "c"  # the model names a removed agent anyway
    ev = room.say("hana", "anyone?")
    assert (ev["targets"], ev["route"]) == ([], "router_stop")
    prompt = model.requests[-1]["messages"][0]["content"]
    assert "a\nb" in prompt and "c" not in prompt.split("Candidates:")[1]


@pytest.mark.parametrize("answer", ["stop", "hana", "nobody", "b and c", ""])
def test_an_answer_that_is_not_a_candidate_is_stop(
    room: Room, model: FakeModel, answer: str
) -> None:
    model.answer = lambda req: answer
    ev = room.say("hana", "anyone?")
    assert (ev["targets"], ev["route"]) == ([], "router_stop")


def test_a_timeout_is_stop_and_the_post_still_lands(room: Room, model: FakeModel) -> None:
    model.hang = True
    ev = room.say("hana", "anyone?")
    assert (ev["targets"], ev["route"]) == ([], "router_stop")
    assert "timed out" in room.hub.log_path.read_text()  # type: ignore[union-attr]


def test_messages_with_a_mention_and_agent_messages_never_ask(room: Room, model: FakeModel) -> None:
    room.say("hana", "@a do it")
    room.say("a", "no mention from an agent")
    assert model.requests == []


def test_a_replay_does_not_ask_again(room: Room, model: FakeModel) -> None:
    model.answer = lambda req: "a"
    with room.hub.client(room.tokens["hana"]) as h:
        for _ in range(3):
            r = h.post(
                f"/v1/rooms/{room.id}/messages",
                json={"text": "anyone?"},
                headers={"Idempotency-Key": "once"},
            )
            assert r.json()["event"]["targets"] == ["a"]
    assert len(model.requests) == 1
