"""Execute a prepared PTS run: purge, precondition, rounds to steady state, journal.

Every round is committed to the store the moment it finishes, so a run stopped at
round 7 (Ctrl-C, crash, power loss) keeps rounds 1-6.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from typing import Any

from ssdlab.analysis.steady import Verdict, evaluate, rule_by_name, verdict_to_dict
from ssdlab.engine.jobfile import render
from ssdlab.engine.runner import Executor, FioInterrupted, FioRun, watchdog_seconds
from ssdlab.errors import ExitCode, UserError
from ssdlab.plan.pts import PtsTest, TrackingVar
from ssdlab.plan.specs import CellSpec, FioJob
from ssdlab.run.cells import Cell, cell_from_job, tracking_value, window_cells
from ssdlab.run.prepare import Prepared
from ssdlab.run.progress import Progress
from ssdlab.store.db import Store
from ssdlab.store.records import FioRecord
from ssdlab.targets.emulator import emulator_of
from ssdlab.targets.emulator import stats as emulator_stats
from ssdlab.targets.filetarget import create_file_target, recreate_file_target
from ssdlab.targets.identity import TargetInfo
from ssdlab.targets.purge import PurgeOutcome, purge_block
from ssdlab.targets.safety import ExclusiveHold

#: size-based fio runs (preconditioning) are presumed stuck below this rate
MIN_PRECONDITION_BYTES_PER_S = 2 * 1024 * 1024
#: fio spends about 0.3 s between stonewalled cells; the watchdog allows 1 s
FIO_CELL_OVERHEAD_S = 1.0


class RunInterrupted(UserError):
    """Ctrl-C: the run is marked interrupted; every completed round is kept."""

    exit_code = ExitCode.INTERRUPTED


class TestFailed(Exception):
    """fio failed inside a test; the test is marked failed and the run goes on."""


def fio_job(prepared: Prepared, cells: tuple[CellSpec, ...]) -> FioJob:
    return FioJob(
        target_path=prepared.info.path,
        cells=cells,
        ioengine=prepared.options.ioengine,
        json_plus=True,
    )


def job_text(prepared: Prepared, cells: tuple[CellSpec, ...], what: str) -> str:
    header = (
        f"ssdlab {prepared.versions['ssdlab']}: {what}\n"
        f"target {prepared.info.path} ({prepared.info.device_class}), "
        f"profile {prepared.options.profile}"
    )
    return render(fio_job(prepared, cells), header)


def _timeout(cells: tuple[CellSpec, ...]) -> float:
    planned = sum(c.planned_seconds or 0.0 for c in cells)
    sized = sum(c.io_bytes or 0 for c in cells)
    startup = FIO_CELL_OVERHEAD_S * len(cells)
    return watchdog_seconds(planned + startup + sized / MIN_PRECONDITION_BYTES_PER_S)


def _record(run: FioRun, phase: str) -> FioRecord:
    return FioRecord(
        phase,
        run.job_text,
        run.command,
        run.stdout,
        run.stderr,
        run.returncode,
        run.started_at,
        run.ended_at,
    )


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
        self.info: TargetInfo = prepared.info
        self.run_id = ""
        self.emulator = emulator_of(self.info.path, self.info.details)

    # -- the whole run ---------------------------------------------------------------
    def execute(self, argv: list[str]) -> str:
        if self.p.create_file:
            self.info = create_file_target(self.info.path, self.info.capacity_bytes)
        self.run_id = self.store.new_run(
            suite="pts",
            profile=self.p.options.profile,
            quick=self.p.options.quick,
            target=self.info.to_dict(),
            host=self.p.host,
            plan=plan_dict(self.p),
            versions=dict(self.p.versions),
            argv=argv,
        )
        self.progress.line(f"run {self.run_id} on {self.info.path} (results in {self.store.path})")
        if self.emulator is not None:
            self.progress.line(
                f"target is emulated SSD {self.emulator.name} "
                f"({self.emulator.profile}); its ground truth is recorded"
            )
        self._ground_truth(None, "start")
        try:
            with self._hold():
                failed = self._run_tests()
        except (FioInterrupted, KeyboardInterrupt):
            self.store.finish_run(self.run_id, "interrupted", "stopped by Ctrl-C")
            raise RunInterrupted(
                f"run {self.run_id} interrupted; completed rounds are kept in {self.store.path}"
            ) from None
        except BaseException as exc:
            self.store.finish_run(self.run_id, "failed", str(exc).splitlines()[0][:300])
            raise
        status_message = f"{len(failed)} test(s) failed: {', '.join(failed)}" if failed else ""
        self.store.finish_run(self.run_id, "complete", status_message)
        return self.run_id

    @contextlib.contextmanager
    def _hold(self) -> Iterator[None]:
        if self.info.kind == "block":
            with ExclusiveHold(self.info.path):
                yield
        else:
            yield

    def _run_tests(self) -> list[str]:
        self.progress.start(self.p.tests)
        failed: list[str] = []
        for test in self.p.tests:
            self.progress.test_started(test)
            try:
                self.run_test(test)
            except TestFailed as exc:
                failed.append(test.name)
                self.progress.line(f"{test.name}: FAILED: {exc}")
        return failed

    # -- one test ----------------------------------------------------------------------
    def run_test(self, test: PtsTest) -> None:
        params = test_params(test, self.p)
        self.store.set_test(
            self.run_id, test.name, status="running", params=params, verdicts={}, result={}
        )
        try:
            if test.purge and self.p.options.purge != "none":
                self._purge(test)
            if test.wipc is not None:
                self._precondition(test, test.wipc)
            self._rounds(test, params)
        except TestFailed as exc:
            self.store.set_test(
                self.run_id,
                test.name,
                status="failed",
                params=params,
                verdicts={},
                result={"error": str(exc)},
            )
            raise

    def _purge(self, test: PtsTest) -> None:
        self.progress.phase("purge")
        if self.info.kind == "file":
            outcome: PurgeOutcome = recreate_file_target(self.info.path, self.info.capacity_bytes)
        else:
            rng = test.round_cells[0]
            outcome = purge_block(self.info, self.p.options.purge, rng.offset_bytes, rng.size_bytes)
        self.store.add_step(self.run_id, test.name, "purge", outcome.to_dict(), None)
        self._ground_truth(test.name, "purge")
        verdict = "ok" if outcome.ok else f"FAILED ({outcome.detail})"
        self.progress.line(
            f"{test.name}: purge by {outcome.method}: {verdict} in {outcome.seconds:.1f} s"
        )
        if not outcome.ok:
            self.store.add_event(
                self.run_id,
                test.name,
                "warning",
                f"purge by {outcome.method} failed; the test starts "
                "from a state that is not fresh-out-of-box",
                outcome.to_dict(),
            )

    def _ground_truth(self, test: str | None, when: str) -> None:
        """On the emulated SSD, keep its ground truth (WA, GC, free blocks) with the run."""
        if self.emulator is None:
            return
        truth = emulator_stats(self.emulator)
        counters = truth.get("counters")
        waf = counters.get("write_amplification") if isinstance(counters, dict) else None
        self.store.add_event(
            self.run_id,
            test,
            "emulator-stats",
            f"emulator ground truth after {when}: write amplification {waf}",
            truth,
        )

    def _precondition(self, test: PtsTest, cell: CellSpec) -> None:
        text = job_text(self.p, (cell,), f"{test.name} workload-independent preconditioning")
        self.progress.phase("preconditioning")
        run = self.executor.run(
            text, _timeout((cell,)), json_plus=False, on_tick=self.progress.tick
        )
        detail: dict[str, object] = {
            "io_bytes": cell.io_bytes,
            "block_bytes": cell.block_bytes,
            "ok": run.ok,
            "error": run.error,
            "seconds": run.ended_at - run.started_at,
        }
        self.store.add_step(
            self.run_id, test.name, "precondition", detail, _record(run, "precondition")
        )
        if not run.ok:
            raise TestFailed(f"preconditioning failed: {run.error}")
        self.progress.line(
            f"{test.name}: preconditioned with "
            f"{(cell.io_bytes or 0) / 2**30:.3g} GiB of 128 KiB sequential "
            f"writes in {run.ended_at - run.started_at:.1f} s"
        )

    def _round(self, test: PtsTest, round_no: int) -> tuple[FioRun, list[Cell]]:
        text = job_text(self.p, test.round_cells, f"{test.name} round {round_no}")
        self.progress.phase("round", round_no, test.round_seconds)
        run = self.executor.run(
            text, _timeout(test.round_cells), json_plus=True, on_tick=self.progress.tick
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

    def _rounds(self, test: PtsTest, params: dict[str, Any]) -> None:
        variables = list({v.name: v for _, vs in test.tracking_sets for v in vs}.values())
        history: list[dict[str, float]] = []
        all_cells: list[list[Cell]] = []
        verdicts: dict[str, Verdict] = {}
        for round_no in range(1, self.p.options.max_rounds + 1):
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
                fio=_record(run, "round"),
                started_at=run.started_at,
                ended_at=run.ended_at,
            )
            self._ground_truth(test.name, f"round {round_no}")
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
