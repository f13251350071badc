-- Search (docs/search.md): an FTS5 index over each event's text, external content (the text
-- stays only in events.body, the view shows it to FTS5 for a rebuild or an integrity check).
-- Rows are added by events.insert in the event's own transaction, keyed by events.rowid.
-- A NUL escaped in the JSON would end json_extract's text: it is read as a space, as
-- events.insert does (an escaped backslash set aside first, as char(1), which JSON never
-- holds unescaped).
CREATE VIEW event_texts AS
  SELECT rowid AS rid, json_extract(replace(replace(replace(CAST(body AS TEXT),
    '\\', char(1)), '\u0000', ' '), char(1), '\\'), '$.text') AS text FROM events;
-- columnsize=0: no per-row size record (only ranking reads it, and hits are newest first).
CREATE VIRTUAL TABLE event_search USING fts5(
  text, content='event_texts', content_rowid='rid', tokenize='unicode61 remove_diacritics 2',
  columnsize=0
);
-- The events from before this migration, oldest first.
INSERT INTO event_search (rowid, text)
  SELECT rid, text FROM event_texts WHERE text IS NOT NULL AND text <> '' ORDER BY rid
