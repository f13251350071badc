"""Run the real agents of tests/interop: where their npm packages are, the environment each
needs against our fake model servers, and a Worker (`agentpost connect`) process."""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from hubproc import HubProcess, Setup, poll
from workerproc import WorkerProcess

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
class Room:
    """A workspace of the test's own on the module's hub: alice (a person) owns the agent
    `bot`; carol is another person; all in room `general`."""

    setup: Setup
    tmp: Path
    workers: list[WorkerProcess] = field(default_factory=list)

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

    def token_file(self, member: str = "bot") -> Path:
        """The member's token in a file of the test's own (mode 0600), as users keep it."""
        path = self.tmp / f"{member}.token"
        path.write_text(self.setup.tokens[member])
        path.chmod(0o600)
        return path

    def worker(self, agent: str, env: dict[str, str], *extra: str, member: str = "bot",
               repo: Path | None = None, start: bool = True) -> WorkerProcess:
        repo = repo or self.tmp / f"repo-{member}"
        repo.mkdir(exist_ok=True)
        token_file = self.token_file(member)
        w = WorkerProcess(
            args=["--agent", agent, "--token-file", str(token_file),
                  "--workspace-dir", str(self.tmp / f"ws-{member}"), "--repo", str(repo), *extra],
            env={**env, "AGENTPOST_HUB": self.hub.url},
            log_path=self.tmp / f"worker-{member}.log",
        )
        self.workers.append(w)
        return w.start() if start else w
