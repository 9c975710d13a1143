"""The private database servers of ``ssdlab run db``: each workload's server
(:class:`WorkloadServer`) started as its own user in a memory cgroup, on the run's
workspace (run/dbworkspace.py), its settings read back as it reports them, and stopped
cleanly and its data removed when its tests end, also after Ctrl-C; what the host needs
for them (:func:`check_host`); the processes as their users, and the leftover server
processes of killed runs stopped (:func:`kill_server`).
"""

from __future__ import annotations

import contextlib
import errno
import os
import pwd
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from ssdlab.children import die_with_parent
from ssdlab.errors import EnvironmentProblem, UserError
from ssdlab.plan import dbcommands as cmd
from ssdlab.plan.db import SERVER_NAMES, SERVERS, SYSBENCH, DbOptions
from ssdlab.plan.dbcommands import STOP_SIGNALS, USERS, Binaries, Layout, shown

#: how long a server may take to start (InnoDB's first start makes its log files)
START_TIMEOUT_S = 300.0
#: how long a server may take to stop cleanly before it is killed
STOP_TIMEOUT_S = 120.0
SERVER_PROGRAMS = ("mariadbd", "mysqld", "postgres")

Say = Callable[[str], None]


@dataclass
class ServerRecord:
    """A server the run started: undone by stopping the process and removing the cgroup."""

    kind: str
    pid: int
    cgroup: str | None = None


# -- memory cgroups --------------------------------------------------------------------


def cgroup_root() -> Path | None:
    """The memory controller's hierarchy: cgroup v2 with memory, or v1's memory one."""
    unified = Path("/sys/fs/cgroup")
    controllers = unified / "cgroup.controllers"
    if controllers.exists():
        if "memory" in controllers.read_text(encoding="ascii").split():
            return unified
        return None
    v1 = unified / "memory"
    return v1 if (v1 / "memory.limit_in_bytes").exists() else None


def make_cgroup(name: str, limit_bytes: int) -> Path:
    """A memory cgroup limited to ``limit_bytes`` (EnvironmentProblem when there is none)."""
    root = cgroup_root()
    if root is None:
        raise EnvironmentProblem("--memory-limit: this machine has no memory cgroup "
                                 "controller; give --memory-limit off")
    path = root / name
    path.mkdir(exist_ok=True)
    limit_file = "memory.max" if (path / "memory.max").exists() else "memory.limit_in_bytes"
    (path / limit_file).write_text(f"{limit_bytes}\n", encoding="ascii")
    return path


def remove_cgroup(path: str) -> None:
    """Remove an (empty) cgroup; a cgroup that still holds processes is left alone."""
    with contextlib.suppress(OSError):
        os.rmdir(path)


# -- processes as another user -------------------------------------------------------------


#: what a server gets when ssdlab dies: PostgreSQL's immediate shutdown (SIGQUIT) still
#: removes its shared memory segments in /dev/shm, which SIGKILL would leave behind
DEATH_SIGNALS = {"postgres": signal.SIGQUIT}


def as_user(user: str, cgroup: Path | None = None) -> Callable[[], None]:
    """A child's setup before exec: into ``cgroup`` (while still root), then ``user``'s
    groups and ids, then stopped with ssdlab (set after the ids change: that clears it)."""
    entry = pwd.getpwnam(user)
    procs = None if cgroup is None else str(cgroup / "cgroup.procs")
    death = DEATH_SIGNALS.get(user, signal.SIGKILL)

    def setup() -> None:
        if procs is not None:
            with open(procs, "w", encoding="ascii") as fh:
                fh.write(f"{os.getpid()}\n")
        os.setgroups([])
        os.setgid(entry.pw_gid)
        os.setuid(entry.pw_uid)
        die_with_parent(death)
    return setup


def user_exists(user: str) -> bool:
    try:
        pwd.getpwnam(user)
    except KeyError:
        return False
    return True


def unreachable_by(path: Path, user: str) -> Path | None:
    """The first directory above ``path`` that ``user`` cannot pass through (None: it can
    reach ``path``)."""
    entry = pwd.getpwnam(user)
    for parent in reversed(path.resolve().parents):
        if not parent.exists():
            break  # made by the run, passable (0711)
        st = parent.stat()
        if st.st_uid == entry.pw_uid:
            allowed = st.st_mode & 0o100
        elif st.st_gid == entry.pw_gid:
            allowed = st.st_mode & 0o010
        else:
            allowed = st.st_mode & 0o001
        if not allowed:
            return parent
    return None


def chown_tree(path: Path, user: str) -> None:
    entry = pwd.getpwnam(user)
    os.chown(path, entry.pw_uid, entry.pw_gid)


def run_checked(argv: list[str], what: str, *, user: str | None = None,
                timeout_s: float = 600.0, env: dict[str, str] | None = None
                ) -> subprocess.CompletedProcess[str]:
    """Run a command to its end; a one-line EnvironmentProblem naming ``what`` when it
    fails."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s,
                              check=False, preexec_fn=as_user(user) if user else die_with_parent,
                              env=env, cwd="/")
    except FileNotFoundError:
        raise EnvironmentProblem(f"{what}: {argv[0]} not found") from None
    except subprocess.TimeoutExpired:
        raise EnvironmentProblem(f"{what}: {shown(argv)} did not finish in {timeout_s:.0f} s"
                                 ) from None
    if done.returncode != 0:
        lines = [ln for ln in (done.stderr + done.stdout).splitlines() if ln.strip()]
        why = lines[-1].strip() if lines else f"exit status {done.returncode}"
        raise EnvironmentProblem(f"{what} failed: {why[:300]}")
    return done

def _process_name(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text(encoding="ascii").strip()
    except OSError:
        return ""


def kill_server(pid: int, say: Say, *, wait_s: float = 30.0) -> None:
    """Stop a leftover server process at once (it is a server only if its name says so: a
    pid reused by another program is left alone)."""
    if _process_name(pid) not in SERVER_PROGRAMS:
        return
    name = _process_name(pid)
    say(f"stopping server process {pid} ({name})")
    first = DEATH_SIGNALS.get(name, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, first)
    if first != signal.SIGKILL:  # its own quick way out first, then no more waiting
        end = time.monotonic() + wait_s / 3
        while time.monotonic() < end and _process_name(pid) in SERVER_PROGRAMS:
            time.sleep(0.05)
        with contextlib.suppress(ProcessLookupError):
            if _process_name(pid) in SERVER_PROGRAMS:
                os.kill(pid, signal.SIGKILL)
    end = time.monotonic() + wait_s
    while time.monotonic() < end and _process_name(pid) in SERVER_PROGRAMS:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
        time.sleep(0.05)


# -- one server ----------------------------------------------------------------------------


@dataclass
class ServerProcess:
    """A running server (a child of ssdlab, as its own user)."""

    kind: str
    argv: list[str]
    process: subprocess.Popen[bytes]
    log: Path
    started_at: float

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self, sig: int, say: Say) -> float:
        """Stop it with ``sig`` (a clean shutdown), killed after :data:`STOP_TIMEOUT_S`;
        the seconds it took."""
        start = time.monotonic()
        if self.alive():
            with contextlib.suppress(ProcessLookupError):
                self.process.send_signal(sig)
            try:
                self.process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                say(f"warning: the {self.kind} server did not stop in {STOP_TIMEOUT_S:.0f} s; "
                    "killing it")
                self.process.kill()
                self.process.wait()
        return time.monotonic() - start

    def log_tail(self, lines: int = 3) -> str:
        try:
            text = self.log.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return " | ".join(ln.strip() for ln in text.splitlines()[-lines:] if ln.strip())


def start_server(kind: str, argv: list[str], user: str, log: Path, cgroup: Path | None,
                 ready: Callable[[], bool]) -> ServerProcess:
    """Start ``argv`` as ``user`` (output to ``log``) and wait until ``ready()``; a
    one-line EnvironmentProblem with the server's last log lines when it does not come up."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        try:
            # a session of its own: Ctrl-C at the terminal reaches ssdlab, which stops the
            # server cleanly, not the server itself
            process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out,
                                       stderr=subprocess.STDOUT, start_new_session=True,
                                       preexec_fn=as_user(user, cgroup), cwd="/")
        except FileNotFoundError:
            raise EnvironmentProblem(f"{argv[0]} not found") from None
    server = ServerProcess(kind, argv, process, log, time.time())
    end = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < end:
        if not server.alive():
            raise EnvironmentProblem(f"the {kind} server stopped while starting (exit status "
                                     f"{process.returncode}): {server.log_tail()}")
        if ready():
            return server
        time.sleep(0.1)
    server.stop(signal.SIGKILL, lambda _m: None)
    raise EnvironmentProblem(f"the {kind} server did not start in {START_TIMEOUT_S:.0f} s: "
                             f"{server.log_tail()}")


def socket_answers(path: Path) -> bool:
    """A Unix socket at ``path`` accepts a connection."""
    import socket
    if not path.exists():
        return False
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(1.0)
        try:
            s.connect(str(path))
        except OSError as exc:
            if exc.errno in (errno.ECONNREFUSED, errno.ENOENT, errno.EAGAIN):
                return False
            raise
    return True


def du_bytes(path: Path) -> int:
    """Bytes allocated under ``path`` (what ``du`` counts), as root sees them."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
    return total


# -- what the host needs -------------------------------------------------------------------


def check_host(o: DbOptions, fs: str | None) -> None:
    """Root, each server's user, ``mkfs.FS`` (when the run makes ``fs``), sockets its
    users can reach, a memory cgroup controller when the servers are limited: a one-line
    error naming the first that is missing."""
    if os.geteuid() != 0:
        raise UserError("ssdlab run db needs root: it makes a file system, mounts it and "
                        "starts the servers as their own users")
    for workload in o.workloads:
        user = USERS[SERVERS[workload]]
        if not user_exists(user):
            raise EnvironmentProblem(f"there is no {user} user for the "
                                     f"{SERVER_NAMES[SERVERS[workload]]} server: install its "
                                     "Debian package")
    if fs is not None and shutil.which(f"mkfs.{fs}") is None:
        package = "xfsprogs" if fs == "xfs" else "e2fsprogs"
        raise EnvironmentProblem(f"mkfs.{fs} not found: install {package}")
    for workload in o.workloads:
        user = USERS[SERVERS[workload]]
        closed = unreachable_by(cmd.RUN_ROOT / "x", user)
        if closed is not None:
            raise EnvironmentProblem(f"the {user} user cannot pass through {closed}, where "
                                     "the servers' sockets go (SSDLAB_DB_RUN_DIR)")
    if o.memory_limit != "off" and cgroup_root() is None:
        raise EnvironmentProblem("--memory-limit: this machine has no memory cgroup "
                                 "controller; give --memory-limit off")


# -- a workload's server, from its start to its removal ------------------------------------


class ServerBook(Protocol):
    """The run's workspace as a server uses it (run/dbworkspace.py): where its places are,
    and what the run has to undo if it is killed."""

    @property
    def layout(self) -> Layout: ...

    @property
    def token(self) -> str: ...

    def server_dirs(self, server: str, user: str) -> None: ...

    def remove_server_data(self, server: str) -> None: ...

    def add_server(self, record: ServerRecord) -> None: ...

    def add_cgroup(self, path: str) -> None: ...

    def drop_server(self, pid: int) -> None: ...


class WorkloadServer:
    """One workload's private server on the run's workspace: :meth:`open` makes its
    directories and memory cgroup (``limit``: None, no limit), initialises it, starts it
    and reads its settings back; :meth:`close` stops it (cleanly, also after Ctrl-C) and
    removes its data and cgroup."""

    def __init__(self, workload: str, binaries: Binaries, settings: dict[str, str],
                 limit: int | None, book: ServerBook, say: Say) -> None:
        self.workload = workload
        self.kind = SERVERS[workload]
        self.name = SERVER_NAMES[self.kind]
        self.user = USERS[self.kind]
        self.binaries, self.settings, self.limit = binaries, settings, limit
        self.book, self.say = book, say
        self.process: ServerProcess | None = None
        self.cgroup: Path | None = None
        #: the settings as the running server reports them
        self.reported: dict[str, str] = {}

    def make_places(self) -> None:
        """Its directories, and its memory cgroup when it is limited."""
        self.book.server_dirs(self.kind, self.user)
        if self.limit is not None:
            name = f"ssdlab-db-{self.book.token}-{self.kind}"
            self.cgroup = make_cgroup(name, self.limit)
            self.book.add_cgroup(str(self.cgroup))

    def open(self) -> list[str]:
        """Initialised, started and its settings read: the initialising command."""
        init = self._init()
        self.start()
        self.reported = self._read_settings()
        return init

    def close(self) -> None:
        self.stop()
        self.book.remove_server_data(self.kind)
        if self.cgroup is not None:
            remove_cgroup(str(self.cgroup))

    def alive(self) -> bool:
        return self.process is not None and self.process.alive()

    def log_tail(self) -> str:
        return self.process.log_tail() if self.process else ""

    def _init(self) -> list[str]:
        argv = cmd.server_init(self.binaries, self.book.layout, self.workload)
        if self.workload == SYSBENCH:
            run_checked(argv, "initialising MariaDB (mariadb-install-db)")
        else:
            run_checked(argv, "initialising PostgreSQL (initdb)", user=self.user)
        return argv

    def start_argv(self) -> list[str]:
        return cmd.server_start(self.binaries, self.book.layout, self.workload, self.settings)

    def start(self) -> None:
        lay = self.book.layout
        sock = (lay.mariadb_socket() if self.workload == SYSBENCH
                else lay.sock_dir(self.kind) / f".s.PGSQL.{cmd.PG_PORT}")
        self.process = start_server(
            self.kind, self.start_argv(), self.user, lay.log_path(self.kind),
            self.cgroup, lambda: socket_answers(sock) and self._answers())
        self.book.add_server(ServerRecord(self.kind, self.process.pid,
                                          str(self.cgroup) if self.cgroup else None))

    def _answers(self) -> bool:
        try:
            self.sql("SELECT 1")
        except EnvironmentProblem:
            return False
        return True

    def sql(self, sql: str, db: str = "postgres") -> str:
        b, lay = self.binaries, self.book.layout
        argv = (cmd.mariadb_sql(b, lay, sql) if self.workload == SYSBENCH
                else cmd.psql(b, lay, sql, db))
        return run_checked(argv, f"{self.name}: {sql[:40]}", timeout_s=120).stdout

    def stop(self) -> None:
        if self.process is None:
            return
        seconds = self.process.stop(STOP_SIGNALS[self.kind], self.say)
        self.book.drop_server(self.process.pid)
        self.say(f"{self.workload}: {self.name} stopped in {seconds:.1f} s")
        self.process = None

    def _read_settings(self) -> dict[str, str]:
        """Every setting that matters, as the running server reports it."""
        if self.workload == SYSBENCH:
            names = sorted({*self.settings, "version", "innodb_page_size", "log_bin",
                            "skip_networking", "port", "socket",
                            "sync_binlog", "innodb_io_capacity", "innodb_log_buffer_size",
                            "innodb_flush_neighbors"} - {"skip_name_resolve"})
            quoted = ",".join(f"'{n}'" for n in names)
            text = self.sql(f"SHOW GLOBAL VARIABLES WHERE Variable_name IN ({quoted})")
            pairs = [ln.split("\t", 1) for ln in text.splitlines() if "\t" in ln]
        else:
            names = sorted({*self.settings, "server_version", "wal_sync_method", "wal_level",
                            "listen_addresses", "unix_socket_directories", "port",
                            "checkpoint_timeout", "data_checksums", "effective_io_concurrency"})
            quoted = ",".join(f"'{n}'" for n in names)
            text = self.sql("SELECT name, setting || coalesce(' ' || unit, '') FROM "
                            f"pg_settings WHERE name IN ({quoted}) ORDER BY name")
            pairs = [ln.split("|", 1) for ln in text.splitlines() if "|" in ln]
        return {k.strip(): v.strip() for k, v in pairs}
