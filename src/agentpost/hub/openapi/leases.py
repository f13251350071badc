"""One Worker per agent member (hub/routes/leases.py, docs/connect.md "One Worker")."""

from __future__ import annotations

from typing import Any

from agentpost.core.errors import Code
from agentpost.hub.openapi.common import AUTH, BODY, MEMBER, WRITE, json_content, operation


def operations() -> dict[str, dict[str, Any]]:
    lease_refusals = [*AUTH, *BODY, *WRITE, Code.LEASE_LOST]
    return {
        "/v1/worker/lease": {
            "post": operation(
                "take_worker_lease",
                (200, json_content("LeaseTaken")),
                [*AUTH, *BODY, *WRITE, Code.FORBIDDEN, Code.LEASE_HELD],
                security=MEMBER,
                body="LeaseIn",
            ),
            "get": operation(
                "worker_lease",
                (200, json_content("LeaseCurrent")),
                [*AUTH, *WRITE],
                security=MEMBER,
            ),
        },
        "/v1/worker/lease/renew": {
            "post": operation(
                "renew_worker_lease",
                (200, json_content("LeaseReply")),
                [*lease_refusals, Code.FORBIDDEN],
                security=MEMBER,
                body="FenceIn",
            )
        },
        "/v1/worker/lease/release": {
            "post": operation(
                "release_worker_lease",
                (200, json_content("LeaseReleased")),
                lease_refusals,
                security=MEMBER,
                body="FenceIn",
            )
        },
    }
