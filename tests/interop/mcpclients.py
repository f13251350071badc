"""The real MCP clients of tests/interop — Claude Code (`claude -p`), Codex (`codex exec`),
Gemini CLI (`gemini -p`) — each configured in its own documented way to run
`agentpost mcp` for one member, and pointed at the fake of its vendor's model API."""

from __future__ import annotations

import json
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

    def run(self, prompt: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """One headless session of the client with `prompt`, to its end."""
        cmd = {
            "claude": ["claude", "-p", prompt, "--mcp-config", str(self.home / "mcp.json"),
                       "--strict-mcp-config", "--allowedTools", "mcp__agentpost"],
            "codex": ["codex", "exec", "--skip-git-repo-check", prompt],
            "gemini": ["gemini", "-p", prompt, "--allowed-mcp-server-names", "agentpost"],
        }[self.vendor]
        return subprocess.run(cmd, env=self.env, cwd=self.workdir, capture_output=True,
                              text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def configure(vendor: str, model: FakeServer, home: Path, bin_dir: Path, hub_url: str,
              token_file: Path) -> McpClient:
    env = agent_env(vendor, model.url, home, bin_dir)
    command = mcp_command(hub_url, token_file)
    server = {"command": command[0], "args": command[1:]}
    if vendor == "claude":
        (home / "mcp.json").write_text(json.dumps({"mcpServers": {"agentpost": {"type": "stdio", **server}}}))
    elif vendor == "codex":
        with open(home / ".codex" / "config.toml", "a") as f:
            f.write("\n[mcp_servers.agentpost]\n")
            f.write(f"command = {json.dumps(server['command'])}\n")
            f.write(f"args = {json.dumps(server['args'])}\n")
            f.write('default_tools_approval_mode = "approve"\n')
    elif vendor == "gemini":
        settings_path = home / ".gemini" / "settings.json"
        settings = json.loads(settings_path.read_text())
        settings["mcpServers"] = {"agentpost": {**server, "trust": True}}
        settings_path.write_text(json.dumps(settings))
    workdir = home / "work"
    workdir.mkdir(exist_ok=True)
    return McpClient(vendor, model, env, home, workdir)
