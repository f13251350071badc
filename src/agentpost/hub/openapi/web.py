"""The web page (hub/routes/web.py, docs/web.md): not API, but served by the same hub."""

from __future__ import annotations

from typing import Any

from agentpost.core.errors import Code
from agentpost.hub.openapi.common import operation, path_param

PAGE_HEADERS = {
    "Content-Security-Policy": {
        "description": "no inline script or style; nothing from elsewhere",
        "required": True,
        "schema": {"type": "string"},
    }
}


def operations() -> dict[str, dict[str, Any]]:
    html = {"content": {"text/html": {"schema": {"type": "string"}}}, "headers": PAGE_HEADERS}
    asset = {
        "content": {
            "text/javascript": {"schema": {"type": "string"}},
            "text/css": {"schema": {"type": "string"}},
            "image/svg+xml": {"schema": {"type": "string"}},
        },
        "headers": PAGE_HEADERS,
    }
    name = path_param("asset", {"type": "string"}, "a file of the page, e.g. `app.js`")
    return {
        "/": {"get": operation("web_page", (200, html), [])},
        "/web/{asset}": {
            "get": operation("web_asset", (200, asset), [Code.NOT_FOUND], params=[name])
        },
    }
