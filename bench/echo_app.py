"""The bare echo ceiling: a Starlette app whose POST answers with the request body.

Served by one uvicorn process with uvloop + httptools, it is the most any Starlette app can
do on this machine with the same wrk settings; `post_path.py` reports the hub against it.
"""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route


async def echo(request: Request) -> Response:
    return Response(await request.body(), status_code=200, media_type="application/json")


app = Starlette(routes=[Route("/{path:path}", echo, methods=["POST"])])
