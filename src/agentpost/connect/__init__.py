"""connect: put ACP agents in rooms — the Worker, Sessions and Turns (docs/connect.md).

The ACP SDK is imported only by `connect/acp.py`, and only when an agent is spawned.
"""

from agentpost.connect.worker import Worker, WorkerConfig, run_worker

__all__ = ["Worker", "WorkerConfig", "run_worker"]
