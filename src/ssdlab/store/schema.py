"""The store's schema: DDL, the ordered migrations, the version check and :func:`connect`.

The schema version lives in ``PRAGMA user_version`` (SQLite) or the ``ssdlab_meta``
table (PostgreSQL). ``MIGRATIONS[i]`` takes a store from version ``i`` to ``i + 1``;
all pending migrations run in one transaction together with the version bump, so a
store is never left half-migrated. Migrations only ever move forward; a store with a
version above :data:`SCHEMA_VERSION` is refused.
Policy (docs/results-format.md): never edit a released migration, append a new one.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

from ssdlab.errors import EnvironmentProblem, command
from ssdlab.store.backend import (
    APPLICATION_ID,
    Db,
    first_line,
    open_db,
    sqlite_open_error,
)
from ssdlab.store.location import StoreLocation

__all__ = ["APPLICATION_ID", "MIGRATIONS", "SCHEMA_V1", "SCHEMA_V2", "SCHEMA_VERSION",
           "apply_migrations", "connect", "ensure_schema", "user_version"]

#: Version 1: runs, tests, rounds, steps, events and fio invocations.
SCHEMA_V1: tuple[str, ...] = (
    """CREATE TABLE runs (
        id            TEXT PRIMARY KEY,
        created_at    REAL NOT NULL,
        finished_at   REAL,
        suite         TEXT NOT NULL,
        profile       TEXT NOT NULL,
        quick         INTEGER NOT NULL,
        status        TEXT NOT NULL,
        message       TEXT NOT NULL DEFAULT '',
        target_path   TEXT NOT NULL,
        target_model  TEXT,
        read_only     INTEGER NOT NULL DEFAULT 0,
        target_json   TEXT NOT NULL,
        host_json     TEXT NOT NULL,
        plan_json     TEXT NOT NULL,
        versions_json TEXT NOT NULL,
        argv_json     TEXT NOT NULL
    )""",
    "CREATE INDEX runs_created ON runs (created_at)",
    """CREATE TABLE fio_invocations (
        id           INTEGER PRIMARY KEY,
        run_id       TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
        phase        TEXT NOT NULL,
        job_text     TEXT NOT NULL,
        command_json TEXT NOT NULL,
        stdout_z     BLOB NOT NULL,
        stdout_bytes INTEGER NOT NULL,
        stderr       TEXT NOT NULL,
        returncode   INTEGER NOT NULL,
        started_at   REAL NOT NULL,
        ended_at     REAL NOT NULL
    )""",
    "CREATE INDEX fio_run ON fio_invocations (run_id)",
    """CREATE TABLE tests (
        id            INTEGER PRIMARY KEY,
        run_id        TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
        name          TEXT NOT NULL,
        status        TEXT NOT NULL,
        params_json   TEXT NOT NULL,
        verdicts_json TEXT NOT NULL,
        result_json   TEXT NOT NULL,
        updated_at    REAL NOT NULL,
        UNIQUE (run_id, name)
    )""",
    """CREATE TABLE rounds (
        run_id        TEXT NOT NULL,
        test          TEXT NOT NULL,
        round_no      INTEGER NOT NULL,
        status        TEXT NOT NULL CHECK (status IN ('ok', 'failed')),
        tracking_json TEXT NOT NULL,
        cells_json    TEXT NOT NULL,
        started_at    REAL NOT NULL,
        ended_at      REAL NOT NULL,
        fio_id        INTEGER REFERENCES fio_invocations (id),
        PRIMARY KEY (run_id, test, round_no),
        FOREIGN KEY (run_id, test) REFERENCES tests (run_id, name) ON DELETE CASCADE
    )""",
    """CREATE TABLE steps (
        id          INTEGER PRIMARY KEY,
        run_id      TEXT NOT NULL,
        test        TEXT NOT NULL,
        kind        TEXT NOT NULL,
        detail_json TEXT NOT NULL,
        created_at  REAL NOT NULL,
        fio_id      INTEGER REFERENCES fio_invocations (id),
        FOREIGN KEY (run_id, test) REFERENCES tests (run_id, name) ON DELETE CASCADE
    )""",
    "CREATE INDEX steps_run ON steps (run_id)",
    """CREATE TABLE events (
        id          INTEGER PRIMARY KEY,
        run_id      TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
        test        TEXT,
        kind        TEXT NOT NULL,
        message     TEXT NOT NULL,
        detail_json TEXT,
        created_at  REAL NOT NULL
    )""",
    "CREATE INDEX events_run ON events (run_id)",
)


def _migrate_to_1(db: Db) -> None:
    """Empty database -> version 1."""
    for statement in SCHEMA_V1:
        db.ddl(statement)
    db.mark_ours()


#: Version 2: sets of runs (several targets run at once, docs/sets.md) and their runs.
SCHEMA_V2: tuple[str, ...] = (
    """CREATE TABLE sets (
        id           TEXT PRIMARY KEY,
        created_at   REAL NOT NULL,
        finished_at  REAL,
        suite        TEXT NOT NULL,
        argv_json    TEXT NOT NULL,
        targets_json TEXT NOT NULL,
        detail_json  TEXT NOT NULL DEFAULT '{}'
    )""",
    """CREATE TABLE set_runs (
        set_id   TEXT NOT NULL REFERENCES sets (id) ON DELETE CASCADE,
        position INTEGER NOT NULL,
        run_id   TEXT NOT NULL UNIQUE REFERENCES runs (id) ON DELETE CASCADE,
        PRIMARY KEY (set_id, position)
    )""",
)


def _migrate_to_2(db: Db) -> None:
    """Version 1 -> 2: the tables of sets; every stored run stays as it is (in no set)."""
    for statement in SCHEMA_V2:
        db.ddl(statement)


#: A migration runs its statements through ``db.ddl``, which gives PostgreSQL its own
#: types for the released (SQLite) DDL; one that needs to differ by backend asks ``db.name``.
Migration = Callable[[Db], None]

#: ``MIGRATIONS[i]`` migrates version ``i`` to ``i + 1``. Append only.
MIGRATIONS: tuple[Migration, ...] = (_migrate_to_1, _migrate_to_2)

#: The schema version this ssdlab writes and understands.
SCHEMA_VERSION = len(MIGRATIONS)


class StoreNotMade(EnvironmentProblem):
    """Opened for reading only, a database in which no run has made the store yet (schema
    version 0, nothing of another program's either): no SQLite tables yet, or a PostgreSQL
    database (schema) still empty."""


def user_version(conn: sqlite3.Connection) -> int:
    """An SQLite file's schema version (``PRAGMA user_version``)."""
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def _check_version(location: StoreLocation, version: int) -> None:
    if version > SCHEMA_VERSION:
        raise EnvironmentProblem(
            f"results store {location} has schema version {version}, newer than this ssdlab "
            f"understands ({SCHEMA_VERSION}); upgrade ssdlab"
        )


def apply_migrations(db: Db, start: int) -> int:
    """Run the migrations after ``start`` (inside the caller's transaction); new version."""
    for number in range(start, SCHEMA_VERSION):
        MIGRATIONS[number](db)
    db.set_version(SCHEMA_VERSION)
    return SCHEMA_VERSION


def ensure_schema(db: Db) -> int:
    """Check the store's version and migrate it to :data:`SCHEMA_VERSION`; return it.

    The migrations run in one write transaction, after taking the backend's migration
    lock and reading the version again, so two processes opening a new store at once
    migrate it once.
    """
    version = db.user_version()
    try:
        db.check_ours(version)
    except EnvironmentProblem:
        # read outside a transaction, a store another process is making at this moment
        # can look half made (its tables, not yet its mark): judge it again whole, under
        # the lock that process holds while it makes it
        with db.tx():
            db.lock_for_migration()
            version = db.user_version()
            db.check_ours(version)
    _check_version(db.location, version)
    if version == SCHEMA_VERSION:
        return version
    with db.tx():
        db.lock_for_migration()
        version = db.user_version()  # again, under the write lock
        _check_version(db.location, version)
        if version < SCHEMA_VERSION:
            version = apply_migrations(db, version)
    return version


def connect(location: StoreLocation | Path, *, read_only: bool = False) -> Db:
    """Open the store at ``location``, creating or migrating it; read-only: never written,
    and a store of another schema version is refused instead of migrated."""
    if isinstance(location, Path):
        location = StoreLocation.parse(location)
    db = open_db(location, read_only=read_only)
    try:
        if read_only:
            version = db.user_version()
            db.check_ours(version)
            _check_version(location, version)
            if version == 0:
                raise StoreNotMade(f"no results store at {location} yet (nothing in it)")
            if version != SCHEMA_VERSION:
                raise EnvironmentProblem(
                    f"results store {location} has schema version {version}; open it once "
                    f"with `{command()} runs --store ...` to bring it to version {SCHEMA_VERSION}")
        else:
            ensure_schema(db)
    except BaseException as exc:
        db.close()
        if isinstance(exc, sqlite3.Error) and location.path is not None:
            raise sqlite_open_error(location.path, exc) from exc
        if isinstance(exc, db.errors):
            raise EnvironmentProblem(f"cannot use results store {location}: {first_line(exc)}"
                                     ) from exc
        raise
    return db
