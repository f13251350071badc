-- File reservations (docs/reservations.md, docs/architecture.md#leases): a member holds path
-- patterns of a project (a repository) in a workspace, exclusive or shared, until `expires_at`.
-- One row per (workspace, project) carries the project's fence, which only grows; grants are
-- decided under that row's lock, so racing requests see each other on both engines and across
-- hub processes. A reservation keeps its row once it ends (`ended_at`, and why: released,
-- forced, expired, removed). `paths` is a JSON array of normalized patterns. Times in ms since
-- the epoch.
CREATE TABLE reservation_projects (
    workspace_id TEXT NOT NULL,
    project TEXT NOT NULL,
    fence INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (workspace_id, project)
);
CREATE TABLE reservations (
    id TEXT PRIMARY KEY,
    workspace_id TEXT NOT NULL,
    project TEXT NOT NULL,
    holder_id TEXT NOT NULL,
    paths TEXT NOT NULL,
    exclusive INTEGER NOT NULL,
    reason TEXT NOT NULL DEFAULT '',
    room_id TEXT,
    fence INTEGER NOT NULL,
    since INTEGER NOT NULL,
    renewed_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    ended_at INTEGER,
    ended_by TEXT
);
CREATE INDEX reservations_live ON reservations (workspace_id, project) WHERE ended_at IS NULL;
CREATE INDEX reservations_expiry ON reservations (expires_at) WHERE ended_at IS NULL;
CREATE INDEX reservations_holder ON reservations (holder_id) WHERE ended_at IS NULL
