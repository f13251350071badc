"""Errors the hub client raises; each says whether sending again could ever help.

Hierarchy::

    HubError                 code, message, status, retryable
    ├── HubRefused           the hub answered 4xx: final for this request (retryable=False)
    ├── HubUnavailable       5xx, 409 running or 429 too many streams: retry later (retryable=True)
    ├── HubUnreachable       no answer at all (connect/read error, timeout): retryable=True
    └── NotConfigured        no hub URL or token to use: final until the setting is fixed

Foreign errors (httpx) are translated here, at the boundary, with `raise … from exc`.
"""

from __future__ import annotations


class HubError(Exception):
    retryable = False

    def __init__(
        self,
        code: str,
        message: str,
        status: int | None = None,
        body: dict[str, object] | None = None,
    ) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.status = status
        self.body = body or {}


class HubRefused(HubError):
    """A final refusal: fix the request (or the credentials) before sending again."""


class HubUnavailable(HubError):
    """The hub is up but could not do it now (5xx, 409 `idempotency_in_flight`, 429
    `too_many_streams`)."""

    retryable = True


class HubUnreachable(HubError):
    """No answer from the hub: it may or may not have acted; retry with the same key."""

    retryable = True

    def __init__(self, message: str) -> None:
        super().__init__("hub_unreachable", message)


class NotConfigured(HubError):
    """The client is not set up: a hub URL that is no http(s) URL, or no token. Nothing was
    sent; retrying never helps until the setting the message names is fixed."""

    def __init__(self, message: str) -> None:
        super().__init__("not_configured", message)
