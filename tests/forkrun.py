"""`python -I -S tests/forkrun.py SOCKET -m agentpost ARGS…`: `python -m agentpost ARGS…` for
a library that spawns the command itself (the `mcp` SDK's stdio client), forked by the test
worker's fork server (tests/forkserver.py) at SOCKET.

This launcher hands the server its own stdin, stdout and stderr, environment and working
directory, so the forked child reads and writes the very pipes the library made; it passes
on SIGTERM, SIGINT and SIGHUP to the child, waits for it, and exits with its exit code (a
child killed by a signal is reported as the shell does, 128 + the signal). It imports only
the standard library, and starts with -I -S, in a few milliseconds.
"""

import json
import os
import signal
import socket
import sys


def main() -> int:
    path, argv = sys.argv[1], sys.argv[2:]
    if argv[:2] != ["-m", "agentpost"]:
        print("forkrun: only -m agentpost …", file=sys.stderr)
        return 2
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    sock.connect(path)
    job = {"args": argv[2:], "env": dict(os.environ), "cwd": os.getcwd()}
    socket.send_fds(sock, [json.dumps(job).encode()], [0, 1, 2])
    started = json.loads(sock.recv(1 << 20))
    pid = started["pid"]

    def forward(sig: int, _frame: object) -> None:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, forward)
    # Our copies of the pipes closed: the library sees EOF when the child ends, not us.
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1):
        os.dup2(null, fd)
    while True:
        try:
            msg = sock.recv(1 << 20)
        except InterruptedError:
            continue
        if not msg:
            return 1  # the server is gone
        note = json.loads(msg)
        if "exit" in note:
            code = int(note["code"])
            return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main())
