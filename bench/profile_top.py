"""Rank where the hub's time goes from a py-spy collapsed-stack file (`--format raw`).

    /work/venv/bin/python bench/profile_top.py PROFILE.txt [--top 25] [--thread MainThread]

Prints, per thread, the share of samples each function takes by itself (self) and with
what it calls (total). Idle samples (a thread waiting in epoll or on a queue) are counted
too, so the event loop's idle share shows how much headroom the core had.
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from pathlib import Path

_FRAME = re.compile(r"^(?P<fn>.*?) \((?P<file>[^()]*?)(?::\d+)?\)$")


def short(frame: str) -> str:
    """`fn (path/to/site-packages/pkg/mod.py:12)` -> `fn (pkg/mod.py)`."""
    m = _FRAME.match(frame)
    if not m:
        return frame
    path = m.group("file")
    for marker in ("site-packages/", "/src/", "/lib/python3.11/"):
        if marker in path:
            path = path.split(marker, 1)[1]
            break
    return f"{m.group('fn')} ({path})"


def load(path: Path) -> dict[str, list[tuple[list[str], int]]]:
    """thread -> [(frames root first, samples)]."""
    threads: dict[str, list[tuple[list[str], int]]] = {}
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames = stack.split(";")
        thread = frames[0]
        threads.setdefault(thread, []).append(([short(f) for f in frames[1:]], int(count)))
    return threads


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("profile", type=Path)
    p.add_argument("--top", type=int, default=25)
    p.add_argument("--thread", default=None, help="only threads whose name contains this")
    p.add_argument(
        "--within",
        default=None,
        help="only stacks through a frame containing this, e.g. GroupCommitWriter._loop (the\n"
        "writer thread; py-spy's raw format names no threads, so worker threads share a root)",
    )
    args = p.parse_args()
    for thread, stacks in load(args.profile).items():
        if args.thread and args.thread not in thread:
            continue
        if args.within:
            stacks = [(f, n) for f, n in stacks if any(args.within in x for x in f)]
            if not stacks:
                continue
            thread += f" within {args.within}"
        total = sum(n for _, n in stacks)
        own: Counter[str] = Counter()
        incl: Counter[str] = Counter()
        for frames, n in stacks:
            if frames:
                own[frames[-1]] += n
            for f in set(frames):
                incl[f] += n
        print(f"\n== {thread}: {total} samples")
        print(f"{'self %':>7} {'total %':>8}  function")
        for fn, n in own.most_common(args.top):
            print(f"{100 * n / total:7.1f} {100 * incl[fn] / total:8.1f}  {fn}")
        print(f"\n{'total %':>8}  function (inclusive, top {args.top})")
        for fn, n in incl.most_common(args.top):
            print(f"{100 * n / total:8.1f}  {fn}")


if __name__ == "__main__":
    main()
