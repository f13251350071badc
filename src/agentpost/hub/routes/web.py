"""The web page (docs/web.md): `/` and its static assets from `agentpost/hub/web/`.

The files ship in the package and are read once. Every answer carries a strict
Content-Security-Policy: scripts and styles only from this origin, no inline code, no
frames, images only from here or the page's own `blob:` URLs (media fetched with the token).
"""

from __future__ import annotations

import functools
from importlib import resources

from starlette.requests import Request
from starlette.responses import Response

from agentpost.core.errors import Code, RequestError

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-cache",
}
TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}


@functools.cache
def assets() -> dict[str, tuple[bytes, str]]:
    """name → (bytes, content type) of every shipped asset; nothing else is ever served."""
    folder = resources.files("agentpost.hub") / "web"
    found: dict[str, tuple[bytes, str]] = {}
    for entry in folder.iterdir():
        suffix = "." + entry.name.rpartition(".")[2]
        if entry.is_file() and suffix in TYPES:
            found[entry.name] = (entry.read_bytes(), TYPES[suffix])
    return found


def _asset(name: str) -> Response:
    found = assets().get(name)
    if found is None:
        raise RequestError(Code.NOT_FOUND, f"no asset {name!r}")
    body, media_type = found
    return Response(body, media_type=media_type, headers=HEADERS)


async def index(request: Request) -> Response:
    return _asset("index.html")


async def asset(request: Request) -> Response:
    return _asset(request.path_params["asset"])
