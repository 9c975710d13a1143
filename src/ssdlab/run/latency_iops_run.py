"""Execute a latency-vs-IOPS run (methodology 1.6, with 1.9's host CPU and NUMA checks).

Purge and workload-independent preconditioning once, then for every block size and mix
one curve per thread count: one fio run per queue depth (ramp_time = warm-up, runtime =
measured, json+), each committed to the store as a round of the test ``latency-iops``
the moment it finishes, until the ladder's stopping rule says stop
(:mod:`ssdlab.analysis.ladder`). Around every point the host-wide CPU use is read from
``/proc/stat`` over the measured period; at the end (and after every point, so a crash
keeps a consistent result) the host-bound verdict is computed
(:mod:`ssdlab.analysis.hostbound`). Ctrl-C keeps every completed point.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TextIO

from ssdlab.analysis.hostbound import CpuPoint, HostBoundRule, HostBoundVerdict, host_bound
from ssdlab.analysis.ladder import MAX_QD, LadderPoint, LadderRule, decide, rise_pct
from ssdlab.analysis.numa import NumaCheck, format_cpulist, numa_check
from ssdlab.engine.runner import Executor, FioInterrupted, FioRun
from ssdlab.errors import TargetError, UserError
from ssdlab.plan.latency_iops import (
    POINT_OVERHEAD_S,
    TEST,
    CurveKey,
    LatencyIopsArgs,
    LatencyIopsOptions,
    LatencyIopsPlan,
    build_options,
    build_plan,
)
from ssdlab.plan.specs import CellSpec, Mix, block_label
from ssdlab.plan.units import format_bytes, format_duration
from ssdlab.run.cells import Cell, cell_from_job
from ssdlab.run.prepare import (
    MIN_ACTIVE_RANGE,
    PreparedTarget,
    check_same_target,
    prepare_target,
)
from ssdlab.run.progress import Progress
from ssdlab.run.session import FioSetup, RunSession, TestFailed, fio_record, timeout_for
from ssdlab.store.db import Store
from ssdlab.store.records import RunData, TestData
from ssdlab.targets.filetarget import create_file_target
from ssdlab.targets.safety import DestroyData
from ssdlab.targets.topology import (
    StatSnapshot,
    allowed_cpus,
    busiest_cpu_pct,
    host_cpu_usage,
    node_cpus,
    pci_attachment,
    read_proc_stat,
)

__all__ = ["LatencyIopsRequest", "LatencyIopsRun", "describe", "prepare_latency_iops"]

#: fio's start-up before its ramp begins; host CPU is read from this long after the warm-up
FIO_STARTUP_S = 0.2
#: what a point keeps in the test's result (the round's cell holds everything)
POINT_KEYS = (
    "iodepth", "outstanding", "iops", "lat_mean_us", "lat_p99_us", "lat_p99_9_us",
    "lat_p99_99_us", "lat_max_us", "read_lat_mean_us", "write_lat_mean_us", "bw_bytes_per_s",
    "usr_cpu_pct", "sys_cpu_pct", "host_cpu_pct", "host_usr_pct", "host_sys_pct",
    "host_cpu_busiest_pct", "iops_rise_pct",
)


# ------------------------------------------------------------------------ preparing


@dataclass(frozen=True)
class LatencyIopsRequest:
    target: str
    size_bytes: int | None
    destroy_data: DestroyData
    args: LatencyIopsArgs
    fio: str = "fio"


@dataclass(frozen=True)
class LatencyIopsPrepared:
    base: PreparedTarget
    options: LatencyIopsOptions
    plan: LatencyIopsPlan
    args: LatencyIopsArgs = field(default_factory=LatencyIopsArgs)


def _check_target(base: PreparedTarget, options: LatencyIopsOptions, plan: LatencyIopsPlan) -> None:
    info = base.info
    if info.kind == "file" and options.purge not in ("auto", "none"):
        raise UserError(
            f"--purge {options.purge} applies to block devices; a file target is "
            "purged by recreating it (--purge auto) or not at all (--purge none)"
        )
    if options.purge.startswith("nvme") and info.device_class != "nvme":
        raise UserError(
            f"--purge {options.purge} needs an NVMe device; {info.path} is {info.device_class}"
        )
    if plan.range.size_bytes < MIN_ACTIVE_RANGE:
        raise TargetError(
            f"target {info.path} is too small: its active range is "
            f"{format_bytes(plan.range.size_bytes)}, ssdlab needs at least "
            f"{format_bytes(MIN_ACTIVE_RANGE)}"
        )


def prepare_latency_iops(request: LatencyIopsRequest) -> LatencyIopsPrepared:
    """Validate the whole run: a one-line UserError before any I/O to the target."""
    options = build_options(request.args, 1)  # options first: bad values before the target
    base = prepare_target(request.target, request.size_bytes, request.destroy_data, request.fio)
    if request.args.max_threads is None:
        options = build_options(request.args, base.cpus)
    plan = build_plan(options, base.info.capacity_bytes, base.info.logical_sector_bytes)
    _check_target(base, options, plan)
    return LatencyIopsPrepared(base, options, plan, request.args)


def fio_setup(prepared: LatencyIopsPrepared) -> FioSetup:
    return FioSetup(
        prepared.base.info.path, prepared.options.ioengine, prepared.base.versions["ssdlab"],
        prepared.base.info.device_class, prepared.options.profile,
    )


def _cell_dict(cell: CellSpec) -> dict[str, object]:
    data = dataclasses.asdict(cell)
    data["pattern"] = str(cell.pattern)
    data["read_pct"] = cell.mix.read_pct
    del data["mix"]
    return data


def plan_dict(prepared: LatencyIopsPrepared) -> dict[str, Any]:
    opts = prepared.options
    options = dataclasses.asdict(opts)
    options["quick"] = opts.quick
    return {
        "suite": TEST,
        # what ``ssdlab resume`` validates again (thread extension as resolved on this host)
        "args": dataclasses.asdict(dataclasses.replace(
            prepared.args, max_threads=opts.max_threads)),
        "options": options,
        "qd_ladder": list(opts.qd_ladder),
        "extra_threads": list(opts.extra_threads),
        "workloads": [cell_label_of(b, m) for b, m in prepared.plan.workloads],
        "skipped": [{"cell": c, "reason": r} for c, r in prepared.plan.skipped],
        "ioengine": opts.ioengine,
        "direct": True,
        "data_pattern": "fio default (random, scrambled per I/O)",
        "latency": "fio completion latency (clat); mixed-point percentiles from merged "
        "json+ histograms",
        "host_cpu": "/proc/stat busy share of all CPUs over each point's measured period",
    }


def test_params(prepared: LatencyIopsPrepared) -> dict[str, Any]:
    opts, plan = prepared.options, prepared.plan
    return {
        "title": "Latency vs IOPS",
        "target_latency_us": opts.target_latency_us,
        "min_iops_rise_pct": opts.min_iops_rise_pct,
        "full_ladder": opts.full_ladder,
        "threads": list(opts.threads),
        "extra_threads": list(opts.extra_threads),
        "qd_ladder": list(opts.qd_ladder),
        "base_qds": list(opts.qds),
        "warmup_s": opts.warmup_s,
        "measure_s": opts.measure_s,
        "cell_seconds": opts.point_seconds,
        "host_bound_rule": {"cpu_pct": opts.host_bound_cpu_pct,
                            "max_rise_pct": opts.host_bound_rise_pct},
        "active_range": {"offset_bytes": plan.range.offset_bytes,
                         "size_bytes": plan.range.size_bytes},
        "purge": opts.purge,
        "precondition": None if plan.wipc is None else _cell_dict(plan.wipc),
        "skipped": [{"cell": c, "reason": r} for c, r in plan.skipped],
        "quick": opts.quick,
    }


def cell_label_of(block: int, read_pct: int) -> str:
    return f"{block_label(block)} {Mix(read_pct).label}"


# ------------------------------------------------------------------------ dry run


def describe(prepared: LatencyIopsPrepared) -> str:
    """``--dry-run``: the plan and the job files, with nothing touched."""
    info, opts, plan = prepared.base.info, prepared.options, prepared.plan
    setup = fio_setup(prepared)
    per_point = opts.point_seconds + POINT_OVERHEAD_S
    extra = (f" (then {', '.join(map(str, opts.extra_threads))} while the largest stays "
             "below the target at the largest QD)" if opts.extra_threads else "")
    rule = (f"stop a curve when mean latency >= {opts.target_latency_us:g} us or IOPS rose "
            f"< {opts.min_iops_rise_pct:g} % over the previous QD")
    if opts.full_ladder:
        rule += f" (checked from QD {opts.qds[-1]} on: --full-ladder)"
    out = [
        f"DRY RUN: nothing will be written. Plan for {info.path} ({info.device_class}, "
        f"{format_bytes(info.capacity_bytes)}, {info.logical_sector_bytes}-byte sectors)",
        f"{TEST}: profile {opts.profile}{' (QUICK)' if opts.quick else ''}, "
        f"{opts.warmup_s:g} s warm-up + {opts.measure_s:g} s measured per point",
        f"workloads: {', '.join(cell_label_of(b, m) for b, m in plan.workloads)}",
        f"threads: {', '.join(map(str, opts.threads))}{extra}",
        f"queue depth per thread: {', '.join(map(str, opts.qd_ladder))}; {rule}",
        f"host-bound: host CPU >= {opts.host_bound_cpu_pct:g} % and IOPS rise "
        f"< {opts.host_bound_rise_pct:g} %",
        f"points: at least {plan.min_points()}, at most {plan.max_points()}; about "
        f"{format_duration(plan.min_points() * per_point)}-"
        f"{format_duration(plan.max_points() * per_point)} (+ purge and preconditioning)",
        f"active range: {format_bytes(plan.range.size_bytes)} from offset "
        f"{plan.range.offset_bytes}",
    ]
    if prepared.base.create_file:
        out.append(f"would create and fully allocate {info.path} "
                   f"({format_bytes(info.capacity_bytes)})")
    purge = opts.purge
    if info.kind == "file" and purge != "none":
        purge = "recreate the file"
    out.append(f"purge: {purge}")
    out += [f"skipped {label}: {reason}" for label, reason in plan.skipped]
    if plan.wipc is not None:
        out += ["-- preconditioning job file:",
                setup.job_text((plan.wipc,), f"{TEST} workload-independent "
                               "preconditioning").rstrip()]
    out.append("-- job file of each curve's first point (later points differ only in "
               "iodepth= and numjobs=):")
    for block, mix in plan.workloads:
        key = CurveKey(block, mix, opts.threads[0])
        cell = plan.point(key, opts.qd_ladder[0])
        out += ["", setup.job_text((cell,), f"{TEST}: {key.label}, QD {cell.iodepth}").rstrip()]
    return "\n".join(out) + "\n"


# ------------------------------------------------------------------------ host CPU


class CpuWindow:
    """Host CPU over one fio run's measured period, from ``/proc/stat`` readings.

    Read before fio starts, at the first progress tick after the warm-up (plus fio's
    start-up), and after fio ends. Without such a tick (a short run, a fake executor)
    the whole run is the window, and the result says so.
    """

    def __init__(self, read: Callable[[], StatSnapshot], measure_from_s: float) -> None:
        self.read = read
        self.measure_from_s = measure_from_s
        self.first = read()
        self.start: tuple[float, StatSnapshot] | None = None

    def tick(self, elapsed_s: float) -> None:
        if self.start is None and elapsed_s >= self.measure_from_s:
            self.start = (elapsed_s, self.read())

    def finish(self, wall_s: float, cpus: frozenset[int]) -> dict[str, object]:
        end = self.read()
        begin = self.start[1] if self.start else self.first
        usage = host_cpu_usage(begin, end)
        return {
            "host_cpu_pct": None if usage is None else usage.busy_pct,
            "host_usr_pct": None if usage is None else usage.usr_pct,
            "host_sys_pct": None if usage is None else usage.sys_pct,
            "host_steal_pct": None if usage is None else usage.steal_pct,
            "host_cpu_busiest_pct": busiest_cpu_pct(begin, end, cpus),
            "host_cpu_window_s": max(0.0, wall_s - self.start[0]) if self.start else wall_s,
            "host_cpu_window": "measured period" if self.start else "whole fio run",
        }


# ------------------------------------------------------------------------ progress


class LadderProgress(Progress):
    """Progress of a ladder run: log lines, and a live line whose ETA is a range."""

    def __init__(self, stream: TextIO | None = None, *, live: bool | None = None,
                 quick: bool = False, point_s: float = 35.0) -> None:
        super().__init__(stream or sys.stdout, live=live, quick=quick)
        self.point_s = point_s
        self.left: tuple[int, int] = (0, 0)  # (fewest, most) points still to run

    def _eta(self) -> str:
        per_point = self.point_s + POINT_OVERHEAD_S
        now = max(0.0, (self.state.planned_s or 0.0) - self.state.elapsed_s)
        low, high = (now + n * per_point for n in self.left)
        return f"{format_duration(low)}-{format_duration(high)}"


# ------------------------------------------------------------------------ the run


@dataclass
class Curve:
    key: CurveKey
    points: list[Cell] = field(default_factory=list)
    rounds: list[int] = field(default_factory=list)
    stop: dict[str, str] | None = None  # {"kind", "reason"}

    def ladder_points(self) -> list[LadderPoint]:
        return [LadderPoint(int(str(c["iodepth"])), _num(c.get("iops")),
                            _num(c.get("lat_mean_us"))) for c in self.points]

    def cpu_points(self) -> list[CpuPoint]:
        return [CpuPoint(self.key.threads, int(str(c["iodepth"])), _num(c.get("iops")),
                         _opt(c.get("host_cpu_pct"))) for c in self.points]


def _num(value: object) -> float:
    return float(value) if isinstance(value, int | float) else 0.0


def _opt(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) else None


class LatencyIopsRun:
    """One latency-vs-IOPS run against one target, journaled to ``store``."""

    def __init__(
        self,
        prepared: LatencyIopsPrepared,
        store: Store,
        executor: Executor,
        progress: Progress,
        *,
        read_stat: Callable[[], StatSnapshot] = read_proc_stat,
        fio_cpus: Callable[[], frozenset[int]] = allowed_cpus,
    ) -> None:
        self.p = prepared
        self.opts = prepared.options
        self.store = store
        self.executor = executor
        self.progress = progress
        self.read_stat = read_stat
        self.cpus = fio_cpus()
        self.session = RunSession(prepared.base.info, store, executor, progress,
                                  fio_setup(prepared))
        self.curves: list[Curve] = []
        self.round_no = 0
        self.numa: NumaCheck = numa_check(prepared.base.info.numa_node, self.cpus,
                                          node_cpus(prepared.base.host))
        info = prepared.base.info
        self.pcie = pci_attachment(info.name) if info.kind == "block" else None

    @property
    def run_id(self) -> str:
        return self.session.run_id

    def execute(self, argv: list[str]) -> str:
        base = self.p.base
        if base.create_file:
            self.session.info = create_file_target(base.info.path, base.info.capacity_bytes)
        self.session.open(
            suite=TEST, profile=self.opts.profile, quick=self.opts.quick, host=base.host,
            plan=plan_dict(self.p), versions=dict(base.versions), argv=argv,
        )
        with self.session.running():
            failed = self._run_test(None)
        self.session.finish(failed)
        return self.run_id

    def resume(self, previous: RunData, argv: list[str]) -> str:
        """Continue a stopped run: finished curves stay, the others go on from their next
        queue depth; no new purge or preconditioning once points exist."""
        check_same_target(previous, self.p.base)
        self.session.reopen(previous.run_id, argv)
        stored = next((t for t in previous.tests if t.name == TEST), None)
        with self.session.running():
            failed = self._run_test(stored)
        self.session.finish(failed)
        return self.run_id

    # -- the test ----------------------------------------------------------------------
    def _run_test(self, previous: TestData | None) -> list[str]:
        resumed = previous is not None and self._restore(previous)
        if not resumed:
            self.store.set_test(self.run_id, TEST, status="running",
                                params=test_params(self.p), verdicts={}, result={})
        self._announce(resumed)
        try:
            rng = self.p.plan.range
            if not resumed and self.opts.purge != "none":
                self.session.purge(TEST, self.opts.purge, rng.offset_bytes, rng.size_bytes)
            if not resumed and self.p.plan.wipc is not None:
                self.session.precondition(TEST, self.p.plan.wipc)
            for block, mix in self.p.plan.workloads:
                self._workload(block, mix)
        except TestFailed as exc:
            self._store_result("failed", str(exc))
            self.progress.line(f"{TEST}: FAILED: {exc}")
            return [TEST]
        except (FioInterrupted, KeyboardInterrupt):
            if self.curves and self.curves[-1].stop is None:
                self.curves[-1].stop = {"kind": "interrupted", "reason": "stopped by Ctrl-C"}
            self._store_result("interrupted")
            raise
        verdict = self._store_result("complete")
        self.progress.line(f"{TEST}: {verdict.message}")
        return []

    def _restore(self, previous: TestData) -> bool:
        """Curves and round numbers of a stopped test; False when it has no points yet."""
        ok = sorted((r for r in previous.rounds if r.status == "ok" and r.cells),
                    key=lambda r: r.round_no)
        self.round_no = max((r.round_no for r in previous.rounds), default=0)
        if not ok:
            return False
        stops = {str(c.get("label")): c.get("stop") for c in
                 previous.result.get("curves", []) if isinstance(c, dict)}
        by_key: dict[CurveKey, Curve] = {}
        for rnd in ok:
            cell = dict(rnd.cells[0])
            key = CurveKey(int(str(cell["block_bytes"])), int(str(cell["read_pct"])),
                           int(str(cell["threads"])))
            if key not in by_key:
                by_key[key] = Curve(key)
                self.curves.append(by_key[key])
            by_key[key].points.append(cell)
            by_key[key].rounds.append(rnd.round_no)
        for curve in self.curves:
            stop = stops.get(curve.key.label)
            finished = isinstance(stop, dict) and stop.get("kind") not in (
                "interrupted", "failed", None)
            curve.stop = dict(stop) if finished and isinstance(stop, dict) else None
        last = ok[-1]
        idle = time.time() - last.ended_at
        self.store.add_event(
            self.run_id, TEST, "resumed",
            f"resumed after point {last.round_no}: the drive was idle for {idle:,.0f} s and is "
            "not purged or preconditioned again; the points after it come after that pause",
            {"after_round": last.round_no, "idle_s": idle},
        )
        return True

    def _announce(self, resumed: bool) -> None:
        self.progress.line(f"{TEST}: NUMA: {self.numa.message}")
        if resumed:
            done = sum(len(c.points) for c in self.curves)
            self.progress.line(f"{TEST}: resuming after {done} stored points")
            return
        if self.numa.mismatch:
            self.store.add_event(self.run_id, TEST, "warning", f"NUMA: {self.numa.message}",
                                 self.numa.to_dict())
        for label, reason in self.p.plan.skipped:
            self.store.add_event(self.run_id, TEST, "skipped", f"skipped {label}: {reason}")
        self._set_left()

    def _set_left(self) -> None:
        if isinstance(self.progress, LadderProgress):
            done = len([c for c in self.curves if c.stop is not None])
            total = len(self.p.plan.workloads) * len(self.opts.threads)
            ladder = len(self.opts.qd_ladder)
            self.progress.left = (max(0, total - done), max(0, total - done) * ladder)

    def _workload(self, block: int, mix: int) -> None:
        last: Curve | None = None
        for threads in self.opts.threads:
            last = self._curve(CurveKey(block, mix, threads))
        for threads in self.opts.extra_threads:
            if last is None or last.stop is None or last.stop["kind"] != MAX_QD:
                break
            key = CurveKey(block, mix, threads)
            if self._stored(key) is None:
                self.progress.line(
                    f"{last.key.label} stayed below {self.opts.target_latency_us:g} us up to "
                    f"QD {self.opts.qd_ladder[-1]}: adding {threads} threads"
                )
            last = self._curve(key)

    def _stored(self, key: CurveKey) -> Curve | None:
        return next((c for c in self.curves if c.key == key), None)

    def _curve(self, key: CurveKey) -> Curve:
        """Run (or, resuming, finish) one curve's ladder until its stopping rule says stop."""
        curve = self._stored(key)
        if curve is not None and curve.stop is not None:
            return curve  # finished before a resume
        if curve is None:
            curve = Curve(key)
            self.curves.append(curve)
        ladder = self.opts.qd_ladder
        rule = LadderRule(self.opts.target_latency_us, self.opts.min_iops_rise_pct,
                          self.opts.qds[-1] if self.opts.full_ladder else 1)
        done = {int(str(c["iodepth"])) for c in curve.points}
        for i, qd in enumerate(ladder):
            if qd not in done:
                self._point(curve, qd)
            elif qd != int(str(curve.points[-1]["iodepth"])):
                continue  # resuming: decide again only at the last stored point
            decision = decide(curve.ladder_points(), rule,
                              ladder[i + 1] if i + 1 < len(ladder) else None)
            if decision.stop:
                curve.stop = decision.to_dict()
                break
        self._store_result("running")
        self._set_left()
        count = len(curve.points)
        self.progress.line(f"{key.label}: {count} point{'s' if count != 1 else ''}; stopped: "
                           f"{curve.stop['reason'] if curve.stop else '-'}")
        return curve

    def _point(self, curve: Curve, qd: int) -> None:
        key = curve.key
        spec = self.p.plan.point(key, qd)
        self.round_no += 1
        round_no = self.round_no
        text = self.session.fio.job_text((spec,), f"{TEST} point {round_no}: {key.label}, "
                                         f"QD {qd}")
        self.progress.phase(f"{key.label}, QD {qd}", round_no, spec.planned_seconds)
        window = CpuWindow(self.read_stat, self.opts.warmup_s + FIO_STARTUP_S)

        def on_tick(elapsed_s: float) -> None:
            window.tick(elapsed_s)
            self.progress.tick(elapsed_s)

        run = self.executor.run(text, timeout_for((spec,)), json_plus=True, on_tick=on_tick)
        host = window.finish(run.ended_at - run.started_at, self.cpus)
        cell = self._cell(spec, run, host, curve)
        ok = run.ok and cell is not None and _num(cell.get("iops")) > 0 and isinstance(
            cell.get("lat_mean_us"), float)
        self.store.add_round(
            self.run_id, TEST, round_no, status="ok" if ok else "failed",
            tracking={"iops": _num(cell.get("iops")), "lat_mean_us": _num(
                cell.get("lat_mean_us"))} if ok and cell else {},
            cells=[cell] if cell is not None else [], fio=fio_record(run, "round"),
            started_at=run.started_at, ended_at=run.ended_at,
        )
        self.session.ground_truth(TEST, f"point {round_no}")
        if not ok or cell is None:
            error = run.error or "fio measured no I/O"
            curve.stop = {"kind": "failed", "reason": f"fio failed at QD {qd}: {error}"}
            raise TestFailed(f"point {round_no} ({key.label}, QD {qd}): {error}")
        curve.points.append(cell)
        curve.rounds.append(round_no)
        self._store_result("running")

    def _cell(self, spec: CellSpec, run: FioRun, host: dict[str, object],
              curve: Curve) -> Cell | None:
        if run.output is None:
            return None
        job = next((j for j in run.output.jobs if j.name == spec.name), None)
        if job is None:
            return None
        cell = cell_from_job(spec, job)
        cell["outstanding"] = spec.threads * spec.iodepth
        cell.update(host)
        previous = curve.points[-1] if curve.points else None
        cell["iops_rise_pct"] = (rise_pct(_num(previous.get("iops")), job.total_iops)
                                 if previous is not None else None)
        return cell

    # -- the result ----------------------------------------------------------------------
    def verdict(self) -> HostBoundVerdict:
        rule = HostBoundRule(self.opts.host_bound_cpu_pct, self.opts.host_bound_rise_pct)
        return host_bound({c.key.label: c.cpu_points() for c in self.curves}, rule)

    def _store_result(self, status: str, error: str | None = None) -> HostBoundVerdict:
        verdict = self.verdict()
        flagged = {(f.curve, f.iodepth): f.reason for f in verdict.findings}
        result: dict[str, Any] = {
            "curves": [self._curve_dict(c, flagged) for c in self.curves],
            "points_run": sum(len(c.points) for c in self.curves),
            "target_latency_us": self.opts.target_latency_us,
            "host_bound": verdict.to_dict(),
            "numa": self.numa.to_dict(),
            "pcie": self.pcie,
            "fio_cpus": format_cpulist(self.cpus),
            "skipped": [{"cell": c, "reason": r} for c, r in self.p.plan.skipped],
        }
        if error is not None:
            result["error"] = error
        self.store.set_test(
            self.run_id, TEST, status=status, params=test_params(self.p),
            verdicts={"host_bound": verdict.to_dict(), "numa": self.numa.to_dict()},
            result=result,
        )
        return verdict

    def _curve_dict(self, curve: Curve, flagged: dict[tuple[str, int], str]) -> dict[str, Any]:
        points = []
        for round_no, cell in zip(curve.rounds, curve.points, strict=True):
            point: dict[str, Any] = {"round": round_no}
            point.update({k: cell.get(k) for k in POINT_KEYS})
            reason = flagged.get((curve.key.label, int(str(cell["iodepth"]))))
            point["host_bound"] = reason is not None
            point["host_bound_reason"] = reason
            points.append(point)
        best = max(points, key=lambda p: _num(p.get("iops")), default=None)
        return {
            "label": curve.key.label,
            "workload": curve.key.workload,
            "block_bytes": curve.key.block_bytes,
            "read_pct": curve.key.read_pct,
            "threads": curve.key.threads,
            "points": points,
            "stop": curve.stop,
            "max_iops": None if best is None else best.get("iops"),
            "max_iops_qd": None if best is None else best.get("iodepth"),
            "max_iops_lat_mean_us": None if best is None else best.get("lat_mean_us"),
        }
