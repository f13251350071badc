"""A2A (docs/architecture.md#a2a, docs/a2a.md): every agent member served as an A2A 1.0 agent under
`/a2a`. `wire.py` holds the JSON-RPC binding's shapes and codes, `tasks.py` the rooms a
call goes to and a task's state, `routes.py` the HTTP."""
