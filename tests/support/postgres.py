"""A private PostgreSQL server for the tests: Debian's binaries, a data directory and a
Unix socket of its own under /tmp (no TCP port), removed afterwards.

``initdb`` refuses root, so the server runs as the ``postgres`` user the Debian package
made. Its durability is off (``fsync=off``, and ``synchronous_commit=off`` unless
``durable``, for a test that crashes the server): these servers hold only test data,
and the tests check ssdlab's transactions, not the disk. Each test takes a fresh database
(:meth:`PgServer.new_database`), so the store tests see an empty one as SQLite tests
see a new file.
"""

from __future__ import annotations

import contextlib
import glob
import itertools
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

START_TIMEOUT_S = 60


def pg_bindir() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                   key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit() else 0)
    return Path(found[-1]).parent if found else None


def why_no_postgres() -> str | None:
    """Why a test server cannot be started here (None: it can)."""
    if os.geteuid() != 0:
        return "needs root (to run PostgreSQL as its own user)"
    if pg_bindir() is None:
        return "PostgreSQL is not installed (make setup installs it)"
    try:
        pwd.getpwnam("postgres")
    except KeyError:
        return "there is no postgres user (make setup installs PostgreSQL)"
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "psycopg is not installed (make setup installs it)"
    return None


class PgServer:
    """One running test server; :meth:`url` of a database on its socket."""

    def __init__(self, *, durable: bool = False) -> None:
        #: commits survive the server's crash (not the machine's): synchronous_commit on
        self.durable = durable
        bindir = pg_bindir()
        assert bindir is not None
        self.bindir = bindir
        self.root = Path(tempfile.mkdtemp(prefix="ssdlab-pg-"))
        self.root.chmod(0o711)
        self.data = self.root / "data"
        self.sock = self.root / "sock"
        user = pwd.getpwnam("postgres")
        for d in (self.data, self.sock):
            d.mkdir(mode=0o700)
            os.chown(d, user.pw_uid, user.pw_gid)
        self._names = itertools.count(1)
        self.started = False

    def _as_postgres(self, *argv: str | Path, timeout: float = START_TIMEOUT_S) -> None:
        proc = subprocess.run([str(a) for a in argv], user="postgres", group="postgres",
                              cwd=self.root, capture_output=True, text=True, timeout=timeout,
                              check=False)
        if proc.returncode != 0:
            raise RuntimeError(f"{argv[0]} failed ({proc.returncode}): "
                               f"{proc.stderr.strip() or proc.stdout.strip()}")

    def start(self) -> PgServer:
        """Start the server (made on the first start)."""
        if not (self.data / "PG_VERSION").exists():
            self._as_postgres(self.bindir / "initdb", "-D", str(self.data), "-U", "postgres",
                              "--auth=trust", "--locale=C", "-E", "UTF8", "--no-sync")
        options = (f"-c listen_addresses='' -k {self.sock} -c fsync=off "
                   f"-c synchronous_commit={'on' if self.durable else 'off'} "
                   "-c full_page_writes=off -c max_connections=200")
        self._as_postgres(self.bindir / "pg_ctl", "-D", str(self.data), "-o", options,
                          "-l", str(self.data / "server.log"), "-w", "-t",
                          str(START_TIMEOUT_S), "start")
        self.started = True
        return self

    def url(self, database: str = "postgres", user: str = "postgres") -> str:
        return f"postgresql://{user}@/{database}?host={self.sock}"

    def sql(self, statement: str, database: str = "postgres") -> list[tuple[object, ...]]:
        """Run one statement as the superuser; its rows (none for DDL)."""
        import psycopg
        with psycopg.connect(self.url(database), autocommit=True) as conn:
            cur = conn.execute(statement.encode())
            return list(cur.fetchall()) if cur.description else []

    def new_database(self) -> str:
        """A fresh empty database's URL."""
        name = f"t{os.getpid()}_{next(self._names)}"
        self.sql(f"CREATE DATABASE {name} TEMPLATE template0")
        return self.url(name)

    def password_database(self, password: str) -> tuple[str, str, str]:
        """A fresh empty database owned by a new role that must log in with ``password``
        (scram-sha-256 on the socket; every other role stays trusted): (its name, the
        role, the socket directory). The caller puts the password where it wants it."""
        number = next(self._names)
        name, role = f"t{os.getpid()}_{number}", f"lab{os.getpid()}_{number}"
        self.sql(f"CREATE ROLE {role} LOGIN PASSWORD '{password}'")
        self.sql(f"CREATE DATABASE {name} OWNER {role} TEMPLATE template0")
        hba = self.data / "pg_hba.conf"
        hba.write_text(f"local all {role} scram-sha-256\n" + hba.read_text())
        self._as_postgres(self.bindir / "pg_ctl", "-D", str(self.data), "reload")
        _wait_for_login_refused(self.url(name, role))
        return name, role, str(self.sock)

    def stop_server(self) -> None:
        """Stop the server at once (as a crash would), keeping its data."""
        if self.started:
            with contextlib.suppress(RuntimeError, subprocess.TimeoutExpired):
                self._as_postgres(self.bindir / "pg_ctl", "-D", str(self.data), "-m",
                                  "immediate", "-w", "stop")
            self.started = False
            _wait_gone(self.data / "postmaster.pid")

    def stop(self) -> None:
        """Stop the server and remove everything of it."""
        self.stop_server()
        shutil.rmtree(self.root, ignore_errors=True)


def _wait_for_login_refused(url: str, timeout: float = 30.0) -> None:
    """Until the server, reloaded, asks ``url``'s role for a password (a reload is
    asynchronous: the postmaster rereads pg_hba.conf when the signal arrives)."""
    import psycopg
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            psycopg.connect(url, connect_timeout=5).close()
        except psycopg.OperationalError:
            return
        time.sleep(0.05)
    raise RuntimeError(f"the server still lets {url} in without a password")


def _wait_gone(pidfile: Path, timeout: float = 10.0) -> None:
    end = time.monotonic() + timeout
    while pidfile.exists() and time.monotonic() < end:
        time.sleep(0.05)


@contextlib.contextmanager
def pg_server(*, durable: bool = False) -> Iterator[PgServer]:
    why = why_no_postgres()
    if why:
        pytest.skip(why)
    server = PgServer(durable=durable)
    try:
        yield server.start()
    finally:
        server.stop()
