"""A project's name from its repository's `origin` URL (docs/reservations.md "Projects"): the
same repository cloned over SSH or HTTPS, with or without `.git`, a user or a port, names one
project, so the agents of two clones see each other's reservations."""

from __future__ import annotations

import re

_SCP = re.compile(r"^(?:[^@/]+@)?([^:/]+):(?!//)(.+)$")  # git@github.com:acme/app.git
_URL = re.compile(r"^[a-z][a-z0-9+.-]*://(?:[^@/]+@)?([^/:]+)(?::[0-9]+)?/(.+)$", re.I)


def from_remote(url: str) -> str:
    """`git@github.com:Acme/app.git`, `https://user@github.com/Acme/app` and
    `ssh://git@github.com:22/Acme/app.git` are all `github.com/Acme/app` (the host in
    lower case; the path as it is, since some hosts tell case apart). A local path stays
    itself, without a trailing `.git` or slash."""
    text = url.strip()
    m = _URL.match(text) or (None if "://" in text else _SCP.match(text))
    if m is None:
        return text.rstrip("/").removesuffix(".git").rstrip("/")
    path = m.group(2).strip("/").removesuffix(".git").strip("/")
    return f"{m.group(1).lower()}/{path}"
