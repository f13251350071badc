"""`python -m agentpost` with tracemalloc on, for bench/soak.py `--tracemalloc DIR`.

Takes the hub's own CLI. Every `AGENTPOST_TRACE_EVERY` seconds (default 60) it writes a
snapshot to `$AGENTPOST_TRACE_DIR/snap-<seconds>.pickle`, filtered to leave tracemalloc's own
frames out, so that soak.py can say which lines hold memory that grows between two points of a
long run. Tracing costs CPU and memory of its own: the RSS of a traced run is not the figure of
an untraced one, only its growth is read.
"""

from __future__ import annotations

import os
import sys
import threading
import time
import tracemalloc
from pathlib import Path


def _dump_loop(out: Path, every: float, start: float) -> None:
    while True:
        time.sleep(every)
        snap = tracemalloc.take_snapshot().filter_traces(
            (tracemalloc.Filter(False, tracemalloc.__file__),)
        )
        name = out / f"snap-{int(time.monotonic() - start):06d}.pickle"
        snap.dump(str(name) + ".part")
        os.replace(str(name) + ".part", name)


def main() -> None:
    tracemalloc.start(int(os.environ.get("AGENTPOST_TRACE_FRAMES", "12")))
    out = Path(os.environ["AGENTPOST_TRACE_DIR"])
    out.mkdir(parents=True, exist_ok=True)
    every = float(os.environ.get("AGENTPOST_TRACE_EVERY", "60"))
    threading.Thread(
        target=_dump_loop, args=(out, every, time.monotonic()), daemon=True, name="trace-dump"
    ).start()
    from agentpost.cli import main as cli_main

    sys.argv[0] = "agentpost"
    cli_main()


if __name__ == "__main__":
    main()
