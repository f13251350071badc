from hubproc import Setup


def test_keyed_post_twice_makes_one_event(setup: Setup) -> None:
    with setup.hub.client(setup.tokens["alice"]) as c:
        first = c.post(
            f"/v1/rooms/{setup.room}/messages",
            json={"text": "hi"},
            headers={"Idempotency-Key": "k"},
        )
        again = c.post(
            f"/v1/rooms/{setup.room}/messages",
            json={"text": "hi"},
            headers={"Idempotency-Key": "k"},
        )
        assert first.status_code == again.status_code == 201
        assert first.headers["idempotency-status"] == "created"
        assert again.headers["idempotency-status"] == "replayed"
        assert first.content == again.content
        events = c.get(f"/v1/rooms/{setup.room}/events").json()["events"]
        assert [e["text"] for e in events] == ["hi"]
