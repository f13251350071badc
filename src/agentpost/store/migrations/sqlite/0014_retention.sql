-- Retention (docs/operations.md "Retention"): how long a workspace's and a room's events and
-- files are kept, in seconds. On a room NULL means "as its workspace"; on a workspace NULL
-- means for ever; 0 means for ever on either.
ALTER TABLE workspaces ADD COLUMN events_seconds INTEGER;
ALTER TABLE workspaces ADD COLUMN media_seconds INTEGER;
ALTER TABLE rooms ADD COLUMN events_seconds INTEGER;
ALTER TABLE rooms ADD COLUMN media_seconds INTEGER;
-- Every event of the room at or below this seq has expired (a tombstone), or is held in
-- retention_held because something still needs it (an unacknowledged inbox item, a
-- delegation still waiting for its receipt, an AG2 task in progress).
ALTER TABLE rooms ADD COLUMN retention_seq INTEGER NOT NULL DEFAULT 0;
-- A tombstone is kept as long again as the event was, then removed with what named it
-- (acknowledged inbox items, answers, receipts): every event at or below floor_seq is gone,
-- the room's events are floor_seq+1..last_seq, still gap-free.
ALTER TABLE rooms ADD COLUMN floor_seq INTEGER NOT NULL DEFAULT 0;
CREATE TABLE retention_held (
  room_id TEXT NOT NULL,
  seq INTEGER NOT NULL,
  PRIMARY KEY (room_id, seq)
);
-- When a file expired (ms; NULL while it is kept): its download is 410 media_expired, and its
-- bytes go once no kept media row names them.
ALTER TABLE media ADD COLUMN expired_at INTEGER;
-- The newest event that carries the file (its upload's, or a later message attaching it)
-- and when: a file expires with its events only once none that still stands carries it, and
-- its own retention counts from its last use. Files from before this version: as if every
-- event of their room at the upgrade carried them (never less than they need).
ALTER TABLE media ADD COLUMN last_seq INTEGER;
ALTER TABLE media ADD COLUMN last_used_at INTEGER;
UPDATE media SET last_seq = (SELECT r.last_seq FROM rooms r WHERE r.id = media.room_id),
  last_used_at = created_at;
CREATE INDEX media_room_created ON media (room_id, created_at);
CREATE INDEX media_sha256 ON media (sha256);
