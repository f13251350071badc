"""Run the real `agentpost` command in a subprocess against a hub, for CLI tests."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import hubproc
from hubproc import HubProcess

ROOT = Path(__file__).resolve().parents[1]


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
    p = _forked(list(args), full, stdin, timeout) or subprocess.run(
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


def _forked(
    args: list[str], env: dict[str, str], stdin: str | None, timeout: float
) -> subprocess.CompletedProcess[str] | None:
    """The command as a fork of this worker's fork server (tests/forkserver.py), or None
    where the server is off or the command needs a fresh interpreter."""
    if not hubproc.FORK_SERVER:
        return None
    from forkserver import ForkServer

    server = ForkServer.get()
    if server is None or not server.fits(env):
        return None
    return server.run([sys.executable, "-m", "agentpost", *args], env, stdin, timeout)


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


def run_doc_block(doc: Path, hub: HubProcess) -> subprocess.CompletedProcess[str]:
    """Run the one ```sh block of `doc` as written, in bash -euo pipefail from the repository
    root, against `hub` (AGENTPOST_HUB and the admin token set, nothing else of ours);
    asserts it exits 0."""
    (script,) = re.findall(r"```sh\n(.*?)```", doc.read_text(), re.S)
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTPOST_")}
    env |= {"AGENTPOST_HUB": hub.url, "AGENTPOST_ADMIN_TOKEN": hub.admin_token}
    p = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )
    assert p.returncode == 0, p.stdout + p.stderr
    return p


def agentpost_batch(
    jobs: list[dict[str, Any]], processes: int = 2, timeout: float = 120
) -> list[dict[str, Any]]:
    """Run many `agentpost` command lines, each a real process forked by tests/clibatch.py
    (one Python start per batch, not per command), split over `processes` batches run at
    once. A job: `args`, `env` (the whole environment of ours: nothing of AGENTPOST_* is
    inherited), optional `stdin`, `cwd`, `mode` ("capture", or "head" for `| head -1`).
    Each result: `rc` (an int, or "timeout"), `stdout`, `stderr`."""
    from concurrent.futures import ThreadPoolExecutor

    base = {k: v for k, v in os.environ.items() if not k.startswith("AGENTPOST_")}
    full = [{"cwd": str(ROOT), **job, "env": {**base, **job.get("env", {})}} for job in jobs]
    chunks = [full[i::processes] for i in range(processes)]

    def run(chunk: list[dict[str, Any]]) -> list[dict[str, Any]]:
        p = subprocess.run(
            [sys.executable, str(ROOT / "tests" / "clibatch.py")],
            input=json.dumps(chunk),
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        assert p.returncode == 0, p.stderr
        out: list[dict[str, Any]] = json.loads(p.stdout)
        return out

    with ThreadPoolExecutor(processes) as pool:
        done = list(pool.map(run, chunks))
    results: list[dict[str, Any]] = [{}] * len(jobs)
    for i, chunk_results in enumerate(done):
        for j, r in enumerate(chunk_results):
            results[i + j * processes] = r
    return results
