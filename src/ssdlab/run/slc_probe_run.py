"""Run the SLC-cache probe: purge, settle, one sequential write with its bandwidth logged,
optionally an idle period and a second write; journal the curve and the cliffs.

The write is one fio invocation; its log is read when fio has finished and cut into
slices of equal bytes, each stored as a round (bytes written, MB/s), so the whole curve is
in the store and the report draws it from there.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from ssdlab.analysis.cliff import rate_by_bytes
from ssdlab.analysis.slc_probe import (
    PassVerdict,
    TimedPoint,
    analyse_pass,
    recovery_text,
    transfers_from_bw_samples,
    with_times,
)
from ssdlab.engine import scratch
from ssdlab.engine.aggregate import by_host
from ssdlab.engine.fiolog import FioLogError, completions, read_log
from ssdlab.engine.model import JobResult
from ssdlab.engine.runner import Executor
from ssdlab.plan import slc_probe as plan
from ssdlab.plan.planned import FIO_RUN_OVERHEAD_S, PlannedTime
from ssdlab.plan.results import StoredPlan, Verdict
from ssdlab.plan.slc_probe import (
    CELL,
    HOST_PASS_KIND,
    TEST,
    TRACKING,
    CliffRecord,
    DipRecord,
    HostPassEvent,
    PassRecord,
    SlcProbeArgs,
    SlcProbeOptions,
    SlcProbeParams,
    SlcProbeResult,
    SlcTruth,
    SliceCell,
    WriteStep,
    build_slc_options,
)
from ssdlab.run.hosts import fio_logs
from ssdlab.run.prepare import (
    MIN_ACTIVE_RANGE,
    TargetRequest,
    check_capacity,
    check_device_purge,
    engine_for,
    prepare_device,
)
from ssdlab.run.progress import Progress
from ssdlab.run.session import SessionRun, TestFailed, fio_record
from ssdlab.run.suite import PreparedSuite, Runner, dry_run
from ssdlab.store.db import Store
from ssdlab.store.records import RoundRecord, RunData, TestState
from ssdlab.units import format_bytes, format_duration


@dataclass(frozen=True)
class PreparedSlcProbe(PreparedSuite[SlcProbeOptions]):
    args: SlcProbeArgs


def prepare_slc_probe(request: TargetRequest, args: SlcProbeArgs) -> PreparedSlcProbe:
    """Everything checked before the first byte is written: UserError (one line) otherwise."""
    base = prepare_device(request)
    info = base.info
    options = engine_for(info, build_slc_options(args, info.capacity_bytes,
                                                 info.logical_sector_bytes,
                                                 file_target=info.kind == "file"))
    check_device_purge(info, options.purge)
    check_capacity(info, info.capacity_bytes, MIN_ACTIVE_RANGE, what="")
    return PreparedSlcProbe(base, options, args)


def describe(p: PreparedSlcProbe) -> str:
    """``--dry-run``: the plan and the job file; nothing is touched."""
    o = p.options
    return dry_run(p, [f"profile {o.profile}{' (QUICK)' if o.quick else ''}"],
                   plan.describe(o, p.target.info.kind == "file", p.job_text))


def planned(p: PreparedSlcProbe) -> PlannedTime:
    """The idle times; each pass writes its bytes as fast as the drive goes."""
    o = p.options
    idle = o.settle_s + (o.repeat_after_s if o.passes > 1 else 0.0)
    out = PlannedTime.fixed(idle + o.passes * FIO_RUN_OVERHEAD_S)
    out += PlannedTime.io(o.write_bytes * o.passes, "the sequential writes")
    return out + (PlannedTime.step("a purge") if o.purge != "none" else PlannedTime.fixed(0))


class WriteProgress(Progress):
    """The live line of one long write: how long it has run; its end is not predictable
    (the rate falls at the cliff), so no ETA is guessed."""

    def _eta(self) -> str | None:
        return None


class SlcProbeRun(SessionRun[PreparedSlcProbe]):
    """One SLC probe on one target, journaled to ``store``."""

    suite = plan.SUITE

    def __init__(
        self,
        prepared: PreparedSlcProbe,
        store: Store,
        executor: Executor,
        progress: Progress,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        super().__init__(prepared, store, executor, progress)
        self.o = prepared.options
        self.sleep = sleep
        self._round_no = 0
        #: on several hosts: each host's own first pass (the result is theirs)
        self._hosts_first: dict[str, PassRecord] = {}

    def plan_record(self) -> StoredPlan:
        return plan.plan_record(self.o, self.p.args)

    def run_tests(self, previous: RunData | None) -> list[str]:
        return self.one_test(TEST, self.run_test, check_target=False)

    def run_test(self) -> None:
        params = plan.test_params(self.o)
        self.store.set_test(self.run_id, TEST, TestState("running", params))
        try:
            self._probe(params)
        except TestFailed as exc:
            self.store.set_test(self.run_id, TEST, TestState(
                "failed", params, {}, SlcProbeResult.partial(error=str(exc))))
            raise

    def _idle(self, seconds: float, why: str) -> None:
        if seconds <= 0:
            return
        self.progress.phase(why)
        self.progress.line(f"{TEST}: {why}: idle for {seconds:g} s")
        self.sleep(seconds)

    def _probe(self, params: SlcProbeParams) -> None:
        o = self.o
        purge = None
        if o.purge != "none":
            purge = self.session.purge(TEST, o.purge, 0, self.session.info.capacity_bytes)
        self._idle(o.settle_s, "settling after the purge")
        first, truth = self._pass(1)
        passes = [(first, 0.0)]
        recovery = None
        if o.passes == 2:
            self._idle(o.repeat_after_s, "idle before the repeat write")
            again, truth = self._pass(2)
            passes.append((again, o.repeat_after_s))
            recovery = recovery_text(first, again, o.repeat_after_s, o.min_change)
        result = self._result(passes, recovery, truth, purge is None or purge.ok)
        if self._hosts_first:
            result = self._on_hosts(result)
        self.store.set_test(self.run_id, TEST, TestState(
            "complete", params, {"primary": Verdict(result.message)}, result))
        self.progress.line(f"{TEST}: {result.message}")
        if recovery:
            self.progress.line(f"{TEST}: {recovery}")

    def _on_hosts(self, result: SlcProbeResult) -> SlcProbeResult:
        """On several hosts the hosts' writes together are no one cache: no aggregate
        estimate (nor recovery); each host's own, from its own write (docs/hosts.md)."""
        first = self._hosts_first
        message = ("each host's own cache (the hosts' writes together have none): " +
                   "; ".join(f"{host}: {p.message}" for host, p in sorted(first.items())))
        return dataclasses.replace(
            result, estimate_bytes=None, recovery=None, message=message,
            cliff_found=all(p.estimate_bytes is not None for p in first.values()))

    def _result(self, passes: list[tuple[PassVerdict, float]], recovery: str | None,
                truth: Mapping[str, object] | None, purged: bool) -> SlcProbeResult:
        first = passes[0][0]
        return SlcProbeResult(
            estimate_bytes=first.estimate_bytes,
            cliff_found=first.estimate_bytes is not None,
            message=first.message if purged else
            f"{first.message} (the purge failed: the write did not start from an empty cache)",
            passes=[PassRecord(n, idle, v.written_bytes, v.mean_rate, v.estimate_bytes,
                               _cliffs(v), v.message, _dips(v))
                    for n, (v, idle) in enumerate(passes, 1)],
            recovery=recovery,
            slice_bytes=self.o.slice_bytes,
            log=self.o.describe_log(),
            ground_truth=_slc_truth(truth, first.estimate_bytes),
        )

    # -- one write -------------------------------------------------------------------------
    def _pass(self, pass_no: int) -> tuple[PassVerdict, Mapping[str, object] | None]:
        cell = self.o.cell(pass_no)
        with scratch.scratch_dir("slc") as logdir:
            prefix = str(logdir / "slc")
            text = plan.write_job(self.o, pass_no, prefix, self.session.fio.job_text)
            self.progress.phase(f"sequential write, pass {pass_no}")
            self.progress.line(f"{TEST}: writing {format_bytes(self.o.write_bytes)} "
                               f"sequentially (pass {pass_no})")
            run = self.session.run_fio(text, (cell,), json_plus=False)
            seconds = run.ended_at - run.started_at
            self.store.add_step(self.run_id, TEST, "write", WriteStep(
                pass_no, cell.io_bytes, cell.block_bytes, cell.iodepth,
                self.o.describe_log(), run.ok, run.error, seconds,
            ), fio_record(run, f"write pass {pass_no}"))
            truth = self.session.ground_truth(TEST, f"write pass {pass_no}")
            if not run.ok:
                raise TestFailed(f"the sequential write (pass {pass_no}) failed: {run.error}")
            assert run.output is not None
            logs = fio_logs(self.session.executor, SlcProbeOptions.log_file(prefix))
            jobs = {host: found[0] for host, found in by_host(run.per_host).items()} \
                if run.per_host else {"": run.output.jobs[0]}
            each = {host: self._transfers(jobs[host], path) for host, path in logs.items()}
        # on several hosts: the set's write is every host's transfers together in time
        transfers = each[""] if "" in each else sorted(t for ts in each.values() for t in ts)
        points = rate_by_bytes(transfers, self.o.slice_bytes)
        if "" not in each:
            self._host_pass(pass_no, each, jobs)
        first_round = self._round_no + 1
        self._store_points(pass_no, with_times(points), run.started_at)
        if self._round_no >= first_round:  # the members over the whole write, its slices
            self.session.member_round(TEST, first_round, run, f"write pass {pass_no}",
                                      last_round=self._round_no)
        assert run.output is not None
        verdict = analyse_pass(points, self.o.min_change, run.output.jobs[0].write.io_bytes)
        self.progress.line(f"{TEST} pass {pass_no}: {format_bytes(verdict.written_bytes)} in "
                           f"{format_duration(seconds)}; {verdict.message}")
        return verdict, truth

    def _host_pass(self, pass_no: int, each: Mapping[str, list[tuple[float, int]]],
                   jobs: Mapping[str, JobResult]) -> None:
        """On several hosts: each host's own write, analysed alone, kept in an event."""
        idle = self.o.repeat_after_s if pass_no > 1 else 0.0
        hosts: dict[str, PassRecord] = {}
        for host, transfers in sorted(each.items()):
            v = analyse_pass(rate_by_bytes(transfers, self.o.slice_bytes), self.o.min_change,
                             jobs[host].write.io_bytes)
            hosts[host] = PassRecord(pass_no, idle, v.written_bytes, v.mean_rate,
                                     v.estimate_bytes, _cliffs(v), v.message, _dips(v))
            self.progress.line(f"{TEST} pass {pass_no} on {host}: {v.message}")
        if pass_no == 1:
            self._hosts_first = hosts
        self.store.add_event(self.run_id, TEST, HOST_PASS_KIND,
                             f"pass {pass_no}: each of {len(hosts)} hosts' own write",
                             HostPassEvent(pass_no, hosts))

    def _transfers(self, job: JobResult, path: Path) -> list[tuple[float, int]]:
        try:
            entries = read_log(path)
        except (OSError, FioLogError) as exc:
            raise TestFailed(f"could not read fio's bandwidth log {path}: {exc}") from None
        if self.o.log == "io":
            return completions(entries, "write")
        samples = [(e.time_ms, e.value) for e in entries if e.direction == "write"]
        return transfers_from_bw_samples(samples, job.write.io_bytes, job.write.runtime_ms)

    def _store_points(self, pass_no: int, points: list[TimedPoint], started: float) -> None:
        """One round per slice, in order: bytes written at its end and its rate."""
        previous_bytes, previous_s = 0.0, 0.0
        for point in points:
            self._round_no += 1
            cell = SliceCell(CELL, pass_no, point.bytes_done, point.bytes_done - previous_bytes,
                             point.rate, point.rate, point.seconds)
            self.store.add_round(self.run_id, TEST, RoundRecord(
                self._round_no, "ok", {TRACKING: point.rate}, [cell], None,
                started + previous_s, started + point.seconds))
            previous_bytes, previous_s = point.bytes_done, point.seconds


def _cliffs(verdict: PassVerdict) -> list[CliffRecord]:
    return [CliffRecord(c.at_bytes, c.rate_before, c.rate_after, c.ratio)
            for c in verdict.cliffs]


def _dips(verdict: PassVerdict) -> list[DipRecord] | None:
    """None when there were none: the key is left out, as in runs stored before."""
    return [DipRecord(d.at_bytes, d.length_bytes, d.rate_level, d.rate_during, d.rate_back)
            for d in verdict.dips] or None


def _slc_truth(truth: Mapping[str, object] | None, estimate: float | None
               ) -> SlcTruth | None:
    """On the emulated SSD: its configured cache, and how far the estimate is from it."""
    if truth is None:
        return None
    config = truth.get("config") if isinstance(truth.get("config"), dict) else {}
    assert isinstance(config, dict)
    slc = config.get("slc_bytes")
    if not isinstance(slc, int):
        return None
    error = (estimate - slc) / slc * 100 if estimate is not None and slc > 0 else None
    profile, fold = truth.get("profile"), config.get("slc_fold_rate_bytes_per_s")
    return SlcTruth(slc, error, profile if isinstance(profile, str) else None,
                    fold if isinstance(fold, int) else None)


RUNNER = Runner(
    prepare=prepare_slc_probe,
    describe=describe,
    progress=lambda p: WriteProgress(quick=p.options.quick),
    start=SlcProbeRun,
    planned=planned,
)
