"""schemathesis hooks for test_openapi.py (loaded by the schemathesis process through
`SCHEMATHESIS_HOOKS`): one Idempotency-Key never goes out with two different requests."""

from __future__ import annotations

import hashlib
import re
from typing import Any

import schemathesis
from schemathesis import Case, HookContext

HEADER = "idempotency-key"
VALID_KEY = re.compile(r"[\x21-\x7e]{1,255}")  # the schema's pattern (hub/openapi/common.py)
DIGEST_CHARS = 16


@schemathesis.hook
def before_call(context: HookContext, case: Case, kwargs: dict[str, Any]) -> None:
    """Tie each valid generated key to the request it comes with.

    schemathesis draws keys from a small space ("0" most of all) and, all phases on one hub,
    sends one key again with another body or room. The hub rightly answers that with 422
    `idempotency_conflict` (docs/api.md, hub/idempotency.py), which the positive checks read
    as a schema-valid request refused. So a valid key gets a digest of its operation, path,
    query, media type and body in its last characters: the same request keeps the same key
    (replays are still fuzzed), another request never shares it. An invalid key (a negative
    case) goes out as generated, so its 400 is still checked. The conflict itself has its
    own tests (test_posts.py, test_media.py).
    """
    headers = case.headers
    if not headers:
        return
    for name in list(headers):
        if name.lower() != HEADER:
            continue
        key = headers[name]
        if not isinstance(key, str) or VALID_KEY.fullmatch(key) is None:
            return
        request = repr(
            (case.operation.label, case.formatted_path, case.query, case.media_type, case.body)
        )
        digest = hashlib.sha256(request.encode()).hexdigest()[:DIGEST_CHARS]
        headers[name] = f"{key[: 255 - DIGEST_CHARS - 1]}.{digest}"
        return
