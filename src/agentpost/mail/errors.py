"""Mail errors: one class per remedy, each with a stable `code` (docs/mail.md).

MailError                      code                 exit
 ├── NotARepo                  not_a_git_repo       1   run inside a git repository
 ├── NoRemote                  no_remote            1   add a remote (or set AGENTPOST_MAIL_REMOTE)
 ├── InvalidName               invalid_name         1   choose a ref-safe machine or session name
 ├── InvalidClock              invalid_clock        1   fix AGENTPOST_MAIL_NOW
 ├── NotJoined                 not_joined           1   run `agentpost mail join --name NAME`
 ├── MachineChanged            machine_changed      1   set AGENTPOST_MACHINE back, or `mail rename-machine NEW`
 ├── MachineNameTaken          machine_name_taken   1   another machine publishes under that name; pick another
 ├── RenameBlocked             rename_blocked       1   wait for acks (`mail sync`), or `--force`
 ├── UnknownRecipient          unknown_recipient    1   check the name; the peer must have joined
 ├── AmbiguousRecipient        ambiguous_recipient  1   pass --instance-id
 ├── MachineRenamed            machine_renamed      1   write NAME@NEW: the peer renamed its machine
 ├── UnknownMachine            unknown_machine      1   check the machine name; nothing was changed
 ├── InvalidBody               invalid_body         1   send a non-empty body under the size cap
 ├── InvalidIdempotencyKey     invalid_idempotency_key 1 give a key of 1-255 bytes
 ├── IdempotencyConflict       idempotency_conflict 1   this key already sent another note; pick a new key
 ├── OutboxFull                outbox_full          1   wait for acks before sending more
 ├── InboxFull                 inbox_full           1   the local recipient must read its inbox
 ├── MailBusy                  mail_busy            75  another sync holds the lock; retry
 ├── RemoteUnreachable         remote_unreachable   3   the message stays queued; retry later
 ├── GitFailed                 git_failed           75  a git command failed; see the message
 ├── StateUnreadable           state_unreadable     75  repair or move the named file
 └── StorageFailed             storage_failed       75  free disk space or fix permissions
"""

from __future__ import annotations


class MailError(Exception):
    """Base of every error the mail layer raises to its caller."""

    code = "mail_error"
    exit_code = 1

    def __init__(self, message: str, *, extra: dict[str, object] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.extra = dict(extra or {})

    def to_json(self) -> dict[str, object]:
        """The `{"error": {"code", "message", ...extra}}` body printed with `--json`."""
        body: dict[str, object] = {"code": self.code, "message": self.message}
        body.update(self.extra)
        return {"error": body}


class NotARepo(MailError):
    code = "not_a_git_repo"


class NoRemote(MailError):
    code = "no_remote"


class InvalidName(MailError):
    code = "invalid_name"


class InvalidClock(MailError):
    code = "invalid_clock"


class NotJoined(MailError):
    code = "not_joined"


class MachineChanged(MailError):
    code = "machine_changed"


class MachineNameTaken(MailError):
    code = "machine_name_taken"


class RenameBlocked(MailError):
    code = "rename_blocked"


class UnknownRecipient(MailError):
    code = "unknown_recipient"


class AmbiguousRecipient(MailError):
    code = "ambiguous_recipient"


class MachineRenamed(MailError):
    code = "machine_renamed"


class UnknownMachine(MailError):
    code = "unknown_machine"


class InvalidBody(MailError):
    code = "invalid_body"


class InvalidIdempotencyKey(MailError):
    code = "invalid_idempotency_key"


class IdempotencyConflict(MailError):
    code = "idempotency_conflict"


class OutboxFull(MailError):
    code = "outbox_full"


class InboxFull(MailError):
    code = "inbox_full"


class MailBusy(MailError):
    code = "mail_busy"
    exit_code = 75


class RemoteUnreachable(MailError):
    code = "remote_unreachable"
    exit_code = 3


class GitFailed(MailError):
    code = "git_failed"
    exit_code = 75


class StateUnreadable(MailError):
    code = "state_unreadable"
    exit_code = 75


class StorageFailed(MailError):
    code = "storage_failed"
    exit_code = 75
