"""Run the real `agentpost` command in a subprocess against a hub, for CLI tests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

from hubproc import HubProcess


def agentpost(
    hub: HubProcess | None,
    *args: str,
    token: str | None = None,
    env: dict[str, str] | None = None,
    check: bool = True,
    stdin: str | None = None,
    timeout: float = 60,
) -> subprocess.CompletedProcess[str]:
    """`agentpost ARGS…` with AGENTPOST_HUB (and the admin token) of `hub`; no member token
    unless `token` is given. `check`: exit 0 expected."""
    full = {k: v for k, v in os.environ.items() if not k.startswith("AGENTPOST_")}
    if hub is not None:
        full["AGENTPOST_HUB"] = hub.url
        full["AGENTPOST_ADMIN_TOKEN"] = hub.admin_token
    if token:
        full["AGENTPOST_TOKEN"] = token
    full.update(env or {})
    p = subprocess.run(
        [sys.executable, "-m", "agentpost", *args],
        capture_output=True,
        text=True,
        env=full,
        input=stdin,
        timeout=timeout,
    )
    if check:
        assert p.returncode == 0, p.stderr + p.stdout
    return p


def json_error(p: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """The one JSON error object a failed `--json` command printed (and nothing else)."""
    assert "Traceback" not in p.stderr, p.stderr
    lines = p.stdout.splitlines()
    assert len(lines) == 1, p.stdout
    body = json.loads(lines[0])
    assert set(body) == {"error"}, body
    assert set(body["error"]) >= {"code", "message", "retryable"}, body
    err: dict[str, Any] = body["error"]
    return err
