-- Edits, reactions and redactions (docs/api.md "Relations"): each is an event of its own
-- whose `relates_to` names its target, and the index finds a target's relations (a redaction
-- hides its edits). `media.redacted` = 1 once a redaction hid the file (410 on download).
ALTER TABLE events ADD COLUMN relates_to TEXT;
CREATE INDEX events_relates_to ON events (relates_to) WHERE relates_to IS NOT NULL;
ALTER TABLE media ADD COLUMN redacted INTEGER NOT NULL DEFAULT 0;
-- A relation event's text is never indexed (its target's latest text is): the view search
-- is rebuilt from says so too. Otherwise as in 0005.
DROP VIEW event_texts;
CREATE VIEW event_texts AS
  SELECT rowid AS rid, CASE WHEN relates_to IS NULL THEN json_extract(replace(replace(replace(
    CAST(body AS TEXT), '\\', char(1)), '\u0000', ' '), char(1), '\\'), '$.text') END AS text
  FROM events
