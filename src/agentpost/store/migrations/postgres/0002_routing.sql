-- Routing and delegation receipts (docs/delegation.md), PostgreSQL.
-- The room's router policy for human messages with no mention: none | sole-agent | llm.
ALTER TABLE rooms ADD COLUMN router TEXT NOT NULL DEFAULT 'sole-agent';
-- One row per (delegation event E1, replier): the terminal slot and the needs_input count.
-- Written only under E1's lock, so each rule holds across hub processes.
CREATE TABLE receipts (
  event_id TEXT NOT NULL,
  replier TEXT NOT NULL,
  terminal_event TEXT,
  needs_input BIGINT NOT NULL DEFAULT 0,
  PRIMARY KEY (event_id, replier)
);
-- Tokens of hard-removed members: refused as removed (403), not as unknown (401).
CREATE TABLE token_tombstones (
  hash TEXT PRIMARY KEY,
  name TEXT NOT NULL,
  kind TEXT NOT NULL,
  removed_at BIGINT NOT NULL
);
