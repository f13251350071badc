-- Read markers (docs/api.md "Read markers"): how far each member has read each room, as the
-- seq it has read up to. It only moves forward (store/read_markers.py).
CREATE TABLE read_markers (
    member_id TEXT NOT NULL,
    room_id TEXT NOT NULL,
    read_seq INTEGER NOT NULL,
    PRIMARY KEY (member_id, room_id)
);
-- Who sent each event, as a member id (null for a hub notice), so that a member's unread
-- count leaves out its own messages without reading bodies. Set by events.insert; the events
-- from before this migration take it from their body's `sender` in the room's workspace.
ALTER TABLE events ADD COLUMN sender_id TEXT;
UPDATE events SET sender_id = (
  SELECT m.id FROM rooms r JOIN members m ON m.workspace_id = r.workspace_id
  WHERE r.id = events.room_id
    AND m.name = json_extract(CAST(events.body AS TEXT), '$.sender')
    AND json_extract(CAST(events.body AS TEXT), '$.sender_kind') <> 'system'
);
-- An unread count reads this index alone: a room's events past a marker, relations left out.
-- `relates_to` is in it though always null there: SQLite reads an index alone only when it
-- holds every column the query names.
CREATE INDEX events_unread ON events (room_id, seq, sender_id, relates_to) WHERE relates_to IS NULL
