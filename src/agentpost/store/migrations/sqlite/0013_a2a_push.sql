-- A2A push notifications (docs/architecture.md#a2a, docs/a2a.md). A config is where a caller wants
-- to hear of one task: the receiver's URL, the token it gave (sent back in
-- X-A2A-Notification-Token and the signature's key: the receiver's own secret, kept as
-- given), an optional Authorization scheme and credentials, and the hub's base URL the
-- task's file links are made from. Times in ms.
CREATE TABLE a2a_push_configs (
    task_id TEXT NOT NULL,
    id TEXT NOT NULL,
    member_id TEXT NOT NULL,
    url TEXT NOT NULL,
    token TEXT NOT NULL DEFAULT '',
    auth_scheme TEXT NOT NULL DEFAULT '',
    auth_credentials TEXT NOT NULL DEFAULT '',
    base_url TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (task_id, id)
);
-- The outbox: one row per (config, event that changed the task), written in that event's
-- transaction; sent until a 2xx answers it or it expires. `id` is the notification's
-- stable id (X-Agentpost-Notification-Id): a receiver that sees it twice drops the second.
-- `due_at` is when it may be sent next (a sender takes a row by moving it a lease ahead).
CREATE TABLE a2a_push_outbox (
    id TEXT PRIMARY KEY,
    task_id TEXT NOT NULL,
    config_id TEXT NOT NULL,
    due_at INTEGER NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    expires_at INTEGER NOT NULL,
    last_error TEXT NOT NULL DEFAULT '',
    created_at INTEGER NOT NULL
);
CREATE INDEX a2a_push_outbox_due ON a2a_push_outbox (due_at)
