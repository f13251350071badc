"""Bench for mail (docs/mail.md, issue 6): machines × messages through one bare remote.

Prints one JSON report: full sync time per machine (p50/p99/max, CLI wall time and
in-process), git objects created per message, and how a sync's cost depends on pending
messages versus messages ever sent. Real git, real clones in a temp dir.

    python bench/mail_sync.py [--machines 20] [--messages 50] [--history 2000]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from agentpost.mail import clock, commands
from agentpost.mail.context import MailContext
from agentpost.mail.envelope import Address, new_envelope, sign
from agentpost.mail.log import Sent
from agentpost.mail.repo import find_repo
from agentpost.mail.sync import sync


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, capture_output=True, check=True, text=True
    ).stdout.strip()


def _objects(repo: Path) -> int:
    counts = dict(
        line.split(": ") for line in _git(repo, "count-objects", "-v").splitlines() if ": " in line
    )
    return int(counts["count"]) + int(counts["in-pack"])


def _summary(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return {
        "p50_ms": round(statistics.median(ordered) * 1000, 1),
        "p99_ms": round(p99 * 1000, 1),
        "max_ms": round(ordered[-1] * 1000, 1),
        "n": len(ordered),
    }


class Net:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.remote = root / "remote.git"
        _git(root, "init", "--quiet", "--bare", str(self.remote))

    def clone(self, machine: str, session: str) -> MailContext:
        path = self.root / machine
        _git(self.root, "clone", "--quiet", str(self.remote), str(path))
        ctx = MailContext(find_repo(path), machine)
        commands.join(ctx, session)
        return ctx


def _timed_sync(ctx: MailContext) -> tuple[float, dict[str, object]]:
    start = time.perf_counter()
    report = sync(ctx)
    return time.perf_counter() - start, report.to_json()


def _cli_sync(ctx: MailContext) -> tuple[float, dict[str, object]]:
    env = dict(os.environ, AGENTPOST_MACHINE=ctx.machine)
    start = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-m", "agentpost", "mail", "sync", "--json"],
        cwd=ctx.repo.worktree,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return time.perf_counter() - start, json.loads(out.stdout)


def _startup_ms() -> float:
    # What every CLI call pays before mail code runs: interpreter + imports + click.
    samples = []
    for _ in range(5):
        start = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "agentpost", "--version"], capture_output=True, check=True
        )
        samples.append(time.perf_counter() - start)
    return round(statistics.median(samples) * 1000, 1)


def fan_in(root: Path, machines: int, messages: int) -> dict[str, object]:
    """Every machine sends `messages` notes spread over all others, then everyone syncs."""
    net = Net(root)
    ctxs = [net.clone(f"m{i:02d}", f"s{i:02d}") for i in range(machines)]
    objects_before = _objects(net.remote)
    send_times: list[float] = []
    for k, ctx in enumerate(ctxs):
        for j in range(messages):
            to = (k + 1 + j % (machines - 1)) % machines
            start = time.perf_counter()
            result = commands.send(ctx, f"s{to:02d}", None, f"note {j} from m{k:02d}")
            send_times.append(time.perf_counter() - start)
            assert result.published
    objects_after_send = _objects(net.remote)
    rounds: dict[str, object] = {}
    imported = 0
    for name in ("import", "take_acks", "retire_acks", "steady"):
        cli_times, reports = [], []
        for ctx in ctxs:
            elapsed, report = _cli_sync(ctx)
            cli_times.append(elapsed)
            reports.append(report)
        imported += sum(int(r["imported"]) for r in reports)  # type: ignore[call-overload]
        rounds[name] = {
            "cli_wall": _summary(cli_times),
            "imported": sum(int(r["imported"]) for r in reports),  # type: ignore[call-overload]
            "acked": sum(int(r["acked"]) for r in reports),  # type: ignore[call-overload]
            "refused": sum(len(r["refused"]) for r in reports),  # type: ignore[arg-type]
        }
    steady_in_process = [_timed_sync(ctx)[0] for ctx in ctxs]
    total = machines * messages
    pending = sum(len(ctx.load_state().pending(clock.now())) for ctx in ctxs)
    return {
        "machines": machines,
        "messages_per_machine": messages,
        "messages_total": total,
        "delivered_once": imported == total,
        "outboxes_empty_after": pending == 0,
        "send_ms": _summary(send_times),
        "python_startup_ms": _startup_ms(),
        "sync_rounds": rounds,
        "steady_sync_in_process": _summary(steady_in_process),
        "remote_objects_per_message_sent": round((objects_after_send - objects_before) / total, 2),
        "remote_objects_per_message_total": round(
            (_objects(net.remote) - objects_before) / total, 2
        ),
    }


def _queue(ctx: MailContext, to: Address, count: int) -> None:
    # Same log records a send writes; one sync then publishes them all in one ref.
    state = ctx.load_state()
    me = ctx.acting_instance(state)
    key = ctx.key()
    sender = Address(ctx.machine, me.name, me.instance_id)
    records = [
        Sent(sign(new_envelope(sender, to, f"history {i}", clock.now()), key)) for i in range(count)
    ]
    ctx.log.append(list(records))


def _settle(p: MailContext, q: MailContext) -> None:
    sync(p)
    sync(q)  # import + ack
    sync(p)  # take acks
    sync(q)  # retire acks
    sync(p)


def _median_sync(ctx: MailContext, repeat: int = 7) -> float:
    return round(statistics.median(_timed_sync(ctx)[0] for _ in range(repeat)) * 1000, 1)


def growth(root: Path, history: int, pending: int) -> dict[str, object]:
    """Sync cost of the receiving machine: fresh, with pending mail, after long history."""
    net = Net(root)
    p, q = net.clone("p", "sender"), net.clone("q", "receiver")
    sync(p)
    to = Address("q", "receiver", q.load_state().instance_by_name("receiver").instance_id)  # type: ignore[union-attr]
    out: dict[str, object] = {"history_messages": history, "pending_messages": pending}
    out["fresh_idle_ms"] = _median_sync(q)
    _queue(p, to, pending)
    sync(p)
    start = time.perf_counter()
    sync(q)
    out["fresh_with_pending_import_ms"] = round((time.perf_counter() - start) * 1000, 1)
    _settle(p, q)
    batch = 500
    for done in range(0, history, batch):
        _queue(p, to, min(batch, history - done))
        _settle(p, q)
    out["after_history_log_lines_receiver"] = q.log.read().lines
    out["after_history_idle_ms"] = _median_sync(q)
    _queue(p, to, pending)
    sync(p)
    start = time.perf_counter()
    sync(q)
    out["after_history_with_pending_import_ms"] = round((time.perf_counter() - start) * 1000, 1)
    _settle(p, q)
    # 15 days on, the history is past every dedup window; compaction drops it.
    os.environ[clock.NOW_ENV] = str(time.time() + 15 * 86400)
    before, after = commands.compact(q)
    out["after_expiry_compact_lines"] = {"before": before, "after": after}
    out["after_expiry_idle_ms"] = _median_sync(q)
    del os.environ[clock.NOW_ENV]
    out["mail_ref_bytes_idle"] = len(
        _git(q.repo.worktree, "cat-file", "-p", "refs/agentpost/mail/q")
    )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--machines", type=int, default=20)
    parser.add_argument("--messages", type=int, default=50)
    parser.add_argument("--history", type=int, default=2000)
    parser.add_argument("--pending", type=int, default=50)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="agentpost-mail-bench-"))
    home = root / "home"
    home.mkdir()
    for key in [k for k in os.environ if k.startswith("AGENTPOST_")]:
        del os.environ[key]
    os.environ.update(
        HOME=str(home), GIT_CONFIG_NOSYSTEM="1", AGENTPOST_MAIL_INBOX_CAPACITY="100000"
    )
    for role in ("AUTHOR", "COMMITTER"):
        os.environ[f"GIT_{role}_NAME"] = "bench"
        os.environ[f"GIT_{role}_EMAIL"] = "bench@example.invalid"
    try:
        (root / "fan").mkdir()
        (root / "growth").mkdir()
        report = {
            "machine": {
                "nproc": os.cpu_count(),
                "arch": platform.machine(),
                "python": platform.python_version(),
                "git": _git(root, "--version"),
            },
            "fan_in": fan_in(root / "fan", args.machines, args.messages),
            "growth": growth(root / "growth", args.history, args.pending),
        }
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
