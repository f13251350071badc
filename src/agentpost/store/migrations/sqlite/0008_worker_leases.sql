-- One Worker per agent member (docs/architecture.md#one-worker-per-agent): the lease a Worker
-- takes at start and renews. `fence` only grows: every new holder gets the next number, and the
-- hub refuses inbox acks and posts that carry an older one. `released` = 1 once the holder let it
-- go at stop (a standby then takes it without waiting for `expires_at`). Times in ms since the
-- epoch.
CREATE TABLE worker_leases (
    member_id TEXT PRIMARY KEY,
    fence INTEGER NOT NULL,
    worker_id TEXT NOT NULL,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    since INTEGER NOT NULL,
    renewed_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    released INTEGER NOT NULL DEFAULT 0
)
