"""Execute a curve run (``ssdlab run curves``, methodology section 2).

Optional purge, optional whole-target fill (the partial-capacity variant: the curves then
run on the first ``--fill-region`` percent), then per workload: one unthrottled run at
the workload's outstanding I/O finds its maximum rate, then one run per fraction of it
(fio ``rate_iops``; ``rate`` in bytes for block-size splits), then optionally one more
unthrottled run (vdbench's 120 %). Every point is one fio run (json+), committed as a
round of the test ``curves`` when it ends.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ssdlab.engine.jobfile import render
from ssdlab.engine.runner import Executor, FioInterrupted, FioRun
from ssdlab.plan import curve_workloads as cw
from ssdlab.plan import curves as cv
from ssdlab.plan.curves import (
    TEST,
    CurvesArgs,
    CurvesOptions,
    CurvesResult,
    FillRecord,
    PointRecord,
    WorkloadRecord,
)
from ssdlab.plan.planned import PlannedTime
from ssdlab.plan.results import StoredPlan, Verdict
from ssdlab.plan.specs import IOENGINES, PURGE_METHODS
from ssdlab.run.cells import Cell, cell_from_job
from ssdlab.run.prepare import TargetRequest, check_file_purge, engine_for
from ssdlab.run.progress import Progress
from ssdlab.run.session import TestFailed
from ssdlab.run.suite import Runner
from ssdlab.run.workload_target import (
    PreparedWorkload,
    WorkloadRun,
    dry_run_head,
    prepare_workload_target,
)
from ssdlab.store.db import Store
from ssdlab.store.records import RunData, TestState
from ssdlab.targets.topology import StatSnapshot, host_cpu_usage, read_proc_stat

#: a point during which the hypervisor took at least this share of CPU time says so
STEAL_WARN_PCT = 5.0


@dataclass(frozen=True)
class PreparedCurves(PreparedWorkload[CurvesOptions]):
    args: CurvesArgs
    layout: cv.Layout

    def point(self, w: cw.Workload, kind: str, fraction: int | None = None,
              target_iops: float | None = None) -> cw.Point:
        return self.layout.point(self.options, w, kind, fraction, target_iops)


def prepare_curves(request: TargetRequest, args: CurvesArgs) -> PreparedCurves:
    """Validate the whole run: a one-line UserError before any I/O to the target."""
    options = cv.build_options(args, PURGE_METHODS, IOENGINES)
    target = prepare_workload_target(
        request, cv.FILE_NAME, cv.DIR_FILE_QUICK if options.quick else cv.DIR_FILE_DEFAULT)
    info = target.info
    options = engine_for(info, options)
    check_file_purge(info, options.purge)
    layout = cv.layout_on(options, info.path, info.capacity_bytes, info.logical_sector_bytes,
                          target.cpus)
    return PreparedCurves(target, options, args, layout)


def describe(p: PreparedCurves) -> str:
    """``--dry-run``: the plan and the job files, nothing touched."""
    info = p.target.info
    lines = cv.describe(p.options, p.layout, info.path, info.kind == "block",
                        p.job_text, render)
    return "\n".join([dry_run_head(p.target, "Plan for"), *lines]) + "\n"


def host_usage(before: StatSnapshot, after: StatSnapshot) -> dict[str, float | None]:
    """Host-wide CPU busy and steal shares (percent) between two /proc/stat readings: the
    host's CPU use over a point's fio run (ramp included)."""
    usage = host_cpu_usage(before, after)
    return {"host_cpu_pct": None if usage is None else usage.busy_pct,
            "host_steal_pct": None if usage is None else usage.steal_pct}


class CurvesRun(WorkloadRun[PreparedCurves]):
    """One curve run against one target, journaled to ``store``."""

    suite = TEST

    def __init__(self, prepared: PreparedCurves, store: Store, executor: Executor,
                 progress: Progress, *,
                 read_stat: Callable[[], StatSnapshot] = read_proc_stat) -> None:
        super().__init__(prepared, store, executor, progress)
        self.read_stat = read_stat
        self.o = prepared.options
        self.round_no = 0
        self.results: list[WorkloadRecord] = []
        self.fill: FillRecord | None = None

    def plan_record(self) -> StoredPlan:
        return cv.plan_record(self.o, self.p.args, self.p.layout,
                              self.p.target.dir_dict())

    def run_tests(self, previous: RunData | None) -> list[str]:
        return self.one_test(TEST, self._test)

    def _test(self) -> None:
        try:
            self._curves()
        except TestFailed as exc:
            self._store("failed", str(exc))
            raise

    def _curves(self) -> None:
        s = self.session
        self._store("running")
        if self.o.purge != "none":
            s.purge(TEST, self.o.purge, 0, s.info.capacity_bytes)
        if self.o.fill_region_pct is not None:
            cell = cv.fill_cell(self.p.layout.capacity_bytes)
            s.precondition(TEST, cell)
            self.fill = FillRecord(cell.io_bytes or 0, cell.block_bytes, self.o.fill_region_pct)
        try:
            for w in self.o.workloads:
                self._workload(w)
        except (FioInterrupted, KeyboardInterrupt):
            self._store("interrupted")
            raise
        self._store("complete")

    def _workload(self, w: cw.Workload) -> None:
        self.results.append(cv.workload_record(w, self.p.layout.load(self.o, w)))
        max_iops = self._point(self.p.point(w, "max")).iops
        self._update(max_iops=max_iops)
        if max_iops <= 0:
            raise TestFailed(f"{w.name}: the max-rate run measured no I/O")
        for f in self.o.fractions_pct:
            self._point(self.p.point(w, "fraction", f, max_iops * f / 100))
        if self.o.with_120:
            self._point(self.p.point(w, "unthrottled", cw.UNTHROTTLED_PCT))
        self._store("running")
        self.progress.line(f"{w.name}: {self.results[-1].summary()}")

    def _update(self, **changes: Any) -> None:
        """The current workload's curve, changed."""
        self.results[-1] = dataclasses.replace(self.results[-1], **changes)

    def _point(self, point: cw.Point) -> PointRecord:
        s = self.session
        self.round_no += 1
        spec = point.cell_spec()
        header = (f"ssdlab {self.p.target.versions['ssdlab']}: {TEST} point {self.round_no}: "
                  f"{point.workload.name}, {point.label}")
        text = render(cw.point_job(point, s.info.path, self.o.ioengine), header)
        self.progress.phase(f"{point.workload.name} {point.label}", self.round_no,
                            spec.planned_seconds)
        before = self.read_stat()
        run = s.run_fio(text, (spec,), json_plus=True)
        usage = host_usage(before, self.read_stat())
        cell = self._cell(run, point)
        record = None if cell is None else self._record(point, cell, usage)
        ok = run.ok and record is not None and record.iops > 0
        stored: cv.CurvesCell | None = None if cell is None else cv.CurvesCell.from_json(
            cell if record is None else {**cell, **self._extra(point, record), **usage},
            f"{TEST} point {self.round_no}")
        s.fio_round(
            TEST, self.round_no, run, "round", status="ok" if ok else "failed",
            tracking={"iops": record.iops, "lat_mean_us": record.lat_mean_us or 0.0}
            if ok and record is not None else {},
            cells=[stored] if stored is not None else [])
        s.ground_truth(TEST, f"point {self.round_no}")
        if not ok or record is None:
            raise TestFailed(f"point {self.round_no} ({point.workload.name}, {point.label}): "
                             f"{run.error or 'fio measured no I/O'}")
        self._update(points=[*self.results[-1].points, record])
        self.progress.line(self._point_line(point, record))
        return record

    @staticmethod
    def _cell(run: FioRun, point: cw.Point) -> Cell | None:
        if run.output is None:
            return None
        job = next((j for j in run.output.jobs if j.name == point.name), None)
        return None if job is None else cell_from_job(point.cell_spec(), job)

    def _record(self, point: cw.Point, cell: Cell, usage: dict[str, float | None]
                ) -> PointRecord:
        """The point as the result keeps it: the cell's figures (read as the record's
        types), what the point asked for, the host's CPU use."""
        figures = PointRecord.from_json({k: cell.get(k) for k in cv.CELL_FIGURES},
                                        f"{TEST} point {self.round_no}")
        target = point.target_iops
        delivered = None if target is None else 100 * figures.iops / target
        return dataclasses.replace(
            figures, round=self.round_no, kind=point.kind, fraction_pct=point.fraction_pct,
            target_iops=target, delivered_pct=delivered,
            short=delivered is not None and delivered < self.o.min_delivered_pct,
            fio_rate=point.rate_line(), host_cpu_pct=usage["host_cpu_pct"],
            host_steal_pct=usage["host_steal_pct"])

    @staticmethod
    def _extra(point: cw.Point, record: PointRecord) -> dict[str, object]:
        """What a point's stored round cell adds to fio's figures."""
        return {"workload": point.workload.name, "kind": point.kind,
                "fraction_pct": point.fraction_pct, "target_iops": point.target_iops,
                "delivered_pct": record.delivered_pct, "short": record.short,
                "fio_rate": record.fio_rate, "outstanding": point.load.outstanding,
                "bssplit": point.workload.bssplit_text(),
                "distribution": point.workload.distribution}

    @staticmethod
    def _point_line(point: cw.Point, q: PointRecord) -> str:
        target = "" if point.target_iops is None else f" (target {point.target_iops:,.0f})"
        flag = " SHORT of target" if q.short else ""
        steal = q.host_steal_pct
        if steal is not None and steal >= STEAL_WARN_PCT:
            flag += f"; the hypervisor took {steal:.0f} % of the CPU time (steal)"
        return (f"  {point.workload.name} {point.label}: {q.iops:,.0f} IOPS"
                f"{target}, mean {q.lat_mean_us or 0:.1f} us, p99 {q.lat_p99_us or 0:.1f} us"
                f"{flag}")

    def _store(self, status: str, error: str | None = None) -> None:
        result = CurvesResult(
            workloads=list(self.results), fill=self.fill, preset=self.o.preset,
            points_run=sum(len(w.points) for w in self.results),
            short_points=sum(1 for w in self.results for q in w.points if q.short),
            error=error)
        verdicts = {w.name: Verdict(w.summary()) for w in self.results}
        self.store.set_test(self.run_id, TEST, TestState(
            status, cv.test_params(self.o, self.p.layout), verdicts, result))


def planned(p: PreparedCurves) -> PlannedTime:
    """Every point (as its dry run says: its time and a second of fio's), the fill and
    the purge."""
    o = p.options
    points = o.points_per_workload * len(o.workloads)
    out = PlannedTime.fixed(points * (o.point_seconds + 1))
    if o.fill_region_pct is not None:
        fill = cv.fill_cell(p.layout.capacity_bytes)
        out += PlannedTime.io(fill.io_bytes or 0, "the whole-target fill")
    if o.purge != "none":
        out += PlannedTime.step("a purge")
    return out


RUNNER = Runner(
    prepare=prepare_curves,
    describe=describe,
    start=CurvesRun,
    planned=planned,
)
