"""Hub settings from flags and the environment (docs/api.md "Starting")."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

PUBLIC_URL_ENV = "AGENTPOST_PUBLIC_URL"


def public_url_problem(url: str) -> str | None:
    """Why `url` cannot be the hub's public URL, or None: an absolute http(s) URL with a
    host and no user, query or fragment (a path is kept, for a proxy's prefix)."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises on a bad port
    except ValueError:
        return "it is not a URL"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "it must be an absolute http(s) URL with a host"
    if parts.username is not None or parts.query or parts.fragment:
        return "it must have no user, query or fragment"
    return None


def default_data_dir() -> Path:
    home = os.environ.get("AGENTPOST_HOME")
    return Path(home) if home else Path.home() / ".local" / "share" / "agentpost"


@dataclass
class HubConfig:
    data_dir: Path = field(default_factory=default_data_dir)
    db_url: str | None = None
    host: str = "127.0.0.1"
    port: int = 8470
    max_upload_bytes: int = 25 * 1024 * 1024
    max_json_bytes: int = 1024 * 1024
    key_ttl_seconds: int = 86400
    key_wait_seconds: float = 5.0
    sweep_interval_seconds: float = field(
        default_factory=lambda: float(os.environ.get("AGENTPOST_SWEEP_INTERVAL", "60"))
    )
    sse_keepalive_seconds: float = field(
        default_factory=lambda: float(os.environ.get("AGENTPOST_SSE_KEEPALIVE", "15"))
    )
    # Open SSE streams one member may hold on one hub process (429 `too_many_streams`).
    max_streams_per_member: int = field(
        default_factory=lambda: int(os.environ.get("AGENTPOST_MAX_STREAMS", "16"))
    )
    # A browser's stream ticket opens its room's stream only this soon
    # (docs/api.md "Stream tickets (for browsers)").
    stream_ticket_seconds: float = field(
        default_factory=lambda: float(os.environ.get("AGENTPOST_STREAM_TICKET_SECONDS", "60"))
    )

    # Presence (docs/presence.md): online means seen this recently; stamps reach the store this
    # often.
    presence_online_seconds: float = field(
        default_factory=lambda: float(os.environ.get("AGENTPOST_PRESENCE_ONLINE", "60"))
    )
    presence_flush_seconds: float = field(
        default_factory=lambda: float(os.environ.get("AGENTPOST_PRESENCE_FLUSH", "2"))
    )
    # A room stream opened with `presence=1` looks at its room's presence this often while
    # it waits (and after each page of events), and sends a frame when it changed.
    presence_push_seconds: float = field(
        default_factory=lambda: float(os.environ.get("AGENTPOST_PRESENCE_PUSH", "5"))
    )

    # One Worker per agent (docs/architecture.md#one-worker-per-agent): a Worker's lease
    # lapses this long after its last renewal.
    worker_lease_seconds: float = field(
        default_factory=lambda: float(os.environ.get("AGENTPOST_WORKER_LEASE_SECONDS", "30"))
    )

    # The AG2 relay profile (docs/architecture.md#ag2-relay-profile, docs/ag2.md): a served
    # task's lease runs this long past the poll that served or last extended it.
    ag2_lease_seconds: float = field(
        default_factory=lambda: float(os.environ.get("AGENTPOST_AG2_LEASE_SECONDS", "60"))
    )

    # Retention (docs/operations.md): the sweep runs every `sweep_interval_seconds`; bytes an
    # upload touched this recently are never freed (hub/blobs.py `free`).
    blob_free_grace_seconds: float = field(
        default_factory=lambda: float(os.environ.get("AGENTPOST_BLOB_FREE_GRACE", "600"))
    )

    # A2A push targets (docs/a2a.md "Push targets"): CIDRs and host names a push may reach
    # although they are internal (loopback, private, link-local…); by default none
    # (hub/a2a/targets.py).
    push_allow: str = field(default_factory=lambda: os.environ.get("AGENTPOST_PUSH_ALLOW", ""))

    # The URL the hub is reached at (docs/a2a.md "Where"): every URL the hub writes (agent cards,
    # push bases, media links) starts with it; never a request's Host header. Unset, the bound
    # address (`bound_url`, set when serving starts).
    public_url: str = field(default_factory=lambda: os.environ.get(PUBLIC_URL_ENV, ""))
    bound_url: str = ""

    blobs_dir: Path | None = None

    @property
    def base_url(self) -> str:
        """Where every URL the hub writes starts: `--public-url`, else the bound address."""
        found = self.public_url or self.bound_url
        if not found:
            host = f"[{self.host}]" if ":" in self.host else self.host
            found = f"http://{host}:{self.port}"
        return found.rstrip("/")

    @property
    def blob_dir(self) -> Path:
        """Media bytes: `--blobs DIR` (shared by every hub process of a PostgreSQL
        deployment), else `<data>/blobs`."""
        return self.blobs_dir if self.blobs_dir is not None else self.data_dir / "blobs"
