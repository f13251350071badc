-- agentpost hub schema, version 1 (docs/api.md).
CREATE TABLE workspaces (
  id TEXT PRIMARY KEY,
  name TEXT NOT NULL UNIQUE,
  created_at INTEGER NOT NULL
);
CREATE TABLE members (
  id TEXT PRIMARY KEY,
  workspace_id TEXT NOT NULL REFERENCES workspaces(id),
  name TEXT NOT NULL,
  kind TEXT NOT NULL,
  status TEXT NOT NULL,
  owner TEXT,
  inbox_cursor INTEGER NOT NULL DEFAULT 0,
  inbox_last INTEGER NOT NULL DEFAULT 0,
  created_at INTEGER NOT NULL,
  UNIQUE (workspace_id, name)
);
CREATE TABLE tokens (
  hash TEXT PRIMARY KEY,
  member_id TEXT NOT NULL,
  created_at INTEGER NOT NULL
);
CREATE INDEX tokens_member ON tokens (member_id);
CREATE TABLE rooms (
  id TEXT PRIMARY KEY,
  workspace_id TEXT NOT NULL REFERENCES workspaces(id),
  name TEXT NOT NULL,
  kind TEXT NOT NULL,
  mode TEXT NOT NULL,
  master TEXT,
  archived INTEGER NOT NULL DEFAULT 0,
  owner TEXT,
  sensitive_filter INTEGER NOT NULL DEFAULT 0,
  last_seq INTEGER NOT NULL DEFAULT 0,
  created_at INTEGER NOT NULL,
  UNIQUE (workspace_id, name)
);
CREATE TABLE participants (
  room_id TEXT NOT NULL,
  member_id TEXT NOT NULL,
  added_at INTEGER NOT NULL,
  PRIMARY KEY (room_id, member_id)
);
CREATE INDEX participants_member ON participants (member_id);
CREATE TABLE events (
  room_id TEXT NOT NULL,
  seq INTEGER NOT NULL,
  id TEXT NOT NULL UNIQUE,
  body BLOB NOT NULL,
  PRIMARY KEY (room_id, seq)
);
-- A member's inbox cursor is taken from members.inbox_last under that row's lock, so
-- cursors commit in order per member even with many hub processes (docs/api.md, docs/deploy.md).
CREATE TABLE inbox (
  member_id TEXT NOT NULL,
  cursor INTEGER NOT NULL,
  room_id TEXT NOT NULL,
  seq INTEGER NOT NULL,
  PRIMARY KEY (member_id, cursor)
);
CREATE TABLE idempotency_keys (
  member_id TEXT NOT NULL,
  key TEXT NOT NULL,
  fingerprint TEXT NOT NULL,
  state TEXT NOT NULL,
  status INTEGER NOT NULL,
  body BLOB NOT NULL,
  room_id TEXT,
  event_id TEXT,
  created_at INTEGER NOT NULL,
  PRIMARY KEY (member_id, key)
);
CREATE INDEX idempotency_keys_created ON idempotency_keys (created_at);
CREATE TABLE media (
  id TEXT PRIMARY KEY,
  room_id TEXT NOT NULL,
  sha256 TEXT NOT NULL,
  name TEXT NOT NULL,
  mime_type TEXT NOT NULL,
  size INTEGER NOT NULL,
  uploader TEXT NOT NULL,
  created_at INTEGER NOT NULL
);
