"""Prometheus metrics of one hub process (prometheus-client, text format at /metrics)."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest
from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST

BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


class PostCounts:
    """`agentpost_posts_total` and `agentpost_post_latency_seconds`, counted in plain ints on
    the event loop (every post is answered there) and turned into Prometheus families only
    when scraped: a post costs a dict update and a bisect, not the client library's locks
    per counter and bucket (issue 29)."""

    def __init__(self) -> None:
        self.outcomes: dict[tuple[str, str], int] = {}
        # route → [count per bucket (the last one is +Inf, not cumulative), sum of seconds]
        self.latency: dict[str, tuple[list[int], list[float]]] = {}

    def count(self, route: str, outcome: str, seconds: float) -> None:
        slot = (route, outcome)
        self.outcomes[slot] = self.outcomes.get(slot, 0) + 1
        found = self.latency.get(route)
        if found is None:
            found = self.latency[route] = ([0] * (len(BUCKETS) + 1), [0.0])
        found[0][bisect_left(BUCKETS, seconds)] += 1
        found[1][0] += seconds

    def collect(self) -> Iterator[Metric]:
        posts = CounterMetricFamily(
            "agentpost_posts", "Posts answered, by route and outcome", labels=["route", "outcome"]
        )
        for (route, outcome), n in sorted(self.outcomes.items()):
            posts.add_metric([route, outcome], n)
        yield posts
        latency = HistogramMetricFamily(
            "agentpost_post_latency_seconds", "Time to answer a post", labels=["route"]
        )
        for route, (counts, total) in sorted(self.latency.items()):
            cumulative, running = [], 0
            for bound, n in zip([*map(str, BUCKETS), "+Inf"], counts, strict=True):
                running += n
                cumulative.append((bound, running))
            latency.add_metric([route], cumulative, sum_value=total[0])
        yield latency


class HubMetrics:
    content_type = CONTENT_TYPE_LATEST

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.posts = PostCounts()
        self.registry.register(self.posts)
        self.replays = Counter(
            "agentpost_idempotent_replays",
            "Keyed requests answered from the stored response",
            registry=self.registry,
        )
        self.conflicts = Counter(
            "agentpost_idempotency_conflicts",
            "Keyed requests refused: same key, other request",
            registry=self.registry,
        )
        self.open_streams = Gauge(
            "agentpost_open_streams",
            "Open SSE streams and long polls",
            ["kind"],
            registry=self.registry,
        )
        self.in_progress = Gauge(
            "agentpost_requests_in_progress",
            "HTTP requests being handled now",
            registry=self.registry,
        )
        self.keys_swept = Counter(
            "agentpost_idempotency_keys_swept",
            "Expired idempotency records deleted",
            registry=self.registry,
        )

    def count_post(self, route: str, outcome: str, seconds: float) -> None:
        """Count one answered post (this is the hot path)."""
        self.posts.count(route, outcome, seconds)

    def watch_in_flight(self, count: Callable[[], int]) -> None:
        """Report how many keyed writes are waiting for their transaction."""
        gauge = Gauge(
            "agentpost_idempotency_keys_in_flight",
            "Keyed writes not yet committed",
            registry=self.registry,
        )
        gauge.set_function(lambda: float(count()))

    def watch_as_data(self, count: Callable[[], int]) -> None:
        """Report how many write jobs were written as data with their batch (issue 14)."""
        gauge = Gauge(
            "agentpost_write_jobs_as_data",
            "Write jobs the writer wrote together with others of their batch, since start",
            registry=self.registry,
        )
        gauge.set_function(lambda: float(count()))

    def render(self) -> bytes:
        return generate_latest(self.registry)
