"""The command lines of a database run, as data: what ``--dry-run`` prints and what the
run executes are the same lists.

A run's private places (:class:`Layout`): a directory of its own under ``/run/ssdlab-db``
(a tmpfs) holds the mount point of the file system made on the target and each server's
socket directory; the servers' data and logs are on the target's file system (or in a work
directory under ``--dir``). The servers listen on those sockets only: MariaDB with
``skip-networking``, PostgreSQL with ``listen_addresses=''``; no TCP port is opened, and
neither reads the machine's own configuration (``--no-defaults``; PostgreSQL's
configuration lives in the private data directory).
"""

from __future__ import annotations

import os
import shlex
import signal
from dataclasses import dataclass
from pathlib import Path

from ssdlab.plan.db import (
    MEMORY_HEADROOM_BYTES,
    MIB,
    PGBENCH,
    SERVER_NAMES,
    SERVERS,
    SYSBENCH,
    DbOptions,
    Fitted,
    Sizes,
    buffer_bytes,
    log_bytes,
)
from ssdlab.units import format_bytes, format_duration

#: where every run's private directory is made (a tmpfs: nothing left after a reboot)
RUN_ROOT = Path(os.environ.get("SSDLAB_DB_RUN_DIR") or "/run/ssdlab-db")
SYSBENCH_DB = "sbtest"
PGBENCH_DB = "pgbench"
#: the port number in PostgreSQL's socket name (.s.PGSQL.5432 in the private directory)
PG_PORT = 5432
#: seconds between the tools' own interval reports
REPORT_INTERVAL_S = 1
#: the user each server runs as (Debian's packages make them)
USERS = {"mariadb": "mysql", "postgresql": "postgres"}
#: how each server is stopped: cleanly, and fast
STOP_SIGNALS = {"mariadb": signal.SIGTERM, "postgresql": signal.SIGINT}


@dataclass(frozen=True)
class Binaries:
    """The programs a run uses, found (or as the dry run names them)."""

    mariadbd: str = "mariadbd"
    install_db: str = "mariadb-install-db"
    mariadb: str = "mariadb"  # the client
    sysbench: str = "sysbench"
    postgres: str = "postgres"
    initdb: str = "initdb"
    psql: str = "psql"
    pgbench: str = "pgbench"


@dataclass(frozen=True)
class Layout:
    """A run's private places (see the module's documentation)."""

    base: Path  # /run/ssdlab-db/TOKEN: root's, 0711
    data_root: Path  # the target's file system mounted, or the work directory in --dir

    @property
    def mount(self) -> Path:
        return self.base / "mnt"

    def sock_dir(self, server: str) -> Path:
        return self.base / f"{server}-sock"

    def data_dir(self, server: str) -> Path:
        return self.data_root / server / "data"

    def log_path(self, server: str) -> Path:
        return self.data_root / server / "server.log"

    def mariadb_socket(self) -> Path:
        return self.sock_dir("mariadb") / "mysqld.sock"


def mariadb_settings(o: DbOptions, sizes: Sizes, fs_bytes: int) -> dict[str, str]:
    """MariaDB's settings as ssdlab starts it: the buffer pool the stated fraction of the
    dataset, data files with O_DIRECT, the redo log flushed at every commit (the safe
    default), no buffer pool kept across restarts; then the user's, which win."""
    mine = {
        "innodb_buffer_pool_size": str(buffer_bytes(o, SYSBENCH, sizes)),
        "innodb_flush_method": "O_DIRECT",
        "innodb_flush_log_at_trx_commit": "1",
        "innodb_doublewrite": "ON",
        "innodb_log_file_size": str(log_bytes(SYSBENCH, fs_bytes)),
        "innodb_buffer_pool_load_at_startup": "OFF",
        "innodb_buffer_pool_dump_at_shutdown": "OFF",
        "max_connections": str(o.threads + 20),
        "skip_name_resolve": "ON",
    }
    return {**mine, **o.server_options["mariadb"]}


def postgres_settings(o: DbOptions, sizes: Sizes, fs_bytes: int) -> dict[str, str]:
    """PostgreSQL's settings as ssdlab starts it: shared_buffers the stated fraction of the
    dataset, fsync and synchronous commit on (the defaults, said so), a WAL that fits the
    file system; then the user's, which win."""
    wal = log_bytes(PGBENCH, fs_bytes)
    mine = {
        "shared_buffers": f"{buffer_bytes(o, PGBENCH, sizes) // 1024}kB",
        "fsync": "on",
        "synchronous_commit": "on",
        "full_page_writes": "on",
        "max_wal_size": f"{wal // MIB}MB",
        "min_wal_size": f"{min(80, wal // MIB // 2)}MB",
        "max_connections": str(o.threads + 20),
    }
    return {**mine, **o.server_options["postgresql"]}


def mariadb_init(b: Binaries, lay: Layout) -> list[str]:
    return [b.install_db, "--no-defaults", f"--datadir={lay.data_dir('mariadb')}",
            "--user=mysql", "--auth-root-authentication-method=socket", "--skip-test-db"]


def mariadb_start(b: Binaries, lay: Layout, settings: dict[str, str]) -> list[str]:
    """mariadbd in the foreground as the mysql user (ssdlab starts it as that user)."""
    sock = lay.sock_dir("mariadb")
    return [b.mariadbd, "--no-defaults", f"--datadir={lay.data_dir('mariadb')}",
            f"--socket={lay.mariadb_socket()}", f"--pid-file={sock / 'mysqld.pid'}",
            "--skip-networking", f"--log-error={lay.log_path('mariadb')}",
            *(f"--{k}={v}" for k, v in settings.items())]


def mariadb_sql(b: Binaries, lay: Layout, sql: str) -> list[str]:
    return [b.mariadb, "--no-defaults", "-S", str(lay.mariadb_socket()), "-u", "root",
            "-N", "-B", "-e", sql]


def postgres_init(b: Binaries, lay: Layout) -> list[str]:
    """initdb as the postgres user: trust on the private socket only (its directory is
    the postgres user's, 0700: root and postgres can connect, nobody else)."""
    return [b.initdb, "-D", str(lay.data_dir("postgresql")), "-U", "postgres", "-A", "trust",
            "-E", "UTF8", "--no-locale", "--no-instructions"]


def postgres_start(b: Binaries, lay: Layout, settings: dict[str, str]) -> list[str]:
    """postgres in the foreground as the postgres user."""
    fixed = {"listen_addresses": "", "unix_socket_directories": str(lay.sock_dir("postgresql")),
             "port": str(PG_PORT)}
    argv = [b.postgres, "-D", str(lay.data_dir("postgresql"))]
    for k, v in {**settings, **fixed}.items():
        argv += ["-c", f"{k}={v}"]
    return argv


def psql(b: Binaries, lay: Layout, sql: str, db: str = "postgres") -> list[str]:
    return [b.psql, "-X", "-q", "-A", "-t", "-h", str(lay.sock_dir("postgresql")), "-p",
            str(PG_PORT), "-U", "postgres", "-d", db, "-c", sql]


def sysbench_base(b: Binaries, lay: Layout, mode: str, sizes: Sizes) -> list[str]:
    return [b.sysbench, mode, "--db-driver=mysql", f"--mysql-socket={lay.mariadb_socket()}",
            "--mysql-user=root", f"--mysql-db={SYSBENCH_DB}", f"--tables={sizes.tables}",
            f"--table-size={sizes.table_rows}"]


def sysbench_prepare(b: Binaries, lay: Layout, sizes: Sizes, threads: int) -> list[str]:
    """Load the tables (up to one thread per table, sysbench's parallel prepare)."""
    return [*sysbench_base(b, lay, "oltp_read_write", sizes),
            f"--threads={max(1, min(threads, sizes.tables))}", "prepare"]


def sysbench_run(b: Binaries, lay: Layout, mode: str, sizes: Sizes, threads: int,
                 seconds: float, *, measured: bool) -> list[str]:
    """A warm-up (``measured=False``) or the measured phase: interval reports every
    second, and the latency histogram with the 99th percentile."""
    argv = [*sysbench_base(b, lay, mode, sizes), f"--threads={threads}",
            f"--time={max(1, round(seconds))}", f"--report-interval={REPORT_INTERVAL_S}"]
    if measured:
        argv += ["--histogram=on", "--percentile=99"]
    return [*argv, "run"]


def pgbench_init(b: Binaries, lay: Layout, sizes: Sizes) -> list[str]:
    return [b.pgbench, "-h", str(lay.sock_dir("postgresql")), "-p", str(PG_PORT), "-U",
            "postgres", "-i", "-q", "-s", str(sizes.pgbench_scale), PGBENCH_DB]


PGBENCH_MODE_FLAGS = {"tpcb-like": [], "select-only": ["-S"], "simple-update": ["-N"]}


def pgbench_run(b: Binaries, lay: Layout, mode: str, threads: int, seconds: float,
                log_prefix: Path | None) -> list[str]:
    """A warm-up (no ``log_prefix``) or the measured phase, which logs every transaction
    (``-l``: the latencies the percentiles are read from)."""
    jobs = max(1, min(threads, os.cpu_count() or 1))
    argv = [b.pgbench, "-h", str(lay.sock_dir("postgresql")), "-p", str(PG_PORT), "-U",
            "postgres", *PGBENCH_MODE_FLAGS[mode], "-c", str(threads), "-j", str(jobs),
            "-T", str(max(1, round(seconds))), "-P", str(REPORT_INTERVAL_S), "-n"]
    if log_prefix is not None:
        argv += ["-l", f"--log-prefix={log_prefix}"]
    return [*argv, PGBENCH_DB]


def mkfs(fs: str, device: str) -> list[str]:
    if fs == "xfs":
        return ["mkfs.xfs", "-f", "-q", device]
    return ["mkfs.ext4", "-F", "-q", device]


def mount(fs: str, device: str, where: Path) -> list[str]:
    return ["mount", "-t", fs, "-o", "noatime", device, str(where)]


def shown(argv: list[str]) -> str:
    """A command line as a shell would take it."""
    return shlex.join(argv)


# -- a workload's commands, in the order the run runs them ---------------------------------


def memory_limit_bytes(o: DbOptions, workload: str, sizes: Sizes) -> int | None:
    """The memory cgroup's limit for the workload's server (None: no limit)."""
    if o.memory_limit == "off":
        return None
    if o.memory_limit == "auto":
        return buffer_bytes(o, workload, sizes) + MEMORY_HEADROOM_BYTES
    return int(o.memory_limit)


def _memory_text(o: DbOptions, workload: str, sizes: Sizes) -> str:
    limit = memory_limit_bytes(o, workload, sizes)
    if limit is None:
        return "no memory limit (--memory-limit off): the page cache may hold the data"
    return f"in a memory cgroup limited to {format_bytes(limit)}"


def settings_for(o: DbOptions, workload: str, fitted: Fitted) -> dict[str, str]:
    if workload == SYSBENCH:
        return mariadb_settings(o, fitted.sizes, fitted.fs_bytes)
    return postgres_settings(o, fitted.sizes, fitted.fs_bytes)


def server_init(b: Binaries, lay: Layout, workload: str) -> list[str]:
    """What makes the workload's server's data directory."""
    return mariadb_init(b, lay) if workload == SYSBENCH else postgres_init(b, lay)


def server_start(b: Binaries, lay: Layout, workload: str, settings: dict[str, str]
                 ) -> list[str]:
    """The workload's server in the foreground (started as its user)."""
    if workload == SYSBENCH:
        return mariadb_start(b, lay, settings)
    return postgres_start(b, lay, settings)


def tool_argv(o: DbOptions, b: Binaries, sizes: Sizes, lay: Layout, workload: str, mode: str,
              log_prefix: Path | None) -> tuple[list[str] | None, list[str]]:
    """The warm-up's command (None: no warm-up) and the measured phase's."""
    if workload == SYSBENCH:
        warm = sysbench_run(b, lay, mode, sizes, o.threads, o.warmup_seconds, measured=False)
        measure = sysbench_run(b, lay, mode, sizes, o.threads, o.seconds, measured=True)
    else:
        warm = pgbench_run(b, lay, mode, o.threads, o.warmup_seconds, None)
        measure = pgbench_run(b, lay, mode, o.threads, o.seconds,
                              log_prefix or lay.base / "pgbench-log" / "tx")
    return (warm if o.warmup_seconds > 0 else None), measure


def describe_workload(o: DbOptions, b: Binaries, f: Fitted, workload: str, lay: Layout
                      ) -> list[str]:
    """The dry run's lines of one workload: its server's commands, its load, each test's."""
    server = SERVERS[workload]
    user = USERS[server]
    start = server_start(b, lay, workload, settings_for(o, workload, f))
    lines = [f"-- {workload} on {SERVER_NAMES[server]} ({_memory_text(o, workload, f.sizes)})",
             f"$ {shown(server_init(b, lay, workload))}"
             + ("" if workload == SYSBENCH else f"    (as {user})"),
             f"$ {shown(start)} &    (as {user})"]
    if workload == SYSBENCH:
        lines += [f"$ {shown(mariadb_sql(b, lay, f'CREATE DATABASE {SYSBENCH_DB}'))}",
                  f"$ {shown(sysbench_prepare(b, lay, f.sizes, o.threads))}"]
    else:
        lines += [f"$ {shown(psql(b, lay, f'CREATE DATABASE {PGBENCH_DB}'))}",
                  f"$ {shown(pgbench_init(b, lay, f.sizes))}"]
    lines += ["stop the server; sync; echo 3 > /proc/sys/vm/drop_caches; start it again "
              "(cold: no buffer pool kept)"]
    for name, wl, mode in o.tests():
        if wl != workload:
            continue
        warm, measure = tool_argv(o, b, f.sizes, lay, workload, mode, None)
        lines.append(f"{name}:")
        if warm is not None:
            lines.append(f"$ {shown(warm)}    (warm-up, {format_duration(o.warmup_seconds)})")
        lines.append(f"$ {shown(measure)}    (measured, {format_duration(o.seconds)})")
    lines.append(f"stop the server (SIG{STOP_SIGNALS[server].name[3:]}); rm -rf "
                 f"{lay.data_dir(server).parent}")
    return lines
