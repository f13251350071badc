-- A2A push signatures (docs/a2a.md, docs/architecture.md#a2a): each config gets a
-- signing secret of its own, made by the hub and returned once when the config is set, never sent on the
-- wire; the receiver's `token` is only sent back beside it. A config set before this has
-- no secret, and its notifications go unsigned (set it again to get one).
ALTER TABLE a2a_push_configs ADD COLUMN secret TEXT NOT NULL DEFAULT ''
