"""Run Write Saturation and Host Idle Recovery, journaling every round as it completes.

Each WSAT round is one fio run (json+, with an averaged IOPS log): fio 3.33 writes its
log files only when a job ends and drops the last partial histogram-log interval, so a
round's complete latency histogram (json+ bins, the same numbers fio's histogram log
holds) and its IOPS series are only available per run. Consecutive rounds are separated
by fio's start-up and exit (tens of milliseconds of idle for the device; ``gap_s`` records
the time between two invocations). Every round is committed
when it ends, so a run killed at any point keeps every completed round, and ``ssdlab
resume`` continues after the last one (without a purge: the drive keeps its state; the
idle time while the run was stopped is recorded).

HIR runs one short fio invocation per burst (json+) with ssdlab idle in between, and
the return to the baseline as one continuous fio run cut into rounds by its IOPS log
(mean latency of a baseline round by Little's law: outstanding I/Os / IOPS).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ssdlab.analysis.saturation import (
    IopsPoint,
    Transition,
    WaitState,
    find_transition,
    recovery_verdict,
    wait_state,
)
from ssdlab.analysis.steady import SNIA_RULE, check_window
from ssdlab.engine import scratch
from ssdlab.engine.fiolog import (
    RateLogFollower,
    fio_log_path,
    merge_rate_logs,
    read_log,
    throughput_points,
)
from ssdlab.engine.runner import Executor
from ssdlab.plan import saturation as plan
from ssdlab.plan.optionsets import DEFAULT_LOADS
from ssdlab.plan.planned import FIO_RUN_OVERHEAD_S, PlannedTime
from ssdlab.plan.results import ResumedAfter, StoredPlan, Verdict
from ssdlab.plan.saturation import (
    HIR,
    WSAT,
    HirResult,
    IopsDipRecord,
    SaturatedVerdict,
    SaturationArgs,
    SaturationOptions,
    TransitionRecord,
    WaitStateRecord,
    WsatResult,
    build_options,
    burst_cell,
    wait_label,
)
from ssdlab.run.cells import Cell, cell_from_job, cell_records
from ssdlab.run.hosts import fio_logs
from ssdlab.run.prepare import (
    PreparedTarget,
    TargetRequest,
    check_file_purge,
    checked_range,
    engine_for,
    prepare_device,
)
from ssdlab.run.progress import Progress
from ssdlab.run.session import SessionRun, TestFailed, fio_record
from ssdlab.run.suite import PreparedRange, Runner, dry_run_head, resume_with
from ssdlab.store.db import Store
from ssdlab.store.records import RoundData, RoundRecord, RunData, TestData, TestState

#: a saturation run checked: the range it writes
PreparedSaturation = PreparedRange[SaturationOptions, SaturationArgs]


def prepare_saturation(request: TargetRequest, args: SaturationArgs) -> PreparedSaturation:
    """Everything checked before the first byte is written."""
    return _prepared(prepare_device(request), args)


def _prepared(base: PreparedTarget, args: SaturationArgs) -> PreparedSaturation:
    load = DEFAULT_LOADS.get(base.info.device_class, DEFAULT_LOADS["file"])
    options = engine_for(base.info, build_options(args, load, base.cpus))
    if base.info.kind != "block":
        check_file_purge(base.info, options.purge)
    rng = checked_range(base.info, options.active_range_pct)
    return PreparedSaturation(base, options, args, rng)


def planned(p: PreparedSaturation) -> PlannedTime:
    """WSAT: from one round to its limit of rounds and hours (what the drive writes
    decides: it stops at its limit of bytes written); HIR: every burst, wait and return
    to the baseline; a fio start per round and per burst; the purge."""
    o = p.options
    rounds = max(1, math.ceil(o.max_seconds / o.round_seconds))
    round_s = o.round_seconds + FIO_RUN_OVERHEAD_S
    out = PlannedTime(round_s, rounds * round_s, "the bytes written")
    if o.hir:
        burst = o.burst_seconds + FIO_RUN_OVERHEAD_S
        out += PlannedTime.fixed(sum(o.bursts * (burst + wait) for wait in o.waits_s)
                                 + len(o.waits_s) * (o.baseline_rounds * o.burst_seconds
                                                     + FIO_RUN_OVERHEAD_S))
    return out + (PlannedTime.step("a purge") if o.purge != "none" else PlannedTime.fixed(0))


def describe(p: PreparedSaturation) -> str:
    """``--dry-run``: the plan and the job files; nothing is touched."""
    lines = [dry_run_head(p.target, sectors=False),
             *plan.describe(p.options, p.range, p.job_text)]
    return "\n".join(lines) + "\n"


class SaturationRun(SessionRun[PreparedSaturation]):
    """Write Saturation, then Host Idle Recovery, on one target, journaled to ``store``."""

    suite = plan.SUITE

    def __init__(self, prepared: PreparedSaturation, store: Store, executor: Executor,
                 progress: Progress) -> None:
        super().__init__(prepared, store, executor, progress)
        self.o = prepared.options

    def plan_record(self) -> StoredPlan:
        return plan.plan_record(self.o, self.p.args, self.p.range)

    def run_tests(self, previous: RunData | None) -> list[str]:
        done = {t.name: t for t in previous.tests} if previous else {}
        wsat = done.get(WSAT)
        if wsat is None or wsat.status in ("running", "interrupted"):
            failed = self.one_test(WSAT, lambda: self.wsat(wsat))
        else:
            failed = [WSAT] if wsat.status == "failed" else []
        hir = done.get(HIR)
        if self.o.hir and not failed and (hir is None or hir.status == "running"):
            failed += self.one_test(HIR, lambda: self.hir(hir))
        return failed

    # -- Write Saturation --------------------------------------------------------------
    def wsat(self, previous: TestData | None) -> None:
        o, rng = self.o, self.p.range
        params = plan.wsat_params(o, rng)
        rounds = [r for r in previous.rounds if r.status == "ok"] if previous else []
        self.store.set_test(self.run_id, WSAT, TestState("running", params))
        if not rounds:
            if previous is not None:
                self.store.add_event(self.run_id, WSAT, "warning",
                                     "no round was completed before the stop: starting over")
            if o.purge != "none":
                self.session.purge(WSAT, o.purge, rng.offset_bytes, rng.size_bytes)
        else:
            self.session.resumed_after(WSAT, "warning", rounds[-1], "round", ", which may let "
                                       "it recover; the rounds after this point are marked "
                                       "resumed")
        state = _WsatState.of(rounds)
        limit_bytes = o.max_written * rng.size_bytes
        while (state.round_no < o.max_rounds and state.written < limit_bytes
               and state.elapsed_s + o.round_seconds * 0.5 <= o.max_seconds):
            self._wsat_round(state)
        self._wsat_finish(params)

    def _wsat_round(self, state: _WsatState) -> None:
        o = self.o
        number = state.round_no + 1
        cell = burst_cell(o, self.p.range, plan.WSAT_CELL, o.round_seconds)
        with scratch.scratch_dir("wsat") as logdir:
            prefix = logdir / "wsat"
            text = plan.wsat_job(o, self.p.range, number, str(prefix), self.session.fio.job_text)
            self.progress.phase("round", number, o.round_seconds)
            run = self.session.run_fio(text, (cell,), json_plus=True)
            job = run.output.jobs[0] if run.output is not None and run.output.jobs else None
            if not run.ok or job is None:
                self.session.fio_round(WSAT, number, run, "round", status="failed",
                                       tracking={}, cells=[])
                raise TestFailed(f"round {number}: {run.error}")
            points = _rate_points(self.session.executor, prefix, o.threads, o.log_msec,
                                  o.block_bytes)
        measured = cell_from_job(cell, job)
        # the group's wall runtime (job_runtime sums the jobs' runtimes)
        seconds = max(job.write.runtime_ms, job.read.runtime_ms) / 1000 or o.round_seconds
        gap = run.started_at - state.last_end if state.last_end else 0.0
        series = [[round(state.elapsed_s + p.elapsed_s, 3), round(state.written + p.bytes_done),
                   round(p.rate, 1)] for p in points]
        state.round_no = number
        state.elapsed_s += seconds
        state.written += job.write.io_bytes
        state.last_end = run.ended_at
        measured.update({"elapsed_s": state.elapsed_s, "written_bytes": state.written,
                         "gap_s": round(gap, 3), "resumed": state.resumed, "series": series})
        iops = _metric(measured, "iops")
        self.session.fio_round(WSAT, number, run, "round", status="ok", tracking={"IOPS": iops},
                               cells=cell_records(plan.WsatCell, [measured], WSAT))
        self.session.ground_truth(WSAT, f"round {number}")
        self.progress.line(
            f"{WSAT} round {number}: {iops:,.0f} IOPS, p99 "
            f"{_metric(measured, 'lat_p99_us'):,.0f} us, "
            f"{state.written / max(self.p.range.size_bytes, 1):.2f}x the range written"
        )

    def _wsat_finish(self, params: plan.WsatParams) -> None:
        test = self.store.load(self.run_id).test(WSAT)
        rounds = [r for r in test.rounds if r.status == "ok"]
        if not rounds:
            raise TestFailed("no complete round was measured")
        result = wsat_result(rounds, self.o, self.p.range.size_bytes)
        self.store.set_test(self.run_id, WSAT, TestState(
            "steady" if result.steady else "not_steady", params, {"primary": result.verdict},
            result))
        self.progress.line(f"{WSAT}: {result.transition.message}")

    # -- Host Idle Recovery --------------------------------------------------------------
    def hir(self, previous: TestData | None) -> None:
        o = self.o
        params = plan.hir_params(o)
        self.store.set_test(self.run_id, HIR, TestState("running", params))
        done = {(int(r.cells[0]["group"]), r.cells[0]["kind"], int(r.cells[0]["index"]))
                for r in (previous.rounds if previous else []) if r.status == "ok" and r.cells}
        round_no = max((r.round_no for r in previous.rounds), default=0) if previous else 0
        ended = [r.ended_at for r in previous.rounds if r.status == "ok"] if previous else []
        if ended:
            idle = time.time() - max(ended)
            self.store.add_event(
                self.run_id, HIR, "warning",
                f"resumed after round {round_no}: the drive was idle for {idle:,.0f} s, so "
                "the next burst follows that idle time, not its wait state's",
                ResumedAfter(round_no, idle),
            )
        for group, wait_s in enumerate(o.waits_s):
            for index in range(o.bursts):
                if (group, "burst", index) in done:
                    continue
                round_no += 1
                self._burst(round_no, group, wait_s, index)
                self.progress.phase(f"idle {wait_label(wait_s)}")
                time.sleep(wait_s)
            if (group, "baseline", o.baseline_rounds - 1) not in done:
                round_no = self._baseline(round_no, group, wait_s, done)
        self._hir_finish(params)

    def _burst(self, round_no: int, group: int, wait_s: float, index: int) -> None:
        o = self.o
        cell = burst_cell(o, self.p.range, f"hir_w{wait_s:g}_b{index + 1}", o.burst_seconds)
        text = self.session.fio.job_text((cell,), f"hir wait {wait_label(wait_s)} burst "
                                                  f"{index + 1}")
        self.progress.phase(f"burst {index + 1}/{o.bursts} ({wait_label(wait_s)} wait)")
        run = self.session.run_fio(text, (cell,), json_plus=True)
        cells = []
        if run.output is not None and run.output.jobs:
            measured = cell_from_job(cell, run.output.jobs[0])
            measured.update({"group": group, "kind": "burst", "index": index, "wait_s": wait_s})
            cells = [measured]
        ok = run.ok and bool(cells)
        iops = _metric(cells[0], "iops") if ok else math.nan
        self.session.fio_round(HIR, round_no, run, "hir", status="ok" if ok else "failed",
                               tracking={"IOPS": iops} if ok else {},
                               cells=cell_records(plan.HirBurstCell, cells, HIR))
        self.session.ground_truth(HIR, f"burst {index + 1} of wait {wait_label(wait_s)}")
        if not ok:
            raise TestFailed(f"burst {index + 1} of wait state {wait_label(wait_s)}: {run.error}")
        self.progress.line(f"{HIR} wait {wait_label(wait_s)} burst {index + 1}: {iops:,.0f} IOPS")

    def _baseline(self, round_no: int, group: int, wait_s: float,
                  done: set[tuple[int, str, int]]) -> int:
        """Continuous writes back to the baseline: one fio run cut into rounds by its log."""
        o = self.o
        first = next((i for i in range(o.baseline_rounds) if (group, "baseline", i) not in done),
                     o.baseline_rounds)
        count = o.baseline_rounds - first
        burst_ms = round(o.burst_seconds * 1000)
        cell = burst_cell(o, self.p.range, f"hir_baseline_w{wait_s:g}", count * o.burst_seconds)
        with scratch.scratch_dir("hir") as logdir:
            prefix = logdir / "base"
            extra = (("write_iops_log", str(prefix)), ("log_avg_msec", str(burst_ms)))
            text = self.session.fio.job_text((cell,), f"hir back to baseline after "
                                                      f"{wait_label(wait_s)}", extra)
            self.progress.phase(f"baseline after {wait_label(wait_s)}")
            run = self.session.run_fio(text, (cell,), json_plus=True)
            points = _rate_points(self.session.executor, prefix, o.threads, burst_ms,
                                  o.block_bytes) if run.ok else []
        self.store.add_step(self.run_id, HIR, "fio", plan.HirStep(run.ok, run.error, wait_s),
                            fio_record(run, "hir-baseline"))
        if not run.ok:
            raise TestFailed(f"baseline after wait {wait_label(wait_s)}: {run.error}")
        index, previous_end = first, 0.0
        first_round = round_no + 1
        outstanding = o.threads * o.iodepth
        for point in points:
            length = point.elapsed_s - previous_end
            previous_end = point.elapsed_s
            if length < o.burst_seconds * 0.5 or index >= o.baseline_rounds or point.rate <= 0:
                continue
            round_no += 1
            record = plan.HirBaselineCell(
                cell.name, plan.HirPoint(group, "baseline", index, wait_s), point.rate,
                outstanding / point.rate * 1e6, o.block_bytes, 0, "random", o.threads,
                o.iodepth)
            ended = run.started_at + point.elapsed_s
            self.store.add_round(self.run_id, HIR, RoundRecord(
                round_no, "ok", {"IOPS": point.rate}, [record], None, ended - length, ended))
            index += 1
        if round_no >= first_round:  # the members over the whole fio run, its rounds
            self.session.member_round(HIR, first_round, run, "hir-baseline",
                                      last_round=round_no)
        self.progress.line(f"{HIR} back to baseline after {wait_label(wait_s)}: "
                           f"{index - first} rounds")
        return round_no

    def _hir_finish(self, params: plan.HirParams) -> None:
        run = self.store.load(self.run_id)
        result = hir_result(run.test(WSAT), run.test(HIR), self.o)
        self.store.set_test(self.run_id, HIR, TestState(
            "recovered" if result.recovered else "no_recovery", params,
            {"primary": Verdict(result.message)}, result))
        self.progress.line(f"{HIR}: {result.message}")


def _metric(cell: Cell, key: str) -> float:
    """A metric of a measured cell as a number (0 where fio gave none)."""
    value = cell.get(key)
    return float(value) if isinstance(value, int | float) else 0.0


def _rate_points(executor: Executor, prefix: Path, threads: int, log_msec: int, block: int
                 ) -> list[Any]:
    """The merged IOPS series of one fio run's averaged per-job logs; on several hosts,
    every host's jobs merged (their sum: the aggregate's series, docs/hosts.md)."""
    jobs = range(1, threads + 1)
    copies = [fio_logs(executor, fio_log_path(prefix, "iops", j)) for j in jobs]
    if "" in copies[0]:
        follower = RateLogFollower(prefix, "iops", jobs, log_msec)
        return throughput_points(follower.poll(final=True), "iops", block)
    logs = [read_log(path) for paths in copies for path in paths.values()]
    return throughput_points(merge_rate_logs(logs, log_msec), "iops", block)


@dataclass
class _WsatState:
    round_no: int
    elapsed_s: float
    written: float
    last_end: float  # wall clock of the previous round's end (0: none yet)
    resumed: bool

    @classmethod
    def of(cls, rounds: list[RoundData]) -> _WsatState:
        if not rounds:
            return cls(0, 0.0, 0.0, 0.0, False)
        cell = rounds[-1].cells[0]
        return cls(rounds[-1].round_no, float(cell["elapsed_s"]), float(cell["written_bytes"]),
                   0.0, True)


# -- results ---------------------------------------------------------------------------------


def wsat_result(rounds: list[RoundData], o: SaturationOptions, range_bytes: int) -> WsatResult:
    """Saturated IOPS (the last window), steady state of that window, the transition."""
    iops = [float(r.cells[0]["iops"]) for r in rounds]
    window = iops[-SNIA_RULE.window:]
    saturated = sum(window) / len(window)
    verdict = SaturatedVerdict(message=f"fewer than {SNIA_RULE.window} rounds")
    if len(window) == SNIA_RULE.window:
        first = len(iops) - SNIA_RULE.window + 1
        check = check_window("IOPS", window, first, SNIA_RULE)
        verdict = SaturatedVerdict(
            attained=check.passed, window_rounds=[first, len(iops)],
            message=(f"{'saturated' if check.passed else 'NOT saturated'}: rounds {first}-"
                     f"{len(iops)}, {'; '.join(check.reasons)}"),
        )
    points = [IopsPoint(float(t), float(b), float(v))
              for r in rounds for t, b, v in r.cells[0].get("series", [])]
    transition = find_transition(points, saturated)
    last = rounds[-1].cells[0]
    written = float(last["written_bytes"])
    return WsatResult(
        steady=verdict.attained,
        rounds_run=len(rounds),
        window_rounds=verdict.window_rounds,
        fob_iops=transition.fob_iops,
        saturated_iops=saturated,
        written_bytes=written,
        written_x=written / max(range_bytes, 1),
        elapsed_s=float(last["elapsed_s"]),
        stop_reason=_stop_reason(len(rounds), written, float(last["elapsed_s"]), o,
                                 range_bytes),
        transition=_transition(transition),
        verdict=verdict,
        cells=[{**{k: v for k, v in last.items() if k != "series"}, "iops": saturated}],
    )


def _stop_reason(rounds: int, written: float, elapsed_s: float, o: SaturationOptions,
                 range_bytes: int) -> str:
    if rounds >= o.max_rounds:
        return "round limit"
    if written >= o.max_written * range_bytes * 0.999:
        return f"{o.max_written:g}x written"
    if elapsed_s >= o.max_seconds - o.round_seconds:
        return "time limit"
    return "stopped early"


def _transition(t: Transition) -> TransitionRecord:
    dips = [IopsDipRecord(d.start_s, d.start_bytes, d.end_s, d.end_bytes, d.fob_iops,
                          d.iops_during, d.iops_back) for d in t.dips]
    return TransitionRecord(t.fob_iops, t.saturated_iops, t.found, t.start_s, t.start_bytes,
                            t.end_s, t.end_bytes, t.message, dips or None)


def _wait_state(s: WaitState) -> WaitStateRecord:
    return WaitStateRecord(s.wait_s, list(s.bursts_iops), list(s.baseline_iops), s.mean_iops,
                           s.baseline_mean, s.ratio, s.p_value, s.recovered, s.note)


def hir_result(wsat: TestData, hir: TestData, o: SaturationOptions) -> HirResult:
    wsat_iops = [float(r.cells[0]["iops"]) for r in wsat.rounds if r.status == "ok"]
    baseline = wsat_iops[-SNIA_RULE.window:]
    cells = [r.cells[0] for r in hir.rounds if r.status == "ok" and r.cells]
    states = []
    for group, wait_s in enumerate(o.waits_s):
        # the first burst of a group follows continuous writing, not idle time: shown in
        # the report, not counted
        bursts = [float(c["iops"]) for c in cells
                  if c["group"] == group and c["kind"] == "burst" and int(c["index"]) > 0]
        if bursts:
            states.append(wait_state(wait_s, bursts, baseline, o.recovery_ratio))
        after = [float(c["iops"]) for c in cells
                 if c["group"] == group and c["kind"] == "baseline"]
        if after:
            baseline = after
    recovered, message = recovery_verdict(states, o.recovery_ratio)
    window = wsat_iops[-SNIA_RULE.window:]
    return HirResult(recovered, message, [_wait_state(s) for s in states],
                     sum(window) / max(len(window), 1))


RUNNER = Runner(
    prepare=prepare_saturation,
    describe=describe,
    start=SaturationRun,
    prepare_resume=resume_with(_prepared, SaturationArgs),
    planned=planned,
)
