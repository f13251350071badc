"""The hub gives freed memory back to the system (hub/memory.py, docs/operations.md
"Memory"): in a fresh process whose heap is left full of holes (posts of every size, most
freed, a few still live between them), a trim brings the resident size back near what is
live; with trimming off it stays at its peak."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from agentpost.hub.memory import Trimmer

FRAGMENT = textwrap.dedent(
    """
    import sys
    from agentpost.hub.memory import Trimmer

    def rss_mb():
        for line in open("/proc/self/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) // 1024

    if sys.argv[1] == "env-off":
        import os
        os.environ["AGENTPOST_MALLOC_TRIM"] = "0"
    trimmer = Trimmer()
    blocks = [bytes([i % 256]) * 20_000 for i in range(5_000)]  # ~100 MB from the C heap
    live = blocks[::50]  # one in fifty stays: the heap cannot shrink from its top alone
    del blocks
    peak = rss_mb()
    print(trimmer.enabled, trimmer.give_back(), peak, rss_mb(), len(live))
    """
)


def _run(mode: str) -> tuple[bool, bool, int, int]:
    env = {k: v for k, v in os.environ.items() if k != "AGENTPOST_MALLOC_TRIM"}
    out = subprocess.run(
        [sys.executable, "-c", FRAGMENT, mode], capture_output=True, text=True, check=True, env=env
    ).stdout.split()
    return out[0] == "True", out[1] == "True", int(out[2]), int(out[3])


@pytest.mark.skipif(not Trimmer(enabled=True).enabled, reason="this libc has no malloc_trim")
def test_a_trim_gives_back_the_holes_of_a_fragmented_heap() -> None:
    enabled, released, peak, after = _run("on")
    assert enabled and released
    assert peak >= 80 and after < peak / 3, (peak, after)


def test_trimming_off_keeps_the_peak_and_says_so() -> None:
    """The same heap with trimming off (the operator's AGENTPOST_MALLOC_TRIM=0): nothing is
    given back, where the test above gives back most of it."""
    enabled, released, peak, after = _run("env-off")
    assert not enabled and not released
    assert after >= peak - 5, (peak, after)


def test_a_trim_is_due_at_most_once_an_interval() -> None:
    t = Trimmer(every=30.0, enabled=True)
    if not t.enabled:
        pytest.skip("this libc has no malloc_trim")
    assert t.due(now=0.0)
    t.give_back()
    assert not t.due() and t.trims == 1
    assert Trimmer(enabled=False).due() is False
