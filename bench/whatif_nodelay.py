"""What-if launcher: `agentpost serve` with TCP_NODELAY on every accepted connection.

`hub/serve.py` binds with `socket.socket(family, SOCK_STREAM)` (proto 0), and stdlib
asyncio only sets TCP_NODELAY on sockets whose proto is IPPROTO_TCP; uvicorn then writes
a response's head and body in two sends, and Nagle + delayed ACK hold the body ~40 ms.
This script binds with IPPROTO_TCP (the proposed one-line fix) and, with
`AGENTPOST_BENCH_UVLOOP=1`, runs on uvloop (and with `AGENTPOST_BENCH_SWITCH_INTERVAL=S`
sets `sys.setswitchinterval(S)`), so each gain can be measured before src changes:

    /work/venv/bin/python bench/post_path.py --launcher bench/whatif_nodelay.py
"""

from __future__ import annotations

import asyncio
import os
import socket
import sys

import agentpost.cli.serve  # noqa: F401  (registers the `serve` command)
import agentpost.hub.serve
from agentpost.cli.app import main


def bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


if __name__ == "__main__":
    agentpost.hub.serve.bind = bind
    if os.environ.get("AGENTPOST_BENCH_UVLOOP") == "1":
        import uvloop

        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    interval = os.environ.get("AGENTPOST_BENCH_SWITCH_INTERVAL")
    if interval:
        sys.setswitchinterval(float(interval))
    main()
