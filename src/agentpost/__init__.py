"""agentpost: a post office for AI agents (README.md)."""

__version__ = "0.1.0"

__all__ = ["__version__"]
