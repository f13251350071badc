"""Run the real agents of tests/interop: where their npm packages are, the environment each
needs against our fake model servers, and a Worker (`agentpost connect`) process."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from hubproc import HubProcess, Setup, poll

NODE_DIR = Path(__file__).parent / "node"
REQUIRE = os.environ.get("AGENTPOST_REQUIRE_INTEROP") == "1"


def node_bin() -> Path:
    """`tests/interop/node/node_modules/.bin` (`npm ci --prefix tests/interop/node`), or a
    skip — a failure under `AGENTPOST_REQUIRE_INTEROP=1` (CI)."""
    where = Path(os.environ.get("AGENTPOST_INTEROP_NODE_BIN") or NODE_DIR / "node_modules" / ".bin")
    missing = [n for n in ("claude", "claude-agent-acp", "codex", "codex-acp", "gemini", "mcp-inspector")
               if not (where / n).exists()]
    if shutil.which("node") is None or missing:
        why = f"the interop agents are not installed ({where}: missing {missing}); run npm ci --prefix {NODE_DIR}"
        if REQUIRE:
            pytest.fail(why)
        pytest.skip(why)
    return where


def agent_env(vendor: str, model_url: str, home: Path, bin_dir: Path) -> dict[str, str]:
    """The environment one vendor's client needs to talk to our fake of its API: a home of
    the test's own (their settings live there), the documented base-URL settings, a fake key."""
    home.mkdir(parents=True, exist_ok=True)
    env = {
        k: v for k, v in os.environ.items()
        if not k.startswith(("ANTHROPIC_", "OPENAI_", "GEMINI_", "GOOGLE_", "CODEX_", "CLAUDE_"))
    }
    env.update(HOME=str(home), PATH=f"{bin_dir}:{env.get('PATH', '')}", NO_COLOR="1")
    if vendor == "claude":
        env.update(
            ANTHROPIC_BASE_URL=model_url,
            ANTHROPIC_API_KEY="sk-ant-fake-interop",
            CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
            DISABLE_AUTOUPDATER="1",
        )
        if os.geteuid() == 0:
            env["IS_SANDBOX"] = "1"  # Claude Code refuses to run as root otherwise
    elif vendor == "codex":
        codex_home = home / ".codex"
        codex_home.mkdir(exist_ok=True)
        (codex_home / "config.toml").write_text(
            'model = "gpt-5.5"\nmodel_provider = "fake"\n'
            "[model_providers.fake]\n"
            'name = "fake"\n'
            f'base_url = "{model_url}/v1"\n'
            'env_key = "OPENAI_API_KEY"\n'
            'wire_api = "responses"\n'
            "request_max_retries = 0\nstream_max_retries = 0\n"
            "[features]\ntool_search = false\n"
        )
        tmp = home / "tmp"
        tmp.mkdir(exist_ok=True)
        env.update(OPENAI_API_KEY="sk-fake-interop", CODEX_HOME=str(codex_home), TMPDIR=str(tmp))
    elif vendor == "gemini":
        gemini_dir = home / ".gemini"
        gemini_dir.mkdir(exist_ok=True)
        settings = {
            "security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": False}},
            "privacy": {"usageStatisticsEnabled": False},
            "general": {"disableAutoUpdate": True, "disableUpdateNag": True},
        }
        (gemini_dir / "settings.json").write_text(json.dumps(settings))
        env.update(
            GEMINI_API_KEY="fake-gemini-key",
            GOOGLE_GEMINI_BASE_URL=model_url,
            GEMINI_CLI_NO_RELAUNCH="true",
        )
    return env


@dataclass
class Worker:
    """One `agentpost connect` process; its stderr is the Worker's log."""

    args: list[str]
    env: dict[str, str]
    log_path: Path
    proc: subprocess.Popen[bytes] | None = None

    def start(self, wait_agent: bool = True) -> Worker:
        offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "agentpost", "connect", *self.args],
                stdout=log, stderr=log, env=self.env,
            )
        if wait_agent:
            poll(lambda: "agent started" in self.log()[offset:] or self.died(), timeout=60)
            assert not self.died(), self.log()
        return self

    def died(self) -> bool:
        return self.proc is not None and self.proc.poll() is not None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.kill()


@dataclass
class Room:
    """A workspace of the test's own on the module's hub: alice (a person) owns the agent
    `bot`; carol is another person; all in room `general`."""

    setup: Setup
    tmp: Path
    workers: list[Worker] = field(default_factory=list)

    @property
    def hub(self) -> HubProcess:
        return self.setup.hub

    def say(self, who: str, text: str, **body: Any) -> dict[str, Any]:
        with self.hub.client(self.setup.tokens[who]) as c:
            r = c.post(f"/v1/rooms/{self.setup.room}/messages", json={"text": text, **body})
        assert r.status_code == 201, r.text
        event: dict[str, Any] = r.json()["event"]
        return event

    def upload(self, who: str, name: str, data: bytes, caption: str) -> dict[str, Any]:
        with self.hub.client(self.setup.tokens[who]) as c:
            r = c.post(
                f"/v1/rooms/{self.setup.room}/media",
                files={"file": (name, data, "text/plain")},
                data={"text": caption},
            )
        assert r.status_code == 201, r.text
        event: dict[str, Any] = r.json()["event"]
        return event

    def events(self, who: str = "alice") -> list[dict[str, Any]]:
        with self.hub.client(self.setup.tokens[who]) as c:
            out: list[dict[str, Any]] = c.get(
                f"/v1/rooms/{self.setup.room}/events", params={"limit": 1000}
            ).json()["events"]
        return out

    def replies_to(self, event_id: str) -> list[dict[str, Any]]:
        return [e for e in self.events() if e["in_reply_to"] == event_id]

    def wait_reply(self, event_id: str, timeout: float = 90.0) -> dict[str, Any]:
        found: list[dict[str, Any]] = poll(lambda: self.replies_to(event_id), timeout=timeout)
        return found[0]

    def worker(self, agent: str, env: dict[str, str], *extra: str, member: str = "bot",
               repo: Path | None = None, start: bool = True) -> Worker:
        repo = repo or self.tmp / f"repo-{member}"
        repo.mkdir(exist_ok=True)
        token_file = self.tmp / f"{member}.token"
        token_file.write_text(self.setup.tokens[member])
        token_file.chmod(0o600)
        w = Worker(
            args=["--agent", agent, "--token-file", str(token_file),
                  "--workspace-dir", str(self.tmp / f"ws-{member}"), "--repo", str(repo), *extra],
            env={**env, "AGENTPOST_HUB": self.hub.url},
            log_path=self.tmp / f"worker-{member}.log",
        )
        self.workers.append(w)
        return w.start() if start else w
