-- The AG2 relay profile (docs/architecture.md#ag2-relay-profile, docs/ag2.md): an agent member's
-- inbox wake-ups as AG2 tasks, each with its own lease. A task is one inbox row (`cursor`) of the
-- member, named by its event id. `state`: queued (waiting to be served), leased (served,
-- `lease_until` running), done (answered), dropped (5 attempts expired). `grace` counts the
-- extensions an un-acked lease got this attempt, `reply_event` is the agent's message linked to
-- the task (its placeholder or answer) and `reply_attempt` the attempt that posted it. Times in ms.
CREATE TABLE ag2_tasks (
    member_id TEXT NOT NULL,
    event_id TEXT NOT NULL,
    room_id TEXT NOT NULL,
    cursor INTEGER NOT NULL,
    state TEXT NOT NULL,
    attempt INTEGER NOT NULL DEFAULT 0,
    lease_until INTEGER NOT NULL DEFAULT 0,
    acked INTEGER NOT NULL DEFAULT 0,
    grace INTEGER NOT NULL DEFAULT 0,
    reply_event TEXT,
    reply_attempt INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL,
    done_at INTEGER,
    PRIMARY KEY (member_id, event_id)
);
CREATE INDEX ag2_tasks_open ON ag2_tasks (member_id, state, cursor);
-- One row per member that ever polled: locked first by every AG2 write of that member, so
-- two hub processes serve one poller one lease at a time. `intake_cursor` is the highest
-- inbox cursor already turned into tasks.
CREATE TABLE ag2_pollers (
    member_id TEXT PRIMARY KEY,
    intake_cursor INTEGER NOT NULL DEFAULT 0,
    polled_at INTEGER NOT NULL DEFAULT 0
)
