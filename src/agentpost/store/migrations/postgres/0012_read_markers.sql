-- Read markers (docs/api.md "Read markers"): how far each member has read each room, as the
-- seq it has read up to. It only moves forward (store/read_markers.py).
CREATE TABLE read_markers (
    member_id TEXT NOT NULL,
    room_id TEXT NOT NULL,
    read_seq BIGINT NOT NULL,
    PRIMARY KEY (member_id, room_id)
);
-- Who sent each event, as a member id (null for a hub notice), so that a member's unread
-- count leaves out its own messages without reading bodies. Set by events.insert; the events
-- from before this migration take it from their body's `sender` in the room's workspace. A
-- NUL escaped in a body cannot become PostgreSQL text: read as in migration 0005.
ALTER TABLE events ADD COLUMN sender_id TEXT;
UPDATE events SET sender_id = s.member_id FROM (
  SELECT e.id, m.id AS member_id
  FROM (
    SELECT id, room_id, replace(replace(replace(convert_from(body, 'UTF8'), '\\', chr(1)),
      '\u0000', ' '), chr(1), '\\')::json AS doc
    FROM events
  ) e
  JOIN rooms r ON r.id = e.room_id
  JOIN members m ON m.workspace_id = r.workspace_id AND m.name = e.doc ->> 'sender'
  WHERE e.doc ->> 'sender_kind' <> 'system'
) s WHERE events.id = s.id;
-- An unread count reads this index alone: a room's events past a marker, relations left out.
CREATE INDEX events_unread ON events (room_id, seq, sender_id) WHERE relates_to IS NULL
