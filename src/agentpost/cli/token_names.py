"""Where a member token comes from, by name (docs/cli.md "Tokens"); `secrets.py` reads it.

Apart so that `agentpost mcp` can declare its options without loading the hub client.
"""

TOKEN_ENV = "AGENTPOST_TOKEN"
TOKEN_FILE_ENV = "AGENTPOST_TOKEN_FILE"
TOKEN_FILE_HELP = (
    "Read the member token from this file (mode 0600, yours), once (env AGENTPOST_TOKEN_FILE)."
)
