"""What the remote showed at the last fetch: every machine's presence and mail document.

Read from `refs/agentpost-remote/<remote>/…` in two git calls (list, then one batch
read). Objects over MAX_REF_BYTES are never read; documents that are off-shape, or
whose `machine` is not the machine their ref names, are kept as errors to report.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from agentpost.mail.errors import InvalidName
from agentpost.mail.git import REMOTE_PREFIX, Document, Git
from agentpost.mail.keys import document_signed
from agentpost.mail.limits import MAX_REF_BYTES
from agentpost.mail.repo import check_name
from agentpost.mail.wire import DocumentError, MailDoc, PresenceDoc, decode_mail, decode_presence


@dataclass
class RemoteView:
    presence: dict[str, PresenceDoc | DocumentError] = field(default_factory=dict)
    mail: dict[str, MailDoc | DocumentError] = field(default_factory=dict)
    # The stored form of each readable mail document, to check who signed it.
    mail_stored: dict[str, Document] = field(default_factory=dict)

    def mail_signed_by(self, machine: str, public_b64: str) -> bool:
        """The mail document of `machine` carries a valid signature by `public_b64`."""
        stored = self.mail_stored.get(machine)
        return stored is not None and document_signed(public_b64, stored.signature, stored.message)

    def valid_presence(self) -> dict[str, PresenceDoc]:
        return {m: d for m, d in self.presence.items() if isinstance(d, PresenceDoc)}


def tracking_ref(remote: str, own_ref: str) -> str:
    """Where the last fetch put `own_ref` (a `refs/agentpost/…` name) from `remote`."""
    return f"{REMOTE_PREFIX}/{remote}/" + own_ref.removeprefix("refs/agentpost/")


def read_view(git: Git, remote: str) -> RemoteView:
    prefix = f"{REMOTE_PREFIX}/{remote}/"
    view = RemoteView()
    wanted: list[tuple[str, str, str]] = []
    for ref in git.list_refs(prefix):
        kind, _, machine = ref.name.removeprefix(prefix).partition("/")
        if kind not in ("mail", "presence"):
            continue
        target = view.mail if kind == "mail" else view.presence
        try:
            check_name(machine, "machine")
        except InvalidName:
            target[machine] = DocumentError(
                "bad_ref_name", f"ref {ref.name} names no valid machine"
            )
            continue
        if ref.kind != "commit":
            target[machine] = DocumentError(
                "corrupt_ref", f"{ref.name} is a {ref.kind}, not a commit"
            )
        elif ref.size > MAX_REF_BYTES:
            target[machine] = DocumentError("too_large", f"{ref.name} is {ref.size} bytes")
        else:
            wanted.append((kind, machine, ref.sha))
    stored = git.read_documents([sha for _, _, sha in wanted])
    for kind, machine, sha in wanted:
        if kind == "mail":
            view.mail[machine] = _checked(machine, decode_mail, stored[sha].message)
            view.mail_stored[machine] = stored[sha]
        else:
            view.presence[machine] = _checked(machine, decode_presence, stored[sha].message)
    return view


_Doc = TypeVar("_Doc", MailDoc, PresenceDoc)


def _checked(
    machine: str, decoder: Callable[[bytes], _Doc], message: bytes
) -> _Doc | DocumentError:
    try:
        doc = decoder(message)
    except DocumentError as exc:
        return exc
    if doc.machine != machine:
        # A document may only speak for the machine whose ref carries it (docs/mail.md).
        return DocumentError("machine_mismatch", f"ref of {machine} claims {doc.machine}")
    return doc
