"""Execute a latency-vs-IOPS run (methodology 1.6, with 1.9's host CPU and NUMA checks).

Purge and workload-independent preconditioning once, then for every block size and mix
one curve per thread count: one fio run per queue depth (ramp_time = warm-up, runtime =
measured, json+), each committed to the store as a round of the test ``latency-iops``
the moment it finishes, until the ladder's stopping rule says stop
(:mod:`ssdlab.analysis.ladder`). Around every point the host-wide CPU use is read from
``/proc/stat`` over the measured period (:mod:`ssdlab.run.cpu_window`); at the end (and
after every point, so a crash keeps a consistent result) the host-bound verdict is
computed (:mod:`ssdlab.analysis.hostbound`) over the curves
(:mod:`ssdlab.run.latency_curves`). Ctrl-C keeps every completed point.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ssdlab.analysis.hostbound import HostBoundRule, HostBoundVerdict, host_bound
from ssdlab.analysis.ladder import MAX_QD, LadderRule, decide, rise_pct
from ssdlab.analysis.numa import NumaCheck, format_cpulist, numa_check
from ssdlab.engine.runner import Executor, FioInterrupted, FioRun
from ssdlab.plan import latency_iops as plan
from ssdlab.plan import results
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
from ssdlab.plan.latency_records import LadderStop, LatencyCell, LatencyIopsResult, PcieLink
from ssdlab.plan.planned import PlannedTime
from ssdlab.plan.specs import CellSpec
from ssdlab.run.cells import Cell, cell_from_job, cell_records
from ssdlab.run.cpu_window import FIO_STARTUP_S, ON_HOSTS_CPU, CpuWindow
from ssdlab.run.ladder_progress import LadderProgress
from ssdlab.run.latency_curves import (
    Curve,
    pcie_record,
    point_of,
    restore_curves,
)
from ssdlab.run.prepare import (
    PreparedTarget,
    TargetRequest,
    check_capacity,
    check_file_purge,
    engine_for,
    prepare_device,
)
from ssdlab.run.progress import Progress
from ssdlab.run.session import SessionRun, TestFailed
from ssdlab.run.suite import PreparedSuite, Runner, dry_run, resume_with
from ssdlab.store.db import Store
from ssdlab.store.records import RunData, TestData, TestState
from ssdlab.targets.topology import (
    StatSnapshot,
    allowed_cpus,
    node_cpus,
    pci_attachment,
    read_proc_stat,
)

__all__ = ["RUNNER", "LatencyIopsPrepared", "LatencyIopsRun", "describe",
           "prepare_latency_iops"]


# ------------------------------------------------------------------------ preparing


@dataclass(frozen=True)
class LatencyIopsPrepared(PreparedSuite[LatencyIopsOptions]):
    plan: LatencyIopsPlan
    args: LatencyIopsArgs = field(default_factory=LatencyIopsArgs)


def prepare_latency_iops(request: TargetRequest, args: LatencyIopsArgs) -> LatencyIopsPrepared:
    """Validate the whole run: a one-line UserError before any I/O to the target."""
    build_options(args, 1)  # options first: bad values before the target
    return _prepared(prepare_device(request), args)


def _prepared(base: PreparedTarget, args: LatencyIopsArgs) -> LatencyIopsPrepared:
    options = engine_for(base.info, build_options(args, base.cpus))
    ladders = build_plan(options, base.info.capacity_bytes, base.info.logical_sector_bytes)
    check_file_purge(base.info, options.purge)
    check_capacity(base.info, ladders.range.size_bytes)
    return LatencyIopsPrepared(base, options, ladders, args)


def describe(prepared: LatencyIopsPrepared) -> str:
    """``--dry-run``: the plan and the job files, with nothing touched."""
    opts, ladders = prepared.options, prepared.plan
    file_target = prepared.target.info.kind == "file"
    return dry_run(prepared, plan.describe_ladders(opts, ladders),
                   plan.describe_jobs(opts, ladders, file_target, prepared.job_text))


def _progress(prepared: LatencyIopsPrepared) -> LadderProgress:
    return LadderProgress(quick=prepared.options.quick, point_s=prepared.options.point_seconds)


# ------------------------------------------------------------------------ the run


#: on other hosts (docs/hosts.md): their NUMA placement is not this host's to check
ON_HOSTS_NUMA = NumaCheck(None, "", (), False, "not checked: the targets are on other hosts")


class LatencyIopsRun(SessionRun[LatencyIopsPrepared]):
    """One latency-vs-IOPS run against one target, journaled to ``store``."""

    suite = TEST

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
        super().__init__(prepared, store, executor, progress)
        self.opts = prepared.options
        self.read_stat = read_stat
        self.cpus = fio_cpus()
        self.curves: list[Curve] = []
        self.round_no = 0
        info = prepared.target.info
        #: on other hosts: their CPUs, NUMA nodes and PCIe links are not this host's to read
        self.local = prepared.target.remote is None
        self.numa: NumaCheck = numa_check(info.numa_node, self.cpus, node_cpus(
            prepared.target.host)) if self.local else ON_HOSTS_NUMA
        self.pcie: PcieLink | None = pcie_record(
            pci_attachment(info.name) if info.kind == "block" and self.local else None)

    def plan_record(self) -> results.StoredPlan:
        return plan.plan_record(self.opts, self.p.plan, self.p.args)

    def run_tests(self, previous: RunData | None) -> list[str]:
        """Run the test, or continue a stopped one: finished curves stay, the others go
        on from their next queue depth; no new purge or preconditioning once points
        exist."""
        stored = next((t for t in previous.tests if t.name == TEST), None) if previous else None
        return self._run_test(stored)

    # -- the test ----------------------------------------------------------------------
    def _run_test(self, previous: TestData | None) -> list[str]:
        resumed = previous is not None and self._restore(previous)
        if not resumed:
            self.store.set_test(self.run_id, TEST, TestState(
                "running", plan.test_params(self.opts, self.p.plan)))
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
                self.curves[-1].stop = LadderStop("interrupted", "stopped by Ctrl-C")
            self._store_result("interrupted")
            raise
        verdict = self._store_result("complete")
        self.progress.line(f"{TEST}: {verdict.message}")
        return []

    def _restore(self, previous: TestData) -> bool:
        """Curves and round numbers of a stopped test; False when it has no points yet."""
        self.round_no = max((r.round_no for r in previous.rounds), default=0)
        self.curves = restore_curves(previous)
        if not self.curves:
            return False
        last = max((r for r in previous.rounds if r.status == "ok" and r.cells),
                   key=lambda r: r.round_no)
        self.session.resumed_after(TEST, "resumed", last, "point", " and is not purged or "
                                   "preconditioned again; the points after it come after that "
                                   "pause")
        return True

    def _announce(self, resumed: bool) -> None:
        self.progress.line(f"{TEST}: NUMA: {self.numa.message}")
        if resumed:
            done = sum(len(c.points) for c in self.curves)
            self.progress.line(f"{TEST}: resuming after {done} stored points")
            return
        if self.numa.mismatch:
            self.store.add_event(self.run_id, TEST, "warning", f"NUMA: {self.numa.message}",
                                 self.numa)
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
            if last is None or last.stop is None or last.stop.kind != MAX_QD:
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
        done = curve.iodepths()
        for i, qd in enumerate(ladder):
            if qd not in done:
                self._point(curve, qd)
            elif qd != curve.points[-1].iodepth:
                continue  # resuming: decide again only at the last stored point
            decision = decide(curve.ladder_points(), rule,
                              ladder[i + 1] if i + 1 < len(ladder) else None)
            if decision.stop:
                curve.stopped(decision)
                break
        self._store_result("running")
        self._set_left()
        count = len(curve.points)
        self.progress.line(f"{key.label}: {count} point{'s' if count != 1 else ''}; stopped: "
                           f"{curve.stop.reason if curve.stop else '-'}")
        return curve

    def _point(self, curve: Curve, qd: int) -> None:
        key = curve.key
        spec = self.p.plan.point(key, qd)
        self.round_no += 1
        round_no = self.round_no
        text = plan.point_job(self.p.plan, key, qd, round_no, self.session.fio.job_text)
        self.progress.phase(f"{key.label}, QD {qd}", round_no, spec.planned_seconds)
        window = CpuWindow(self.read_stat, self.opts.warmup_s + FIO_STARTUP_S)

        def on_tick(elapsed_s: float) -> None:
            window.tick(elapsed_s)
            self.progress.tick(elapsed_s)

        run = self.session.run_fio(text, (spec,), json_plus=True, on_tick=on_tick)
        host = window.finish(run.ended_at - run.started_at, self.cpus) if self.local else \
            ON_HOSTS_CPU
        cell = self._cell(spec, run, host, curve)
        ok = run.ok and cell is not None and _num(cell.get("iops")) > 0 and isinstance(
            cell.get("lat_mean_us"), float)
        self.session.fio_round(
            TEST, round_no, run, "round", status="ok" if ok else "failed",
            tracking={"iops": _num(cell.get("iops")), "lat_mean_us": _num(
                cell.get("lat_mean_us"))} if ok and cell else {},
            cells=cell_records(LatencyCell, [cell] if cell is not None else [], TEST),
        )
        self.session.ground_truth(TEST, f"point {round_no}")
        if not ok or cell is None:
            error = run.error or "fio measured no I/O"
            curve.stop = LadderStop("failed", f"fio failed at QD {qd}: {error}")
            raise TestFailed(f"point {round_no} ({key.label}, QD {qd}): {error}")
        curve.points.append(point_of(round_no, cell))
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
        cell["iops_rise_pct"] = (rise_pct(float(previous.iops), job.total_iops)
                                 if previous is not None else None)
        return cell

    # -- the result ----------------------------------------------------------------------
    def verdict(self) -> HostBoundVerdict:
        rule = HostBoundRule(self.opts.host_bound_cpu_pct, self.opts.host_bound_rise_pct)
        return host_bound({c.key.label: c.cpu_points() for c in self.curves}, rule)

    def _store_result(self, status: str, error: str | None = None) -> HostBoundVerdict:
        verdict = self.verdict()
        flagged = {(f.curve, f.iodepth): f.reason for f in verdict.findings}
        numa = self.numa
        result = LatencyIopsResult(
            curves=[c.record(flagged) for c in self.curves],
            points_run=sum(len(c.points) for c in self.curves),
            target_latency_us=self.opts.target_latency_us,
            host_bound=verdict,
            numa=numa,
            pcie=self.pcie,
            fio_cpus=format_cpulist(self.cpus) if self.local else "",
            skipped=[results.SkippedCell(c, r) for c, r in self.p.plan.skipped],
            error=error,
        )
        self.store.set_test(self.run_id, TEST, TestState(
            status, plan.test_params(self.opts, self.p.plan), {"host_bound": verdict, "numa": numa},
            result))
        return verdict


def _num(value: object) -> float:
    return float(value) if isinstance(value, int | float) else 0.0


def planned(prepared: LatencyIopsPrepared) -> PlannedTime:
    """The points, from the fewest the stopping rules allow to the most, as the dry run
    says; the purge and the preconditioning."""
    opts, ladders = prepared.options, prepared.plan
    per_point = opts.point_seconds + POINT_OVERHEAD_S
    out = PlannedTime(ladders.min_points() * per_point, ladders.max_points() * per_point,
                      "each curve's stopping rule")
    if opts.purge != "none":
        out += PlannedTime.step("a purge")
    if ladders.wipc is not None:
        out += PlannedTime.io(ladders.wipc.io_bytes or 0, "preconditioning")
    return out


RUNNER = Runner(
    prepare=prepare_latency_iops,
    describe=describe,
    progress=_progress,
    start=LatencyIopsRun,
    prepare_resume=resume_with(_prepared, LatencyIopsArgs),
    planned=planned,
)
