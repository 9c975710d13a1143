"""Run the over-provisioning sweep: per OP setting, purge the whole target, precondition
the active range, 4 KiB random writes in rounds to steady state; then recommend.

Every round is committed as it finishes (rounds are numbered across the whole sweep;
each round's cell carries its ``op_pct`` and ``setting_round``), and the test's result is
updated after every setting, so a stopped sweep keeps every completed setting. On the
emulated SSD each round also records the device's write counters, from which the write
amplification over each measurement window (the ground truth) is computed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ssdlab.analysis import steady
from ssdlab.analysis.op_sweep import (
    SettingOutcome,
    order_agrees,
    recommend,
    window_write_amplification,
)
from ssdlab.analysis.steady import SteadyRule, evaluate, rule_by_name
from ssdlab.errors import UserError
from ssdlab.plan import op_sweep as plan
from ssdlab.plan.op_sweep import (
    DEFINITION,
    TEST,
    TRACKING_NAME,
    FailedSetting,
    MeasuredSetting,
    OpSetting,
    OpSweepArgs,
    OpSweepOptions,
    OpSweepParams,
    OpSweepPlan,
    OpSweepResult,
    PurgeRecord,
    RecommendationRecord,
    SettingRecord,
    SettingsSoFar,
    StepRecord,
    build_options,
    build_plan,
    namespace_note,
)
from ssdlab.plan.optionsets import default_load
from ssdlab.plan.planned import PlannedTime
from ssdlab.plan.results import SteadyVerdict, StoredPlan, Verdict
from ssdlab.plan.rounds import RoundTest
from ssdlab.run.cells import Cell, cell_from_job, cell_records, metric, window_cells
from ssdlab.run.prepare import (
    MIN_ACTIVE_RANGE,
    TargetRequest,
    check_device_purge,
    engine_for,
    prepare_device,
)
from ssdlab.run.progress import round_estimate, rounds_planned
from ssdlab.run.session import SessionRun, TestFailed
from ssdlab.run.suite import PreparedSuite, Runner, dry_run, rounds_progress
from ssdlab.store.records import RunData, TestState
from ssdlab.targets.purge import PurgeOutcome
from ssdlab.units import format_bytes


@dataclass(frozen=True)
class PreparedOpSweep(PreparedSuite[OpSweepOptions]):
    plan: OpSweepPlan
    args: OpSweepArgs


def prepare_op_sweep(request: TargetRequest, args: OpSweepArgs) -> PreparedOpSweep:
    """Everything checked before the first byte is written: UserError (one line) otherwise."""
    base = prepare_device(request)
    info = base.info
    options = engine_for(info, build_options(args, default_load(info.device_class, base.cpus)))
    check_device_purge(info, options.purge)
    if info.kind == "file" and options.purge != "auto":
        raise UserError(f"--purge {options.purge} applies to block devices; a file target is "
                        "purged by recreating it (--purge auto)")
    note = namespace_note(info.device_class, info.details)
    return PreparedOpSweep(base, options,
                           build_plan(options, info.capacity_bytes, MIN_ACTIVE_RANGE, note), args)


def describe(p: PreparedOpSweep) -> str:
    """``--dry-run``: the plan and every job file; nothing is touched."""
    round_s = round_estimate(plan.progress_tests(p.plan)[0])
    return dry_run(p, plan.describe_sweep(p.plan, p.target.info.kind == "file", round_s),
                   plan.describe_settings(p.plan, p.job_text), sectors=False)


def planned(p: PreparedOpSweep) -> PlannedTime:
    """Every setting's rounds, purge and preconditioning (run/progress.py)."""
    o = p.options
    return rounds_planned(plan.progress_tests(p.plan), rule_by_name(o.rule).window,
                          o.max_rounds, purge=True, each="setting")


def _counters(truth: Mapping[str, object] | None) -> tuple[int, int] | None:
    counters = truth.get("counters") if truth is not None else None
    if not isinstance(counters, Mapping):
        return None
    host, nand = counters.get("host_write_bytes"), counters.get("nand_write_bytes")
    return (host, nand) if isinstance(host, int) and isinstance(nand, int) else None


class OpSweepRun(SessionRun[PreparedOpSweep]):
    """One OP sweep on one target, journaled to ``store``."""

    suite = plan.SUITE
    _round_no = 0  # rounds are numbered across the whole sweep

    @property
    def o(self) -> OpSweepOptions:
        return self.p.options

    @property
    def rule(self) -> SteadyRule:
        return rule_by_name(self.o.rule)

    def plan_record(self) -> StoredPlan:
        return plan.plan_record(self.p.plan, self.p.args)

    def run_tests(self, previous: RunData | None) -> list[str]:
        """Every setting in increasing OP; the names of failed settings."""
        params = plan.test_params(self.p.plan)
        self.store.set_test(self.run_id, TEST, TestState("running", params))
        tests = plan.progress_tests(self.p.plan)
        self.progress.start(tests)
        settings: list[SettingRecord] = []
        failed: list[str] = []
        for setting, ptest in zip(self.p.plan.settings, tests, strict=True):
            self.progress.test_started(ptest)
            try:
                settings.append(self._setting(setting, ptest))
            except TestFailed as exc:
                failed.append(f"{TEST} ({setting.label})")
                settings.append(_failed(setting, str(exc)))
                self.progress.line(f"{TEST} {setting.label}: FAILED: {exc}")
                self.store.add_event(self.run_id, TEST, "warning",
                                     f"{setting.label} failed: {exc}",
                                     plan.SettingFailed(setting.op_pct))
            self.store.set_test(self.run_id, TEST, TestState(
                "running", params, {}, SettingsSoFar(list(settings))))
        self._finish(params, settings)
        return failed

    # -- one setting ---------------------------------------------------------------------
    def _setting(self, s: OpSetting, ptest: RoundTest) -> MeasuredSetting:
        info = self.session.info
        self.store.add_event(
            self.run_id, TEST, "op-setting",
            f"{s.label}: active range {format_bytes(s.range.size_bytes)} of "
            f"{format_bytes(info.capacity_bytes)} ({s.actual_op_pct:.1f} % unused)",
            plan.setting_record(s),
        )
        purge = self.session.purge(TEST, self.o.purge, 0, info.capacity_bytes)
        self.session.precondition(TEST, self.p.plan.precondition_cell(s))
        counters = [_counters(self.session.ground_truth(TEST, f"{s.label} preconditioned"))]
        first_round = self._round_no + 1
        series: list[float] = []
        all_cells: list[list[Cell]] = []
        verdict: steady.Verdict | None = None
        for r in range(1, self.o.max_rounds + 1):
            cells, counter = self._round(s, r)
            counters.append(counter)
            iops = metric(cells[0], "iops")
            series.append(iops if iops is not None else float("nan"))
            all_cells.append(cells)
            verdict = evaluate({TRACKING_NAME: series}, self.rule)
            self.progress.round_done(r, {TRACKING_NAME: series[-1]}, verdict.message)
            if verdict.attained:
                break
        assert verdict is not None
        summary = self._summary(s, verdict, all_cells, counters, (first_round, self._round_no),
                                purge)
        self.progress.line(f"{TEST} {s.label}: {verdict.message}")
        return summary

    def _round(self, s: OpSetting, r: int) -> tuple[list[Cell], tuple[int, int] | None]:
        cell_spec = self.p.plan.round_cell(s)
        text = self.session.fio.job_text((cell_spec,), f"{TEST} {s.label} round {r}")
        self.progress.phase("round", r, self.o.round_seconds)
        run = self.session.run_fio(text, (cell_spec,), json_plus=True)
        cells: list[Cell] = []
        if run.output is not None:
            by_name = {job.name: job for job in run.output.jobs}
            if cell_spec.name in by_name:
                cells = [cell_from_job(cell_spec, by_name[cell_spec.name])]
        counter = _counters(self.session.ground_truth(TEST, f"{s.label} round {r}"))
        complete = run.ok and len(cells) == 1
        for cell in cells:
            cell.update({"op_pct": s.op_pct, "setting_round": r,
                         "emu_host_write_bytes": counter[0] if counter else None,
                         "emu_nand_write_bytes": counter[1] if counter else None})
        self._round_no += 1
        iops = metric(cells[0], "iops") if cells else None
        self.session.fio_round(
            TEST, self._round_no, run, "round", status="ok" if complete else "failed",
            tracking={TRACKING_NAME: iops if iops is not None else float("nan")},
            cells=cell_records(plan.OpSweepCell, cells, f"{TEST} {s.label}"),
        )
        if not complete:
            raise TestFailed(f"round {r}: {run.error or 'fio reported no result'}")
        return cells, counter

    def _summary(self, s: OpSetting, verdict: steady.Verdict, all_cells: list[list[Cell]],
                 counters: list[tuple[int, int] | None], rounds: tuple[int, int],
                 purge: PurgeOutcome) -> MeasuredSetting:
        window = verdict.window_rounds if verdict.attained else None
        if window is None:  # SNIA: the last window, marked not steady
            window = (max(1, len(all_cells) - self.rule.window + 1), len(all_cells))
        cell = window_cells(all_cells[window[0] - 1: window[1]])[0]
        iops = metric(cell, "iops")
        return MeasuredSetting(
            op_pct=s.op_pct, label=s.label, usable_bytes=s.range.size_bytes,
            usable_fraction=s.usable_fraction, actual_op_pct=s.actual_op_pct,
            status="steady" if verdict.attained else "not_steady", steady=verdict.attained,
            rounds=list(rounds), rounds_run=len(all_cells), window_rounds=list(window),
            iops=iops, iops_per_raw=None if iops is None else iops * s.usable_fraction,
            lat_mean_us=metric(cell, "lat_mean_us"),
            lat_p99_us=metric(cell, "lat_p99_us"),
            lat_p99_9_us=metric(cell, "lat_p99_9_us"),
            lat_max_us=metric(cell, "lat_max_us"),
            bw_bytes_per_s=metric(cell, "bw_bytes_per_s"), verdict=SteadyVerdict.of(verdict),
            message=verdict.message,
            emulator_wa=window_write_amplification(counters, window[0], window[1]),
            purge=PurgeRecord(purge.method, purge.ok, purge.seconds,
                              None if purge.command is None else list(purge.command),
                              purge.detail),
        )

    def _finish(self, params: OpSweepParams, settings: list[SettingRecord]) -> None:
        outcomes = [SettingOutcome(x.op_pct, x.usable_fraction, x.iops, x.steady)
                    for x in settings]
        rec = recommend(outcomes, self.o.min_gain_pct)
        measured = [x for x in settings if x.iops is not None]
        was = [x.emulator_wa for x in measured if x.emulator_wa is not None]
        agrees = None
        if len(measured) >= 2 and len(was) == len(measured):
            agrees = order_agrees([x.iops for x in measured if x.iops is not None], was)
        result = OpSweepResult(
            settings=settings,
            recommendation=RecommendationRecord(
                rec.op_pct, rec.iops, rec.min_gain_pct, rec.best_per_raw_op, rec.message,
                [StepRecord(st.from_op, st.to_op, st.gain_pct, st.per_point_pct, st.accepted)
                 for st in rec.steps]),
            definition=DEFINITION,
            ground_truth_order_agrees=agrees,
            steady=all(x.steady for x in settings),
            error="every OP setting failed" if not measured else None,
        )
        if not measured:
            status = "failed"
        else:
            status = "steady" if all(x.steady for x in measured) else "not_steady"
        self.store.set_test(self.run_id, TEST, TestState(
            status, params, {"primary": Verdict(rec.message)}, result))
        self.progress.line(f"{TEST}: {rec.message}")
        if agrees is not None:
            self.progress.line(
                f"{TEST}: ranking by steady IOPS {'agrees' if agrees else 'DISAGREES'} with the "
                "emulator's ground truth (lower write amplification = higher IOPS)")


def _failed(s: OpSetting, error: str) -> FailedSetting:
    return FailedSetting(op_pct=s.op_pct, label=s.label, usable_bytes=s.range.size_bytes,
                         usable_fraction=s.usable_fraction, actual_op_pct=s.actual_op_pct,
                         error=error)


RUNNER = Runner(
    prepare=prepare_op_sweep,
    describe=describe,
    progress=rounds_progress,
    start=OpSweepRun,
    planned=planned,
)
