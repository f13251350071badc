"""Backups and restores of a hub's data while it serves (docs/architecture.md#operations,
docs/operations.md).

A backup is a directory, private to its user (0700, files 0600)::

    manifest.json   what it holds: engine, schema version, counts, problems seen
    hub.sqlite3     SQLite: a consistent copy made with SQLite's online backup API
    hub.pgdump      PostgreSQL: `pg_dump --format=custom` of one exported snapshot
    blobs/aa/<sha256>  the bytes of every media row the copy names, checked on the way
    admin.token     the data dir's admin token file, when it has one

Consistency: on SQLite the whole database is copied in one step of the backup API, so in one
read transaction (WAL: the hub keeps writing meanwhile). The blobs copied are those the copy's
media rows name, and a hub makes a blob durable before the row that names it commits: an
upload in flight is either in the copy with its bytes, or not in it at all. On PostgreSQL the
same holds for the snapshot `pg_dump` is given. Media whose bytes are missing or do not match
their hash in the hub's own store are listed in the manifest and make the command fail (exit
1) after the rest is written: the backup is still the best copy there is.

A backup is written under `.<name>.partial` next to its destination and renamed into place
when whole, so a backup killed midway leaves no directory that looks complete (the next
backup to the same place removes the partial one). A restore is copied the same way under
`.<name>.restoring` and renamed: a data dir is either untouched or whole. On PostgreSQL
`pg_restore` runs in one transaction into an empty database (blobs are copied first; being
content-addressed, copying one twice is harmless), so a restore killed midway leaves the
database empty and can simply be run again.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

from agentpost import __version__
from agentpost.core.errors import Code
from agentpost.store import migrate
from agentpost.store.datastore import (  # re-exported: the db commands import them here
    SQLITE_FILE,
    OpsError,
    Store,
    hash_file,
    pg_connect,
)
from agentpost.store.files import DIR_MODE, FILE_MODE, UMASK
from agentpost.store.verify import verify

FORMAT = "agentpost-backup"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
PG_DUMP = "hub.pgdump"
BLOBS = "blobs"
ADMIN_TOKEN = "admin.token"
# Tests: `AGENTPOST_DB_CRASH_POINT=name` SIGKILLs the command where `_crash_point(name)` is.
CRASH_ENV = "AGENTPOST_DB_CRASH_POINT"
_CHUNK = 1 << 20
_MARKER = ".agentpost-partial"  # locked (flock) by the command writing the partial directory


def _crash_point(name: str) -> None:
    if os.environ.get(CRASH_ENV) == name:
        os.kill(os.getpid(), signal.SIGKILL)


# -- files --------------------------------------------------------------------------------


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_file(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
        out.flush()
        os.fsync(out.fileno())


def _copy_checked(src: Path, dst: Path, sha256: str) -> str | None:
    """Copy a blob through a temp name, hashing on the way; a problem (missing, or bytes
    that do not match their name) as text, else None. An existing `dst` with the right
    bytes is kept (content-addressed: a second copy is the same file)."""
    if dst.exists() and hash_file(dst)[0] == sha256:
        return None
    tmp = dst.with_name(f".{dst.name}.tmp")
    h = hashlib.sha256()
    try:
        fin = open(src, "rb")  # noqa: SIM115 - closed below, after the copy
    except FileNotFoundError:
        return f"the bytes of {sha256} are missing ({src})"
    dst.parent.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
        with fin, os.fdopen(fd, "wb") as out:
            while chunk := fin.read(_CHUNK):
                h.update(chunk)
                out.write(chunk)
            out.flush()
            os.fsync(out.fileno())
        if h.hexdigest() != sha256:
            tmp.unlink()
            return f"the bytes of {sha256} do not match their hash ({src})"
        os.replace(tmp, dst)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return None


def _empty_or_missing(path: Path) -> bool:
    return not path.exists() or (path.is_dir() and not any(path.iterdir()))


@contextmanager
def _partial(dest: Path, suffix: str) -> Iterator[Path]:
    """A private directory `.<dest name>.<suffix>` next to `dest`, held (flock) while the
    body runs and renamed to `dest` when it ends without an error. One left by a killed run
    is removed first; one another live run holds is refused."""
    dest.parent.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    work = dest.parent / f".{dest.name}.{suffix}"
    if work.exists():
        marker = work / _MARKER
        fd = os.open(marker, os.O_RDONLY) if marker.exists() else -1
        try:
            if fd >= 0:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError:
                    raise OpsError(
                        Code.BUSY, f"another agentpost command is writing {work}; wait for it"
                    ) from None
            elif any(work.iterdir()):
                raise OpsError(
                    Code.TARGET_NOT_EMPTY, f"{work} is in the way and is not ours; move it away"
                )
        finally:
            if fd >= 0:
                os.close(fd)
        shutil.rmtree(work)
    work.mkdir(mode=DIR_MODE)
    fd = os.open(work / _MARKER, os.O_RDWR | os.O_CREAT, FILE_MODE)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        yield work
        (work / _MARKER).unlink()
        if dest.exists():  # an empty directory made for us: ours replaces it
            dest.rmdir()
        os.rename(work, dest)
        _fsync_dir(dest.parent)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    finally:
        os.close(fd)


# -- PostgreSQL ---------------------------------------------------------------------------


# libpq's connection keywords and the environment variables its tools read them from.
_PG_ENV = {
    "host": "PGHOST",
    "hostaddr": "PGHOSTADDR",
    "port": "PGPORT",
    "dbname": "PGDATABASE",
    "user": "PGUSER",
    "password": "PGPASSWORD",
    "passfile": "PGPASSFILE",
    "options": "PGOPTIONS",
    "application_name": "PGAPPNAME",
    "sslmode": "PGSSLMODE",
    "sslcert": "PGSSLCERT",
    "sslkey": "PGSSLKEY",
    "sslrootcert": "PGSSLROOTCERT",
    "sslcrl": "PGSSLCRL",
    "connect_timeout": "PGCONNECT_TIMEOUT",
    "service": "PGSERVICE",
    "target_session_attrs": "PGTARGETSESSIONATTRS",
    "gssencmode": "PGGSSENCMODE",
    "channel_binding": "PGCHANNELBINDING",
    "requiressl": "PGREQUIRESSL",
}


def _pg_env(url: str) -> dict[str, str]:
    """The environment that gives libpq's tools (pg_dump, pg_restore) this database: every
    part of the URL as a PG* variable, so nothing of it (a password above all, in the URL's
    user part or its `?password=`) is on their command line."""
    from psycopg.conninfo import conninfo_to_dict

    try:
        parts = conninfo_to_dict(url)
    except Exception as exc:  # psycopg.ProgrammingError: the URL cannot be read
        raise OpsError(Code.INVALID_REQUEST, "the database URL cannot be read") from exc
    env = dict(os.environ)  # PGPASSWORD or ~/.pgpass still give a password the URL lacks
    for key, value in parts.items():
        name = _PG_ENV.get(key)
        if name is None:
            raise OpsError(
                Code.INVALID_REQUEST, f"the database URL's {key!r} has no libpq variable"
            )
        env[name] = str(value)
    return env


def _pg_tool(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        raise OpsError(
            Code.TOOL_MISSING,
            f"{name} not found: install PostgreSQL's client tools (Debian: postgresql-client), "
            "of the server's major version or newer",
        )
    return found


def _run_tool(argv: list[str], env: dict[str, str], what: str) -> None:
    p = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    if p.returncode != 0:
        raise OpsError(Code.TOOL_FAILED, f"{what} failed: {p.stderr.strip()[-2000:]}")


# -- what a database holds ----------------------------------------------------------------

_COUNTED = ("workspaces", "members", "rooms", "events", "media")


def _facts(q: Any) -> dict[str, Any]:
    """Counts, schema version and the media hashes, through `q(sql) -> rows`."""
    counts = {t: int(q(f"SELECT COUNT(*) FROM {t}")[0][0]) for t in _COUNTED}
    version = int(q("SELECT MAX(version) FROM schema_version")[0][0] or 0)
    # The bytes a download may still ask for: a redacted file's and an expired one's may be
    # gone for good (hub/retention.py frees them).
    served = "redacted = 0" + (" AND expired_at IS NULL" if version >= 14 else "")
    rows = q(f"SELECT DISTINCT sha256 FROM media WHERE {served}")
    return {"counts": counts, "schema_version": version, "hashes": sorted(str(r[0]) for r in rows)}


# -- backup -------------------------------------------------------------------------------


@contextmanager
def _private() -> Iterator[None]:
    """Whatever is made meanwhile (directories included) is the user's alone."""
    old = os.umask(UMASK)
    try:
        yield
    finally:
        os.umask(old)


def backup(store: Store, dest: Path) -> dict[str, Any]:
    """Write a backup of `store` to `dest` (which must not exist, or be an empty directory);
    its manifest. `OpsError` when nothing usable was written; a manifest with `problems`
    when the hub's own store lacks bytes some media rows name."""
    with _private():
        return _backup(store, dest)


def _inside(path: Path, home: Path) -> bool:
    where, root = path.resolve(), home.resolve()
    return where == root or root in where.parents


def _backup(store: Store, dest: Path) -> dict[str, Any]:
    if not _empty_or_missing(dest):
        raise OpsError(Code.TARGET_EXISTS, f"{dest} exists and is not empty; name a new one")
    for home in (store.data_dir, store.blob_dir):
        # A backup inside what it backs up is lost with it, and the next backup copies it.
        if home.exists() and _inside(dest, home):
            raise OpsError(
                Code.INVALID_REQUEST,
                f"{dest} is inside {home}, which it backs up: write the backup elsewhere",
            )
    with _partial(dest, "partial") as work:
        if store.engine == "sqlite":
            facts = _sqlite_copy(store.sqlite_path, work / SQLITE_FILE)
        else:
            assert store.db_url is not None
            facts = _pg_dump(store.db_url, work / PG_DUMP)
        _crash_point("backup:database")
        problems = []
        missing = []
        copied = []
        total = 0
        for sha in facts["hashes"]:
            where = work / BLOBS / sha[:2] / sha
            problem = _copy_checked(store.blob_dir / sha[:2] / sha, where, sha)
            if problem is not None:
                problems.append(problem)
                missing.append(sha)
            else:
                copied.append(sha)
                total += where.stat().st_size
            _crash_point("backup:blob")
        for d in [work / BLOBS, *(work / BLOBS).glob("*")] if (work / BLOBS).exists() else []:
            _fsync_dir(d)
        token = store.data_dir / ADMIN_TOKEN
        if token.is_file():
            _write_file(work / ADMIN_TOKEN, token.read_bytes())
        # Every file but the blobs (named by their own sha256) by its sha256: restore
        # refuses bytes that changed since.
        files = {
            f.name: hash_file(f)[0]
            for f in (work / SQLITE_FILE, work / PG_DUMP, work / ADMIN_TOKEN)
            if f.is_file()
        }
        manifest = {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "engine": store.engine,
            "agentpost_version": __version__,
            "schema_version": facts["schema_version"],
            "created_at": int(time.time()),
            "counts": facts["counts"],
            "blobs": len(copied),
            "blob_bytes": total,
            "problems": problems,
            "missing_blobs": missing,  # not in the hub's own store: known, not restorable
            "blob_hashes": copied,
            "files": files,
        }
        if "pg_schema" in facts:
            manifest["pg_schema"] = facts["pg_schema"]
        _write_file(work / MANIFEST, json.dumps(manifest, indent=2).encode() + b"\n")
        _fsync_dir(work)
        _crash_point("backup:written")
    return manifest


def _sqlite_copy(path: Path, out: Path) -> dict[str, Any]:
    if not path.is_file():
        raise OpsError(Code.NOT_FOUND, f"no hub database at {path}")
    fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    os.close(fd)
    src = sqlite3.connect(path, timeout=30)
    try:
        dst = sqlite3.connect(out)
        try:
            # pages=-1: the whole database in one step, so in one read transaction; with WAL
            # the hub's writers go on meanwhile.
            src.backup(dst, pages=-1)
            dst.execute("PRAGMA journal_mode=DELETE")  # one self-contained file
            if dst.execute("PRAGMA quick_check").fetchone()[0] != "ok":
                raise OpsError(Code.STORAGE_UNAVAILABLE, f"the copy of {path} fails its check")
            facts = _facts(lambda sql: dst.execute(sql).fetchall())
        finally:
            dst.close()
    except sqlite3.Error as exc:
        raise OpsError(Code.STORAGE_UNAVAILABLE, f"cannot copy {path}: {exc}") from exc
    finally:
        src.close()
    with open(out, "rb+") as f:
        os.fsync(f.fileno())
    return facts


def _quoted(name: str) -> str:
    """A schema name as a pg_dump pattern that matches it alone."""
    return '"' + name.replace('"', '""') + '"'


def _pg_dump(url: str, out: Path) -> dict[str, Any]:
    pg_dump = _pg_tool("pg_dump")
    env = _pg_env(url)
    conn = pg_connect(url)
    try:
        conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        snapshot = conn.execute("SELECT pg_export_snapshot()").fetchone()[0]
        schema = conn.execute("SELECT current_schema()").fetchone()[0]
        facts = _facts(lambda sql: conn.execute(sql).fetchall())
        facts["pg_schema"] = schema
        # The same snapshot for the dump: the media rows above are the dump's.
        _run_tool(
            [
                pg_dump,
                "--format=custom",
                "--no-owner",
                "--no-privileges",
                f"--snapshot={snapshot}",
                f"--schema={_quoted(schema)}",
                f"--file={out}",
            ],
            env,
            "pg_dump",
        )
        conn.execute("COMMIT")
    finally:
        conn.close()
    os.chmod(out, FILE_MODE)
    return facts


# -- restore ------------------------------------------------------------------------------


def read_manifest(src: Path) -> dict[str, Any]:
    try:
        manifest: dict[str, Any] = json.loads((src / MANIFEST).read_text("utf-8"))
    except FileNotFoundError:
        raise OpsError(
            Code.BACKUP_INVALID, f"{src} is not an agentpost backup (no manifest)"
        ) from None
    except (OSError, ValueError) as exc:
        raise OpsError(Code.BACKUP_INVALID, f"{src / MANIFEST} cannot be read: {exc}") from exc
    if (
        not isinstance(manifest, dict)
        or manifest.get("format") != FORMAT
        or not isinstance(manifest.get("schema_version"), int)
        or manifest.get("engine") not in ("sqlite", "postgresql")
        or not isinstance(manifest.get("counts"), dict)
        or not isinstance(manifest.get("missing_blobs", []), list)
        or not isinstance(manifest.get("blob_hashes", []), list)
    ):
        raise OpsError(Code.BACKUP_INVALID, f"{src} is not an agentpost backup")
    if manifest.get("format_version") != FORMAT_VERSION:
        raise OpsError(
            Code.BACKUP_INVALID,
            f"{src} is backup format {manifest.get('format_version')}; this agentpost reads "
            f"{FORMAT_VERSION}",
        )
    return manifest


Problem = dict[str, str]  # {"check": …, "message": …}, as `db verify` reports them


def _problem(check: str, message: str) -> Problem:
    return {"check": check, "message": message}


def check_backup(src: Path) -> tuple[dict[str, Any], list[Problem]]:
    """The manifest and what is wrong with the backup at `src`, without changing it: each
    file's sha256 against the manifest's, its blobs hashed, and on SQLite every check of
    `db verify` on its database and the manifest's counts against the rows (PostgreSQL's
    rows are checked once restored: `_pg_restore`)."""
    manifest = read_manifest(src)
    problems: list[Problem] = []
    files = manifest.get("files", {})  # absent from a backup made before it was recorded
    if not isinstance(files, dict):
        return manifest, [_problem("manifest", "its files are not a name → sha256 map")]
    for name, want in sorted(files.items()):
        path = src / str(name)
        if name not in (SQLITE_FILE, PG_DUMP, ADMIN_TOKEN):
            problems.append(_problem("manifest", f"it names {name!r}, no file of a backup"))
        elif not path.is_file():
            problems.append(_problem("files", f"{path} is missing"))
        elif hash_file(path)[0] != want:
            problems.append(_problem("sha256", f"{path} is not the file the backup wrote"))
    engine = manifest.get("engine")
    known = {str(h) for h in manifest.get("missing_blobs", [])}  # said when it was made
    flagged = set()
    for sha in (str(h) for h in manifest.get("blob_hashes", [])):
        blob = src / BLOBS / sha[:2] / sha
        if sha in known:
            continue
        if not blob.is_file():
            problems.append(_problem("media", f"the bytes of {sha} are missing from the backup"))
            flagged.add(sha)
        elif hash_file(blob)[0] != sha:
            problems.append(_problem("media", f"the bytes of {sha} do not match their hash"))
            flagged.add(sha)
    if engine == "sqlite":
        db = src / SQLITE_FILE
        if not db.is_file():
            return manifest, [*problems, _problem("files", f"{db} is missing")]
        problems += _checked_rows(Store(None, src, src / BLOBS), manifest, known | flagged)
        return manifest, problems
    if engine != "postgresql":
        return manifest, [_problem("manifest", f"unknown engine {engine!r}")]
    dump = src / PG_DUMP
    if not dump.is_file():
        return manifest, [*problems, _problem("files", f"{dump} is missing")]
    listed = subprocess.run(
        [_pg_tool("pg_restore"), "--list", str(dump)],
        capture_output=True,
        text=True,
        check=False,
    )
    if listed.returncode != 0:
        message = f"{dump} cannot be read: {listed.stderr.strip()[-500:]}"
        problems.append(_problem("integrity", message))
    return manifest, problems


def _checked_rows(store: Store, manifest: dict[str, Any], known: set[str]) -> list[Problem]:
    """`db verify`'s checks on a database (a backup's SQLite one, or a database just
    restored) and its counts against the manifest's; media in `known` (missing when the
    backup was made, or already found damaged in it) are not said twice."""
    report = verify(store)
    problems = [
        p
        for p in report.problems
        if not (p["check"] == "media" and any(sha in p["message"] for sha in known))
    ]
    if not report.ok and any(p["check"] in ("integrity", "schema") for p in report.problems):
        return problems  # no rows to count
    try:
        counts = _counts(store)
    except OpsError as exc:
        return [*problems, _problem("integrity", exc.message)]
    want = manifest["counts"]
    for table in _COUNTED:
        if want.get(table) != counts[table]:
            problems.append(
                _problem(
                    "counts",
                    f"the manifest counts {want.get(table)} {table}, the database holds "
                    f"{counts[table]}",
                )
            )
    return problems


def _counts(store: Store) -> dict[str, int]:
    if store.engine == "sqlite":
        uri = f"file:{quote(str(store.sqlite_path))}?mode=ro&immutable=1"
        conn = sqlite3.connect(uri, uri=True)
        try:
            return dict(_facts(lambda sql: conn.execute(sql).fetchall())["counts"])
        except sqlite3.Error as exc:
            raise OpsError(Code.BACKUP_INVALID, f"cannot count its rows: {exc}") from exc
        finally:
            conn.close()
    assert store.db_url is not None
    pg = pg_connect(store.db_url)
    try:
        return dict(_facts(lambda sql: pg.execute(sql).fetchall())["counts"])
    finally:
        pg.close()


def _refused(src: Path, problems: list[Problem], when: str) -> OpsError:
    checks = ", ".join(sorted({p["check"] for p in problems}))
    listed = "; ".join(f"{p['check']}: {p['message']}" for p in problems[:5])
    return OpsError(
        Code.BACKUP_INVALID,
        f"{src} fails its checks ({checks}){when}; nothing was restored: {listed} "
        "(restore --force restores it all the same)",
        problems=problems,
    )


def restore(src: Path, target: Store, force: bool = False) -> dict[str, Any]:
    """Restore the backup at `src` into `target`: an empty data dir (SQLite) or an empty
    database (PostgreSQL). Checked whole first, as `db verify` checks; nothing is changed
    when it fails, unless `force` (the checks' findings are then only returned)."""
    with _private():
        return _restore(src, target, force)


def _restore(src: Path, target: Store, force: bool) -> dict[str, Any]:
    manifest, problems = check_backup(src)
    if manifest["engine"] != target.engine:
        raise OpsError(
            Code.INVALID_REQUEST,
            f"{src} is a backup of a {manifest['engine']} hub; restore it into the same engine "
            f"(this target is {target.engine})",
        )
    known = migrate.known_version(target.engine)
    if manifest["schema_version"] > known:
        raise migrate.SchemaTooNew(manifest["schema_version"], known)
    if problems and not force:
        raise _refused(src, problems, "")
    if target.engine == "sqlite":
        if target.db_url is not None:
            raise OpsError(Code.INVALID_REQUEST, "restore a SQLite backup with --data DIR")
        if not _empty_or_missing(target.data_dir):
            raise OpsError(
                Code.TARGET_NOT_EMPTY,
                f"{target.data_dir} is not empty; restore into a new or empty data dir",
            )
        with _partial(target.data_dir, "restoring") as work:
            shutil.copyfile(src / SQLITE_FILE, work / SQLITE_FILE)
            os.chmod(work / SQLITE_FILE, FILE_MODE)
            elsewhere = target.blob_dir != target.data_dir / BLOBS  # the hub's --blobs DIR
            _copy_blobs(src, target.blob_dir if elsewhere else work / BLOBS, force)
            if (src / ADMIN_TOKEN).is_file():
                _write_file(work / ADMIN_TOKEN, (src / ADMIN_TOKEN).read_bytes())
            with open(work / SQLITE_FILE, "rb+") as f:
                os.fsync(f.fileno())
            _fsync_dir(work)
            _crash_point("restore:copied")
    else:
        assert target.db_url is not None
        _pg_restore(src, target, manifest, force)
    return {**manifest, "problems_forced": problems} if problems else manifest


def _copy_blobs(src: Path, blob_dir: Path, force: bool = False) -> None:
    blob_dir.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    for blob in sorted((src / BLOBS).glob("*/*")):
        if blob.name.startswith("."):
            continue
        problem = _copy_checked(blob, blob_dir / blob.name[:2] / blob.name, blob.name)
        if problem is not None and not force:  # forced: a damaged blob is left out
            raise OpsError(Code.BACKUP_INVALID, problem)
    for d in [blob_dir, *blob_dir.glob("*")]:
        if d.is_dir():
            _fsync_dir(d)


def _pg_restore(src: Path, target: Store, manifest: dict[str, Any], force: bool) -> None:
    assert target.db_url is not None
    pg_restore = _pg_tool("pg_restore")
    conn = pg_connect(target.db_url)
    try:
        schema = conn.execute("SELECT current_schema()").fetchone()[0]
        dbname = conn.execute("SELECT current_database()").fetchone()[0]
        tables = conn.execute(
            "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = current_schema()"
        ).fetchone()[0]
        wanted = manifest.get("pg_schema", "public")
        schema_there = bool(
            conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (wanted,)).fetchone()
        )
        if schema is None:  # the search_path names a schema that is not there (yet)
            schema = conn.execute(
                "SELECT trim(both '\"' from split_part(current_setting('search_path'), ',', 1))"
            ).fetchone()[0]
    finally:
        conn.close()
    if schema != wanted:
        raise OpsError(
            Code.INVALID_REQUEST,
            f"the backup holds schema {wanted!r} and this database's search_path starts at "
            f"{schema!r}: restore into a database whose search_path is {wanted!r}",
        )
    if tables:
        raise OpsError(
            Code.TARGET_NOT_EMPTY,
            f"the database has {tables} tables; restore into a new, empty database",
        )
    _copy_blobs(src, target.blob_dir)  # first: copying a content-addressed blob twice is harmless
    _crash_point("restore:blobs")
    env = _pg_env(target.db_url)
    argv = [
        pg_restore,
        "--no-owner",
        "--no-privileges",
        "--single-transaction",
        "--exit-on-error",
        f"--dbname={dbname}",  # a name alone: the rest is in the environment
    ]
    if schema_there:
        # The schema exists already (`public` in every new database): restore all but its
        # CREATE SCHEMA, which would fail.
        listed = subprocess.run(
            [pg_restore, "--list", str(src / PG_DUMP)],
            capture_output=True,
            text=True,
            check=False,
            env=env,
        )
        entries = [
            ln
            for ln in listed.stdout.splitlines()
            if not re.search(r"\bSCHEMA - " + re.escape(wanted) + r"\b", ln)
        ]
        use_list = src.parent / f".{src.name}.restore-list-{os.getpid()}"
        use_list.write_text("\n".join(entries) + "\n")
        argv.append(f"--use-list={use_list}")
    else:
        use_list = None
    try:
        _run_tool([*argv, str(src / PG_DUMP)], env, "pg_restore")
    finally:
        if use_list is not None:
            use_list.unlink(missing_ok=True)
    if not force:  # the rows, as `db verify` checks them; refused ones are taken out again
        known_missing = {str(h) for h in manifest.get("missing_blobs", [])}
        problems = _checked_rows(target, manifest, known_missing)
        if problems:
            _empty_schema(target.db_url, wanted, schema_there)
            raise _refused(src, problems, " once restored")
    token = src / ADMIN_TOKEN
    if token.is_file() and not (target.data_dir / ADMIN_TOKEN).exists():
        target.data_dir.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
        _write_file(target.data_dir / ADMIN_TOKEN, token.read_bytes())


def _empty_schema(url: str, schema: str, keep: bool) -> None:
    """Take out what a refused restore put into `schema` (which was empty before it): the
    schema dropped with everything in it, made again empty when it was there before."""
    conn = pg_connect(url)
    try:
        with conn.transaction():
            conn.execute(f"DROP SCHEMA {_quoted(schema)} CASCADE")
            if keep:
                conn.execute(f"CREATE SCHEMA {_quoted(schema)}")
    finally:
        conn.close()
