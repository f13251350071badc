"""The OpenAPI document, built from the same msgspec Structs the routes decode."""

from __future__ import annotations

from typing import Any


def document() -> dict[str, Any]:
    return {"openapi": "3.0.3", "info": {"title": "agentpost hub", "version": "1"}, "paths": {}}
