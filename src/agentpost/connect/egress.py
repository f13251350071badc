"""The Turn egress judge (docs/connect.md) is the shared one in `agentpost/egress.py`: one
decision, one place, for connect's `resource_link` files and the MCP server's uploads."""

from agentpost.egress import CODES, PRIVATE, EgressRefused, EgressRoots, OpenedFile

__all__ = ["CODES", "PRIVATE", "EgressRefused", "EgressRoots", "OpenedFile"]
