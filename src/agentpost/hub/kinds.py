"""Event kinds: the one list of EVENT `type`s the hub writes (docs/api.md). A relation kind
names its target in `relates_to`; hub/relations.py decides what it does to that target."""

from __future__ import annotations

MESSAGE = "message"
MEDIA = "media"
NOTICE = "notice"
EDIT = "edit"
REACTION = "reaction"
REDACTION = "redaction"

EVENT_KINDS = (MESSAGE, MEDIA, NOTICE, EDIT, REACTION, REDACTION)
RELATION_KINDS = (EDIT, REACTION, REDACTION)
# What an edit may change: a message's text, a media event's caption.
EDITABLE = (MESSAGE, MEDIA)
# What a reaction or a redaction may name: any event but a relation.
RELATABLE = (MESSAGE, MEDIA, NOTICE)
