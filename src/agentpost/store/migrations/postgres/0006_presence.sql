-- Presence (docs/presence.md): when each member was last seen, in ms since the epoch. Each hub
-- process keeps it in memory and upserts the newest value here every few seconds, so the
-- table is where processes sharing a database meet and what survives a restart. A table of
-- its own: the flush never takes a lock on a members row, which the post path locks.
CREATE TABLE presence (
    member_id TEXT PRIMARY KEY,
    last_seen BIGINT NOT NULL
)
