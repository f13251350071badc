"""Run many `agentpost` command lines as real processes for the price of one Python start.

`python tests/clibatch.py` reads a JSON list of jobs on stdin, imports the CLI once, and runs
each job in a forked child: its own environment, working directory, stdin, stdout and
stderr, and a normal interpreter exit (so a failed flush at exit counts as it would in a
process started from a shell). A job of mode `head` reads its stdout as `| head -1` does:
the first line, then the pipe is closed (the pipe is made as small as Linux allows, so a
command with more than a page to say meets the closed pipe). It prints one JSON result per
job: `{"rc", "stdout", "stderr"}`. Used through `clirun.agentpost_batch`.
"""

from __future__ import annotations

import fcntl
import importlib
import json
import os
import select
import signal
import sys
import tempfile
import time

F_SETPIPE_SZ = 1031


def _child(job: dict, stdin_fd: int, out_fd: int, err_fd: int) -> None:
    """In the forked child: become the command. Returns only by raising SystemExit."""
    os.dup2(stdin_fd, 0)
    os.dup2(out_fd, 1)
    os.dup2(err_fd, 2)
    os.chdir(job["cwd"])
    os.environ.clear()
    os.environ.update(job["env"])
    from agentpost.cli.app import main

    main(job["args"], prog_name="agentpost")


def _exit(job: dict, head: bool, read_end, inp, out, err, write_end) -> None:  # noqa: ANN001
    """The child's whole life: the command, then its exit as the interpreter would end it
    (stdout flushed, a flush that fails is exit 120), without tearing every module down."""
    code: object = 0
    try:
        if read_end is not None:
            os.close(read_end)  # else the child is a reader of its own pipe
        _child(job, inp.fileno(), write_end if head else out.fileno(), err.fileno())
    except SystemExit as exc:
        code = exc.code
    except BaseException as exc:  # the CLI's own edge should have caught it
        os.write(2, f"clibatch: {type(exc).__name__}: {exc}\n".encode())
        os._exit(99)
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except OSError:
        os.write(2, b"Exception ignored: flushing stdout at exit failed\n")
        os._exit(120)
    if code is None:
        os._exit(0)
    if isinstance(code, int):
        os._exit(code)
    os.write(2, f"{code}\n".encode())
    os._exit(1)


def _run(job: dict) -> dict:
    deadline = time.monotonic() + job.get("timeout", 30)
    with (
        tempfile.TemporaryFile() as err,
        tempfile.TemporaryFile() as out,
        tempfile.TemporaryFile() as inp,
    ):
        inp.write(job.get("stdin", "").encode())
        inp.flush()
        inp.seek(0)
        head = job.get("mode") == "head"
        if head:
            read_end, write_end = os.pipe()
            fcntl.fcntl(write_end, F_SETPIPE_SZ, 4096)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _exit(job, head, read_end if head else None, inp, out, err, write_end if head else None)
        pidfd = os.pidfd_open(pid)
        stdout = b""
        if head:
            os.close(write_end)
            while b"\n" not in stdout:
                left = deadline - time.monotonic()
                ready, _, _ = select.select([read_end], [], [], max(left, 0))
                if not ready:
                    break
                chunk = os.read(read_end, 65536)
                if not chunk:
                    break
                stdout += chunk
            stdout = stdout.split(b"\n", 1)[0] + (b"\n" if b"\n" in stdout else b"")
            os.close(read_end)
        ready, _, _ = select.select([pidfd], [], [], max(deadline - time.monotonic(), 0))
        if not ready:
            os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
        os.close(pidfd)
        rc = os.waitstatus_to_exitcode(status)
        if not head:
            out.seek(0)
            stdout = out.read()
        err.seek(0)
        return {
            "rc": rc if ready else "timeout",
            "stdout": stdout.decode(errors="replace"),
            "stderr": err.read().decode(errors="replace"),
        }


def _batch() -> None:
    jobs = json.load(sys.stdin)
    # Every command module imported once, before the first fork (cli/app.py COMMANDS).
    from agentpost.cli.app import COMMANDS

    for module in sorted({m for ms in COMMANDS.values() for m in ms}):
        importlib.import_module(f"agentpost.cli.{module}")
    # What the commands import when they run, imported once here rather than in each child.
    for module in ("agentpost.client", "agentpost.connect", "agentpost.mail", "httpx"):
        importlib.import_module(module)
    results = [_run(job) for job in jobs]
    sys.stdout.write(json.dumps(results) + "\n")


if __name__ == "__main__":
    _batch()
