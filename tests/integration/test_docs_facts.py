"""What README.md and docs/ say about the program, checked against the program itself: the
schema version `db migrate` reaches, what a hub keeps in its data dir, what `post` prints, which
commands take `--json`, and that the README's map names every page."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import click
from test_cli import run

from agentpost.cli.app import main
from hubproc import HubProcess, Setup

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
DEPLOY = (ROOT / "docs" / "deploy.md").read_text(encoding="utf-8")


def test_deploy_md_names_the_version_db_migrate_reaches(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTPOST_")}
    migrate = [sys.executable, "-m", "agentpost", "db", "migrate", "--data", str(tmp_path)]
    out = subprocess.run(migrate, env=env, capture_output=True, text=True, check=True).stdout
    reached = re.search(r"is at version (\d+)", out)
    assert reached, out
    documented = re.findall(r"schema is at version (\d+)", DEPLOY)
    assert documented == [reached.group(1)]


def test_deploy_md_says_what_a_data_dir_holds(setup: Setup) -> None:
    hub: HubProcess = setup.hub
    run(hub, "post", "general", "-t", "something to store", token=setup.tokens["alice"])
    said = re.search(r"its own `--data` dir \((.*?)\), the same admin token", DEPLOY, re.S)
    assert said, "deploy.md says what a --data dir is for"
    holds = {p.name for p in hub.data_dir.iterdir() if p != hub.log_path}  # the test's own log
    for name in holds:
        assert name.split("-")[0].rstrip("/") in said.group(1), f"{name} is not named: {said[1]}"
    if not any(name.endswith(".log") for name in holds):
        assert not re.search(r"\blogs?\b(?! go to stderr)", said.group(1)), said.group(1)


def test_post_prints_what_the_docs_show(setup: Setup) -> None:
    line = run(setup.hub, "post", "general", "-t", "@bot hi", token=setup.tokens["alice"]).stdout
    shape = re.sub(r"ev_\w+", "ev_…", line.split(";")[0].strip())
    shape = re.sub(r"seq \d+", "seq N", shape)
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for shown in re.findall(r"(?m)^# (posted ev_… seq \d+[^;\n]*)", page.read_text()):
            assert re.sub(r"seq \d+", "seq N", shown) == shape, f"{page.name}: {shown}"


def _commands(cmd: click.Command, path: tuple[str, ...] = ()) -> list[tuple[str, bool]]:
    """(command line, takes --json) for every command, groups that run something included."""
    found = []
    if not isinstance(cmd, click.Group) or cmd.invoke_without_command:
        found.append((" ".join(path), any("--json" in getattr(p, "opts", ()) for p in cmd.params)))
    if isinstance(cmd, click.Group):
        ctx = click.Context(cmd)
        for name in cmd.list_commands(ctx):
            sub = cmd.get_command(ctx, name)
            assert sub is not None
            found += _commands(sub, (*path, name))
    return found


def test_readme_names_the_commands_without_json() -> None:
    said = re.search(r"Every command but (.*?) takes `--json`", README, re.S)
    assert said, "the README says which commands take --json"
    named = set(re.findall(r"`([a-z -]+)`", said.group(1)))
    without = {line for line, takes in _commands(main) if line and not takes}
    assert without <= named, f"take no --json and are not named: {without - named}"
    with_json = {line for line, takes in _commands(main) if takes}
    assert not (named - {"connect status"}) & with_json


def test_readme_maps_every_docs_page() -> None:
    pages = {f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md")}
    mapped = set(re.findall(r"(?m)^- `(docs/[a-z0-9_-]+\.md)`", README))
    assert pages == mapped, f"missing from the map: {pages - mapped}"


# Where the code and docs may cite the architecture from (node_modules: the real agents' npm
# install, not this repository's text).
_CITING = ("README.md", "CONTRIBUTING.md", "docs", "src", "tests", "bench")
_TEXT = {".md", ".py", ".sql", ".js", ".html", ".toml", ".txt"}


def _citing_files() -> list[Path]:
    found = []
    for name in _CITING:
        top = ROOT / name
        paths = [top] if top.is_file() else top.rglob("*")
        found += [
            p for p in paths if p.is_file() and p.suffix in _TEXT and "node_modules" not in p.parts
        ]
    return found


def _anchors(markdown: str) -> set[str]:
    """The anchors a page's headings get on GitHub: lower case, punctuation dropped, spaces
    made hyphens (fenced code blocks are no headings)."""
    text = re.sub(r"(?ms)^```.*?^```", "", markdown)
    headings = re.findall(r"(?m)^#{1,6} +(.+?) *$", text)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


def test_every_architecture_anchor_cited_exists() -> None:
    anchors = _anchors((ROOT / "docs" / "architecture.md").read_text(encoding="utf-8"))
    cite = re.compile(r"docs/architecture\.md#([A-Za-z0-9_-]+)")
    missing = {
        f"{p.relative_to(ROOT)}: #{anchor}"
        for p in _citing_files()
        for anchor in cite.findall(p.read_text(encoding="utf-8", errors="replace"))
        if anchor not in anchors
    }
    assert not missing, f"no such heading in docs/architecture.md: {sorted(missing)}"


def test_no_reference_to_a_design_document_outside_the_repository() -> None:
    """Comments and docs point to docs/architecture.md (or another page of this
    repository), never to a design document the repository does not hold."""
    name = "DESIGN" + ".md"  # spelled apart, so this file does not cite it
    citing = {
        str(p.relative_to(ROOT))
        for p in _citing_files()
        if re.search(re.escape(name) + r'(?!")', p.read_text(encoding="utf-8", errors="replace"))
    }
    assert not citing, f"cite {name}: {sorted(citing)}"
