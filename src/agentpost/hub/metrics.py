"""Prometheus metrics of one hub process (prometheus-client, text format at /metrics)."""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST


class HubMetrics:
    content_type = CONTENT_TYPE_LATEST

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.posts = Counter(
            "agentpost_posts",
            "Posts answered, by route and outcome",
            ["route", "outcome"],
            registry=self.registry,
        )
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
        self.latency = Histogram(
            "agentpost_post_latency_seconds",
            "Time to answer a post",
            ["route"],
            registry=self.registry,
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0),
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
        self._posts: dict[tuple[str, str], Counter] = {}
        self._latency: dict[str, Histogram] = {}
        self.keys_swept = Counter(
            "agentpost_idempotency_keys_swept",
            "Expired idempotency records deleted",
            registry=self.registry,
        )

    def count_post(self, route: str, outcome: str, seconds: float) -> None:
        """Count one answered post; label children are cached (this is the hot path)."""
        child = self._posts.get((route, outcome))
        if child is None:
            child = self._posts[(route, outcome)] = self.posts.labels(route, outcome)
        child.inc()
        timer = self._latency.get(route)
        if timer is None:
            timer = self._latency[route] = self.latency.labels(route)
        timer.observe(seconds)

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
