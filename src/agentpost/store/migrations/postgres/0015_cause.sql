-- One cause per event (docs/delegation.md "Cause"): the agent wake-ups one origin (a
-- person's message, or an agent's own unprompted start) has caused so far, over every path
-- and room together, never refilled by time; and the notice posted once it was spent.
-- Written under the origin's row lock in the post's transaction, the last lock a post takes.
CREATE TABLE origin_wakeups (
  origin TEXT PRIMARY KEY,
  spent INTEGER NOT NULL DEFAULT 0,
  notice_event TEXT,
  created_at BIGINT NOT NULL
);
CREATE INDEX origin_wakeups_created ON origin_wakeups (created_at)
