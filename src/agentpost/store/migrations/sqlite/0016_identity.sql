-- Identity is the member id (docs/architecture.md#identity, docs/api.md "Identity"): an agent's
-- owner and a room's owner are compared by member id, never by name, so a name freed by a hard
-- removal owns nothing of its predecessor. `owner` stays, the name people read. Backfilled from the
-- current names where that member exists and is not removed; else no one owns it (an admin
-- names a new owner: agentpost admin member set-owner).
ALTER TABLE members ADD COLUMN owner_id TEXT;
UPDATE members SET owner_id = (
  SELECT o.id FROM members o
  WHERE o.workspace_id = members.workspace_id AND o.name = members.owner AND o.status = 'active'
) WHERE owner IS NOT NULL;
-- An owner whose name no member holds any more was removed hard: the agent has no owner.
UPDATE members SET owner = NULL WHERE owner IS NOT NULL AND NOT EXISTS (
  SELECT 1 FROM members o WHERE o.workspace_id = members.workspace_id AND o.name = members.owner
);
CREATE INDEX members_owner ON members (owner_id);
ALTER TABLE rooms ADD COLUMN owner_id TEXT;
UPDATE rooms SET owner_id = (
  SELECT o.id FROM members o
  WHERE o.workspace_id = rooms.workspace_id AND o.name = rooms.owner AND o.status = 'active'
) WHERE owner IS NOT NULL;
CREATE INDEX rooms_owner ON rooms (owner_id);
-- Every EVENT names its sender's member id (`sender_id`, docs/api.md), so a Worker compares
-- ids too. Events from before this version get it appended to their body from the column
-- migration 0012 filled (a hub notice has none); the rest of the body is left byte for byte.
UPDATE events SET body = CAST(
  substr(body, 1, length(body) - 1) || ',"sender_id":' || json_quote(sender_id) || '}' AS BLOB
) WHERE sender_id IS NOT NULL AND length(body) > 2 AND substr(body, -1) = X'7D'
