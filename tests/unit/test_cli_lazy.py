"""The CLI imports only the modules of the command it runs (`agentpost.cli.app.COMMANDS`):
the map names every command, and for each command every module that defines a part of it."""

from __future__ import annotations

import importlib
import subprocess
import sys
from collections.abc import Iterator

import click

from agentpost.cli.app import COMMANDS, main


def _modules(cmd: click.Command) -> Iterator[str]:
    assert cmd.callback is not None
    yield cmd.callback.__module__
    if isinstance(cmd, click.Group):
        for sub in cmd.commands.values():
            yield from _modules(sub)


def test_the_map_names_every_command_and_every_module_of_each() -> None:
    for module in {m for mods in COMMANDS.values() for m in mods}:
        importlib.import_module(f"agentpost.cli.{module}")
    assert sorted(main.commands) == sorted(COMMANDS)
    for name, cmd in main.commands.items():
        listed = {f"agentpost.cli.{m}" for m in COMMANDS[name]}
        assert set(_modules(cmd)) <= listed, name


def test_a_command_line_loads_only_its_own_modules() -> None:
    probe = (
        "import sys\nfrom agentpost.cli import main\n"
        "try:\n    main(['post', '--help'])\nexcept SystemExit:\n    pass\n"
        "print(' '.join(sorted(sys.modules)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout.splitlines()[-1]
    loaded = set(out.split())
    assert "agentpost.cli.rooms" in loaded
    assert not loaded & {"agentpost.cli.mail", "agentpost.mail", "agentpost.hub", "uvicorn"}
