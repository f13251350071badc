"""The real MCP clients of tests/interop — Claude Code (`claude -p`), Codex (`codex exec`),
Gemini CLI (`gemini -p`) — each configured in its own documented way to run
`agentpost mcp` for one member, and pointed at the fake of its vendor's model API."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from agentrun import agent_env
from fakes.base import FakeServer


def mcp_command(hub_url: str, token_file: Path) -> list[str]:
    return [sys.executable, "-m", "agentpost", "mcp", "--hub", hub_url, "--token-file", str(token_file)]


@dataclass
class McpClient:
    vendor: str
    model: FakeServer
    env: dict[str, str]
    home: Path
    workdir: Path

    extra: tuple[str, ...] = ()

    def run(self, prompt: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """One headless session of the client with `prompt`, to its end."""
        cmd = {
            "claude": ["claude", "-p", prompt, "--mcp-config", str(self.home / "mcp.json"),
                       "--strict-mcp-config", "--allowedTools", "mcp__agentpost"],
            "codex": ["codex", "exec", "--skip-git-repo-check", prompt],
            "gemini": ["gemini", "-p", prompt, "--allowed-mcp-server-names", "agentpost"],
        }[self.vendor] + list(self.extra)
        return subprocess.run(cmd, env=self.env, cwd=self.workdir, capture_output=True,
                              text=True, timeout=timeout, stdin=subprocess.DEVNULL)


DOC = Path(__file__).resolve().parents[2] / "docs" / "mcp.md"
HEADINGS = {"claude": "**Claude Code**", "codex": "**Codex**", "gemini": "**Gemini CLI**"}


def documented_config(vendor: str, hub_url: str, token_file: Path, project: Path) -> str:
    """docs/mcp.md's configuration block for the client, as written, with its example paths
    made this test's: the tests run what the docs tell users to write."""
    text = DOC.read_text()
    section = text[text.index("## Configure your agent"):text.index("## The tools")]
    after = section[section.index(HEADINGS[vendor]):]
    m = re.search(r"```\w*\n(.*?)```", after, re.S)
    assert m, f"docs/mcp.md has no configuration block for {vendor}"
    agentpost = Path(sys.executable).parent / "agentpost"
    return (
        m.group(1)
        .replace("/home/me/agentpost/.venv/bin/agentpost", str(agentpost))
        .replace("http://127.0.0.1:8470", hub_url)
        .replace("/home/me/.config/agentpost/writer.token", str(token_file))
        .replace("/home/me/project", str(project))
    )


def configure(vendor: str, model: FakeServer, home: Path, bin_dir: Path, hub_url: str,
              token_file: Path) -> McpClient:
    env = agent_env(vendor, model.url, home, bin_dir)
    project = home / "project"
    project.mkdir(exist_ok=True)
    block = documented_config(vendor, hub_url, token_file, project)
    if vendor == "claude":
        (home / "mcp.json").write_text(block)
    elif vendor == "codex":
        with open(home / ".codex" / "config.toml", "a") as f:
            f.write("\n" + block)
    elif vendor == "gemini":
        settings_path = home / ".gemini" / "settings.json"
        settings = json.loads(settings_path.read_text())
        settings.update(json.loads(block))
        settings_path.write_text(json.dumps(settings))
    workdir = home / "work"
    workdir.mkdir(exist_ok=True)
    return McpClient(vendor, model, env, home, workdir)
