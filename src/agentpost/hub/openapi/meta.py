"""Unauthenticated routes (hub/routes/meta.py): health, metrics, this document, capabilities."""

from __future__ import annotations

from typing import Any

from agentpost.hub.openapi.common import JSON, json_content, operation


def operations() -> dict[str, dict[str, Any]]:
    text = {"content": {"text/plain": {"schema": {"type": "string"}}}}
    return {
        "/healthz": {"get": operation("healthz", (200, json_content("Health")), [])},
        "/metrics": {"get": operation("metrics", (200, text), [])},
        "/openapi.json": {
            "get": operation("openapi", (200, {"content": {JSON: {"schema": {}}}}), [])
        },
        "/v1/capabilities": {
            "get": operation("capabilities", (200, json_content("Capabilities")), [])
        },
    }
