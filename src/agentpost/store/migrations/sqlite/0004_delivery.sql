-- Delivery state (docs/delivery.md): when an inbox row was handed to its member's client
-- (read_at, one UPDATE per page handed out) and when their cursor passed it (acked_at, one
-- UPDATE per ack). Both in ms since the epoch, NULL until it happened.
ALTER TABLE inbox ADD COLUMN read_at INTEGER;
ALTER TABLE inbox ADD COLUMN acked_at INTEGER;
-- The targets of one event, for its delivery state.
CREATE INDEX inbox_event ON inbox (room_id, seq);
-- The event that answered a person's event (docs/delegation.md), for its delivery state
-- (docs/delivery.md).
ALTER TABLE answers ADD COLUMN answer_event TEXT
