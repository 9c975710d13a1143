"""Run the database benchmarks: for each workload a private server on the target, its
dataset loaded, caches dropped and the server restarted cold, then each of its tests
warmed up and measured by the tool's own reports; the server stopped and its data removed
before the next workload (run/dbserver.py), the workspace at the end (run/dbworkspace.py).

Every phase is stored as it completes (the server's settings, the load with the dataset
it made, each warm-up and each measured phase with the tool's output verbatim), so a run
that is stopped keeps what it finished.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from ssdlab.engine.dboutput import DbOutputError
from ssdlab.engine.pgbench import parse_pgbench, read_transaction_logs
from ssdlab.engine.sysbench import histogram_percentile, parse_sysbench
from ssdlab.engine.tool import ToolRun, find_binaries, run_tool, tool_versions
from ssdlab.errors import EnvironmentProblem, TargetError, UserError
from ssdlab.jsonrecord import JsonObject
from ssdlab.plan import db as plan
from ssdlab.plan import dbcommands as cmd
from ssdlab.plan.db import (
    FS_USABLE,
    PGBENCH,
    SERVER_NAMES,
    SERVERS,
    SYSBENCH,
    DbArgs,
    DbOptions,
    Fitted,
    buffer_bytes,
)
from ssdlab.plan.db_records import (
    CacheDropStep,
    DatasetRecord,
    DbCell,
    DbParams,
    DbPlan,
    DbResult,
    DbServerPlan,
    LoadStep,
    SecondPoint,
    ServerStep,
    WarmupStep,
    WorkspaceEvent,
)
from ssdlab.plan.dbcommands import USERS, Binaries, Layout, memory_limit_bytes, settings_for, shown
from ssdlab.plan.planned import PlannedTime
from ssdlab.plan.results import StoredPlan, Verdict, plan_head
from ssdlab.run import dbserver, dbworkspace
from ssdlab.run.dbserver import WorkloadServer
from ssdlab.run.dbworkspace import Workspace
from ssdlab.run.prepare import (
    PreparedTarget,
    TargetRequest,
    checked_versions,
    planned_target,
    prepare_target,
)
from ssdlab.run.progress import PhaseProgress
from ssdlab.run.session import SessionRun, TestFailed
from ssdlab.run.suite import PreparedSuite, Runner
from ssdlab.store.db import Store
from ssdlab.store.records import FioRecord, RoundRecord, RunData, TestState
from ssdlab.targets.identity import TargetInfo, host_info
from ssdlab.targets.workdir import DirInfo, describe_dir, drop_caches
from ssdlab.units import format_bytes

#: a tool may run this much longer than asked before it is stopped as stuck
TOOL_GRACE_S = 300.0
#: pgbench logs every transaction of the measured phase; past this many the log is sampled
MAX_LOGGED_TRANSACTIONS = 5_000_000


# -- checks before anything is touched -----------------------------------------------------


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


def _device_target(request: TargetRequest) -> PreparedTarget:
    base = planned_target(request) or prepare_target(request.device(), None,
                                                     request.destroy_data, request.fio)
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
    dbserver.check_host(o, o.fs if request.dir is None else None)
    binaries = find_binaries(o, args)
    left = tuple(s.token for s in dbworkspace.leftovers())
    if left and not request.dry_run:
        dbworkspace.clean_leftovers(print)
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
        lines += cmd.describe_workload(o, p.binaries, f, workload, lay)
    lines.append(f"$ umount {lay.mount}" if p.dir is None else f"$ rm -rf {lay.data_root}")
    lines.append(f"$ rm -rf {lay.base}")
    return "\n".join(lines) + "\n"


# -- the run -------------------------------------------------------------------------------


class DbRun(SessionRun[PreparedDb]):
    """The whole run (see the module's documentation), on the shared skeleton: the run
    mounts the device rather than holding it, and its tests run in its workspace."""

    suite = plan.SUITE
    holds_target = False
    ws: Workspace | None = None

    def plan_record(self) -> StoredPlan:
        p = self.p
        o, f = p.options, p.fitted
        servers = {w: DbServerPlan(SERVER_NAMES[SERVERS[w]], settings_for(o, w, f),
                                   buffer_bytes(o, w, f.sizes),
                                   memory_limit_bytes(o, w, f.sizes), f.sizes.describe(w))
                   for w in o.workloads}
        return DbPlan(plan.SUITE, *plan_head(p.args, o), dataclasses.asdict(f.sizes),
                      f.fs_bytes, f.scaled, None if p.dir else o.fs,
                      None if p.dir is None else cast(JsonObject, p.dir.to_dict()),
                      tuple(t for t, _, _ in o.tests()), servers, dict(p.tools))

    def started(self) -> None:
        for line in plan.describe_sizes(self.p.options, self.p.fitted):
            self.progress.line(line)
        if self.p.fitted.scaled:
            self.store.add_event(self.run_id, None, "warning", self.p.fitted.scaled, None)

    def interrupted_text(self) -> str:
        return (f"run {self.run_id} interrupted; its completed phases are kept in "
                f"{self.store.path}; its servers, mount and files were removed")

    @contextlib.contextmanager
    def workspace(self) -> Iterator[None]:
        """The file system made on the device (mounted by the run: the mount is the
        kernel's own claim on it, so the run does not hold it exclusively), or a work
        directory in ``--dir``; removed with everything in it when the run ends."""
        device = None if self.p.dir else self.p.target.info.path
        fs = self.p.options.fs
        with Workspace(device=device, fs=fs, work_in=self.p.dir.path if self.p.dir else None,
                       say=self.progress.line) as ws:
            where = f"{fs} made on {device}" if device else f"work directory {ws.layout.data_root}"
            self.store.add_event(self.run_id, None, "workspace", f"servers' data on {where}",
                                 WorkspaceEvent(device, None if self.p.dir else fs,
                                                shown(cmd.mkfs(fs, device)) if device else None,
                                                ws.mkfs_output, str(ws.layout.data_root),
                                                ws.token))
            self.ws = ws
            try:
                yield
            finally:
                self.ws = None

    def run_tests(self, previous: RunData | None) -> list[str]:
        """Each workload's server, from its start to its removal, and its tests."""
        assert self.ws is not None
        failed: list[str] = []
        for workload in self.p.options.workloads:
            failed += DbWorkload(self, self.ws, workload).run()
        return failed


class DbWorkload:
    """One workload's server, from its start to its removal, and its tests."""

    def __init__(self, run: DbRun, ws: Workspace, workload: str) -> None:
        self.owner, self.ws, self.workload = run, ws, workload
        self.p = run.p
        self.server = SERVERS[workload]
        self.settings = settings_for(self.p.options, workload, self.p.fitted)
        self.tests = [(n, m) for n, w, m in self.p.options.tests() if w == workload]
        self.limit = memory_limit_bytes(self.p.options, workload, self.p.fitted.sizes)
        self.db = WorkloadServer(workload, self.p.binaries, self.settings, self.limit, ws,
                                 self.say)
        self.dataset: DatasetRecord | None = None

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
                    if not self.db.alive():
                        why = f"the {self.server} server stopped: {self.db.log_tail()}"
                        rest = [n for n, _ in self.tests if n not in failed and
                                self.store.load(self.run_id).test(n) is None]
                        return failed + self._all_failed(rest, why)
                return failed
        except EnvironmentProblem as exc:
            return self._all_failed(names, str(exc))

    def _all_failed(self, names: list[str], why: str) -> list[str]:
        for name in names:
            self.say(f"{name}: FAILED: {why}")
            self.store.set_test(self.run_id, name, TestState(
                "failed", self._params(), {}, DbResult.partial(error=why)))
        return names

    def _params(self, mode: str | None = None) -> DbParams:
        o = self.p.options
        return DbParams(self.workload, mode, SERVER_NAMES[self.server], o.threads,
                        o.warmup_seconds, o.seconds, self.p.fitted.sizes.describe(self.workload))

    # -- the server -------------------------------------------------------------------

    @contextlib.contextmanager
    def _server(self) -> Iterator[None]:
        db, limit = self.db, self.limit
        db.make_places()
        try:
            started = time.time()
            self.owner.progress.phase(f"{self.workload}: initialising {db.name}")
            init = db.open()
            self.store.add_step(self.run_id, self.tests[0][0], "server", ServerStep(
                self.workload, db.name, self.p.tools.get(self.server), shown(init),
                shown(db.start_argv()), db.reported, limit, time.time() - started), None)
            self.say(f"{self.workload}: {db.name} {self.p.tools.get(self.server, '')} started "
                     f"on {self.ws.layout.sock_dir(self.server)} only"
                     + (f", memory limit {format_bytes(limit)}" if limit else ""))
            yield
        finally:
            db.close()

    # -- load, cold restart -------------------------------------------------------------

    def _load(self) -> None:
        o, b, lay, sizes = self.p.options, self.p.binaries, self.ws.layout, self.p.fitted.sizes
        if self.workload == SYSBENCH:
            self.db.sql(f"CREATE DATABASE {cmd.SYSBENCH_DB}")
            argv = cmd.sysbench_prepare(b, lay, sizes, o.threads)
        else:
            self.db.sql(f"CREATE DATABASE {cmd.PGBENCH_DB}")
            argv = cmd.pgbench_init(b, lay, sizes)
        self.owner.progress.phase(f"{self.workload}: loading {sizes.describe(self.workload)}")
        estimate = sizes.dataset_bytes(self.workload)
        timeout = 600 + estimate / (1 * 2**20)  # at least 1 MiB/s
        done = run_tool(argv, timeout, self.owner.progress.tick)
        record = _record(done, "load", f"{self.workload}: load {sizes.describe(self.workload)}")
        self.dataset = self._dataset(self._dataset_bytes())
        detail = LoadStep(self.workload, done.returncode == 0, done.ended_at - done.started_at,
                          self.dataset)
        self.store.add_step(self.run_id, self.tests[0][0], "load", detail, record)
        if done.returncode != 0:
            raise TestFailed(done.error(f"loading the {self.workload} dataset"))
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
        text = self.db.sql(f"SELECT pg_database_size('{cmd.PGBENCH_DB}')").strip()
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
        self.db.stop()
        done = drop_caches()
        self.db.start()
        self.store.add_step(self.run_id, self.tests[0][0], "cache-drop", CacheDropStep(
            self.workload, done.synced, done.dropped, done.why), None)
        if not done.dropped:
            raise TestFailed(f"the kernel's caches could not be dropped: {done.why}")

    # -- one test ---------------------------------------------------------------------

    def _test(self, name: str, mode: str) -> None:
        o = self.p.options
        self.store.set_test(self.run_id, name, TestState("running", self._params(mode)))
        log_dir = self.ws.layout.base / f"pgbench-log-{mode}"
        warm, _ = self._tool_argv(mode, None)
        sampling = None
        if warm is not None:
            self.owner.progress.phase(f"{name}: warm-up", planned_s=o.warmup_seconds)
            done = run_tool(warm, o.warmup_seconds + TOOL_GRACE_S, self.owner.progress.tick)
            self.store.add_step(self.run_id, name, "warmup", WarmupStep(
                done.ended_at - done.started_at, done.returncode == 0),
                _record(done, "warmup", f"{name}: warm-up"))
            if done.returncode != 0:
                raise TestFailed(done.error(f"{name} warm-up"))
            sampling = self._sampling(done)
        log_dir.mkdir(exist_ok=True)
        _, measure = self._tool_argv(mode, log_dir / "tx")
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
        self.store.set_test(self.run_id, name, TestState(
            "complete", self._params(mode), {"primary": Verdict(result.message or "")}, result))
        self.say(f"{name}: {result.message}")

    def _tool_argv(self, mode: str, log_prefix: Path | None
                   ) -> tuple[list[str] | None, list[str]]:
        p = self.p
        return cmd.tool_argv(p.options, p.binaries, p.fitted.sizes, self.ws.layout,
                             self.workload, mode, log_prefix)

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
        # a failed phase's cell is its name and workload only (no metric, not even null)
        cell = DbCell.partial(cell=name, workload=self.workload)
        tracking: dict[str, float] = {}
        if result is not None:
            cell = DbCell(name, self.workload, result.tps, result.qps, result.latency_avg_ms,
                          result.latency_p95_ms, result.latency_p99_ms, result.errors)
            tracking = {"tps": result.tps}
        self.store.add_round(self.run_id, name, RoundRecord(
            1, "ok" if result else "failed", tracking, [cell],
            _record(done, "measure", f"{name}: measured phase"), done.started_at,
            done.ended_at))

    def _result(self, mode: str, done: ToolRun, log_dir: Path, sampling: float | None
                ) -> DbResult:
        o = self.p.options
        common: dict[str, Any] = {
            "workload": self.workload, "mode": mode,
            "server": f"{SERVER_NAMES[self.server]} {self.p.tools.get(self.server, '')}".strip(),
            "threads": o.threads, "warmup_seconds": o.warmup_seconds,
            "dataset": self.dataset, "settings": self.db.reported}
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
            raise DbOutputError(done.error("sysbench"))
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
            raise DbOutputError(done.error("pgbench"))
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
            seconds=pg.measured_s, transactions=pg.transactions, tps=pg.tps, qps=None,
            errors=pg.failed, latency_avg_ms=pg.latency_avg_ms,
            latency_p95_ms=counts.percentile_us(95) / 1000,
            latency_p99_ms=counts.percentile_us(99) / 1000,
            latency_max_ms=counts.max_us / 1000, latency_source=source, series=series,
            series_latency="the interval's mean")


def _record(run: ToolRun, phase: str, what: str) -> FioRecord:
    """A tool's run as the store keeps every engine's invocation (its ``job_text`` says
    what it was)."""
    return FioRecord(phase, what, tuple(run.argv), run.stdout, run.stderr, run.returncode,
                     run.started_at, run.ended_at)


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f} ms"


RUNNER = Runner(
    prepare=prepare_db,
    describe=describe,
    progress=lambda p: PhaseProgress(quick=p.options.quick),
    start=DbRun,
    planned=planned,
)
