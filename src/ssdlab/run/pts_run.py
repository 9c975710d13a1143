"""Execute a prepared PTS run: purge, precondition, rounds to steady state, journal.

Every round is committed to the store the moment it finishes, so a run stopped at
round 7 (Ctrl-C, crash, power loss) keeps rounds 1-6.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from ssdlab.analysis.steady import Verdict, evaluate, rule_by_name, verdict_to_dict
from ssdlab.engine.runner import Executor, FioRun
from ssdlab.plan.pts import PtsTest, TrackingVar
from ssdlab.plan.specs import CellSpec
from ssdlab.run.cells import Cell, cell_from_job, tracking_value, window_cells
from ssdlab.run.prepare import Prepared
from ssdlab.run.progress import Progress
from ssdlab.run.session import (
    FioSetup,
    RunInterrupted,
    RunSession,
    TestFailed,
    fio_record,
    timeout_for,
)
from ssdlab.store.db import Store
from ssdlab.store.records import RoundData, RunData, TestData
from ssdlab.targets.filetarget import create_file_target

#: a test with one of these statuses is not run again when a run is resumed
FINISHED_TESTS = ("steady", "not_steady", "failed", "skipped")

__all__ = ["PtsRun", "RunInterrupted", "TestFailed", "job_text", "plan_dict", "test_params"]


def fio_setup(prepared: Prepared) -> FioSetup:
    return FioSetup(
        prepared.info.path, prepared.options.ioengine, prepared.versions["ssdlab"],
        prepared.info.device_class, prepared.options.profile,
    )


def job_text(prepared: Prepared, cells: tuple[CellSpec, ...], what: str) -> str:
    if prepared.options.read_only_target:
        what += "\nread-only: fio runs with --readonly and refuses any write or trim"
    return fio_setup(prepared).job_text(cells, what)


def _verdicts(test: PtsTest, rounds: list[dict[str, float]], rule_name: str) -> dict[str, Verdict]:
    rule = rule_by_name(rule_name)
    out: dict[str, Verdict] = {}
    for set_name, variables in test.tracking_sets:
        series = {v.name: [r[v.name] for r in rounds] for v in variables}
        out[set_name] = evaluate(series, rule)
    return out


def _tracking(variables: list[TrackingVar], cells: list[Cell]) -> dict[str, float]:
    return {v.name: tracking_value(cells, v.cell, v.metric) for v in variables}


class PtsRun:
    """One PTS run against one target, journaled to ``store``."""

    def __init__(
        self, prepared: Prepared, store: Store, executor: Executor, progress: Progress
    ) -> None:
        self.p = prepared
        self.store = store
        self.executor = executor
        self.progress = progress
        self.session = RunSession(prepared.info, store, executor, progress, fio_setup(prepared))

    @property
    def run_id(self) -> str:
        return self.session.run_id

    # -- the whole run ---------------------------------------------------------------
    def execute(self, argv: list[str]) -> str:
        if self.p.create_file:
            self.session.info = create_file_target(self.p.info.path, self.p.info.capacity_bytes)
        self.session.open(
            suite="pts",
            profile=self.p.options.profile,
            quick=self.p.options.quick,
            host=self.p.host,
            plan=plan_dict(self.p),
            versions=dict(self.p.versions),
            argv=argv,
        )
        with self.session.running():
            failed = self._run_tests()
        self.session.finish(failed)
        return self.run_id

    def resume(self, run: RunData, argv: list[str]) -> str:
        """Continue a stopped run: finished tests stay, the current one goes on from its
        last completed round (no new purge or preconditioning), the rest run as planned."""
        if self.p.create_file:  # killed while a purge was recreating the test file
            self.session.info = create_file_target(self.p.info.path, self.p.info.capacity_bytes)
        self.session.reopen(run.run_id, argv)
        stored = {t.name: t for t in run.tests}
        with self.session.running():
            failed = self._run_tests(stored)
        self.session.finish(failed)
        return self.run_id

    def _run_tests(self, stored: dict[str, TestData] | None = None) -> list[str]:
        stored = stored or {}
        self.progress.start(self.p.tests)
        failed: list[str] = []
        for test in self.p.tests:
            before = stored.get(test.name)
            if before is not None and before.status in FINISHED_TESTS:
                if before.status == "failed":
                    failed.append(test.name)
                continue
            self.progress.test_started(test)
            try:
                self.run_test(test, before)
            except TestFailed as exc:
                failed.append(test.name)
                self.session.after_failure(test.name, exc)
        return failed

    # -- one test ----------------------------------------------------------------------
    def run_test(self, test: PtsTest, before: TestData | None = None) -> None:
        params = test_params(test, self.p)
        self.store.set_test(
            self.run_id, test.name, status="running", params=params, verdicts={}, result={}
        )
        previous = [r for r in before.rounds if r.status == "ok"] if before else []
        if previous:
            self.store.add_event(
                self.run_id, test.name, "warning",
                f"resumed after round {previous[-1].round_no}: the drive was idle "
                f"{time.time() - previous[-1].ended_at:,.0f} s while the run was stopped",
                {"after_round": previous[-1].round_no},
            )
            try:
                self._rounds(test, params, previous)
            except TestFailed as exc:
                self._failed(test, params, exc)
                raise
            return
        try:
            if test.purge and self.p.options.purge != "none":
                rng = test.round_cells[0]
                self.session.purge(test.name, self.p.options.purge, rng.offset_bytes,
                                   rng.size_bytes)
            if test.wipc is not None:
                self.session.precondition(test.name, test.wipc)
            self._rounds(test, params)
        except TestFailed as exc:
            self._failed(test, params, exc)
            raise

    def _failed(self, test: PtsTest, params: dict[str, Any], exc: TestFailed) -> None:
        self.store.set_test(
            self.run_id, test.name, status="failed", params=params, verdicts={},
            result={"error": str(exc)},
        )

    def _round(self, test: PtsTest, round_no: int) -> tuple[FioRun, list[Cell]]:
        text = job_text(self.p, test.round_cells, f"{test.name} round {round_no}")
        self.progress.phase("round", round_no, test.round_seconds)
        run = self.executor.run(
            text, timeout_for(test.round_cells), json_plus=True, on_tick=self.progress.tick
        )
        cells: list[Cell] = []
        if run.output is not None:
            by_name = {job.name: job for job in run.output.jobs}
            cells = [
                cell_from_job(spec, by_name[spec.name])
                for spec in test.round_cells
                if spec.name in by_name
            ]
        return run, cells

    def _rounds(
        self, test: PtsTest, params: dict[str, Any], previous: list[RoundData] | None = None
    ) -> None:
        variables = list({v.name: v for _, vs in test.tracking_sets for v in vs}.values())
        done = sorted((r for r in previous or [] if r.status == "ok"), key=lambda r: r.round_no)
        history: list[dict[str, float]] = [dict(r.tracking) for r in done]
        all_cells: list[list[Cell]] = [list(r.cells) for r in done]
        verdicts: dict[str, Verdict] = (
            _verdicts(test, history, self.p.options.rule) if history else {}
        )
        if verdicts and verdicts[test.primary_set].attained:  # stopped right after it settled
            self._finish_test(test, params, verdicts, all_cells)
            return
        for round_no in range(len(done) + 1, self.p.options.max_rounds + 1):
            run, cells = self._round(test, round_no)
            tracking = _tracking(variables, cells)
            complete = run.ok and len(cells) == len(test.round_cells)
            self.store.add_round(
                self.run_id,
                test.name,
                round_no,
                status="ok" if complete else "failed",
                tracking=tracking,
                cells=cells,
                fio=fio_record(run, "round"),
                started_at=run.started_at,
                ended_at=run.ended_at,
            )
            self.session.ground_truth(test.name, f"round {round_no}")
            if not complete:
                raise TestFailed(f"round {round_no}: {run.error or 'fio reported fewer cells'}")
            history.append(tracking)
            all_cells.append(cells)
            verdicts = _verdicts(test, history, self.p.options.rule)
            primary = verdicts[test.primary_set]
            self.progress.round_done(
                round_no, {k: tracking[k] for k in primary.variables}, primary.message
            )
            if primary.attained:
                break
        if not verdicts:
            raise TestFailed("no round completed")
        self._finish_test(test, params, verdicts, all_cells)

    def _finish_test(
        self,
        test: PtsTest,
        params: dict[str, Any],
        verdicts: dict[str, Verdict],
        all_cells: list[list[Cell]],
    ) -> None:
        primary = verdicts[test.primary_set]
        window = primary.window_rounds if primary.attained else None
        if window is None:  # SNIA: report the last window's rounds, marked not steady
            size = rule_by_name(self.p.options.rule).window
            window = (max(1, len(all_cells) - size + 1), len(all_cells))
        result = {
            "steady": primary.attained,
            "window_rounds": list(window),
            "rounds_run": len(all_cells),
            "tracking_set": test.primary_set,
            "cells": window_cells(all_cells[window[0] - 1 : window[1]]),
            "skipped": [{"cell": c, "reason": r} for c, r in test.skipped],
        }
        stored = {"primary": verdict_to_dict(primary)}
        stored.update({name: verdict_to_dict(v) for name, v in verdicts.items()})
        self.store.set_test(
            self.run_id,
            test.name,
            status="steady" if primary.attained else "not_steady",
            params=params,
            verdicts=stored,
            result=result,
        )
        self.progress.line(f"{test.name}: {primary.message}")


def _cell_dict(cell: CellSpec) -> dict[str, object]:
    data = dataclasses.asdict(cell)
    data["pattern"] = str(cell.pattern)
    data["read_pct"] = cell.mix.read_pct
    del data["mix"]
    return data


def test_params(test: PtsTest, prepared: Prepared) -> dict[str, Any]:
    opts = prepared.options
    return {
        "title": test.title,
        "rule": opts.rule,
        "window": rule_by_name(opts.rule).window,
        "max_rounds": opts.max_rounds,
        "tracking_set": test.primary_set,
        "tracking": {name: [dataclasses.asdict(v) for v in vs] for name, vs in test.tracking_sets},
        "cell_seconds": opts.cell_seconds,
        "round_seconds": test.round_seconds,
        "cells": [_cell_dict(c) for c in test.round_cells],
        "precondition": None if test.wipc is None else _cell_dict(test.wipc),
        "purge": opts.purge if test.purge else "none",
        "skipped": [{"cell": c, "reason": r} for c, r in test.skipped],
        "quick": opts.quick,
    }


def plan_dict(prepared: Prepared) -> dict[str, Any]:
    opts = dataclasses.asdict(prepared.options)
    opts["quick"] = prepared.options.quick
    return {
        "suite": "pts",
        "options": opts,
        "tests": [t.name for t in prepared.tests],
        "ioengine": prepared.options.ioengine,
        "direct": True,
        "data_pattern": "fio default (random, scrambled per I/O)",
        "latency": "fio completion latency (clat); mixed-cell percentiles from merged "
        "json+ histograms",
    }
