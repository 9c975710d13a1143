"""Run a block-level review preset (``cdm``, ``atto``, ``iometer``) on a block device, an
ssdlab test file (``--target``) or a test file in a directory (``--dir``).

The flow: every check before any I/O (:func:`prepare_preset`), then one run: the test
file (or the device region from offset 0) is written once with data (CrystalDiskMark
does this before it reads; fio's default random buffers), then each measurement is one
fio invocation, journaled as one round with one cell as soon as it finishes, then the
summary (best pass and mean per table entry) is stored with the test. On a directory,
the file lives in a subdirectory of its own that is removed afterwards, also on errors
and Ctrl-C (:class:`~ssdlab.targets.workdir.WorkDir`).
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ssdlab import __version__
from ssdlab.analysis.block_presets import summarise, timeline_total
from ssdlab.engine.fiolog import FioLogError, fio_log_path, merge_rate_logs, read_log
from ssdlab.engine.jobfile import render
from ssdlab.engine.runner import Executor, FioRun
from ssdlab.errors import TargetError, UserError
from ssdlab.plan.block_presets import Measurement, PresetPlan
from ssdlab.plan.specs import CellSpec, FioJob
from ssdlab.plan.units import format_bytes, format_duration
from ssdlab.run.cells import cell_from_job
from ssdlab.run.prepare import prepare_target
from ssdlab.run.progress import Progress
from ssdlab.run.session import FioSetup, RunSession, TestFailed, fio_record, timeout_for
from ssdlab.store.db import Store
from ssdlab.targets.filetarget import create_file_target
from ssdlab.targets.identity import TargetInfo, check_fio_version, fio_version, host_info
from ssdlab.targets.safety import DestroyData
from ssdlab.targets.workdir import WORK_PREFIX, DirInfo, WorkDir, describe_dir, drop_caches

#: free space kept beyond the test file in a --dir target
DIR_MARGIN_BYTES = 16 * 1024 * 1024
LOG_PLACEHOLDER = "LOGDIR/iops"
#: settings that are the preset's definitions (lists of tables), not options
DEFINITIONS = ("tests", "specs")

#: (logical sector size, size of an existing test file) -> plan; the file's size is the
#: test size when --size is not given
PlanBuilder = Callable[[int, int | None], PresetPlan]


@dataclass(frozen=True)
class PreparedPreset:
    plan: PresetPlan
    info: TargetInfo  # the device, the file, or the directory (kind "directory")
    create_file: bool
    dir_info: DirInfo | None
    host: dict[str, object]
    versions: dict[str, str]

    @property
    def file_name(self) -> str:
        return f"{self.plan.preset}-test.dat"


def _is_block(path: str) -> bool:
    return os.path.exists(path) and stat.S_ISBLK(os.stat(path).st_mode)


def _dir_target(directory: str, plan: PresetPlan, fio: str) -> PreparedPreset:
    version = fio_version(fio)
    check_fio_version(version)
    d = describe_dir(directory)
    needed = plan.size_bytes + DIR_MARGIN_BYTES
    if needed > d.free_bytes:
        raise TargetError(f"--dir {directory}: {format_bytes(needed)} needed, "
                          f"{format_bytes(d.free_bytes)} free")
    info = TargetInfo(
        path=d.path, kind="directory", name=os.path.basename(d.path) or d.path,
        device_class="network share" if d.network else "directory", model=None, serial=None,
        firmware=None, capacity_bytes=plan.size_bytes, logical_sector_bytes=512,
        physical_sector_bytes=512, rotational=None, numa_node=None, scheduler=None,
        discard_max_bytes=None, details=d.to_dict(),
    )
    return PreparedPreset(plan, info, False, d, host_info(), {"ssdlab": __version__,
                                                              "fio": version})


def prepare_preset(target: str | None, directory: str | None, destroy_data: DestroyData,
                   fio: str, build: PlanBuilder) -> PreparedPreset:
    """Validate the plan and the target; UserError (one line) before any I/O."""
    if (target is None) == (directory is None):
        raise UserError("give either --target (a block device or an ssdlab test file) or "
                        "--dir (a directory for the test file), not both or neither")
    if directory is not None:
        plan = build(512, None)
        if destroy_data is not False:
            raise UserError("--destroy-data is for block devices; --dir writes only its own "
                            "test file in a subdirectory it removes afterwards")
        return _dir_target(directory, plan, fio)
    assert target is not None
    path = os.path.abspath(target)
    block = _is_block(path)
    existing = os.path.getsize(path) if not block and os.path.isfile(path) else None
    plan = build(512, existing)
    base = prepare_target(target, None if block else plan.size_bytes, destroy_data, fio)
    info = base.info
    if info.logical_sector_bytes != 512:
        plan = build(info.logical_sector_bytes, existing)
    if block and plan.size_bytes > info.capacity_bytes:
        raise TargetError(f"--size {format_bytes(plan.size_bytes)} is larger than "
                          f"{info.path} ({format_bytes(info.capacity_bytes)})")
    return PreparedPreset(plan, info, base.create_file, None, base.host, base.versions)


# --------------------------------------------------------------------------- job files


def job_text(p: PreparedPreset, path: str, cell: CellSpec, what: str,
             log_prefix: str | None = None, *, writes: bool = True) -> str:
    plan = p.plan
    extra: list[tuple[str, str]] = []
    if not plan.direct and writes:
        extra.append(("end_fsync", "1"))  # buffered writes count until they are on the device
    if log_prefix is not None and plan.log_interval_ms:
        extra += [("write_iops_log", log_prefix), ("log_avg_msec", str(plan.log_interval_ms))]
    job = FioJob(path, (cell,), plan.ioengine, direct=plan.direct, json_plus=True,
                 extra_global=tuple(extra))
    header = (f"ssdlab {p.versions.get('ssdlab', __version__)}: {plan.title} preset "
              f"{plan.preset} v{plan.version}, {what}\n"
              f"target {path} ({p.info.device_class}), profile {plan.profile}")
    return render(job, header)


def entry_label(group: str, mode: str) -> str:
    """How a result is named in messages: IOmeter's spec names say the direction."""
    return group if mode in group.lower() or "/" in group else f"{group} {mode}"


def label(m: Measurement) -> str:
    return entry_label(m.group, m.mode)


def _measure_text(p: PreparedPreset, path: str, m: Measurement, log_prefix: str | None) -> str:
    what = f"{m.group} {m.mode}" + (f" pass {m.pass_no}" if m.pass_no > 1 or
                                     p.plan.settings.get("passes", 1) != 1 else "")
    return job_text(p, path, m.cell, what, log_prefix if m.log_iops else None,
                    writes=m.cell.mix.read_pct < 100)


def file_path_placeholder(p: PreparedPreset) -> str:
    if p.dir_info is None:
        return p.info.path
    return os.path.join(p.dir_info.path, f"{WORK_PREFIX}XXXXXXXX", p.file_name)


def describe(p: PreparedPreset) -> str:
    """``--dry-run``: the plan and every fio job file; nothing is touched."""
    plan, info = p.plan, p.info
    path = file_path_placeholder(p)
    lines = [f"DRY RUN: nothing will be written. {plan.title} preset {plan.preset} "
             f"v{plan.version}, profile {plan.profile}{' (QUICK)' if plan.quick else ''}"]
    if p.dir_info is not None:
        d = p.dir_info
        lines.append(f"directory {d.path} ({d.fs_type} on {d.source or '-'}"
                     f"{', network share' if d.network else ''}): the test file goes in a new "
                     f"subdirectory {WORK_PREFIX}*, removed afterwards")
    else:
        lines.append(f"target {info.path} ({info.kind}, {info.device_class}, "
                     f"{format_bytes(info.capacity_bytes)})")
        if p.create_file:
            lines.append(f"would create and fully allocate {info.path}")
    io = "direct I/O" if plan.direct else "buffered I/O (sync and drop caches before reads)"
    lines.append(f"test file {format_bytes(plan.size_bytes)} at {path}, {io}, "
                 f"ioengine {plan.ioengine}")
    lines.append("settings: " + ", ".join(f"{k} {v}" for k, v in plan.settings.items()
                                          if not isinstance(v, list)))
    lines.append(f"{len(plan.measurements)} measurements, about "
                 f"{format_duration(plan.measured_seconds)} of I/O and idle time")
    lines.append(f"-- prefill: the test file is written once with data "
                 f"({format_bytes(plan.prefill_block_bytes)} sequential writes):")
    lines.append(job_text(p, path, plan.prefill_cell(), "prefill").rstrip())
    for n, m in enumerate(plan.measurements, 1):
        extra = []
        if m.idle_before_s:
            extra.append(f"after {m.idle_before_s:g} s idle")
        if m.drop_caches_before:
            extra.append("after sync and drop_caches")
        lines.append(f"-- measurement {n}: {m.group} {m.mode}"
                     f"{' pass ' + str(m.pass_no) if m.pass_no > 1 else ''}"
                     f"{' (' + ', '.join(extra) + ')' if extra else ''}:")
        lines.append(_measure_text(p, path, m, LOG_PLACEHOLDER).rstrip())
    return "\n".join(lines) + "\n"


def plan_dict(p: PreparedPreset) -> dict[str, Any]:
    plan = p.plan
    return {
        "suite": plan.preset,
        **plan.identity,
        "profile": plan.profile,
        "options": {**{k: v for k, v in plan.settings.items() if k not in DEFINITIONS},
                    "direct": plan.direct, "ioengine": plan.ioengine, "quick": plan.quick},
        "definitions": {k: v for k, v in plan.settings.items() if k in DEFINITIONS},
        "tests": [plan.preset],
        "prefill": f"{format_bytes(plan.size_bytes)} written sequentially in "
                   f"{format_bytes(plan.prefill_block_bytes)} blocks before measuring",
        "data_pattern": "fio default (random buffers)",
        "directory": p.dir_info.to_dict() if p.dir_info else None,
    }


def test_params(p: PreparedPreset, file_path: str) -> dict[str, Any]:
    plan = p.plan
    return {
        "title": plan.title,
        **plan.identity,
        "profile": plan.profile,
        "quick": plan.quick,
        "settings": plan.settings,
        "direct": plan.direct,
        "ioengine": plan.ioengine,
        "test_file": file_path,
        "target_kind": p.info.kind,
        "size_bytes": plan.size_bytes,
        "measurements": len(plan.measurements),
    }


class PresetProgress(Progress):
    """Log lines per measurement; no round-based ETA."""

    def _eta(self) -> str:
        return "-"


# --------------------------------------------------------------------------- running


class PresetRun:
    """One preset on one target, journaled to ``store``."""

    def __init__(self, prepared: PreparedPreset, store: Store, executor: Executor,
                 progress: Progress, *, sleep: Callable[[float], None] = time.sleep,
                 drop: Callable[[], dict[str, object]] = drop_caches) -> None:
        self.p = prepared
        self.plan = prepared.plan
        self.store = store
        self.executor = executor
        self.progress = progress
        self.sleep = sleep
        self.drop = drop
        self.session: RunSession | None = None

    @property
    def test(self) -> str:
        return self.plan.preset

    def execute(self, argv: list[str]) -> str:
        if self.p.dir_info is not None:
            with WorkDir(self.p.dir_info, self.plan.size_bytes) as work:
                path = str(work.path / self.p.file_name)
                run_id = self._execute(self.p.info, path, argv)
                self._cleanup(work, run_id)
                return run_id
        info = self.p.info
        if self.p.create_file:
            info = create_file_target(info.path, info.capacity_bytes)
        return self._execute(info, info.path, argv)

    def _cleanup(self, work: WorkDir, run_id: str) -> None:
        """Remove the work directory now (not only on exit) and record that it is gone."""
        work.remove()
        gone = not work.path.exists()
        self.store.add_event(run_id, self.test, "cleanup",
                             f"removed {work.path} with the test file" if gone else
                             f"could not remove {work.path}",
                             {"path": str(work.path), "removed": gone})

    def _execute(self, info: TargetInfo, path: str, argv: list[str]) -> str:
        setup = FioSetup(path, self.plan.ioengine, self.p.versions["ssdlab"],
                         info.device_class, self.plan.profile)
        session = RunSession(info, self.store, self.executor, self.progress, setup)
        self.session = session
        session.open(suite=self.plan.preset, profile=self.plan.profile, quick=self.plan.quick,
                     host=self.p.host, plan=plan_dict(self.p), versions=dict(self.p.versions),
                     argv=argv)
        failed: list[str] = []
        params = test_params(self.p, path)
        with session.running():
            self.store.set_test(session.run_id, self.test, status="running", params=params,
                                verdicts={}, result={})
            try:
                self._run(session, path, params)
            except TestFailed as exc:
                failed.append(self.test)
                self.progress.line(f"{self.test}: FAILED: {exc}")
                self.store.set_test(session.run_id, self.test, status="failed", params=params,
                                    verdicts={}, result={"error": str(exc)})
        session.finish(failed)
        return session.run_id

    def _run(self, session: RunSession, path: str, params: dict[str, Any]) -> None:
        self._prefill(session, path)
        cells: list[dict[str, Any]] = []
        for n, m in enumerate(self.plan.measurements, 1):
            cells.append(self._measure(session, path, n, m))
        rows = summarise(cells)
        result: dict[str, Any] = {"rows": rows, "message": self._message(rows),
                                  "prefilled_bytes": self.plan.size_bytes}
        session.ground_truth(self.test, "measurements")
        self.store.set_test(session.run_id, self.test, status="complete", params=params,
                            verdicts={"primary": {"message": result["message"]}},
                            result=result)
        self.progress.line(f"{self.test}: {result['message']}")

    def _message(self, rows: list[dict[str, Any]]) -> str:
        best = max(rows, key=lambda r: r["best"]["mb_per_s"] or 0.0)
        return (f"preset {self.plan.preset} v{self.plan.version}: {len(rows)} results; "
                f"highest {best['best']['mb_per_s']:,.1f} MB/s "
                f"({entry_label(str(best['group']), str(best['mode']))})")

    def _prefill(self, session: RunSession, path: str) -> None:
        cell = self.plan.prefill_cell()
        self.progress.phase("prefill")
        run = self.executor.run(job_text(self.p, path, cell, "prefill"), timeout_for((cell,)),
                                json_plus=False, on_tick=self.progress.tick)
        seconds = run.ended_at - run.started_at
        self.store.add_step(session.run_id, self.test, "prefill", {
            "io_bytes": cell.io_bytes, "block_bytes": cell.block_bytes, "ok": run.ok,
            "error": run.error, "seconds": seconds, "direct": self.plan.direct,
        }, fio_record(run, "prefill"))
        if not run.ok:
            raise TestFailed(f"writing the test file failed: {run.error}")
        self.progress.line(f"{self.test}: test file written with data "
                           f"({format_bytes(cell.io_bytes or 0)} in {seconds:.1f} s)")

    def _measure(self, session: RunSession, path: str, n: int, m: Measurement) -> dict[str, Any]:
        run_id = session.run_id
        if m.idle_before_s > 0:
            self.progress.phase("interval")
            self.sleep(m.idle_before_s)
        caches = None
        if m.drop_caches_before:
            caches = self.drop()
            self.store.add_event(run_id, self.test, "drop-caches",
                                 f"sync and drop caches before {m.group} {m.mode}: "
                                 f"{'dropped' if caches.get('dropped') else 'NOT dropped'}",
                                 caches)
        logdir = Path(tempfile.mkdtemp(prefix="ssdlab-preset-")) if m.log_iops else None
        try:
            prefix = str(logdir / "iops") if logdir else None
            self.progress.phase(label(m))
            run = self.executor.run(_measure_text(self.p, path, m, prefix),
                                    timeout_for((m.cell,)), json_plus=True,
                                    on_tick=self.progress.tick)
            if not run.ok or run.output is None or not run.output.jobs:
                self.store.add_round(run_id, self.test, n, status="failed", tracking={},
                                     cells=[], fio=fio_record(run, m.cell.name),
                                     started_at=run.started_at, ended_at=run.ended_at)
                raise TestFailed(f"{label(m)}: {run.error}")
            cell: dict[str, Any] = {**cell_from_job(m.cell, run.output.jobs[0]),
                                    "group": m.group, "mode": m.mode, "pass": m.pass_no,
                                    "direct": self.plan.direct}
            if caches is not None:
                cell["caches_dropped"] = bool(caches.get("dropped"))
            if prefix is not None:
                cell["timeline"] = self._timeline(prefix, m, run)
        finally:
            if logdir is not None:
                shutil.rmtree(logdir, ignore_errors=True)
        mb = (cell["bw_bytes_per_s"] or 0.0) / 1e6
        self.store.add_round(run_id, self.test, n, status="ok", tracking={"MB/s": mb},
                             cells=[cell], fio=fio_record(run, m.cell.name),
                             started_at=run.started_at, ended_at=run.ended_at)
        self.progress.line(f"{self.test} {label(m)}"
                           f"{' pass ' + str(m.pass_no) if m.pass_no > 1 else ''}: "
                           f"{mb:,.1f} MB/s, {cell['iops'] or 0:,.0f} IOPS, "
                           f"{cell['lat_mean_us'] or 0:,.1f} us")
        return cell

    def _timeline(self, prefix: str, m: Measurement, run: FioRun) -> list[list[float]]:
        """Per-interval IOPS of the whole spec (all workers, both directions)."""
        interval = self.plan.log_interval_ms or 1000
        try:
            jobs = [read_log(fio_log_path(prefix, "iops", j))
                    for j in range(1, m.cell.threads + 1)]
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
