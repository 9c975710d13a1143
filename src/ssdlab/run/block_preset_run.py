"""Run a block-level review preset (``cdm``, ``atto``, ``iometer``) on a block device, an
ssdlab test file (``--target``) or a test file in a directory (``--dir``): the runner of
the three suites (the prepared plan says which preset).

The flow: every check before any I/O (:func:`prepare_preset`), then one run: the test
file (or the device region from offset 0) is written once with data (CrystalDiskMark
does this before it reads; fio's default random buffers), then each measurement is one
fio invocation, journaled as one round with one cell as soon as it finishes, then the
summary (best pass and mean per table entry) is stored with the test. On a directory,
the file lives in a subdirectory of its own that is removed afterwards, also on errors
and Ctrl-C (:class:`~ssdlab.targets.workdir.WorkDir`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import stat
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from ssdlab import __version__
from ssdlab.analysis.block_presets import summarise, timeline_total
from ssdlab.engine import scratch
from ssdlab.engine.fiolog import FioLogError, fio_log_path, merge_rate_logs, read_log
from ssdlab.engine.jobfile import render
from ssdlab.engine.runner import Executor
from ssdlab.errors import TargetError, UserError
from ssdlab.plan import block_presets as bp
from ssdlab.plan import preset_defs as pd
from ssdlab.plan.block_presets import (
    CachesDropped,
    CleanupEvent,
    PrefillStep,
    PresetCell,
    PresetParams,
    PresetResult,
    RowRecord,
)
from ssdlab.plan.planned import FIO_RUN_OVERHEAD_S, PlannedTime
from ssdlab.plan.preset_defs import Measurement, PresetArgs, PresetPlan
from ssdlab.plan.results import StoredPlan, Verdict
from ssdlab.plan.specs import CellSpec, FioJob
from ssdlab.run.cells import cell_from_job
from ssdlab.run.host_dirs import HostDirs, checked_dirs
from ssdlab.run.hosts import fio_logs
from ssdlab.run.peak_load import AUTO, peak_load
from ssdlab.run.prepare import (
    PreparedTarget,
    TargetRequest,
    check_file_target,
    checked_versions,
    engine_for,
    planned_target,
    prepare_target,
)
from ssdlab.run.progress import Progress
from ssdlab.run.session import SessionRun, TestFailed, fio_record
from ssdlab.run.suite import PreparedSuite, Runner, capacity_text, planned_device_note
from ssdlab.store.db import Store
from ssdlab.store.records import RunData, TestState
from ssdlab.targets.identity import host_info
from ssdlab.targets.nbd import is_nbd_target
from ssdlab.targets.remote_spec import is_remote
from ssdlab.targets.workdir import (
    WORK_PREFIX,
    DirInfo,
    DroppedCaches,
    WorkDir,
    describe_dir,
    drop_caches,
)
from ssdlab.units import format_bytes

#: free space kept beyond the test file in a --dir target
DIR_MARGIN_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True)
class PreparedPreset(PreparedSuite[PresetPlan]):
    """The target (the device, the file, or the directory: kind "directory") and the
    preset's plan; ``dir_info`` for a --dir target."""

    dir_info: DirInfo | None = None
    #: a --dir on each host of a run on several hosts (run/host_dirs.py)
    host_dirs: HostDirs | None = None


def _is_block(path: str) -> bool:
    return os.path.exists(path) and stat.S_ISBLK(os.stat(path).st_mode)


def _dir_target(directory: str, plan: PresetPlan, fio: str) -> PreparedPreset:
    versions = checked_versions(fio)
    d = describe_dir(directory)
    needed = plan.size_bytes + DIR_MARGIN_BYTES
    if needed > d.free_bytes:
        raise TargetError(f"--dir {directory}: {format_bytes(needed)} needed, "
                          f"{format_bytes(d.free_bytes)} free")
    info = d.as_target(plan.size_bytes)
    return PreparedPreset(PreparedTarget(info, False, host_info(), versions), plan, d)


def _refuse_buffered(plan: PresetPlan) -> None:
    """On other hosts: direct I/O only (their page caches are not this host's to drop)."""
    if any(m.drop_caches_before for m in plan.measurements):
        raise UserError("--no-direct on other hosts: buffered reads need each host's page "
                        "cache dropped, which ssdlab does on this host only")


def _host_dirs_target(spec: str, plan: PresetPlan, fio: str) -> PreparedPreset:
    """A --dir on each host: every host's agent checks its own (nothing is written)."""
    _refuse_buffered(plan)
    versions = checked_versions(fio)
    dirs = checked_dirs(spec, plan.size_bytes, plan.size_bytes + DIR_MARGIN_BYTES)
    remote = dirs.remote
    remote.local_fio = versions["fio"]
    host: dict[str, object] = dict(remote.hosts[0].hello.host or host_info())
    host["coordinator"] = host_info().get("hostname")
    target = PreparedTarget(remote.combined_info(), False, host, versions, remote=remote)
    return PreparedPreset(target, plan, host_dirs=dirs)


def auto_qd(request: TargetRequest, args: PresetArgs) -> tuple[PresetArgs, str]:
    """``--qd auto``: the arguments with the outstanding I/O (jobs x QD) of the target's
    most recent peak run (ATTO: its 128 KiB sequential peak; IOmeter: its 4 KiB random
    one), and where it came from; UserError (exit 2) without such a run."""
    if isinstance(args, pd.CdmArgs) or args.qd != AUTO:
        return args, ""
    if request.target is None:
        raise UserError("--qd auto needs --target: the load comes from that target's peak run")
    load = peak_load(request.target, request.store,
                     "throughput" if isinstance(args, pd.AttoArgs) else "iops", "--qd")
    qd = load.threads * load.iodepth
    return dataclasses.replace(args, qd=qd), f"QD {qd} (jobs x QD) from {load.origin}"


def prepare_preset(request: TargetRequest, args: PresetArgs) -> PreparedPreset:
    """Validate the plan and the target; UserError (one line) before any I/O."""
    args, source = auto_qd(request, args)
    prepared = _prepare_preset(request, args)
    if not source:
        return prepared
    plan = prepared.options
    return dataclasses.replace(prepared, options=dataclasses.replace(
        plan, settings={**plan.settings, "qd_source": source}))


def _prepare_preset(request: TargetRequest, args: PresetArgs) -> PreparedPreset:
    target, directory = request.target, request.dir
    if (target is None) == (directory is None):
        raise UserError("give either --target (a block device or an ssdlab test file) or "
                        "--dir (a directory for the test file), not both or neither")
    if directory is not None:
        plan = pd.plan_of(args)
        if request.destroy_data is not False:
            raise UserError("--destroy-data is for block devices; --dir writes only its own "
                            "test file in a subdirectory it removes afterwards")
        if is_remote(directory.split(",")[0]):
            return _host_dirs_target(directory, plan, request.fio)
        return _dir_target(directory, plan, request.fio)
    assert target is not None
    on_hosts = is_remote(target.split(",")[0])  # block devices of other hosts (hosts.md)
    path = target if on_hosts else os.path.abspath(target)
    # an NBD export is tested as a device, and so is one a matrix level will build
    block = on_hosts or _is_block(path) or is_nbd_target(target) or request.planned is not None
    if not block:
        check_file_target(target)  # a foreign file is refused before its size is judged
    existing = os.path.getsize(path) if not block and os.path.isfile(path) else None
    plan = _plan(args, 512, existing, path)
    base = planned_target(request) or prepare_target(
        target, None if block else plan.size_bytes, request.destroy_data, request.fio)
    info = base.info
    if info.logical_sector_bytes != 512:
        plan = _plan(args, info.logical_sector_bytes, existing, path)
    plan = engine_for(info, plan)
    if block and plan.size_bytes > info.capacity_bytes:
        raise TargetError(f"--size {format_bytes(plan.size_bytes)} is larger than "
                          f"{info.path} ({format_bytes(info.capacity_bytes)})")
    if on_hosts:
        _refuse_buffered(plan)
    return PreparedPreset(base, plan)


def _plan(args: PresetArgs, logical_sector: int, existing: int | None, path: str
          ) -> PresetPlan:
    """The preset's plan; an existing test file of a size out of its range (no --size
    given, so its size is the test's) is refused naming the file, not --size."""
    try:
        return pd.plan_of(args, logical_sector, existing)
    except pd.SizeRefused as exc:
        if args.size_bytes is not None or existing is None:
            raise
        raise TargetError(f"the test file {path} is {format_bytes(existing)} and no --size "
                          f"was given: {exc.need}; give --size to have ssdlab make it that "
                          "size") from None


# --------------------------------------------------------------------------- job files


def job_text(p: PreparedPreset, path: str, cell: CellSpec, what: str,
             log_prefix: str | None = None, *, writes: bool = True) -> str:
    plan = p.options
    extra: list[tuple[str, str]] = []
    if not plan.direct and writes:
        extra.append(("end_fsync", "1"))  # buffered writes count until they are on the device
    if log_prefix is not None and plan.log_interval_ms:
        extra += [("write_iops_log", log_prefix), ("log_avg_msec", str(plan.log_interval_ms))]
    job = FioJob(path, (cell,), plan.ioengine, direct=plan.direct, json_plus=True,
                 extra_global=tuple(extra))
    header = (f"ssdlab {p.target.versions.get('ssdlab', __version__)}: {plan.label}, {what}\n"
              f"target {path} ({p.target.info.device_class}), profile {plan.profile}")
    return render(job, header)


def jobs_of(p: PreparedPreset, path: str) -> bp.JobText:
    """The job files of the test file at ``path`` (the plan's callback)."""
    def job(cell: CellSpec, what: str, log_prefix: str | None, writes: bool) -> str:
        return job_text(p, path, cell, what, log_prefix, writes=writes)
    return job


def entry_label(group: str, mode: str) -> str:
    """How a result is named in messages: IOmeter's spec names say the direction."""
    return group if mode in group.lower() or "/" in group else f"{group} {mode}"


def label(m: Measurement) -> str:
    return entry_label(m.group, m.mode)


def file_path_placeholder(p: PreparedPreset) -> str:
    if p.dir_info is None:
        return p.target.info.path
    return os.path.join(p.dir_info.path, f"{WORK_PREFIX}XXXXXXXX", p.options.file_name)


def describe(p: PreparedPreset) -> str:
    """``--dry-run``: the plan and every fio job file; nothing is touched."""
    plan, info = p.options, p.target.info
    path = file_path_placeholder(p)
    lines = [f"DRY RUN: nothing will be written. {plan.label}, "
             f"profile {plan.profile}{' (QUICK)' if plan.quick else ''}"]
    if p.dir_info is not None:
        d = p.dir_info
        lines.append(f"directory {d.path} ({d.fs_type} on {d.source or '-'}"
                     f"{', network share' if d.network else ''}): the test file goes in a new "
                     f"subdirectory {WORK_PREFIX}*, removed afterwards")
    else:
        lines.append(f"target {info.path} ({info.kind}, {info.device_class}, "
                     f"{capacity_text(info)})")
        lines += planned_device_note(info)
        if p.target.create_file:
            lines.append(f"would create and fully allocate {info.path}")
    lines += bp.describe(plan, path, jobs_of(p, path))
    return "\n".join(lines) + "\n"


class PresetProgress(Progress):
    """Log lines per measurement; the ETA from the plan's time (no rounds)."""


# --------------------------------------------------------------------------- running


class PresetRun(SessionRun[PreparedPreset]):
    """One preset on one target, journaled to ``store``: one test (named as the preset);
    on a --dir target, in a work directory removed afterwards."""

    def __init__(self, prepared: PreparedPreset, store: Store, executor: Executor,
                 progress: Progress, *, sleep: Callable[[float], None] = time.sleep,
                 drop: Callable[[], DroppedCaches] = drop_caches) -> None:
        super().__init__(prepared, store, executor, progress)
        self.plan = prepared.options
        self.suite = self.plan.preset
        self.sleep = sleep
        self.drop = drop
        self.path = prepared.target.info.path  # the test file (in the work directory)

    @property
    def test(self) -> str:
        return self.plan.preset

    @contextlib.contextmanager
    def target_in_place(self) -> Iterator[None]:
        """With ``--dir``: the test file in a work directory, removed (and that recorded)
        once the run has ended."""
        dirs = self.p.host_dirs
        if dirs is not None:
            with dirs.work(self.plan.file_name, self._host_cleanup):
                self.path = dirs.remote.spec()  # the job files' name of every host's file
                with super().target_in_place():
                    yield
            return
        if self.p.dir_info is None:
            with super().target_in_place():
                yield
            return
        with WorkDir(self.p.dir_info, self.plan.size_bytes) as work:
            self.path = str(work.path / self.plan.file_name)
            with super().target_in_place():
                yield
            self._cleanup(work, self.run_id)

    def _cleanup(self, work: WorkDir, run_id: str) -> None:
        """Remove the work directory now (not only on exit) and record that it is gone."""
        work.remove()
        gone = not work.path.exists()
        self.store.add_event(run_id, self.test, "cleanup",
                             f"removed {work.path} with the test file" if gone else
                             f"could not remove {work.path}",
                             CleanupEvent(str(work.path), gone))

    def _host_cleanup(self, host: str, work: str, gone: bool) -> None:
        """A host's work directory removed (or not), recorded."""
        where = f"{host}:{work}"
        self.store.add_event(self.run_id, self.test, "cleanup",
                             f"removed {where} with the test file" if gone else
                             f"could not remove {where}", CleanupEvent(where, gone))

    def plan_record(self) -> StoredPlan:
        d, dirs = self.p.dir_info, self.p.host_dirs
        if dirs is not None:  # each host's directory, as its agent described it
            return bp.plan_record(self.plan, {"path": dirs.spec, "kind": "directory", "hosts": {
                h: i.to_dict() for h, i in sorted(dirs.infos.items())}})
        return bp.plan_record(self.plan, d.to_dict() if d is not None else None)

    def run_tests(self, previous: RunData | None) -> list[str]:
        return self.one_test(self.test, self._run_test, check_target=False)

    def _run_test(self) -> None:
        params = bp.test_params(self.plan, self.path, self.p.target.info.kind)
        self._store_test("running", params, PresetResult())
        try:
            self._measure_all(params)
        except TestFailed as exc:
            self._store_test("failed", params, PresetResult(error=str(exc)))
            raise

    def _store_test(self, status: str, params: PresetParams, result: PresetResult) -> None:
        verdicts = {"primary": Verdict(result.message)} if result.message else {}
        self.store.set_test(self.run_id, self.test, TestState(status, params, verdicts, result))

    def _measure_all(self, params: PresetParams) -> None:
        self._prefill()
        cells = [self._measure(n, m) for n, m in enumerate(self.plan.measurements, 1)]
        rows = [RowRecord.of(e) for e in summarise([c.to_json() for c in cells])]
        result = PresetResult(rows, self._message(rows), self.plan.size_bytes)
        self.session.ground_truth(self.test, "measurements")
        self._store_test("complete", params, result)
        self.progress.line(f"{self.test}: {result.message}")

    def _message(self, rows: list[RowRecord]) -> str:
        best = max(rows, key=lambda r: r.best.mb_per_s or 0.0)
        return (f"preset {self.plan.preset} v{self.plan.version}: {len(rows)} results; "
                f"highest {best.best.mb_per_s:,.1f} MB/s "
                f"({entry_label(best.group, best.mode)})")

    def _prefill(self) -> None:
        cell = self.plan.prefill_cell()
        self.progress.phase("prefill")
        run = self.session.run_fio(job_text(self.p, self.path, cell, "prefill"), (cell,),
                                   json_plus=False)
        seconds = run.ended_at - run.started_at
        self.store.add_step(self.run_id, self.test, "prefill", PrefillStep(
            cell.io_bytes, cell.block_bytes, run.ok, run.error, seconds, self.plan.direct,
        ), fio_record(run, "prefill"))
        if not run.ok:
            raise TestFailed(f"writing the test file failed: {run.error}")
        self.progress.line(f"{self.test}: test file written with data "
                           f"({format_bytes(cell.io_bytes or 0)} in {seconds:.1f} s)")

    def _before(self, m: Measurement) -> CachesDropped | None:
        """CrystalDiskMark's interval, or (buffered reads) sync and drop caches, recorded."""
        if m.idle_before_s > 0:
            self.progress.phase("interval")
            self.sleep(m.idle_before_s)
        if not m.drop_caches_before:
            return None
        done = self.drop()
        caches = CachesDropped(done.synced, done.dropped, done.why)
        self.store.add_event(self.run_id, self.test, "drop-caches",
                             f"sync and drop caches before {m.group} {m.mode}: "
                             f"{'dropped' if caches.dropped else 'NOT dropped'}",
                             caches)
        return caches

    def _measure(self, n: int, m: Measurement) -> PresetCell:
        caches = self._before(m)
        logdir = scratch.make("preset") if m.log_iops else None
        try:
            prefix = str(logdir / "iops") if logdir else None
            self.progress.phase(label(m))
            run = self.session.run_fio(bp.measure_job(self.plan, m, prefix,
                                                      jobs_of(self.p, self.path)),
                                       (m.cell,), json_plus=True)
            if not run.ok or run.output is None or not run.output.jobs:
                self.session.fio_round(self.test, n, run, m.cell.name, status="failed",
                                       tracking={}, cells=[])
                raise TestFailed(f"{label(m)}: {run.error}")
            cell = PresetCell.from_json({
                **cell_from_job(m.cell, run.output.jobs[0]), "group": m.group,
                "mode": m.mode, "pass": m.pass_no, "direct": self.plan.direct,
                **({} if caches is None else {"caches_dropped": caches.dropped}),
                **({} if prefix is None else {"timeline": self._timeline(prefix, m)}),
            }, f"{self.test} cell {m.cell.name}")
        finally:
            if logdir is not None:
                shutil.rmtree(logdir, ignore_errors=True)
        mb = cell.bw_bytes_per_s / 1e6
        self.session.fio_round(self.test, n, run, m.cell.name, status="ok",
                               tracking={"MB/s": mb}, cells=[cell])
        self.progress.line(f"{self.test} {label(m)}"
                           f"{' pass ' + str(m.pass_no) if m.pass_no > 1 else ''}: "
                           f"{mb:,.1f} MB/s, {cell.iops:,.0f} IOPS, "
                           f"{cell.lat_mean_us or 0:,.1f} us")
        return cell

    def _timeline(self, prefix: str, m: Measurement) -> list[list[float]]:
        """Per-interval IOPS of the whole spec (all workers, both directions)."""
        interval = self.plan.log_interval_ms or 1000
        try:
            # on several hosts every host's jobs: the timeline of their sum (docs/hosts.md)
            jobs = [read_log(path) for j in range(1, m.cell.threads + 1)
                    for path in fio_logs(self.session.executor,
                                         fio_log_path(prefix, "iops", j)).values()]
        except (OSError, FioLogError) as exc:
            raise TestFailed(f"could not read fio's IOPS log for {m.group}: {exc}") from None
        directions = []
        for direction in ("read", "write"):
            if direction == "read" and m.cell.mix.read_pct == 0:
                continue
            if direction == "write" and m.cell.mix.read_pct == 100:
                continue
            intervals = merge_rate_logs(jobs, interval, direction=direction)
            # a last partial interval of a few ms is noise, not a point of the timeline
            kept = [i for i in intervals if (i.end_ms - i.start_ms) * 2 >= interval]
            directions.append([(i.end_ms / 1000.0, i.rate) for i in kept])
        return timeline_total(directions)


def planned(p: PreparedPreset) -> PlannedTime:
    """Every measurement's I/O and idle time, a fio start each, and the prefill."""
    plan = p.options
    fio = len(plan.measurements) * FIO_RUN_OVERHEAD_S
    return (PlannedTime.fixed(plan.measured_seconds + fio)
            + PlannedTime.io(plan.size_bytes, "writing the test file first"))


RUNNER = Runner(
    prepare=prepare_preset,
    describe=describe,
    progress=lambda p: PresetProgress(quick=p.options.quick),
    start=PresetRun,
    planned=planned,
)
