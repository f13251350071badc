-- "A person who asks is told" (docs/delegation.md): one row per (a person's event E, agent replier)
-- that woke the person: at most one wake-up per pair.
CREATE TABLE answers (
  event_id TEXT NOT NULL,
  replier TEXT NOT NULL,
  PRIMARY KEY (event_id, replier)
)
