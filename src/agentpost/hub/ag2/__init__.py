"""The AG2 relay profile (docs/architecture.md#ag2-relay-profile, docs/ag2.md): the broker wire of
AG2's `ag2-relay-client`, served under `/ag2` so the unmodified `ag2-agent-connect` Worker runs
on an agentpost hub. `wire.py` holds the shapes and the edge translation of ids,
`routes.py` the HTTP, `tasks.py` the leases, `answers.py` what the agent posts."""
