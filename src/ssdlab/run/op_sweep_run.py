"""Run the over-provisioning sweep: per OP setting, purge the whole target, precondition
the active range, 4 KiB random writes in rounds to steady state; then recommend.

Every round is committed as it finishes (rounds are numbered across the whole sweep;
each round's cell carries its ``op_pct`` and ``setting_round``), and the test's result is
updated after every setting, so a stopped sweep keeps every completed setting. On the
emulated SSD each round also records the device's write counters, from which the write
amplification over each measurement window (the ground truth) is computed.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from ssdlab.analysis.op_sweep import (
    SettingOutcome,
    order_agrees,
    recommend,
    window_write_amplification,
)
from ssdlab.analysis.steady import Verdict, evaluate, rule_by_name, verdict_to_dict
from ssdlab.engine.runner import Executor
from ssdlab.errors import UserError
from ssdlab.plan.op_sweep import (
    TEST,
    TRACKING_NAME,
    OpSetting,
    OpSweepArgs,
    OpSweepPlan,
    build_options,
    build_plan,
    namespace_note,
)
from ssdlab.plan.options import default_load
from ssdlab.plan.pts import PtsTest
from ssdlab.plan.units import format_bytes, format_duration
from ssdlab.run.cells import Cell, cell_from_job, window_cells
from ssdlab.run.prepare import MIN_ACTIVE_RANGE, PreparedTarget, prepare_target
from ssdlab.run.progress import Progress, round_estimate
from ssdlab.run.session import FioSetup, RunSession, TestFailed, fio_record, timeout_for
from ssdlab.store.db import Store
from ssdlab.targets.filetarget import create_file_target
from ssdlab.targets.safety import DestroyData

SUITE = "op-sweep"
DEFINITION = ("OP = share of the capacity left unused: the active range is the first "
              "(100 - OP) % of the target; the rest is trimmed by the purge and never written")


@dataclass(frozen=True)
class PreparedOpSweep:
    target: PreparedTarget
    plan: OpSweepPlan
    args: OpSweepArgs


def prepare_op_sweep(
    target: str, size_bytes: int | None, destroy_data: DestroyData, fio: str, args: OpSweepArgs
) -> PreparedOpSweep:
    """Everything checked before the first byte is written: UserError (one line) otherwise."""
    base = prepare_target(target, size_bytes, destroy_data, fio)
    info = base.info
    options = build_options(args, default_load(info.device_class, base.cpus))
    if info.kind == "file" and options.purge != "auto":
        raise UserError(f"--purge {options.purge} applies to block devices; a file target is "
                        "purged by recreating it (--purge auto)")
    note = namespace_note(info.device_class, info.details)
    plan = build_plan(options, info.capacity_bytes, MIN_ACTIVE_RANGE, note)
    return PreparedOpSweep(base, plan, args)


def fio_setup(p: PreparedOpSweep) -> FioSetup:
    info, o = p.target.info, p.plan.options
    return FioSetup(info.path, o.ioengine, p.target.versions["ssdlab"], info.device_class,
                    o.profile)


def progress_tests(plan: OpSweepPlan) -> tuple[PtsTest, ...]:
    """The settings as the progress display counts them (one "test" each)."""
    return tuple(
        PtsTest(
            name=f"{TEST} {s.label}",
            title=f"Over-provisioning sweep, {s.label}",
            round_cells=(plan.round_cell(s),),
            tracking_sets=(("op", (plan.tracking(s),)),),
            primary_set="op",
            wipc=plan.precondition_cell(s),
            purge=True,
            skipped=(),
        )
        for s in plan.settings
    )


def describe(p: PreparedOpSweep) -> str:
    """``--dry-run``: the plan and every job file; nothing is touched."""
    plan, o, info = p.plan, p.plan.options, p.target.info
    setup = fio_setup(p)
    purge = "recreate the file" if info.kind == "file" else o.purge
    rule = rule_by_name(o.rule)
    per_setting = rule.window * round_estimate(progress_tests(plan)[0])
    lines = [
        f"DRY RUN: nothing will be written. Plan for {info.path} ({info.device_class}, "
        f"{format_bytes(info.capacity_bytes)})",
        f"profile {o.profile}{' (QUICK)' if o.quick else ''}; {DEFINITION}",
        f"namespaces: {plan.namespace_note}",
        f"per setting: purge {purge} over the WHOLE target, precondition the active range "
        f"(2x, 128 KiB sequential), then rounds of {o.round_seconds:g} s of 4 KiB random "
        f"writes ({o.threads} threads x QD {o.iodepth}) on the active range until steady "
        f"state ({o.rule} rule, {rule.window}-round window, at most {o.max_rounds} rounds); "
        f"at least {format_duration(per_setting)} per setting plus preconditioning",
        f"recommendation: the largest OP whose steady IOPS gain at least {o.min_gain_pct:g} % "
        "per point of capacity given up over the previous choice (docs/op-sweep.md)",
    ]
    if p.target.create_file:
        lines.append(f"would create and fully allocate {info.path} "
                     f"({format_bytes(info.capacity_bytes)})")
    for s in plan.settings:
        lines += [
            "",
            f"== {s.label}: active range {format_bytes(s.range.size_bytes)} "
            f"({s.usable_fraction * 100:.1f} % usable, {s.actual_op_pct:.1f} % unused)",
            "-- preconditioning job file:",
            setup.job_text((plan.precondition_cell(s),),
                           f"{TEST} {s.label} workload-independent preconditioning").rstrip(),
            "-- job file of every round:",
            setup.job_text((plan.round_cell(s),), f"{TEST} {s.label} round N").rstrip(),
        ]
    return "\n".join(lines) + "\n"


def plan_dict(p: PreparedOpSweep) -> dict[str, Any]:
    opts = dataclasses.asdict(p.plan.options)
    opts["quick"] = p.plan.options.quick
    return {
        "suite": SUITE,
        "args": dataclasses.asdict(p.args),
        "options": opts,
        "tests": [TEST],
        "definition": DEFINITION,
        "op_method": "active range",
        "namespaces": p.plan.namespace_note,
        "settings": [{"op_pct": s.op_pct, "usable_bytes": s.range.size_bytes,
                      "actual_op_pct": s.actual_op_pct} for s in p.plan.settings],
        "ioengine": p.plan.options.ioengine,
        "direct": True,
    }


def test_params(plan: OpSweepPlan) -> dict[str, Any]:
    o = plan.options
    first = plan.round_cell(plan.settings[0])
    return {
        "title": "Over-provisioning sweep",
        "rule": o.rule,
        "window": rule_by_name(o.rule).window,
        "max_rounds": o.max_rounds,
        "tracking_set": TRACKING_NAME,
        "tracking": {TRACKING_NAME: [{"name": TRACKING_NAME, "cell": "op_sweep_*",
                                      "metric": "iops"}]},
        "cell_seconds": o.round_seconds,
        "round_seconds": o.round_seconds,
        "cells": [{"cell": first.name, "block_bytes": first.block_bytes, "read_pct": 0,
                   "pattern": str(first.pattern), "threads": first.threads,
                   "iodepth": first.iodepth}],
        "precondition": {"block_bytes": 128 * 1024, "factor": 2},
        "purge": o.purge,
        "ops": list(o.ops),
        "min_gain_pct": o.min_gain_pct,
        "definition": DEFINITION,
        "capacity_bytes": plan.capacity_bytes,
        "quick": o.quick,
    }


def _counters(truth: dict[str, Any] | None) -> tuple[int, int] | None:
    counters = truth.get("counters") if isinstance(truth, dict) else None
    if not isinstance(counters, dict):
        return None
    host, nand = counters.get("host_write_bytes"), counters.get("nand_write_bytes")
    return (host, nand) if isinstance(host, int) and isinstance(nand, int) else None


class OpSweepRun:
    """One OP sweep on one target, journaled to ``store``."""

    def __init__(
        self, prepared: PreparedOpSweep, store: Store, executor: Executor, progress: Progress
    ) -> None:
        self.p = prepared
        self.plan = prepared.plan
        self.o = prepared.plan.options
        self.store = store
        self.executor = executor
        self.progress = progress
        self.session = RunSession(prepared.target.info, store, executor, progress,
                                  fio_setup(prepared))
        self.rule = rule_by_name(self.o.rule)
        self._round_no = 0

    @property
    def run_id(self) -> str:
        return self.session.run_id

    def execute(self, argv: list[str]) -> str:
        t = self.p.target
        if t.create_file:
            self.session.info = create_file_target(t.info.path, t.info.capacity_bytes)
        self.session.open(suite=SUITE, profile=self.o.profile, quick=self.o.quick, host=t.host,
                          plan=plan_dict(self.p), versions=dict(t.versions), argv=argv)
        with self.session.running():
            failed = self.run_test()
        self.session.finish(failed)
        return self.run_id

    def run_test(self) -> list[str]:
        """Every setting in increasing OP; the names of failed settings."""
        params = test_params(self.plan)
        self.store.set_test(self.run_id, TEST, status="running", params=params, verdicts={},
                            result={})
        tests = progress_tests(self.plan)
        self.progress.start(tests)
        summaries: list[dict[str, Any]] = []
        failed: list[str] = []
        for setting, ptest in zip(self.plan.settings, tests, strict=True):
            self.progress.test_started(ptest)
            try:
                summaries.append(self._setting(setting, ptest))
            except TestFailed as exc:
                failed.append(f"{TEST} ({setting.label})")
                summaries.append(self._failed_summary(setting, str(exc)))
                self.progress.line(f"{TEST} {setting.label}: FAILED: {exc}")
                self.store.add_event(self.run_id, TEST, "warning",
                                     f"{setting.label} failed: {exc}", {"op_pct": setting.op_pct})
            self.store.set_test(self.run_id, TEST, status="running", params=params,
                                verdicts={}, result={"settings": summaries})
        self._finish(params, summaries)
        return failed

    # -- one setting ---------------------------------------------------------------------
    def _setting(self, s: OpSetting, ptest: PtsTest) -> dict[str, Any]:
        info = self.session.info
        self.store.add_event(
            self.run_id, TEST, "op-setting",
            f"{s.label}: active range {format_bytes(s.range.size_bytes)} of "
            f"{format_bytes(info.capacity_bytes)} ({s.actual_op_pct:.1f} % unused)",
            {"op_pct": s.op_pct, "usable_bytes": s.range.size_bytes,
             "actual_op_pct": s.actual_op_pct},
        )
        purge = self.session.purge(TEST, self.o.purge, 0, info.capacity_bytes)
        self.session.precondition(TEST, self.plan.precondition_cell(s))
        counters = [_counters(self.session.ground_truth(TEST, f"{s.label} preconditioned"))]
        first_round = self._round_no + 1
        series: list[float] = []
        all_cells: list[list[Cell]] = []
        verdict: Verdict | None = None
        for r in range(1, self.o.max_rounds + 1):
            cells, counter = self._round(s, ptest, r)
            counters.append(counter)
            iops = cells[0].get("iops")
            series.append(float(iops) if isinstance(iops, int | float) else float("nan"))
            all_cells.append(cells)
            verdict = evaluate({TRACKING_NAME: series}, self.rule)
            self.progress.round_done(r, {TRACKING_NAME: series[-1]}, verdict.message)
            if verdict.attained:
                break
        assert verdict is not None
        summary = self._summary(s, verdict, all_cells, counters, (first_round, self._round_no))
        summary["purge"] = purge.to_dict()
        self.progress.line(f"{TEST} {s.label}: {verdict.message}")
        return summary

    def _round(self, s: OpSetting, ptest: PtsTest, r: int) -> tuple[list[Cell],
                                                                   tuple[int, int] | None]:
        cell_spec = self.plan.round_cell(s)
        text = self.session.fio.job_text((cell_spec,), f"{TEST} {s.label} round {r}")
        self.progress.phase("round", r, self.o.round_seconds)
        run = self.executor.run(text, timeout_for((cell_spec,)), json_plus=True,
                                on_tick=self.progress.tick)
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
        iops = cells[0].get("iops") if cells else None
        self.store.add_round(
            self.run_id, TEST, self._round_no, status="ok" if complete else "failed",
            tracking={TRACKING_NAME: float(iops) if isinstance(iops, int | float) else
                      float("nan")},
            cells=cells, fio=fio_record(run, "round"), started_at=run.started_at,
            ended_at=run.ended_at,
        )
        if not complete:
            raise TestFailed(f"round {r}: {run.error or 'fio reported no result'}")
        return cells, counter

    def _summary(self, s: OpSetting, verdict: Verdict, all_cells: list[list[Cell]],
                 counters: list[tuple[int, int] | None], rounds: tuple[int, int]
                 ) -> dict[str, Any]:
        window = verdict.window_rounds if verdict.attained else None
        if window is None:  # SNIA: the last window, marked not steady
            window = (max(1, len(all_cells) - self.rule.window + 1), len(all_cells))
        cell = window_cells(all_cells[window[0] - 1: window[1]])[0]
        iops = cell.get("iops")
        iops_value = float(iops) if isinstance(iops, int | float) else None
        wa = window_write_amplification(counters, window[0], window[1])
        return {
            "op_pct": s.op_pct,
            "label": s.label,
            "usable_bytes": s.range.size_bytes,
            "usable_fraction": s.usable_fraction,
            "actual_op_pct": s.actual_op_pct,
            "status": "steady" if verdict.attained else "not_steady",
            "steady": verdict.attained,
            "rounds": list(rounds),
            "rounds_run": len(all_cells),
            "window_rounds": list(window),
            "iops": iops_value,
            "iops_per_raw": None if iops_value is None else iops_value * s.usable_fraction,
            "lat_mean_us": cell.get("lat_mean_us"),
            "lat_p99_us": cell.get("lat_p99_us"),
            "lat_p99_9_us": cell.get("lat_p99_9_us"),
            "lat_max_us": cell.get("lat_max_us"),
            "bw_bytes_per_s": cell.get("bw_bytes_per_s"),
            "verdict": verdict_to_dict(verdict),
            "message": verdict.message,
            "emulator_wa": wa,
        }

    @staticmethod
    def _failed_summary(s: OpSetting, error: str) -> dict[str, Any]:
        return {"op_pct": s.op_pct, "label": s.label, "usable_bytes": s.range.size_bytes,
                "usable_fraction": s.usable_fraction, "actual_op_pct": s.actual_op_pct,
                "status": "failed", "steady": False, "iops": None, "iops_per_raw": None,
                "error": error, "emulator_wa": None}

    def _finish(self, params: dict[str, Any], summaries: list[dict[str, Any]]) -> None:
        outcomes = [SettingOutcome(x["op_pct"], x["usable_fraction"], x["iops"], x["steady"])
                    for x in summaries]
        rec = recommend(outcomes, self.o.min_gain_pct)
        measured = [x for x in summaries if x["iops"] is not None]
        was = [w for x in measured if isinstance(w := x.get("emulator_wa"), float)]
        agrees = None
        if len(measured) >= 2 and len(was) == len(measured):
            agrees = order_agrees([x["iops"] for x in measured], was)
        result = {
            "settings": summaries,
            "recommendation": {
                "op_pct": rec.op_pct, "iops": rec.iops, "min_gain_pct": rec.min_gain_pct,
                "best_iops_per_raw_op_pct": rec.best_per_raw_op, "message": rec.message,
                "steps": [dataclasses.asdict(step) for step in rec.steps],
            },
            "definition": DEFINITION,
            "ground_truth_order_agrees": agrees,
            "steady": all(x["steady"] for x in summaries),
        }
        if not measured:
            status = "failed"
        else:
            status = "steady" if all(x["steady"] for x in measured) else "not_steady"
        result["error"] = "every OP setting failed" if not measured else None
        self.store.set_test(self.run_id, TEST, status=status, params=params,
                            verdicts={"primary": {"message": rec.message}}, result=result)
        self.progress.line(f"{TEST}: {rec.message}")
        if agrees is not None:
            self.progress.line(
                f"{TEST}: ranking by steady IOPS {'agrees' if agrees else 'DISAGREES'} with the "
                "emulator's ground truth (lower write amplification = higher IOPS)")
