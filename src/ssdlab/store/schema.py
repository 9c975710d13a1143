"""The store's schema: DDL, the ordered migrations, the version check and :func:`connect`.

The schema version lives in ``PRAGMA user_version``. ``MIGRATIONS[i]`` takes a store
from version ``i`` to ``i + 1``; all pending migrations run in one transaction together
with the ``user_version`` bump, so a store is never left half-migrated. Migrations only
ever move forward; a store with a version above :data:`SCHEMA_VERSION` is refused.
Policy (docs/results-format.md): never edit a released migration, append a new one.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

from ssdlab.errors import EnvironmentProblem

#: ``PRAGMA application_id`` of an ssdlab store ("ssdl" in ASCII).
APPLICATION_ID = 0x7373646C

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


def _migrate_to_1(conn: sqlite3.Connection) -> None:
    """Empty database -> version 1."""
    for statement in SCHEMA_V1:
        conn.execute(statement)
    conn.execute(f"PRAGMA application_id = {APPLICATION_ID:d}")  # a constant, not a value


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


def _migrate_to_2(conn: sqlite3.Connection) -> None:
    """Version 1 -> 2: the tables of sets; every stored run stays as it is (in no set)."""
    for statement in SCHEMA_V2:
        conn.execute(statement)


Migration = Callable[[sqlite3.Connection], None]

#: ``MIGRATIONS[i]`` migrates version ``i`` to ``i + 1``. Append only.
MIGRATIONS: tuple[Migration, ...] = (_migrate_to_1, _migrate_to_2)

#: The schema version this ssdlab writes and understands.
SCHEMA_VERSION = len(MIGRATIONS)


def user_version(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def _check_version(path: Path, version: int) -> None:
    if version > SCHEMA_VERSION:
        raise EnvironmentProblem(
            f"results store {path} has schema version {version}, newer than this ssdlab "
            f"understands ({SCHEMA_VERSION}); upgrade ssdlab"
        )


def _check_ours(conn: sqlite3.Connection, path: Path, version: int) -> None:
    """Refuse an SQLite database that some other program wrote."""
    app_id = int(conn.execute("PRAGMA application_id").fetchone()[0])
    if app_id == APPLICATION_ID:
        return
    tables = conn.execute(
        "SELECT count(*) FROM sqlite_master WHERE name NOT LIKE 'sqlite!_%' ESCAPE '!'"
    ).fetchone()[0]
    if version != 0 or tables:
        raise EnvironmentProblem(
            f"{path} is an SQLite database but not an ssdlab results store; "
            "choose another store path"
        )


def apply_migrations(conn: sqlite3.Connection, start: int) -> int:
    """Run the migrations after ``start`` (inside the caller's transaction); new version."""
    for number in range(start, SCHEMA_VERSION):
        MIGRATIONS[number](conn)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION:d}")  # a constant, not a value
    return SCHEMA_VERSION


def ensure_schema(conn: sqlite3.Connection, path: Path) -> int:
    """Check the store's version and migrate it to :data:`SCHEMA_VERSION`; return it.

    ``conn`` must be in autocommit mode (``isolation_level=None``).
    """
    version = user_version(conn)
    _check_ours(conn, path, version)
    _check_version(path, version)
    if version == SCHEMA_VERSION:
        return version
    conn.execute("BEGIN IMMEDIATE")
    try:
        version = user_version(conn)  # again, under the write lock
        _check_version(path, version)
        if version < SCHEMA_VERSION:
            version = apply_migrations(conn, version)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return version


def _open_error(path: Path, exc: sqlite3.Error) -> EnvironmentProblem:
    name = getattr(exc, "sqlite_errorname", "")
    if name == "SQLITE_NOTADB":
        return EnvironmentProblem(f"results store {path} is not an SQLite database")
    if name == "SQLITE_CORRUPT":
        return EnvironmentProblem(f"results store {path} is corrupt ({exc})")
    return EnvironmentProblem(f"cannot use results store {path}: {exc}")


def connect(path: Path) -> sqlite3.Connection:
    """Open ``path`` (WAL, synchronous=FULL, foreign keys), creating or migrating it."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        msg = f"cannot create the results store directory {path.parent}: {exc.strerror or exc}"
        raise EnvironmentProblem(msg) from exc
    if path.is_dir():
        raise EnvironmentProblem(f"results store {path} is a directory, not a file")
    try:
        conn = sqlite3.connect(path, timeout=30.0, isolation_level=None)
    except sqlite3.Error as exc:
        raise _open_error(path, exc) from exc
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute("PRAGMA foreign_keys=ON")
        ensure_schema(conn, path)
    except sqlite3.Error as exc:
        conn.close()
        raise _open_error(path, exc) from exc
    except BaseException:
        conn.close()
        raise
    return conn
