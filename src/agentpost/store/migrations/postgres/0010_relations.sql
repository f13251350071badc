-- Edits, reactions and redactions (docs/api.md "Relations"): each is an event of its own
-- whose `relates_to` names its target, and the index finds a target's relations (a redaction
-- hides its edits). `media.redacted` = 1 once a redaction hid the file (410 on download).
ALTER TABLE events ADD COLUMN relates_to TEXT;
CREATE INDEX events_relates_to ON events (relates_to) WHERE relates_to IS NOT NULL;
ALTER TABLE media ADD COLUMN redacted INTEGER NOT NULL DEFAULT 0
