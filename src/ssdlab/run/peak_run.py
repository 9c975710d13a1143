"""Run the peak finder (docs/peak.md): per workload, the adaptive search of
analysis/peak.py, each probe one fio run (json+) with the host's CPU read over its
measured period, stored as a round the moment it ends. A stopped run resumes: the search
replays the stored probes (``measure`` answers them from the store) and goes on.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from pathlib import Path

from ssdlab.analysis.numa import format_cpulist, numa_check
from ssdlab.analysis.peak import Engine, Measured, Probe, SearchOutcome, search
from ssdlab.engine.runner import Executor
from ssdlab.plan import peak as plan
from ssdlab.plan.peak import (
    BY_NAME,
    PeakArgs,
    PeakCell,
    PeakOptions,
    PeakResult,
    PointRecord,
    Workload,
    build_options,
)
from ssdlab.plan.planned import FIO_RUN_OVERHEAD_S, PlannedTime
from ssdlab.plan.results import StoredPlan, Verdict
from ssdlab.run.cells import Cell, cell_from_job
from ssdlab.run.cpu_window import FIO_STARTUP_S, ON_HOSTS_CPU, CpuWindow
from ssdlab.run.prepare import (
    PreparedTarget,
    TargetRequest,
    checked_range,
    prepare_device,
    prepare_resume_target,
    refuse_nbd,
    stored_args,
)
from ssdlab.run.progress import Progress
from ssdlab.run.session import SessionRun, TestFailed
from ssdlab.run.suite import PreparedRange, Runner, dry_run
from ssdlab.store.db import Store
from ssdlab.store.records import RunData, TestData, TestState
from ssdlab.targets.topology import StatSnapshot, allowed_cpus, node_cpus, read_proc_stat

#: a peak run checked: the range its probes use
PreparedPeak = PreparedRange[PeakOptions, PeakArgs]
SYS_BLOCK = Path("/sys/block")
#: a probe cell's latency keys, by the metric names of ``--max-latency``
def polls(name: str, sysfs: Path = SYS_BLOCK) -> bool:
    """Whether a block device completes polled I/O (its ``queue/io_poll`` is 1)."""
    try:
        return (sysfs / name / "queue" / "io_poll").read_text().strip() == "1"
    except OSError:
        return False


#: on other hosts (docs/hosts.md): fio's jobs are not pinned, the host CPU is not read
ON_HOSTS_PINNING = "NUMA: the targets are on other hosts: fio's jobs are not pinned"


def pinning(base: PreparedTarget, cpus: frozenset[int]) -> tuple[str, str]:
    """(cpus_allowed for fio, what was decided and why) from the device's NUMA node."""
    nodes = node_cpus(base.host)
    check = numa_check(base.info.numa_node, cpus, nodes)
    node = base.info.numa_node
    local = nodes.get(node, frozenset()) & cpus if node is not None else frozenset()
    if len(nodes) > 1 and local:
        return format_cpulist(local), (f"NUMA: device on node {node}: fio's jobs pinned to "
                                       f"its CPUs {format_cpulist(local)}")
    if len(nodes) > 1:
        why = (f"the device reports no NUMA node ({check.message})" if node is None else
               f"no CPU of the device's node {node} is ours")
        return format_cpulist(cpus), f"NUMA: {why}: fio's jobs on CPUs {format_cpulist(cpus)}"
    count = "1 NUMA node" if nodes else "no NUMA nodes reported"
    return format_cpulist(cpus), (f"NUMA: the host has {count}, so no node to pin to; fio's "
                                  f"jobs on CPUs {format_cpulist(cpus)}")


def _writes(args: PeakArgs) -> bool:
    return any(BY_NAME[w].writes for w in plan.parse_workloads(args.workloads))


def prepare_peak(request: TargetRequest, args: PeakArgs) -> PreparedPeak:
    """Everything checked before any I/O; read-only when no workload writes."""
    build_options(args, 1)  # bad values before the target
    return _prepared(prepare_device(request, read_only=not _writes(args)), args)


def prepare_peak_resume(run: RunData, request: TargetRequest) -> PreparedPeak:
    """A stopped peak run on its target again: a run of read workloads only stays read-only,
    so it resumes on a block device without ``--destroy-data`` as it started."""
    args = stored_args(run, PeakArgs)
    base = prepare_resume_target(run, request.destroy_data, request.fio,
                                 read_only=not _writes(args))
    return _prepared(base, args)


def _prepared(base: PreparedTarget, args: PeakArgs) -> PreparedPeak:
    info = base.info
    refuse_nbd(info, plan.SUITE, "its engines (libaio, io_uring, psync) need a local file "
               "or device")
    local = base.remote is None
    polling = info.kind == "block" and local and polls(info.name)
    cpus_allowed, numa = pinning(base, allowed_cpus()) if local else ("", ON_HOSTS_PINNING)
    hipri = ("hipri: the device polls (queue/io_poll 1): tried" if polling else
             "hipri: not tried (the target does not poll: queue/io_poll is not 1)" if local
             else "hipri: not tried (the targets are on other hosts)")
    options = build_options(args, base.cpus, polling=polling, cpus_allowed=cpus_allowed,
                            notes=(numa, hipri))
    return PreparedPeak(base, options, args, checked_range(info, options.active_range_pct))


def planned(p: PreparedPeak) -> PlannedTime:
    """Each workload's search: from one probe (the first already over the ceiling) to its
    whole budget, each probe its ramp, its measured time and fio's own."""
    o = p.options
    probe = o.ramp_seconds + o.probe_seconds + FIO_RUN_OVERHEAD_S
    return PlannedTime(probe, o.max_probes * probe, "the search").times(len(o.workloads))


def describe(p: PreparedPeak) -> str:
    return dry_run(p, plan.describe(p.options, p.range, p.job_text), [], sectors=False)


def measured_of(cell: PeakCell) -> Measured:
    """A stored probe's cell back as what the search measured."""
    probe = Probe(Engine.parse(cell.engine), cell.threads, cell.iodepth, cell.split,
                  cell.trial or 0)
    latency = {"mean": cell.lat_mean_us, "p50": cell.lat_p50_us, "p99": cell.lat_p99_us,
               "p99.9": cell.lat_p99_9_us, "p99.99": cell.lat_p99_99_us,
               "max": cell.lat_max_us}
    return Measured(probe, cell.ok, float(cell.iops), float(cell.bw_bytes_per_s),
                    {m: None if v is None else float(v) for m, v in latency.items()},
                    cell.host.use.host_cpu_pct, cell.probe_error or None)


def point_record(m: Measured, round_no: int, phase: str = "", outcome: str = ""
                 ) -> PointRecord:
    p = m.probe
    return PointRecord(round_no, p.engine.label, p.engine.name, list(p.engine.fast_paths),
                       p.threads, p.iodepth, p.split, m.iops, m.bw_bytes_per_s,
                       m.latency_us.get("mean"), m.latency_us.get("p99"), m.host_cpu_pct,
                       phase, outcome)


class PeakRun(SessionRun[PreparedPeak]):
    """The peak search of every workload on one target, journaled to ``store``."""

    suite = plan.SUITE

    def __init__(self, prepared: PreparedPeak, store: Store, executor: Executor,
                 progress: Progress, *,
                 read_stat: Callable[[], StatSnapshot] = read_proc_stat,
                 fio_cpus: Callable[[], frozenset[int]] = allowed_cpus) -> None:
        super().__init__(prepared, store, executor, progress)
        self.o = prepared.options
        self.read_stat = read_stat
        self.cpus = fio_cpus()
        #: on other hosts: their CPU use is not this host's to read
        self.local = prepared.target.remote is None

    def plan_record(self) -> StoredPlan:
        return plan.plan_record(self.o, self.p.args, self.p.range)

    def run_tests(self, previous: RunData | None) -> list[str]:
        done = {t.name: t for t in previous.tests} if previous else {}
        failed: list[str] = []
        for note in self.o.notes:
            self.progress.line(f"{plan.SUITE}: {note}")
        for name in self.o.workloads:
            stored = done.get(name)
            if stored is not None and stored.status in ("complete", "failed"):
                failed += [name] if stored.status == "failed" else []
                continue
            failed += self.one_test(name, functools.partial(self.workload, BY_NAME[name],
                                                            stored))
        return failed

    def workload(self, w: Workload, previous: TestData | None) -> None:
        params = plan.test_params(self.o, w)
        stored = {}
        for r in previous.rounds if previous else []:
            if r.cells and "engine" in r.cells[0]:
                m = measured_of(r.cells_as(PeakCell)[0])
                stored[m.probe] = (r.round_no, m)
        if stored:
            self.progress.line(f"{w.name}: resuming after {len(stored)} stored probes")
        self.store.set_test(self.run_id, w.name, TestState("running", params))
        rounds = {m.probe: n for n, m in stored.values()}

        def measure(p: Probe) -> Measured:
            if p in stored:
                return stored[p][1]
            n = max(rounds.values(), default=0) + 1
            rounds[p] = n
            return self.probe(w, p, n)

        outcome = search(self.o.rules(), measure)
        result = self.result(w, outcome, rounds)
        # no peak within the ceiling is a verdict, not a failure; no I/O at all is one
        measured = any(s.measured.ok for s in outcome.steps)
        status = "complete" if result.found or measured else "failed"
        self.store.set_test(self.run_id, w.name, TestState(
            status, params, {"primary": Verdict(result.message), "host_bound": outcome.host},
            result))
        if status == "failed":
            raise TestFailed(result.message)
        self.progress.line(f"{w.name}: {result.message if result.found else result.verdict}")

    def probe(self, w: Workload, p: Probe, round_no: int) -> Measured:
        o = self.o
        setup = dataclasses.replace(self.session.fio, ioengine=p.engine.name)
        text = plan.probe_job(o, w, p, self.p.range, round_no, setup.job_text)
        cell_spec = plan.probe_cell(o, w, p, self.p.range)
        self.progress.phase(f"{w.name}: {p.label}", round_no, cell_spec.planned_seconds)
        window = CpuWindow(self.read_stat, o.ramp_seconds + FIO_STARTUP_S)

        def on_tick(elapsed_s: float) -> None:
            window.tick(elapsed_s)
            self.progress.tick(elapsed_s)

        run = self.session.run_fio(text, (cell_spec,), json_plus=True, on_tick=on_tick)
        host = window.finish(run.ended_at - run.started_at, self.cpus) if self.local else \
            ON_HOSTS_CPU
        job = next((j for j in run.output.jobs if j.name == w.name), None) if run.output \
            else None
        figures: Cell = cell_from_job(cell_spec, job) if job is not None else {
            "cell": w.name, "threads": p.threads, "iodepth": p.iodepth}
        iops = float(str(figures.get("iops") or 0))
        ok = run.ok and job is not None and iops > 0
        cell = PeakCell.from_json({
            **figures, **host, "engine": p.engine.label, "ioengine": p.engine.name,
            "fast_paths": list(p.engine.fast_paths), "split": p.split, "trial": p.trial,
            "cpus_allowed": o.cpus_allowed, "ok": ok,
            "probe_error": None if ok else (run.error or "fio measured no I/O"),
        }, f"{w.name} probe {round_no}")
        self.session.fio_round(w.name, round_no, run, "probe",
                               status="ok" if ok else "failed",
                               tracking={"iops": iops} if ok else {}, cells=[cell])
        m = measured_of(cell)
        lat = m.latency_us.get("p99")
        self.progress.line(f"{w.name} probe {round_no}: {p.label}: "
                           + (f"{m.iops:,.0f} IOPS, p99 {lat or 0:,.0f} us" if ok
                              else f"FAILED ({m.error})"))
        return m

    def result(self, w: Workload, out: SearchOutcome, rounds: dict[Probe, int]
               ) -> PeakResult:
        def rec(m: Measured | None, phase: str = "", outcome: str = "") -> PointRecord | None:
            return None if m is None else point_record(m, rounds.get(m.probe, 0), phase,
                                                       outcome)

        steps = [point_record(s.measured, rounds.get(s.measured.probe, 0), s.phase, s.outcome)
                 for s in out.steps]
        knee = out.knee
        return PeakResult(
            workload=w.name, kind=w.kind, found=out.peak is not None, peak=rec(out.peak),
            knee=rec(knee.point) if knee else None, knee_found=bool(knee and knee.found),
            knee_message=knee.message if knee else "", limited_by=out.limited_by,
            host_message=out.host.message, pinning=self.o.notes[0] if self.o.notes else "",
            ceiling=", ".join(lim.text for lim in self.o.limits) or "none",
            probes=len(out.steps), stopped=out.stopped, steps=steps, message=out.message,
            unconfirmed=out.unconfirmed or None)


RUNNER = Runner(
    prepare=prepare_peak,
    describe=describe,
    start=PeakRun,
    prepare_resume=prepare_peak_resume,
    read_only=lambda p: not p.options.writes,
    planned=planned,
)
