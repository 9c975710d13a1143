"""The two databases a store can live in, behind one small interface.

:class:`SqliteDb` (the embedded default: one file, WAL, ``synchronous=FULL``) and
:class:`PostgresDb` (a lab's shared server, through psycopg 3) both offer what the
store's SQL needs: ``execute`` with ``?`` placeholders, ``executemany``,
``insert_id`` (an INSERT that returns the new row's id), ``tx`` (one durable write
transaction), the schema version and the "is this ours" check. The store's SQL is
written once, in the subset both understand; :meth:`PostgresDb.ddl` maps the released
DDL's SQLite types to PostgreSQL's (``REAL`` is a 4-byte float there: a unix time would
come back a minute off).

Free text is stored the same way in both: a NUL character (which PostgreSQL's text
type cannot hold) becomes U+FFFD, so a run merged from one into the other exports the
same.
"""

from __future__ import annotations

import contextlib
import re
import sqlite3
import urllib.parse
from collections.abc import Iterator, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol

from ssdlab.errors import EnvironmentProblem
from ssdlab.store.location import StoreLocation

#: ``PRAGMA application_id`` of an ssdlab SQLite store ("ssdl" in ASCII); also the key of
#: the advisory lock PostgreSQL stores migrate under.
APPLICATION_ID = 0x7373646C
APPLICATION = "ssdlab"
PG_HINT = "pip install 'ssdlab[postgres]' (psycopg 3)"


class Conn(Protocol):
    """What the store's SQL runs on (both backends)."""

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any: ...

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None: ...

    def insert_id(self, sql: str, params: Sequence[Any]) -> int: ...


def clean(params: Sequence[Any]) -> Sequence[Any]:
    """``params`` with NUL in text replaced by U+FFFD (see the module docstring)."""
    if any(isinstance(v, str) and "\x00" in v for v in params):
        return tuple(v.replace("\x00", "\ufffd") if isinstance(v, str) else v for v in params)
    return params


class Db:
    """A store's connection and its dialect. Subclasses fill in the parts that differ."""

    name = ""
    integrity_errors: tuple[type[BaseException], ...] = ()
    write_errors: tuple[type[BaseException], ...] = ()
    errors: tuple[type[BaseException], ...] = ()

    def __init__(self, location: StoreLocation) -> None:
        self.location = location

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        raise NotImplementedError

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        raise NotImplementedError

    def insert_id(self, sql: str, params: Sequence[Any]) -> int:
        raise NotImplementedError

    def tx(self) -> contextlib.AbstractContextManager[Db]:
        raise NotImplementedError

    def read(self) -> contextlib.AbstractContextManager[Db]:
        """A consistent snapshot for a multi-statement read."""
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def ddl(self, statement: str) -> None:
        self.execute(statement)

    def user_version(self) -> int:
        raise NotImplementedError

    def set_version(self, version: int) -> None:
        raise NotImplementedError

    def mark_ours(self) -> None:
        raise NotImplementedError

    def check_ours(self, version: int) -> None:
        raise NotImplementedError

    def lock_for_migration(self) -> None:
        """Called first in the migration transaction (SQLite's IMMEDIATE lock suffices)."""

    def write_error_reason(self, exc: BaseException) -> str:
        return f"{self.name}: {first_line(exc)}"


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


# -- SQLite ----------------------------------------------------------------------------


class SqliteDb(Db):
    name = "SQLite"
    integrity_errors = (sqlite3.IntegrityError,)
    write_errors = (sqlite3.OperationalError,)
    errors = (sqlite3.Error,)

    def __init__(self, location: StoreLocation, conn: sqlite3.Connection) -> None:
        super().__init__(location)
        self.conn = conn

    @classmethod
    def open(cls, location: StoreLocation, *, read_only: bool = False) -> SqliteDb:
        """Open the file (WAL, synchronous=FULL, foreign keys), creating its directory
        unless ``read_only``."""
        path = location.sqlite_path()
        if not read_only:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                msg = (f"cannot create the results store directory {path.parent}: "
                       f"{exc.strerror or exc}")
                raise EnvironmentProblem(msg) from exc
        if path.is_dir():
            raise EnvironmentProblem(f"results store {path} is a directory, not a file")
        try:
            if read_only:
                uri = f"file:{urllib.parse.quote(str(path.resolve()))}?mode=ro"
                conn = sqlite3.connect(uri, uri=True, timeout=30.0, isolation_level=None,
                                       check_same_thread=False)
            else:
                conn = sqlite3.connect(path, timeout=30.0, isolation_level=None)
        except sqlite3.Error as exc:
            raise sqlite_open_error(path, exc) from exc
        db = cls(location, conn)
        try:
            if not read_only:
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=FULL")
            conn.execute("PRAGMA foreign_keys=ON")
        except sqlite3.Error as exc:
            conn.close()
            raise sqlite_open_error(path, exc) from exc
        return db

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        return self.conn.execute(sql, clean(params))

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        self.conn.executemany(sql, [clean(r) for r in rows])

    def insert_id(self, sql: str, params: Sequence[Any]) -> int:
        rowid = self.conn.execute(sql, clean(params)).lastrowid
        assert rowid is not None
        return rowid

    @contextlib.contextmanager
    def tx(self) -> Iterator[Db]:
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield self
        except BaseException:
            if self.conn.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    self.conn.execute("ROLLBACK")
            raise
        try:
            self.conn.execute("COMMIT")
        except BaseException:
            if self.conn.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    self.conn.execute("ROLLBACK")
            raise

    @contextlib.contextmanager
    def read(self) -> Iterator[Db]:
        self.conn.execute("BEGIN")
        try:
            yield self
        finally:
            with contextlib.suppress(sqlite3.Error):
                self.conn.execute("COMMIT")

    def close(self) -> None:
        self.conn.close()

    def user_version(self) -> int:
        return int(self.conn.execute("PRAGMA user_version").fetchone()[0])

    def set_version(self, version: int) -> None:
        self.conn.execute(f"PRAGMA user_version = {int(version):d}")  # a number, not a value

    def mark_ours(self) -> None:
        self.conn.execute(f"PRAGMA application_id = {APPLICATION_ID:d}")

    def check_ours(self, version: int) -> None:
        """Refuse an SQLite database that some other program wrote."""
        app_id = int(self.conn.execute("PRAGMA application_id").fetchone()[0])
        if app_id == APPLICATION_ID:
            return
        tables = self.conn.execute(
            "SELECT count(*) FROM sqlite_master WHERE name NOT LIKE 'sqlite!_%' ESCAPE '!'"
        ).fetchone()[0]
        if version != 0 or tables:
            raise EnvironmentProblem(
                f"{self.location} is an SQLite database but not an ssdlab results store; "
                "choose another store path"
            )

    def write_error_reason(self, exc: BaseException) -> str:
        text = str(exc)
        if "full" in text:
            return "its disk is full"
        if "locked" in text or "busy" in text:
            return "another process kept it locked for 30 s"
        return f"SQLite: {text}"


def sqlite_open_error(path: Path, exc: sqlite3.Error) -> EnvironmentProblem:
    name = getattr(exc, "sqlite_errorname", "")
    if name == "SQLITE_NOTADB":
        return EnvironmentProblem(f"results store {path} is not an SQLite database")
    if name == "SQLITE_CORRUPT":
        return EnvironmentProblem(f"results store {path} is corrupt ({exc})")
    return EnvironmentProblem(f"cannot use results store {path}: {exc}")


# -- PostgreSQL ------------------------------------------------------------------------

_PG_TYPES = (
    (re.compile(r"\bINTEGER PRIMARY KEY\b"), "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY"),
    (re.compile(r"\bINTEGER\b"), "BIGINT"),
    (re.compile(r"\bREAL\b"), "DOUBLE PRECISION"),
    (re.compile(r"\bBLOB\b"), "BYTEA"),
)
_META = "ssdlab_meta"


def pg_ddl(statement: str) -> str:
    """A released SQLite DDL statement in PostgreSQL's types."""
    for pattern, replacement in _PG_TYPES:
        statement = pattern.sub(replacement, statement)
    return statement


@lru_cache(maxsize=512)
def pg_sql(sql: str) -> str:
    """``?`` placeholders as psycopg's ``%s`` (a literal ``%`` doubled)."""
    return sql.replace("%", "%%").replace("?", "%s")


def _psycopg() -> Any:
    try:
        import psycopg
    except ImportError:
        raise EnvironmentProblem(
            f"a PostgreSQL results store needs psycopg, which is not installed: {PG_HINT}"
        ) from None
    return psycopg


class PostgresDb(Db):
    name = "PostgreSQL"

    def __init__(self, location: StoreLocation, conn: Any, psycopg: Any) -> None:
        super().__init__(location)
        self.conn = conn
        self.integrity_errors = (psycopg.IntegrityError,)
        self.write_errors = (psycopg.OperationalError,)
        self.errors = (psycopg.Error,)

    @classmethod
    def open(cls, location: StoreLocation, *, read_only: bool = False) -> PostgresDb:
        psycopg = _psycopg()
        url = location.url or ""
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)
        extra: dict[str, Any] = {}
        if "connect_timeout" not in query:
            extra["connect_timeout"] = 10
        if "application_name" not in query:
            extra["application_name"] = "ssdlab"
        try:
            conn = psycopg.connect(url, autocommit=True, **extra)
        except psycopg.Error as exc:
            raise EnvironmentProblem(
                f"cannot use results store {location}: {pg_reason(exc)}") from None
        except ValueError as exc:  # psycopg's own URL checks
            raise EnvironmentProblem(f"results store {location}: {exc}") from None
        if read_only:
            conn.execute("SET default_transaction_read_only = on")
        return cls(location, conn, psycopg)

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        return self.conn.execute(pg_sql(sql), clean(params))

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        with self.conn.cursor() as cur:
            cur.executemany(pg_sql(sql), [clean(r) for r in rows])

    def insert_id(self, sql: str, params: Sequence[Any]) -> int:
        return int(self.execute(sql + " RETURNING id", params).fetchone()[0])

    @contextlib.contextmanager
    def tx(self) -> Iterator[Db]:
        with self.conn.transaction():
            yield self

    @contextlib.contextmanager
    def read(self) -> Iterator[Db]:
        self.conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        try:
            yield self
        finally:
            with contextlib.suppress(*self.errors):
                self.conn.execute("COMMIT")

    def close(self) -> None:
        self.conn.close()

    def ddl(self, statement: str) -> None:
        self.conn.execute(pg_ddl(statement))

    def _has_meta(self) -> bool:
        # a query of the catalog, not to_regclass(): after waiting for the migration lock,
        # a name lookup may still answer from this session's cache of the catalog
        row = self.conn.execute(
            "SELECT count(*) FROM pg_catalog.pg_tables WHERE schemaname = current_schema()"
            " AND tablename = %s", (_META,)).fetchone()
        return bool(row[0])

    def _meta(self, key: str) -> str | None:
        if not self._has_meta():
            return None
        row = self.conn.execute(f"SELECT value FROM {_META} WHERE key = %s", (key,)).fetchone()
        return None if row is None else str(row[0])

    def _set_meta(self, key: str, value: str) -> None:
        self.conn.execute(f"CREATE TABLE IF NOT EXISTS {_META} (key TEXT PRIMARY KEY,"
                          " value TEXT NOT NULL)")
        self.conn.execute(f"INSERT INTO {_META} (key, value) VALUES (%s, %s) ON CONFLICT (key)"
                          " DO UPDATE SET value = excluded.value", (key, value))

    def user_version(self) -> int:
        value = self._meta("schema_version")
        return int(value) if value is not None else 0

    def set_version(self, version: int) -> None:
        self._set_meta("schema_version", str(int(version)))

    def mark_ours(self) -> None:
        self._set_meta("application", APPLICATION)

    def check_ours(self, version: int) -> None:
        """Refuse a database (its current schema) that holds some other program's tables."""
        if self._meta("application") == APPLICATION:
            return
        tables = self.conn.execute(
            "SELECT count(*) FROM information_schema.tables"
            " WHERE table_schema = current_schema()").fetchone()[0]
        if version != 0 or tables:
            raise EnvironmentProblem(
                f"{self.location} is a PostgreSQL database with other tables, not an ssdlab "
                "results store; give ssdlab a database (or schema) of its own"
            )

    def lock_for_migration(self) -> None:
        self.conn.execute("SELECT pg_advisory_xact_lock(%s)", (APPLICATION_ID,))

    def write_error_reason(self, exc: BaseException) -> str:
        return f"PostgreSQL: {pg_reason(exc)}"


def pg_reason(exc: BaseException) -> str:
    """psycopg's message in one line (libpq's messages never carry the password)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return "; ".join(lines[:2]) if lines else type(exc).__name__


def open_db(location: StoreLocation, *, read_only: bool = False) -> Db:
    if location.is_postgresql:
        return PostgresDb.open(location, read_only=read_only)
    return SqliteDb.open(location, read_only=read_only)
