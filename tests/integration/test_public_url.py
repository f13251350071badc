"""URLs the hub writes come from its configured public URL (docs/deploy.md "The proxy",
docs/architecture.md#a2a): `serve --public-url` (or AGENTPOST_PUBLIC_URL), else the address
it is bound to, and never a request's Host header, which whoever calls chooses."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from hubproc import HubProcess, Setup, make_setup

EVIL = {"Host": "evil.example"}


def _card(setup: Setup) -> str:
    with setup.hub.client(setup.tokens["alice"]) as c:
        r = c.get(f"/a2a/{setup.workspace}/bot/.well-known/agent-card.json", headers=EVIL)
    assert r.status_code == 200, r.text
    return r.text


def test_without_a_public_url_the_card_names_the_bound_address_never_the_host(
    make_hub: Callable[..., HubProcess],
) -> None:
    setup = make_setup(make_hub(), ["alice"], ["bot"])
    card = _card(setup)
    assert "evil.example" not in card
    assert f'"url":"{setup.hub.url}/a2a/{setup.workspace}/bot"' in card.replace(" ", "")


def test_a_public_url_is_the_base_of_the_card(make_hub: Callable[..., HubProcess]) -> None:
    public = "https://hub.example/agentpost"
    hub = make_hub(extra_args=["--public-url", public + "/"])
    setup = make_setup(hub, ["alice"], ["bot"])
    card = _card(setup)
    assert "evil.example" not in card
    assert f'"url":"{public}/a2a/{setup.workspace}/bot"' in card.replace(" ", "")
    assert f'"url":"{public}"' in card.replace(" ", "")  # the provider


def test_the_public_url_is_taken_from_the_environment_too(
    make_hub: Callable[..., HubProcess],
) -> None:
    hub = make_hub(env={"AGENTPOST_PUBLIC_URL": "http://proxy.example:8500"})
    setup = make_setup(hub, ["alice"], ["bot"])
    assert "http://proxy.example:8500/a2a/" in _card(setup)


def test_a_public_url_that_is_not_one_is_a_usage_error(tmp_path: Path) -> None:
    for bad in (
        "hub.example",
        "ftp://hub.example",
        "https://u@hub.example",
        "https://h.example/?a",
    ):
        p = subprocess.run(
            [
                sys.executable,
                "-m",
                "agentpost",
                "serve",
                "--port",
                "0",
                "--data",
                str(tmp_path),
                "--public-url",
                bad,
            ],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert p.returncode == 2, (bad, p.stderr)
        assert "--public-url" in p.stderr and p.stderr.count("\n") == 1, p.stderr
