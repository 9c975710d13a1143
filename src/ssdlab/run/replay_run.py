"""Execute a trace replay (``ssdlab run replay``): one fio run replays the trace against
the target (``read_iolog`` + ``replay_redirect``), with its IOPS logged per interval
(``write_iops_log``); the result is reported like any workload: IOPS, MB/s, mean and p99
latency, and the per-interval IOPS timeline."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from ssdlab.engine import scratch
from ssdlab.engine.fiolog import FioLogError, LogEntry, fio_log_path, read_log
from ssdlab.engine.jobfile import render
from ssdlab.engine.runner import FioRun, watchdog_seconds
from ssdlab.plan import replay as rp
from ssdlab.plan.planned import FIO_RUN_OVERHEAD_S, PlannedTime
from ssdlab.plan.replay import (
    TEST,
    ReplayArgs,
    ReplayCell,
    ReplayOptions,
    ReplayResult,
    TimelinePoint,
)
from ssdlab.plan.results import StoredPlan, Verdict
from ssdlab.plan.specs import IOENGINES, CellSpec, FioJob, Mix, Pattern
from ssdlab.run.cells import cell_from_job
from ssdlab.run.prepare import TargetRequest, refuse_nbd
from ssdlab.run.session import TestFailed
from ssdlab.run.suite import Runner
from ssdlab.run.workload_target import (
    PreparedWorkload,
    WorkloadRun,
    dry_run_head,
    prepare_workload_target,
)
from ssdlab.store.records import RunData, TestState

MIB = 1 << 20
#: a trace without timing (or replayed without stalls) is presumed stuck below this
MIN_REPLAY_IOPS = 50.0


@dataclass(frozen=True)
class PreparedReplay(PreparedWorkload[ReplayOptions]):
    args: ReplayArgs


def prepare_replay(request: TargetRequest, args: ReplayArgs) -> PreparedReplay:
    """Options, the trace and the target, checked before any I/O (one-line UserError)."""
    options = rp.build_options(args, IOENGINES)
    # on --dir without --size: a file just big enough for the trace (whole MiB)
    fit = max(MIB, -(-options.trace.extent_bytes // MIB) * MIB)
    target = prepare_workload_target(request, rp.FILE_NAME, fit)
    info = target.info
    refuse_nbd(info, "replay", "fio replays a trace onto a file or device name "
               "(replay_redirect), which its nbd engine does not take")
    rp.check_fits(options.trace, info.capacity_bytes, info.logical_sector_bytes, True,
                  info.path)
    return PreparedReplay(target, options, args)


def job_text(p: PreparedReplay, job: FioJob) -> str:
    return render(job, f"ssdlab {p.target.versions['ssdlab']}: {TEST} of "
                       f"{p.options.trace.path}")


def describe(p: PreparedReplay) -> str:
    info = p.target.info
    lines = rp.describe(p.options, info.capacity_bytes, info.path,
                        lambda job: job_text(p, job))
    return "\n".join([dry_run_head(p.target, "Replay onto"), *lines]) + "\n"


def planned(p: PreparedReplay) -> PlannedTime:
    """The trace's own timing (scaled, capped by --max-seconds); without it (no
    timestamps, --no-stall), its I/O as fast as the drive goes."""
    o = p.options
    seconds = rp.planned_seconds(o)
    if seconds is not None:
        return PlannedTime.fixed(seconds + FIO_RUN_OVERHEAD_S)
    t = o.trace
    return (PlannedTime.fixed(FIO_RUN_OVERHEAD_S)
            + PlannedTime.io(t.read_bytes + t.write_bytes, "the trace's I/O"))


def timeline(entries: list[LogEntry], interval_ms: int) -> list[TimelinePoint]:
    """Per-interval IOPS, reads and writes added up (one job: no merge over jobs)."""
    buckets: dict[int, dict[str, float]] = defaultdict(lambda: {"read": 0.0, "write": 0.0})
    for e in entries:
        if e.direction in ("read", "write"):
            slot = max(1, round(e.time_ms / interval_ms))
            buckets[slot][e.direction] += e.value
    return [TimelinePoint(slot * interval_ms / 1000, v["read"] + v["write"], v["read"],
                          v["write"])
            for slot, v in sorted(buckets.items())]


def _timeout(o: ReplayOptions) -> float:
    planned = rp.planned_seconds(o)
    sized = o.trace.ios / MIN_REPLAY_IOPS
    return watchdog_seconds(max(planned or 0.0, 0.0) + sized + 5.0)


class ReplayRun(WorkloadRun[PreparedReplay]):
    """One replay of a trace onto one target, journaled to ``store``."""

    suite = TEST

    def plan_record(self) -> StoredPlan:
        return rp.plan_record(self.p.options, self.p.args, self.p.target.dir_dict())

    def run_tests(self, previous: RunData | None) -> list[str]:
        return self.one_test(TEST, self._replay)

    def _spec(self) -> CellSpec:
        tr = self.p.options.trace
        return CellSpec(TEST, Pattern.RANDOM, tr.main_block, Mix(tr.read_pct), 1,
                        self.p.options.iodepth, 0, max(tr.extent_bytes, 1),
                        io_bytes=tr.read_bytes + tr.write_bytes)

    def _replay(self) -> None:
        s, o = self.session, self.p.options
        params = rp.test_params(o)
        self.store.set_test(self.run_id, TEST, TestState("running", params, {}, ReplayResult()))
        with scratch.scratch_dir("iolog") as logdir:
            prefix = str(logdir / "replay")
            text = job_text(self.p, rp.replay_job(o, s.info.path, prefix))
            self.progress.phase("replay", 1, rp.planned_seconds(o))
            run = s.run_fio(text, (), json_plus=True, timeout_s=_timeout(o))
            entries = self._log(prefix, run)
        cell = self._cell(run)
        ok = run.ok and cell is not None
        s.fio_round(TEST, 1, run, "replay", status="ok" if ok else "failed",
                    tracking={"iops": cell.iops} if ok and cell else {},
                    cells=[cell] if cell else [])
        s.ground_truth(TEST, "replay")
        if not ok or cell is None:
            error = run.error or "fio measured no I/O"
            self.store.set_test(self.run_id, TEST, TestState(
                "failed", params, {}, ReplayResult(error=error)))
            raise TestFailed(error)
        result = self._result(run, cell, timeline(entries, o.log_interval_ms))
        self.store.set_test(self.run_id, TEST, TestState(
            "complete", params, {"primary": Verdict(result.message or "")}, result))
        self.progress.line(f"{TEST}: {result.message}")

    def _result(self, run: FioRun, cell: ReplayCell, series: list[TimelinePoint]
                ) -> ReplayResult:
        o = self.p.options
        wall = run.ended_at - run.started_at
        message = (f"replayed {cell.ios:,} I/Os in {wall:.1f} s: {cell.iops:,.0f} IOPS, "
                   f"{cell.bw_bytes_per_s / 1e6:,.1f} MB/s, mean latency "
                   f"{cell.lat_mean_us or 0:.1f} us")
        note = None if series else (f"no IOPS timeline: the replay ended within one "
                                    f"{o.log_interval_ms} ms log interval")
        return ReplayResult(cell, series, o.trace.record(), message, wall, note)

    def _log(self, prefix: str, run: FioRun) -> list[LogEntry]:
        path = fio_log_path(prefix, "iops", 1)
        if not run.ok or not path.exists():
            return []
        try:
            return read_log(path)
        except FioLogError:
            return []

    def _cell(self, run: FioRun) -> ReplayCell | None:
        """fio's cell of the replay and the I/O it did, read as the result keeps them
        (None: fio measured no I/O)."""
        if run.output is None:
            return None
        job = next((j for j in run.output.jobs if j.name == TEST), None)
        if job is None:
            return None
        ios = job.read.total_ios + job.write.total_ios
        if ios == 0:
            return None
        cell = {**cell_from_job(self._spec(), job), "ios": ios,
                "read_bytes": job.read.io_bytes, "write_bytes": job.write.io_bytes}
        return ReplayCell.from_json(cell, f"{TEST} cell")


RUNNER = Runner(
    prepare=prepare_replay,
    describe=describe,
    start=ReplayRun,
    planned=planned,
)
