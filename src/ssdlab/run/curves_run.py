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

from ssdlab.engine.runner import Executor, FioInterrupted
from ssdlab.errors import UserError
from ssdlab.plan import curves as cv
from ssdlab.plan.options import IOENGINES, PURGE_METHODS
from ssdlab.plan.specs import CellSpec, Mix, Pattern
from ssdlab.plan.units import format_bytes, format_duration
from ssdlab.run.cells import Cell, cell_from_job
from ssdlab.run.progress import Progress
from ssdlab.run.session import FioSetup, RunSession, TestFailed, fio_record, timeout_for
from ssdlab.run.workload_target import WorkloadTarget, materialised, prepare_workload_target
from ssdlab.store.db import Store
from ssdlab.targets.safety import DestroyData
from ssdlab.targets.topology import StatSnapshot, host_cpu_usage, read_proc_stat

TEST = cv.TEST
FILE_NAME = "ssdlab-curves.dat"
#: the test file on --dir without --size (full, quick)
DIR_FILE_DEFAULT = 1 << 30
DIR_FILE_QUICK = 256 << 20
REGION_ALIGN = 1024 * 1024
POINT_KEYS = ("iops", "read_iops", "write_iops", "bw_bytes_per_s", "lat_mean_us",
              "lat_p50_us", "lat_p99_us", "lat_p99_9_us", "lat_max_us", "read_lat_mean_us",
              "write_lat_mean_us")


@dataclass(frozen=True)
class CurvesRequest:
    target: str | None
    directory: str | None
    size_bytes: int | None
    destroy_data: DestroyData
    args: cv.CurvesArgs
    fio: str = "fio"


@dataclass(frozen=True)
class PreparedCurves:
    target: WorkloadTarget
    options: cv.CurvesOptions
    args: cv.CurvesArgs
    region_offset: int
    region_bytes: int

    @property
    def cpus(self) -> int:
        return self.target.base.cpus

    def load(self, w: cv.Workload) -> cv.Load:
        return cv.load_for(self.options.threads or w.threads, self.options.jobs, self.cpus)

    def point(self, w: cv.Workload, kind: str, fraction: int | None = None,
              target_iops: float | None = None) -> cv.Point:
        o = self.options
        return cv.Point(w, kind, fraction, target_iops, self.load(w), self.region_offset,
                        self.region_bytes, o.measure_s, o.ramp_s)


def prepare_curves(request: CurvesRequest) -> PreparedCurves:
    """Validate the whole run: a one-line UserError before any I/O to the target."""
    options = cv.build_options(request.args, PURGE_METHODS, IOENGINES)
    target = prepare_workload_target(request.target, request.directory, request.size_bytes,
                                     request.destroy_data, request.fio, FILE_NAME,
                                     DIR_FILE_QUICK if options.quick else DIR_FILE_DEFAULT)
    info = target.info
    if info.kind == "file" and options.purge not in ("auto", "none"):
        raise UserError(f"--purge {options.purge} applies to block devices; a file target is "
                        "purged by recreating it (--purge auto) or not at all (--purge none)")
    if options.purge.startswith("nvme") and info.device_class != "nvme":
        raise UserError(f"--purge {options.purge} needs an NVMe device; {info.path} is "
                        f"{info.device_class}")
    capacity = info.capacity_bytes
    region = capacity
    if options.fill_region_pct is not None:
        region = int(capacity * options.fill_region_pct / 100)
        region -= region % REGION_ALIGN
    if region < REGION_ALIGN:
        raise UserError(f"the curve region of {info.path} would be {format_bytes(region)}; "
                        "give a larger target or --fill-region")
    cv.check_fits(options, region, info.logical_sector_bytes, target.base.cpus)
    return PreparedCurves(target, options, request.args, 0, region)


def fill_cell(p: PreparedCurves) -> CellSpec:
    """The partial-capacity variant's fill: one sequential pass over the whole target."""
    size = p.target.info.capacity_bytes
    size -= size % cv.FILL_BLOCK
    return CellSpec("fill", Pattern.SEQUENTIAL, cv.FILL_BLOCK, Mix(0), 1, cv.FILL_QD, 0, size,
                    io_bytes=size)


def _setup(p: PreparedCurves, path: str) -> FioSetup:
    info = p.target.info
    return FioSetup(path, p.options.ioengine, p.target.base.versions["ssdlab"],
                    info.device_class, p.options.profile)


def plan_dict(p: PreparedCurves) -> dict[str, Any]:
    o = p.options
    options = {k: v for k, v in dataclasses.asdict(o).items() if k != "workloads"}
    return {"suite": TEST, "args": dataclasses.asdict(p.args), "options": options,
            "preset": o.preset, "workloads": [w.to_dict() for w in o.workloads],
            "region": {"offset_bytes": p.region_offset, "size_bytes": p.region_bytes},
            "dir": None if p.target.dir is None else p.target.dir.to_dict(),
            "ioengine": o.ioengine, "direct": True,
            "rate": "fio rate_iops per job: the point's target / jobs, split by read share; "
                    "for a block-size split fio rate= in bytes (IOPS x the mean block size)",
            "latency": "fio completion latency (clat); mixed percentiles from merged json+"}


def test_params(p: PreparedCurves) -> dict[str, Any]:
    o = p.options
    return {"title": "Curves (vdbench style)", **o.preset, "profile": o.profile,
            "quick": o.quick, "fractions_pct": list(o.fractions_pct), "with_120": o.with_120,
            "measure_s": o.measure_s, "ramp_s": o.ramp_s,
            "min_delivered_pct": o.min_delivered_pct,
            "fill_region_pct": o.fill_region_pct,
            "region": {"offset_bytes": p.region_offset, "size_bytes": p.region_bytes},
            "purge": o.purge, "workloads": [w.to_dict() for w in o.workloads]}


def describe(p: PreparedCurves) -> str:
    """``--dry-run``: the plan and the job files, nothing touched."""
    o, info = p.options, p.target.info
    points = o.points_per_workload * len(o.workloads)
    fractions = ", ".join(f"{f} %" for f in o.fractions_pct)
    out = [
        f"DRY RUN: nothing will be written. Plan for {p.target.describe()}",
        f"{TEST}: preset {o.preset['preset']} v{o.preset['preset_version']}, profile "
        f"{o.profile}{' (QUICK)' if o.quick else ''}, {o.ramp_s:g} s ramp + "
        f"{o.measure_s:g} s measured per point",
        f"per workload: a max-rate run (unthrottled), then {fractions} of it"
        + (f", then {cv.UNTHROTTLED_PCT} % (unthrottled)" if o.with_120 else ""),
        f"points: {points}, about {format_duration(points * (o.point_seconds + 1))}",
        f"region: {format_bytes(p.region_bytes)} from offset {p.region_offset}"
        + (f" ({o.fill_region_pct:g} % after a whole-target fill)"
           if o.fill_region_pct is not None else ""),
        f"purge: {o.purge if info.kind == 'block' or o.purge == 'none' else 'recreate the file'}",
        f"points short of their target rate by more than {100 - o.min_delivered_pct:g} % "
        "are flagged",
    ]
    setup = _setup(p, info.path)
    if o.fill_region_pct is not None:
        out += ["-- fill job file:", setup.job_text((fill_cell(p),), "fill").rstrip()]
    for w in o.workloads:
        load = p.load(w)
        out += ["", f"== {w.describe()}; fio: {load.jobs} job(s) x QD {load.iodepth}",
                f"   source: {w.source}", "-- max-rate job file:",
                cv.point_job_text(p.point(w, "max"), info.path, o.ioengine,
                                  f"{TEST}: {w.name}, max rate").rstrip(),
                "-- each fraction's job file adds rate_iops=READ,WRITE per job: the fraction "
                f"x the measured maximum / {load.jobs} job(s), split {Mix(w.read_pct).label}"
                + ("" if len(w.bssplit) == 1 else
                   f" (as rate= in bytes: x {w.mean_block_bytes:g} bytes, the split's mean "
                   "block size)")]
    return "\n".join(out) + "\n"


#: host CPU use over each point's fio run (ramp included), from /proc/stat
HOST_KEYS = ("host_cpu_pct", "host_steal_pct")
#: a point during which the hypervisor took at least this share of CPU time says so
STEAL_WARN_PCT = 5.0


def host_usage(before: StatSnapshot, after: StatSnapshot) -> dict[str, float | None]:
    """Host-wide CPU busy and steal shares (percent) between two /proc/stat readings."""
    usage = host_cpu_usage(before, after)
    return {"host_cpu_pct": None if usage is None else usage.busy_pct,
            "host_steal_pct": None if usage is None else usage.steal_pct}


def _num(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) \
        else None


class CurvesRun:
    """One curve run against one target, journaled to ``store``."""

    def __init__(self, prepared: PreparedCurves, store: Store, executor: Executor,
                 progress: Progress, *,
                 read_stat: Callable[[], StatSnapshot] = read_proc_stat) -> None:
        self.p = prepared
        self.read_stat = read_stat
        self.o = prepared.options
        self.store = store
        self.executor = executor
        self.progress = progress
        self.session: RunSession | None = None
        self.round_no = 0
        self.results: list[dict[str, Any]] = []
        self.fill: dict[str, Any] | None = None

    def execute(self, argv: list[str]) -> str:
        t = self.p.target
        with materialised(t) as info:
            session = RunSession(info, self.store, self.executor, self.progress,
                                 _setup(self.p, info.path))
            self.session = session
            plan = plan_dict(self.p)
            session.open(suite=TEST, profile=self.o.profile, quick=self.o.quick,
                         host=t.base.host, plan=plan, versions=dict(t.base.versions),
                         argv=argv)
            failed: list[str] = []
            with session.running():
                try:
                    self._test()
                except TestFailed as exc:
                    failed.append(TEST)
                    self._store("failed", str(exc))
                    session.after_failure(TEST, exc)
            session.finish(failed)
        return session.run_id

    @property
    def _s(self) -> RunSession:
        assert self.session is not None
        return self.session

    def _test(self) -> None:
        s = self._s
        self._store("running")
        if self.o.purge != "none":
            s.purge(TEST, self.o.purge, 0, s.info.capacity_bytes)
        if self.o.fill_region_pct is not None:
            cell = fill_cell(self.p)
            s.precondition(TEST, cell)
            self.fill = {"bytes": cell.io_bytes, "block_bytes": cell.block_bytes,
                         "region_pct": self.o.fill_region_pct}
        try:
            for w in self.o.workloads:
                self._workload(w)
        except (FioInterrupted, KeyboardInterrupt):
            self._store("interrupted")
            raise
        self._store("complete")

    def _workload(self, w: cv.Workload) -> None:
        entry: dict[str, Any] = {**w.to_dict(), "describe": w.describe(), "points": [],
                                 "max_iops": None}
        load = self.p.load(w)
        entry.update(jobs=load.jobs, iodepth=load.iodepth, outstanding=load.outstanding)
        self.results.append(entry)
        top = self._point(self.p.point(w, "max"), entry)
        max_iops = _num(top.get("iops")) or 0.0
        entry["max_iops"] = max_iops
        if max_iops <= 0:
            raise TestFailed(f"{w.name}: the max-rate run measured no I/O")
        for f in self.o.fractions_pct:
            self._point(self.p.point(w, "fraction", f, max_iops * f / 100), entry)
        if self.o.with_120:
            self._point(self.p.point(w, "unthrottled", cv.UNTHROTTLED_PCT), entry)
        self._store("running")
        self.progress.line(f"{w.name}: {self._summary(entry)}")

    @staticmethod
    def _summary(entry: dict[str, Any]) -> str:
        fr = [q for q in entry["points"] if q["kind"] == "fraction"]
        short = sum(1 for q in entry["points"] if q.get("short"))
        if not fr:
            return "no points"
        a, b = fr[0], fr[-1]
        text = (f"max {entry['max_iops']:,.0f} IOPS; mean latency {a['lat_mean_us']:.0f} us at "
                f"{a['fraction_pct']} % -> {b['lat_mean_us']:.0f} us at {b['fraction_pct']} %")
        return text + (f"; {short} point(s) short of their target rate" if short else "")

    def _point(self, point: cv.Point, entry: dict[str, Any]) -> Cell:
        s = self._s
        self.round_no += 1
        spec = point.cell_spec()
        text = cv.point_job_text(point, s.info.path, self.o.ioengine,
                                 f"ssdlab {self.p.target.base.versions['ssdlab']}: {TEST} "
                                 f"point {self.round_no}: {point.workload.name}, {point.label}")
        self.progress.phase(f"{point.workload.name} {point.label}", self.round_no,
                            spec.planned_seconds)
        before = self.read_stat()
        run = self.executor.run(text, timeout_for((spec,)), json_plus=True,
                                on_tick=self.progress.tick)
        usage = host_usage(before, self.read_stat())
        job = None
        if run.output is not None:
            job = next((j for j in run.output.jobs if j.name == point.name), None)
        cell = cell_from_job(spec, job) if job is not None else None
        ok = run.ok and cell is not None and (_num(cell.get("iops")) or 0) > 0
        if cell is not None:
            cell.update(self._extra(point, cell))
            cell.update(usage)
        self.store.add_round(
            s.run_id, TEST, self.round_no, status="ok" if ok else "failed",
            tracking={"iops": _num(cell.get("iops")) or 0.0, "lat_mean_us": _num(
                cell.get("lat_mean_us")) or 0.0} if ok and cell else {},
            cells=[cell] if cell is not None else [], fio=fio_record(run, "round"),
            started_at=run.started_at, ended_at=run.ended_at)
        s.ground_truth(TEST, f"point {self.round_no}")
        if not ok or cell is None:
            raise TestFailed(f"point {self.round_no} ({point.workload.name}, {point.label}): "
                             f"{run.error or 'fio measured no I/O'}")
        summary: dict[str, Any] = {"round": self.round_no}
        summary.update({k: cell.get(k) for k in (
            "kind", "fraction_pct", "target_iops", "delivered_pct", "short", "fio_rate",
            *POINT_KEYS, *HOST_KEYS)})
        entry["points"].append(summary)
        self.progress.line(self._point_line(point, cell))
        return cell

    def _extra(self, point: cv.Point, cell: Cell) -> dict[str, object]:
        iops = _num(cell.get("iops")) or 0.0
        delivered = None if point.target_iops is None else 100 * iops / point.target_iops
        return {"workload": point.workload.name, "kind": point.kind,
                "fraction_pct": point.fraction_pct, "target_iops": point.target_iops,
                "delivered_pct": delivered,
                "short": delivered is not None and delivered < self.o.min_delivered_pct,
                "fio_rate": point.rate_line(),
                "outstanding": point.load.outstanding, "bssplit": point.workload.bssplit_text(),
                "distribution": point.workload.distribution}

    @staticmethod
    def _point_line(point: cv.Point, cell: Cell) -> str:
        target = "" if point.target_iops is None else f" (target {point.target_iops:,.0f})"
        flag = " SHORT of target" if cell.get("short") else ""
        steal = _num(cell.get("host_steal_pct"))
        if steal is not None and steal >= STEAL_WARN_PCT:
            flag += f"; the hypervisor took {steal:.0f} % of the CPU time (steal)"
        mean, p99 = _num(cell.get("lat_mean_us")), _num(cell.get("lat_p99_us"))
        return (f"  {point.workload.name} {point.label}: {float(str(cell['iops'])):,.0f} IOPS"
                f"{target}, mean {mean or 0:.1f} us, p99 {p99 or 0:.1f} us{flag}")

    def _store(self, status: str, error: str | None = None) -> None:
        s = self._s
        verdicts = {w["name"]: {"message": self._summary(w)} for w in self.results}
        result: dict[str, Any] = {"workloads": self.results, "fill": self.fill,
                                  "preset": self.o.preset,
                                  "points_run": sum(len(w["points"]) for w in self.results),
                                  "short_points": sum(1 for w in self.results
                                                      for q in w["points"] if q.get("short"))}
        if error is not None:
            result["error"] = error
        self.store.set_test(s.run_id, TEST, status=status, params=test_params(self.p),
                            verdicts=verdicts, result=result)
