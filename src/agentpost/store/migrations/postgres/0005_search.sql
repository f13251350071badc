-- Search (docs/search.md): each event's text as a tsvector ('simple': no stemming, no stop
-- words, as SQLite's index), set by events.insert in the event's own transaction.
ALTER TABLE events ADD COLUMN search tsvector;
-- The events from before this migration. A NUL escaped in the JSON cannot become text in
-- PostgreSQL: it is read as a space, as events.insert does. An escaped backslash is set
-- aside first (as chr(1), which JSON never holds unescaped), so a text `\u0000` stays.
UPDATE events SET search = to_tsvector('simple', coalesce(replace(replace(replace(
  convert_from(body, 'UTF8'), '\\', chr(1)), '\u0000', ' '), chr(1), '\\')::json ->> 'text', ''));
CREATE INDEX events_search ON events USING GIN (search)
