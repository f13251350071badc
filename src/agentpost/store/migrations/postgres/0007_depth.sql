-- Delegation depth and the per-room wake budget (docs/delegation.md "Depth and budget").
-- How deep a chain of delegations may go before an agent's mentions wake no one.
ALTER TABLE rooms ADD COLUMN max_delegation_depth INTEGER NOT NULL DEFAULT 8;
-- Agent-caused wake-ups per window (a minute) before an agent's mentions wake no one.
ALTER TABLE rooms ADD COLUMN agent_wakeups_per_minute INTEGER NOT NULL DEFAULT 120;
-- The budget's window (its start, ms since the epoch), the wake-ups spent in it, and the
-- window whose notice was posted. Written under the room's row lock in the post's
-- transaction, so every hub process sharing the database spends one budget.
ALTER TABLE rooms ADD COLUMN wake_window BIGINT NOT NULL DEFAULT 0;
ALTER TABLE rooms ADD COLUMN wake_count INTEGER NOT NULL DEFAULT 0;
ALTER TABLE rooms ADD COLUMN wake_notice_window BIGINT NOT NULL DEFAULT 0;
-- One depth-limit notice per chain: the chain's first event, and the notice posted for it.
CREATE TABLE depth_notices (
  chain_event TEXT PRIMARY KEY,
  room_id TEXT NOT NULL,
  notice_event TEXT NOT NULL
);
