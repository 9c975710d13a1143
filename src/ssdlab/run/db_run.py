"""Run the database benchmarks: for each workload a private server on the target, its
dataset loaded, caches dropped and the server restarted cold, then each of its tests
warmed up and measured by the tool's own reports; the server stopped and its data removed
before the next workload, the workspace at the end (run/dbserver.py).

Every phase is stored as it completes (the server's settings, the load with the dataset
it made, each warm-up and each measured phase with the tool's output verbatim), so a run
that is stopped keeps what it finished.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import glob
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ssdlab.children import die_with_parent
from ssdlab.engine.dboutput import DbOutputError
from ssdlab.engine.pgbench import parse_pgbench, read_transaction_logs
from ssdlab.engine.sysbench import histogram_percentile, parse_sysbench
from ssdlab.errors import EnvironmentProblem, TargetError, UserError
from ssdlab.plan import db as plan
from ssdlab.plan import dbcommands as cmd
from ssdlab.plan.db import (
    FS_USABLE,
    MEMORY_HEADROOM_BYTES,
    PGBENCH,
    SERVER_NAMES,
    SERVERS,
    SYSBENCH,
    DatasetRecord,
    DbArgs,
    DbOptions,
    DbResult,
    Fitted,
    SecondPoint,
    Sizes,
    buffer_bytes,
)
from ssdlab.plan.dbcommands import Binaries, Layout, shown
from ssdlab.plan.planned import PlannedTime
from ssdlab.plan.suite import stored_plan
from ssdlab.run import dbserver
from ssdlab.run.dbserver import ServerProcess, ServerRecord, Workspace
from ssdlab.run.prepare import PreparedTarget, TargetRequest, checked_versions, prepare_target
from ssdlab.run.progress import Progress
from ssdlab.run.session import SessionRun, TestFailed, recorded_ending
from ssdlab.run.suite import PreparedSuite, Runner
from ssdlab.store.db import Store
from ssdlab.store.records import FioRecord, RunData
from ssdlab.targets.identity import TargetInfo, host_info
from ssdlab.targets.workdir import DirInfo, describe_dir, drop_caches
from ssdlab.units import format_bytes, format_duration

#: the user each server runs as (Debian's packages make them)
USERS = {"mariadb": "mysql", "postgresql": "postgres"}
#: a tool may run this much longer than asked before it is stopped as stuck
TOOL_GRACE_S = 300.0
#: pgbench logs every transaction of the measured phase; past this many the log is sampled
MAX_LOGGED_TRANSACTIONS = 5_000_000
STOP_SIGNALS = {"mariadb": signal.SIGTERM, "postgresql": signal.SIGINT}  # clean, fast


# -- checks before anything is touched -----------------------------------------------------


def _which(name: str, dirs: list[str] | None) -> str | None:
    if dirs is None:
        return shutil.which(name) or shutil.which(name, path="/usr/sbin:/usr/bin:/sbin")
    return shutil.which(name, path=os.pathsep.join(dirs))


def pg_bindir(given: str | None) -> str | None:
    """PostgreSQL's programs: ``--pg-bindir``, else the newest /usr/lib/postgresql/*/bin."""
    if given is not None:
        return given
    found = glob.glob("/usr/lib/postgresql/*/bin")

    def version(path: str) -> tuple[int, ...]:
        return tuple(int(x) for x in re.findall(r"\d+", path.split("/")[-2]))
    return max(found, key=version) if found else None


def find_binaries(o: DbOptions, args: DbArgs) -> Binaries:
    """Every program the chosen workloads need: a one-line error naming the first one
    missing (a usage error when an option names where it should be, else the package it
    comes from)."""
    found: dict[str, str] = {}
    if SYSBENCH in o.workloads:
        found.update(_mariadb_binaries(args))
    if PGBENCH in o.workloads:
        found.update(_postgres_binaries(args))
    return Binaries(**found)


def _mariadb_binaries(args: DbArgs) -> dict[str, str]:
    found = {}
    mdirs = [args.mariadb_bindir] if args.mariadb_bindir else None
    for key, name, package in (("mariadbd", "mariadbd", "mariadb-server"),
                               ("install_db", "mariadb-install-db", "mariadb-server"),
                               ("mariadb", "mariadb", "mariadb-client")):
        path = _which(name, mdirs)
        if path is None and mdirs:  # the option names a directory without it
            raise UserError(f"--mariadb-bindir {args.mariadb_bindir}: no {name} there")
        if path is None:
            raise EnvironmentProblem(f"{name} not found on the PATH or in /usr/sbin: "
                                     f"install {package} (Debian) or give --mariadb-bindir")
        found[key] = path
    sysbench = shutil.which(args.sysbench)
    if sysbench is None and args.sysbench != DbArgs.sysbench:
        raise UserError(f"--sysbench {args.sysbench}: not found, or not a program")
    if sysbench is None:
        raise EnvironmentProblem("sysbench not found: install sysbench (Debian) or give "
                                 "--sysbench PATH")
    found["sysbench"] = sysbench
    return found


def _postgres_binaries(args: DbArgs) -> dict[str, str]:
    found = {}
    bindir = pg_bindir(args.pg_bindir)
    for name in ("postgres", "initdb", "psql", "pgbench"):
        path = _which(name, [bindir]) if bindir else None
        if path is None and args.pg_bindir is not None:
            raise UserError(f"--pg-bindir {args.pg_bindir}: no {name} there")
        if path is None:
            where = f"in {bindir}" if bindir else "(no /usr/lib/postgresql/*/bin)"
            raise EnvironmentProblem(f"PostgreSQL's {name} not found {where}: install "
                                     "postgresql (Debian) or give --pg-bindir")
        found[name] = path
    return found


def _version(argv: list[str], pattern: str) -> str:
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False,
                             preexec_fn=die_with_parent).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ""
    match = re.search(pattern, out)
    return match.group(1) if match else out.strip()[:80]


def tool_versions(o: DbOptions, b: Binaries) -> dict[str, str]:
    """The servers' and tools' versions, as they report them."""
    out = {}
    if SYSBENCH in o.workloads:
        out["mariadb"] = _version([b.mariadbd, "--version"], r"Ver\s+(\d[\w.]*?)-MariaDB")
        out["sysbench"] = _version([b.sysbench, "--version"], r"sysbench\s+(\S+)")
    if PGBENCH in o.workloads:
        out["postgresql"] = _version([b.postgres, "--version"], r"\)\s+(\d[\w.]*)")
        out["pgbench"] = _version([b.pgbench, "--version"], r"\)\s+(\d[\w.]*)")
    return out


@dataclass(frozen=True)
class PreparedDb(PreparedSuite[DbOptions]):
    """A database run, checked: the target (a device, or ``dir``), the validated options,
    the dataset fitted to it, the programs."""

    args: DbArgs
    dir: DirInfo | None
    fitted: Fitted
    binaries: Binaries
    tools: dict[str, str]
    leftovers: tuple[str, ...] = ()  # killed runs' leftovers (the dry run names them)


def _check_host(o: DbOptions, fs: str | None) -> None:
    if os.geteuid() != 0:
        raise UserError("ssdlab run db needs root: it makes a file system, mounts it and "
                        "starts the servers as their own users")
    for workload in o.workloads:
        user = USERS[SERVERS[workload]]
        if not dbserver.user_exists(user):
            raise EnvironmentProblem(f"there is no {user} user for the "
                                     f"{SERVER_NAMES[SERVERS[workload]]} server: install its "
                                     "Debian package")
    if fs is not None and shutil.which(f"mkfs.{fs}") is None:
        package = "xfsprogs" if fs == "xfs" else "e2fsprogs"
        raise EnvironmentProblem(f"mkfs.{fs} not found: install {package}")
    for workload in o.workloads:
        user = USERS[SERVERS[workload]]
        closed = dbserver.unreachable_by(cmd.RUN_ROOT / "x", user)
        if closed is not None:
            raise EnvironmentProblem(f"the {user} user cannot pass through {closed}, where "
                                     "the servers' sockets go (SSDLAB_DB_RUN_DIR)")
    if o.memory_limit != "off" and dbserver.cgroup_root() is None:
        raise EnvironmentProblem("--memory-limit: this machine has no memory cgroup "
                                 "controller; give --memory-limit off")


def _device_target(request: TargetRequest) -> PreparedTarget:
    base = prepare_target(request.device(), None, request.destroy_data, request.fio)
    if base.info.kind != "block":
        raise TargetError(f"--target {base.info.path} is not a block device: ssdlab run db "
                          "makes a file system on a device (a loop device over a file works: "
                          "losetup --show -f FILE), or give --dir on a mounted file system")
    return base


def _dir_target(request: TargetRequest) -> tuple[PreparedTarget, DirInfo]:
    if request.destroy_data is not False:
        raise UserError("--destroy-data applies to --target; --dir needs none")
    info = describe_dir(request.dir or "")
    for user in USERS.values():
        closed = dbserver.unreachable_by(Path(info.path) / "x", user) \
            if dbserver.user_exists(user) else None
        if closed is not None:
            raise TargetError(f"--dir {info.path}: the {user} user cannot pass through "
                              f"{closed} (its mode is {closed.stat().st_mode & 0o777:o})")
    if info.network:
        raise TargetError(f"--dir {info.path} is on a network share ({info.fs_type}): the "
                          "servers' data must be on a local file system")
    target = TargetInfo(path=info.path, kind="directory", name=os.path.basename(info.path),
                        device_class="directory", model=None, serial=None, firmware=None,
                        capacity_bytes=info.free_bytes, logical_sector_bytes=512,
                        physical_sector_bytes=512, rotational=None, numa_node=None,
                        scheduler=None, discard_max_bytes=None, details={"dir": info.to_dict()})
    return PreparedTarget(target, False, host_info(), checked_versions(request.fio)), info


def prepare_db(request: TargetRequest, args: DbArgs) -> PreparedDb:
    """Everything checked before anything is touched; a one-line error otherwise. What
    killed runs left is cleaned up first (not in a dry run), so that their mount does not
    hold the target."""
    o = plan.build_options(args)
    if (request.target is None) == (request.dir is None):
        raise UserError("give exactly one of --target DEVICE (a file system is made on it) "
                        "and --dir DIR (a directory on a mounted file system)")
    _check_host(o, o.fs if request.dir is None else None)
    binaries = find_binaries(o, args)
    left = tuple(s.token for s in dbserver.leftovers())
    if left and not request.dry_run:
        dbserver.clean_leftovers(print)
        left = ()
    if request.dir is None:
        target, directory = _device_target(request), None
        fs_bytes = int(target.info.capacity_bytes * FS_USABLE)
        where = f"{target.info.path}'s file system"
    else:
        target, directory = _dir_target(request)
        fs_bytes = int(directory.free_bytes * 0.9)
        where = f"--dir {directory.path} ({format_bytes(directory.free_bytes)} free)"
    fitted = plan.fit(o, fs_bytes, where)
    tools = tool_versions(o, binaries)
    versions = {**target.versions, **tools}
    target = dataclasses.replace(target, versions=versions)
    return PreparedDb(target, o, args, directory, fitted, binaries, tools, left)


# -- the dry run ---------------------------------------------------------------------------


def _memory_text(o: DbOptions, workload: str, sizes: Sizes) -> str:
    limit = memory_limit_bytes(o, workload, sizes)
    if limit is None:
        return "no memory limit (--memory-limit off): the page cache may hold the data"
    return f"in a memory cgroup limited to {format_bytes(limit)}"


def memory_limit_bytes(o: DbOptions, workload: str, sizes: Sizes) -> int | None:
    if o.memory_limit == "off":
        return None
    if o.memory_limit == "auto":
        return buffer_bytes(o, workload, sizes) + MEMORY_HEADROOM_BYTES
    return int(o.memory_limit)


def settings_for(o: DbOptions, workload: str, fitted: Fitted) -> dict[str, str]:
    if workload == SYSBENCH:
        return cmd.mariadb_settings(o, fitted.sizes, fitted.fs_bytes)
    return cmd.postgres_settings(o, fitted.sizes, fitted.fs_bytes)


def planned(p: PreparedDb) -> PlannedTime:
    """Each test's warm-up and measured time; each database's loading (its dataset, as
    fast as the drive and the server go) and the servers' start-ups."""
    o, f = p.options, p.fitted
    out = PlannedTime.fixed(len(o.tests()) * (o.warmup_seconds + o.seconds))
    for workload in o.workloads:
        out += PlannedTime.io(f.sizes.dataset_bytes(workload), "loading the datasets")
    return out + PlannedTime.step("starting and restarting the servers")


def describe(p: PreparedDb) -> str:
    """``--dry-run``: every command, in order; nothing is touched."""
    o, f = p.options, p.fitted
    info = p.target.info
    lay = Layout(cmd.RUN_ROOT / "TOKEN", cmd.RUN_ROOT / "TOKEN" / "mnt")
    lines = [f"DRY RUN: nothing will be written. Plan for {info.path} ({info.device_class}, "
             f"{format_bytes(info.capacity_bytes)}{' free' if p.dir else ''})",
             *plan.describe_sizes(o, f),
             "versions: " + ", ".join(f"{k} {v}" for k, v in p.tools.items())]
    if p.leftovers:
        lines.append(f"would first clean up what killed runs left: {', '.join(p.leftovers)}")
    if p.dir is None:
        lines += [f"$ {shown(cmd.mkfs(o.fs, info.path))}",
                  f"$ {shown(cmd.mount(o.fs, info.path, lay.mount))}"]
    else:
        lay = Layout(lay.base, Path(p.dir.path) / "ssdlab-db-TOKEN")
        lines.append(f"$ mkdir {lay.data_root}")
    for workload in o.workloads:
        lines += _describe_workload(p, workload, lay)
    lines.append(f"$ umount {lay.mount}" if p.dir is None else f"$ rm -rf {lay.data_root}")
    lines.append(f"$ rm -rf {lay.base}")
    return "\n".join(lines) + "\n"


def _describe_workload(p: PreparedDb, workload: str, lay: Layout) -> list[str]:
    o, b, f = p.options, p.binaries, p.fitted
    server = SERVERS[workload]
    settings = settings_for(o, workload, f)
    user = USERS[server]
    start = (cmd.mariadb_start(b, lay, settings) if workload == SYSBENCH
             else cmd.postgres_start(b, lay, settings))
    init = cmd.mariadb_init(b, lay) if workload == SYSBENCH else cmd.postgres_init(b, lay)
    lines = [f"-- {workload} on {SERVER_NAMES[server]} ({_memory_text(o, workload, f.sizes)})",
             f"$ {shown(init)}" + ("" if workload == SYSBENCH else f"    (as {user})"),
             f"$ {shown(start)} &    (as {user})"]
    if workload == SYSBENCH:
        lines += [f"$ {shown(cmd.mariadb_sql(b, lay, f'CREATE DATABASE {cmd.SYSBENCH_DB}'))}",
                  f"$ {shown(cmd.sysbench_prepare(b, lay, f.sizes, o.threads))}"]
    else:
        lines += [f"$ {shown(cmd.psql(b, lay, f'CREATE DATABASE {cmd.PGBENCH_DB}'))}",
                  f"$ {shown(cmd.pgbench_init(b, lay, f.sizes))}"]
    lines += ["stop the server; sync; echo 3 > /proc/sys/vm/drop_caches; start it again "
              "(cold: no buffer pool kept)"]
    for name, wl, mode in o.tests():
        if wl != workload:
            continue
        warm, measure = _tool_argv(p, lay, workload, mode, None)
        lines.append(f"{name}:")
        if warm is not None:
            lines.append(f"$ {shown(warm)}    (warm-up, {format_duration(o.warmup_seconds)})")
        lines.append(f"$ {shown(measure)}    (measured, {format_duration(o.seconds)})")
    lines.append(f"stop the server (SIG{STOP_SIGNALS[server].name[3:]}); rm -rf "
                 f"{lay.data_dir(server).parent}")
    return lines


def _tool_argv(p: PreparedDb, lay: Layout, workload: str, mode: str, log_prefix: Path | None
               ) -> tuple[list[str] | None, list[str]]:
    """The warm-up's command (None: no warm-up) and the measured phase's."""
    o, b, s = p.options, p.binaries, p.fitted.sizes
    if workload == SYSBENCH:
        warm = cmd.sysbench_run(b, lay, mode, s, o.threads, o.warmup_seconds, measured=False)
        measure = cmd.sysbench_run(b, lay, mode, s, o.threads, o.seconds, measured=True)
    else:
        warm = cmd.pgbench_run(b, lay, mode, o.threads, o.warmup_seconds, None)
        measure = cmd.pgbench_run(b, lay, mode, o.threads, o.seconds,
                                  log_prefix or lay.base / "pgbench-log" / "tx")
    return (warm if o.warmup_seconds > 0 else None), measure


# -- the run -------------------------------------------------------------------------------


@dataclass(frozen=True)
class ToolRun:
    """One run of sysbench or pgbench, kept verbatim."""

    argv: list[str]
    stdout: str
    stderr: str
    returncode: int
    started_at: float
    ended_at: float

    def record(self, phase: str, what: str) -> FioRecord:
        """As the store keeps every engine's invocation (its ``job_text`` says what it was)."""
        return FioRecord(phase, what, tuple(self.argv), self.stdout, self.stderr,
                         self.returncode, self.started_at, self.ended_at)


class DbProgress(Progress):
    """The live line says the phase, its time and what is left of it."""

    def _draw(self, force: bool = False) -> None:
        now = time.monotonic()
        if not self.live or not self.draws or (not force and now - self._last_draw < 0.5):
            return
        self._last_draw = now
        s = self.state
        planned = f" of {format_duration(s.planned_s)}" if s.planned_s else ""
        text = (f"{'QUICK · ' if self.quick else ''}{s.phase} · "
                f"{format_duration(s.elapsed_s)}{planned}")
        from ssdlab.run.progress import OUTPUT_LOCK, write
        with OUTPUT_LOCK:
            write(self.stream, "\r\x1b[K" + text[:160])

    def status(self) -> str:
        return self.state.phase or "starting"


def run_tool(argv: list[str], timeout_s: float, tick: Callable[[float], None],
             cwd: str = "/") -> ToolRun:
    """Run a benchmark tool to its end (killed with ssdlab; stopped after ``timeout_s``),
    ``tick(elapsed)`` about once a second. Ctrl-C stops it and goes on up."""
    started = time.time()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                    preexec_fn=die_with_parent, cwd=cwd)
        except FileNotFoundError:
            raise EnvironmentProblem(f"{argv[0]} not found") from None
        try:
            while proc.poll() is None:
                elapsed = time.time() - started
                if elapsed > timeout_s:
                    proc.kill()
                    proc.wait()
                    break
                tick(elapsed)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(0.5)
        except BaseException:
            proc.kill()
            proc.wait()
            raise
        out.seek(0)
        err.seek(0)
        stdout = out.read().decode("utf-8", "replace")
        stderr = err.read().decode("utf-8", "replace")
    code = proc.returncode if time.time() - started <= timeout_s else -9
    return ToolRun(argv, stdout, stderr, code, started, time.time())


def _tool_error(run: ToolRun, what: str) -> str:
    lines = [ln.strip() for ln in (run.stderr + "\n" + run.stdout).splitlines()
             if ln.strip() and ("error" in ln.lower() or "fatal" in ln.lower())]
    why = lines[0] if lines else f"exit status {run.returncode}"
    return f"{what} failed: {why[:300]}"


class DbRun(SessionRun[PreparedDb]):
    """The whole run (see the module's documentation)."""

    suite = plan.SUITE

    def plan_dict(self) -> dict[str, Any]:
        p = self.p
        o, f = p.options, p.fitted
        servers = {}
        for workload in o.workloads:
            servers[workload] = {
                "server": SERVER_NAMES[SERVERS[workload]],
                "settings": settings_for(o, workload, f),
                "buffer_bytes": buffer_bytes(o, workload, f.sizes),
                "memory_limit_bytes": memory_limit_bytes(o, workload, f.sizes),
                "dataset": f.sizes.describe(workload),
            }
        return stored_plan(plan.SUITE, p.args, o, sizes=dataclasses.asdict(f.sizes),
                           fs_estimate_bytes=f.fs_bytes, scaled=f.scaled,
                           fs=None if p.dir else o.fs,
                           dir=None if p.dir is None else p.dir.to_dict(),
                           tests=[t for t, _, _ in o.tests()], servers=servers,
                           tools=p.tools)

    def execute(self, argv: list[str]) -> str:
        """Not the shared skeleton: the device is mounted by the run, so the run does not
        hold it open exclusively (the mount is the kernel's own claim on it)."""
        t, o = self.p.target, self.p.options
        self.session.open(suite=self.suite, profile=o.profile, quick=o.quick, host=t.host,
                          plan=self.plan_dict(), versions=dict(t.versions), argv=argv)
        for line in plan.describe_sizes(o, self.p.fitted):
            self.progress.line(line)
        if self.p.fitted.scaled:
            self.store.add_event(self.run_id, None, "warning", self.p.fitted.scaled, None)
        interrupted = (f"run {self.run_id} interrupted; its completed phases are kept in "
                       f"{self.store.path}; its servers, mount and files were removed")
        with recorded_ending(functools.partial(self.store.finish_run, self.run_id),
                             interrupted):
            failed = self._in_workspace()
        self.session.finish(failed)
        return self.run_id

    def _in_workspace(self) -> list[str]:
        device = None if self.p.dir else self.p.target.info.path
        with Workspace(device=device, fs=self.p.options.fs,
                       work_in=self.p.dir.path if self.p.dir else None,
                       say=self.progress.line) as ws:
            where = (f"{self.p.options.fs} made on {device}" if device else
                     f"work directory {ws.layout.data_root}")
            self.store.add_event(self.run_id, None, "workspace", f"servers' data on {where}", {
                "device": device, "fs": None if self.p.dir else self.p.options.fs,
                "mkfs": shown(cmd.mkfs(self.p.options.fs, device)) if device else None,
                "mkfs_output": ws.mkfs_output, "data_root": str(ws.layout.data_root),
                "token": ws.state.token})
            failed: list[str] = []
            for workload in self.p.options.workloads:
                failed += WorkloadRun(self, ws, workload).run()
            return failed

    def run_tests(self, previous: RunData | None) -> list[str]:  # pragma: no cover
        raise NotImplementedError("DbRun runs its tests in its workspace (execute)")


class WorkloadRun:
    """One workload's server, from its start to its removal, and its tests."""

    def __init__(self, run: DbRun, ws: Workspace, workload: str) -> None:
        self.owner, self.ws, self.workload = run, ws, workload
        self.p = run.p
        self.server = SERVERS[workload]
        self.user = USERS[self.server]
        self.settings = settings_for(self.p.options, workload, self.p.fitted)
        self.tests = [(n, m) for n, w, m in self.p.options.tests() if w == workload]
        self.process: ServerProcess | None = None
        self.cgroup: Path | None = None
        self.dataset: DatasetRecord | None = None
        self.reported: dict[str, str] = {}

    @property
    def store(self) -> Store:
        return self.owner.store

    @property
    def run_id(self) -> str:
        return self.owner.run_id

    def say(self, text: str) -> None:
        self.owner.progress.line(text)

    def run(self) -> list[str]:
        """The tests that failed (every one of them when the server could not be made)."""
        names = [n for n, _ in self.tests]
        try:
            with self._server():
                try:
                    self._load()
                    self._cold_restart()
                except (EnvironmentProblem, TestFailed, DbOutputError) as exc:
                    return self._all_failed(names, str(exc))
                failed = []
                for name, mode in self.tests:
                    failed += self.owner.one_test(name, functools.partial(self._test, name, mode),
                                                check_target=False)
                    if self.process is None or not self.process.alive():
                        why = f"the {self.server} server stopped: {self._log_tail()}"
                        rest = [n for n, _ in self.tests if n not in failed and
                                self.store.load(self.run_id).test(n) is None]
                        return failed + self._all_failed(rest, why)
                return failed
        except EnvironmentProblem as exc:
            return self._all_failed(names, str(exc))

    def _all_failed(self, names: list[str], why: str) -> list[str]:
        for name in names:
            self.say(f"{name}: FAILED: {why}")
            self.store.set_test(self.run_id, name, status="failed", params=self._params(),
                                verdicts={}, result=DbResult.partial(error=why).to_json())
        return names

    def _log_tail(self) -> str:
        return self.process.log_tail() if self.process else ""

    def _params(self, mode: str | None = None) -> dict[str, Any]:
        o = self.p.options
        return {"workload": self.workload, "mode": mode, "server": SERVER_NAMES[self.server],
                "threads": o.threads, "warmup_seconds": o.warmup_seconds,
                "seconds": o.seconds, "dataset": self.p.fitted.sizes.describe(self.workload)}

    # -- the server -------------------------------------------------------------------

    @contextlib.contextmanager
    def _server(self) -> Iterator[None]:
        o, lay = self.p.options, self.ws.layout
        self.ws.server_dirs(self.server, self.user)
        limit = memory_limit_bytes(o, self.workload, self.p.fitted.sizes)
        if limit is not None:
            name = f"ssdlab-db-{self.ws.state.token}-{self.server}"
            self.cgroup = dbserver.make_cgroup(name, limit)
            self.ws.state.cgroups.append(str(self.cgroup))
            self.ws.state.save()
        try:
            started = time.time()
            self.owner.progress.phase(f"{self.workload}: initialising {SERVER_NAMES[self.server]}")
            init = self._init()
            self._start()
            self.reported = self._read_settings()
            self.store.add_step(self.run_id, self.tests[0][0], "server", {
                "workload": self.workload, "server": SERVER_NAMES[self.server],
                "version": self.p.tools.get(self.server), "init": shown(init),
                "start": shown(self._start_argv()), "settings": self.reported,
                "memory_limit_bytes": limit, "seconds": time.time() - started}, None)
            self.say(f"{self.workload}: {SERVER_NAMES[self.server]} "
                     f"{self.p.tools.get(self.server, '')} started on "
                     f"{lay.sock_dir(self.server)} only"
                     + (f", memory limit {format_bytes(limit)}" if limit else ""))
            yield
        finally:
            self._stop()
            self.ws.remove_server_data(self.server)
            if self.cgroup is not None:
                dbserver.remove_cgroup(str(self.cgroup))

    def _init(self) -> list[str]:
        b, lay = self.p.binaries, self.ws.layout
        if self.workload == SYSBENCH:
            argv = cmd.mariadb_init(b, lay)
            dbserver.run_checked(argv, "initialising MariaDB (mariadb-install-db)")
        else:
            argv = cmd.postgres_init(b, lay)
            dbserver.run_checked(argv, "initialising PostgreSQL (initdb)", user=self.user)
        return argv

    def _start_argv(self) -> list[str]:
        b, lay = self.p.binaries, self.ws.layout
        if self.workload == SYSBENCH:
            return cmd.mariadb_start(b, lay, self.settings)
        return cmd.postgres_start(b, lay, self.settings)

    def _start(self) -> None:
        lay = self.ws.layout
        sock = (lay.mariadb_socket() if self.workload == SYSBENCH
                else lay.sock_dir(self.server) / f".s.PGSQL.{cmd.PG_PORT}")
        self.process = dbserver.start_server(
            self.server, self._start_argv(), self.user, lay.log_path(self.server),
            self.cgroup, lambda: dbserver.socket_answers(sock) and self._answers())
        self.ws.add_server(ServerRecord(self.server, self.process.pid,
                                        str(self.cgroup) if self.cgroup else None))

    def _answers(self) -> bool:
        try:
            self._sql("SELECT 1")
        except EnvironmentProblem:
            return False
        return True

    def _sql(self, sql: str, db: str = "postgres") -> str:
        b, lay = self.p.binaries, self.ws.layout
        argv = (cmd.mariadb_sql(b, lay, sql) if self.workload == SYSBENCH
                else cmd.psql(b, lay, sql, db))
        return dbserver.run_checked(argv, f"{SERVER_NAMES[self.server]}: {sql[:40]}",
                                    timeout_s=120).stdout

    def _stop(self) -> None:
        if self.process is None:
            return
        seconds = self.process.stop(STOP_SIGNALS[self.server], self.say)
        self.ws.drop_server(self.process.pid)
        self.say(f"{self.workload}: {SERVER_NAMES[self.server]} stopped in {seconds:.1f} s")
        self.process = None

    def _read_settings(self) -> dict[str, str]:
        """Every setting that matters, as the running server reports it."""
        if self.workload == SYSBENCH:
            names = sorted({*self.settings, "version", "innodb_page_size", "log_bin",
                            "skip_networking", "port", "socket",
                            "sync_binlog", "innodb_io_capacity", "innodb_log_buffer_size",
                            "innodb_flush_neighbors"} - {"skip_name_resolve"})
            quoted = ",".join(f"'{n}'" for n in names)
            text = self._sql(f"SHOW GLOBAL VARIABLES WHERE Variable_name IN ({quoted})")
            pairs = [ln.split("\t", 1) for ln in text.splitlines() if "\t" in ln]
        else:
            names = sorted({*self.settings, "server_version", "wal_sync_method", "wal_level",
                            "listen_addresses", "unix_socket_directories", "port",
                            "checkpoint_timeout", "data_checksums", "effective_io_concurrency"})
            quoted = ",".join(f"'{n}'" for n in names)
            text = self._sql("SELECT name, setting || coalesce(' ' || unit, '') FROM "
                             f"pg_settings WHERE name IN ({quoted}) ORDER BY name")
            pairs = [ln.split("|", 1) for ln in text.splitlines() if "|" in ln]
        return {k.strip(): v.strip() for k, v in pairs}

    # -- load, cold restart -------------------------------------------------------------

    def _load(self) -> None:
        o, b, lay, sizes = self.p.options, self.p.binaries, self.ws.layout, self.p.fitted.sizes
        if self.workload == SYSBENCH:
            self._sql(f"CREATE DATABASE {cmd.SYSBENCH_DB}")
            argv = cmd.sysbench_prepare(b, lay, sizes, o.threads)
        else:
            self._sql(f"CREATE DATABASE {cmd.PGBENCH_DB}")
            argv = cmd.pgbench_init(b, lay, sizes)
        self.owner.progress.phase(f"{self.workload}: loading {sizes.describe(self.workload)}")
        estimate = sizes.dataset_bytes(self.workload)
        timeout = 600 + estimate / (1 * 2**20)  # at least 1 MiB/s
        done = run_tool(argv, timeout, self.owner.progress.tick)
        record = done.record("load", f"{self.workload}: load {sizes.describe(self.workload)}")
        self.dataset = self._dataset(self._dataset_bytes())
        detail = {"workload": self.workload, "ok": done.returncode == 0,
                  "seconds": done.ended_at - done.started_at,
                  "dataset": self.dataset.to_json()}
        self.store.add_step(self.run_id, self.tests[0][0], "load", detail, record)
        if done.returncode != 0:
            raise TestFailed(_tool_error(done, f"loading the {self.workload} dataset"))
        self.say(f"{self.workload}: loaded {sizes.describe(self.workload)} in "
                 f"{done.ended_at - done.started_at:.1f} s: "
                 f"{format_bytes(self.dataset.bytes)} on disk")
        if self.dataset.fits_in_memory:
            self.say(f"warning: {self._fits_warning()}")

    def _dataset_bytes(self) -> int:
        """The loaded database's own size: its tables and indexes (sysbench's database
        directory; pgbench's database as PostgreSQL counts it), not the server's logs."""
        if self.workload == SYSBENCH:
            return dbserver.du_bytes(self.ws.layout.data_dir(self.server) / cmd.SYSBENCH_DB)
        text = self._sql(f"SELECT pg_database_size('{cmd.PGBENCH_DB}')").strip()
        try:
            return int(text)
        except ValueError:
            raise EnvironmentProblem(f"PostgreSQL did not say its database's size ({text!r})"
                                     ) from None

    def _dataset(self, on_disk: int) -> DatasetRecord:
        o, sizes = self.p.options, self.p.fitted.sizes
        buf = buffer_bytes(o, self.workload, sizes)
        limit = memory_limit_bytes(o, self.workload, sizes)
        direct = (self.workload == SYSBENCH and
                  self.settings.get("innodb_flush_method", "").upper().startswith("O_DIRECT"))
        # with O_DIRECT only the buffer pool holds data; otherwise the page cache too, up
        # to the memory limit or the machine's memory
        machine = self.p.target.host.get("memory_bytes")
        memory = buf if direct else (limit if limit is not None else
                                     machine if isinstance(machine, int) else 0)
        return DatasetRecord(
            shape=sizes.describe(self.workload), tables=sizes.tables,
            table_rows=sizes.table_rows, pgbench_scale=sizes.pgbench_scale,
            estimated_bytes=sizes.dataset_bytes(self.workload), bytes=on_disk,
            buffer_bytes=buf, buffer_ratio=round(buf / on_disk, 4) if on_disk else 0.0,
            memory_limit_bytes=limit, memory_bytes=memory,
            fits_in_memory=on_disk <= memory, direct_io=direct, scaled=self.p.fitted.scaled)

    def _fits_warning(self) -> str:
        d = self.dataset
        assert d is not None
        holder = ("its buffer pool" if d.direct_io else
                  "its buffer and the page cache within its memory limit"
                  if d.memory_limit_bytes is not None else "the machine's memory (page cache)")
        return (f"the {self.workload} dataset ({format_bytes(d.bytes)}) fits in "
                f"{holder} ({format_bytes(d.memory_bytes)}): the results measure memory more "
                "than the drive")

    def _cold_restart(self) -> None:
        """Stop the server, drop the kernel's caches, start it again: the tests start cold."""
        self.owner.progress.phase(f"{self.workload}: restarting cold")
        self._stop()
        dropped = drop_caches()
        self._start()
        self.store.add_step(self.run_id, self.tests[0][0], "cache-drop",
                            {"workload": self.workload, **dropped,
                             "server_restarted": True}, None)
        if not dropped.get("dropped"):
            raise TestFailed(f"the kernel's caches could not be dropped: {dropped.get('why')}")

    # -- one test ---------------------------------------------------------------------

    def _test(self, name: str, mode: str) -> None:
        o = self.p.options
        self.store.set_test(self.run_id, name, status="running", params=self._params(mode),
                            verdicts={}, result={})
        log_dir = self.ws.layout.base / f"pgbench-log-{mode}"
        warm, _ = _tool_argv(self.p, self.ws.layout, self.workload, mode, None)
        sampling = None
        if warm is not None:
            self.owner.progress.phase(f"{name}: warm-up", planned_s=o.warmup_seconds)
            done = run_tool(warm, o.warmup_seconds + TOOL_GRACE_S, self.owner.progress.tick)
            self.store.add_step(self.run_id, name, "warmup", {
                "seconds": done.ended_at - done.started_at, "ok": done.returncode == 0},
                done.record("warmup", f"{name}: warm-up"))
            if done.returncode != 0:
                raise TestFailed(_tool_error(done, f"{name} warm-up"))
            sampling = self._sampling(done)
        log_dir.mkdir(exist_ok=True)
        _, measure = _tool_argv(self.p, self.ws.layout, self.workload, mode, log_dir / "tx")
        if sampling is not None:
            measure = [*measure[:-1], f"--sampling-rate={sampling:.4f}", measure[-1]]
        self.owner.progress.phase(f"{name}: measured", planned_s=o.seconds)
        done = run_tool(measure, o.seconds + TOOL_GRACE_S, self.owner.progress.tick,
                        cwd=str(log_dir))
        try:
            result = self._result(mode, done, log_dir, sampling)
        except DbOutputError as exc:
            self._store_round(name, done, None)
            raise TestFailed(str(exc)) from None
        finally:
            shutil.rmtree(log_dir, ignore_errors=True)
        self._store_round(name, done, result)
        self.owner.session.ground_truth(name, "measured phase")
        status = "complete"
        self.store.set_test(self.run_id, name, status=status, params=self._params(mode),
                            verdicts={"primary": {"message": result.message}},
                            result=result.to_json())
        self.say(f"{name}: {result.message}")

    def _sampling(self, warm: ToolRun) -> float | None:
        """pgbench: the share of transactions the measured phase logs (None: all), so that
        the log stays at most :data:`MAX_LOGGED_TRANSACTIONS` at the warm-up's rate."""
        if self.workload != PGBENCH:
            return None
        try:
            tps = parse_pgbench(warm.stdout, warm.stderr).tps
        except DbOutputError:
            return None
        expected = tps * self.p.options.seconds
        return None if expected <= MAX_LOGGED_TRANSACTIONS else MAX_LOGGED_TRANSACTIONS / expected

    def _store_round(self, name: str, done: ToolRun, result: DbResult | None) -> None:
        cell: dict[str, Any] = {"cell": name, "workload": self.workload}
        tracking: dict[str, float] = {}
        if result is not None:
            cell.update(tps=result.tps, qps=result.qps, latency_avg_ms=result.latency_avg_ms,
                        latency_p95_ms=result.latency_p95_ms,
                        latency_p99_ms=result.latency_p99_ms, errors=result.errors)
            tracking = {"tps": result.tps}
        self.store.add_round(self.run_id, name, 1, status="ok" if result else "failed",
                             tracking=tracking, cells=[cell],
                             fio=done.record("measure", f"{name}: measured phase"),
                             started_at=done.started_at, ended_at=done.ended_at)

    def _result(self, mode: str, done: ToolRun, log_dir: Path, sampling: float | None
                ) -> DbResult:
        o = self.p.options
        common: dict[str, Any] = {
            "workload": self.workload, "mode": mode,
            "server": f"{SERVER_NAMES[self.server]} {self.p.tools.get(self.server, '')}".strip(),
            "threads": o.threads, "warmup_seconds": o.warmup_seconds,
            "dataset": self.dataset, "settings": self.reported}
        if self.workload == SYSBENCH:
            result = self._sysbench_result(done, common)
        else:
            result = self._pgbench_result(done, log_dir, sampling, common)
        message = (f"{result.tps:,.1f} TPS, latency avg {result.latency_avg_ms:.2f} ms, p95 "
                   f"{_ms(result.latency_p95_ms)}, p99 {_ms(result.latency_p99_ms)} "
                   f"({o.threads} threads, {result.seconds:.0f} s)")
        warning = self._fits_warning() if self.dataset and self.dataset.fits_in_memory else None
        return dataclasses.replace(result, message=message, warning=warning)

    def _sysbench_result(self, done: ToolRun, common: dict[str, Any]) -> DbResult:
        if done.returncode != 0:
            raise DbOutputError(_tool_error(done, "sysbench"))
        sb = parse_sysbench(done.stdout)
        series = [SecondPoint(i.t_s, i.tps, i.latency_ms, i.errors_per_s) for i in sb.intervals]
        return DbResult(
            **common, tool=f"sysbench {self.p.tools.get('sysbench', '')}".strip(),
            seconds=sb.total_time_s, transactions=sb.transactions, tps=sb.tps, qps=sb.qps,
            errors=sb.ignored_errors, latency_avg_ms=sb.latency_avg_ms,
            latency_p95_ms=histogram_percentile(sb.histogram, 95),
            latency_p99_ms=histogram_percentile(sb.histogram, 99),
            latency_max_ms=sb.latency_max_ms,
            latency_source="sysbench's own latency histogram (--histogram)",
            series=series, series_latency=f"the interval's {sb.latency_pct:g}th percentile")

    def _pgbench_result(self, done: ToolRun, log_dir: Path, sampling: float | None,
                        common: dict[str, Any]) -> DbResult:
        if done.returncode != 0:
            raise DbOutputError(_tool_error(done, "pgbench"))
        pg = parse_pgbench(done.stdout, done.stderr)
        logs = sorted(log_dir.glob("tx.*"))
        if not logs:
            raise DbOutputError("pgbench wrote no per-transaction log")
        counts = read_transaction_logs(logs)
        source = "pgbench's per-transaction log (-l)"
        if sampling is not None:
            source += f", a {sampling:.1%} sample (--sampling-rate)"
        series = [SecondPoint(i.t_s, i.tps, i.latency_avg_ms, 0.0) for i in pg.intervals]
        return DbResult(
            **common, tool=f"pgbench {self.p.tools.get('pgbench', '')}".strip(),
            seconds=pg.duration_s, transactions=pg.transactions, tps=pg.tps, qps=None,
            errors=pg.failed, latency_avg_ms=pg.latency_avg_ms,
            latency_p95_ms=counts.percentile_us(95) / 1000,
            latency_p99_ms=counts.percentile_us(99) / 1000,
            latency_max_ms=counts.max_us / 1000, latency_source=source, series=series,
            series_latency="the interval's mean")


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f} ms"


RUNNER = Runner(
    prepare=prepare_db,
    describe=describe,
    progress=lambda p: DbProgress(quick=p.options.quick),
    start=DbRun,
    planned=planned,
)
