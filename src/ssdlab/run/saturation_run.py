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

import dataclasses
import math
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ssdlab.analysis.saturation import (
    IopsPoint,
    find_transition,
    recovery_verdict,
    wait_state,
)
from ssdlab.analysis.steady import SNIA_RULE, check_window
from ssdlab.engine.fiolog import RateLogFollower, throughput_points
from ssdlab.engine.runner import Executor
from ssdlab.errors import TargetError, UserError
from ssdlab.plan.options import DEFAULT_LOADS
from ssdlab.plan.pts import ActiveRange, active_range
from ssdlab.plan.saturation import (
    WSAT_CELL,
    SaturationArgs,
    SaturationOptions,
    build_options,
    burst_cell,
    wait_label,
)
from ssdlab.plan.units import format_bytes, format_duration
from ssdlab.run.cells import cell_from_job
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

WSAT, HIR = "wsat", "hir"


@dataclass(frozen=True)
class PreparedSaturation:
    target: PreparedTarget
    options: SaturationOptions
    args: SaturationArgs
    range: ActiveRange


def prepare_saturation(
    target: str, size_bytes: int | None, destroy_data: DestroyData, fio: str, args: SaturationArgs
) -> PreparedSaturation:
    """Everything checked before the first byte is written."""
    base = prepare_target(target, size_bytes, destroy_data, fio)
    load = DEFAULT_LOADS.get(base.info.device_class, DEFAULT_LOADS["file"])
    options = build_options(args, load, base.cpus)
    if base.info.kind == "file" and options.purge not in ("auto", "none"):
        raise UserError(f"--purge {options.purge} applies to block devices; a file target is "
                        "purged by recreating it (--purge auto) or not at all (--purge none)")
    rng = active_range(base.info.capacity_bytes, options.active_range_pct)
    if rng.size_bytes < MIN_ACTIVE_RANGE:
        raise TargetError(f"target {base.info.path} is too small: its active range is "
                          f"{format_bytes(rng.size_bytes)}, ssdlab needs at least "
                          f"{format_bytes(MIN_ACTIVE_RANGE)}")
    return PreparedSaturation(base, options, args, rng)


def describe(p: PreparedSaturation) -> str:
    """``--dry-run``: the plan and the job files; nothing is touched."""
    o, info = p.options, p.target.info
    setup = _setup(p)
    lines = [
        f"DRY RUN: nothing will be written. Plan for {info.path} ({info.device_class}, "
        f"{format_bytes(info.capacity_bytes)})",
        f"profile {o.profile}{' (QUICK)' if o.quick else ''}; {o.threads} threads x QD "
        f"{o.iodepth}, 4 KiB random writes on {format_bytes(p.range.size_bytes)}",
        f"== wsat: purge {o.purge}; rounds of {o.round_seconds:g} s until {o.max_rounds} "
        f"rounds, {o.max_written:g}x the range written "
        f"({format_bytes(o.max_written * p.range.size_bytes)}) or {o.max_hours:g} h, "
        f"whichever first (at most {format_duration(o.max_seconds)})",
        "-- each round's job file:",
        setup.job_text((burst_cell(o, p.range, WSAT_CELL, o.round_seconds),), "wsat round N",
                       (("write_iops_log", "LOGDIR/wsat"), ("log_avg_msec", str(o.log_msec)))
                       ).rstrip(),
    ]
    if o.hir:
        waits = ", ".join(wait_label(w) for w in o.waits_s)
        lines += [
            f"== hir: wait states {waits}: each {o.bursts} bursts of {o.burst_seconds:g} s with "
            f"the wait between, then {o.baseline_rounds} continuous rounds of "
            f"{o.burst_seconds:g} s back to the baseline",
            setup.job_text((burst_cell(o, p.range, "hir_burst", o.burst_seconds),),
                           "hir burst").rstrip(),
        ]
    return "\n".join(lines) + "\n"


def _setup(p: PreparedSaturation) -> FioSetup:
    info = p.target.info
    return FioSetup(info.path, p.options.ioengine, p.target.versions["ssdlab"],
                    info.device_class, p.options.profile)


def plan_dict(p: PreparedSaturation) -> dict[str, Any]:
    opts = dataclasses.asdict(p.options)
    opts["quick"] = p.options.quick
    return {
        "suite": "saturation",
        "args": dataclasses.asdict(p.args),
        "options": opts,
        "tests": [WSAT, HIR] if p.options.hir else [WSAT],
        "active_range": dataclasses.asdict(p.range),
        "latency": "fio completion latency (clat), per round from that round's json+ "
        "histogram",
    }


class SaturationRun:
    def __init__(
        self, prepared: PreparedSaturation, store: Store, executor: Executor, progress: Progress
    ) -> None:
        self.p = prepared
        self.o = prepared.options
        self.store = store
        self.executor = executor
        self.progress = progress
        self.session = RunSession(prepared.target.info, store, executor, progress,
                                  _setup(prepared))

    @property
    def run_id(self) -> str:
        return self.session.run_id

    # -- whole runs ----------------------------------------------------------------
    def execute(self, argv: list[str]) -> str:
        t = self.p.target
        if t.create_file:
            self.session.info = create_file_target(t.info.path, t.info.capacity_bytes)
        self.session.open(suite="saturation", profile=self.o.profile, quick=self.o.quick,
                          host=t.host, plan=plan_dict(self.p), versions=dict(t.versions),
                          argv=argv)
        return self._run(None)

    def resume(self, run: RunData, argv: list[str]) -> str:
        check_same_target(run, self.p.target)
        t = self.p.target
        if t.create_file:  # killed while a purge was recreating the test file
            self.session.info = create_file_target(t.info.path, t.info.capacity_bytes)
        self.session.reopen(run.run_id, argv)
        return self._run(run)

    def _run(self, previous: RunData | None) -> str:
        failed: list[str] = []
        done = {t.name: t for t in previous.tests} if previous else {}
        with self.session.running():
            wsat = done.get(WSAT)
            if wsat is None or wsat.status in ("running", "interrupted"):
                try:
                    self.wsat(wsat)
                except TestFailed as exc:
                    failed.append(WSAT)
                    self.session.after_failure(WSAT, exc)
            elif wsat.status == "failed":
                failed.append(WSAT)
            hir = done.get(HIR)
            if self.o.hir and not failed and (hir is None or hir.status == "running"):
                try:
                    self.hir(hir)
                except TestFailed as exc:
                    failed.append(HIR)
                    self.session.after_failure(HIR, exc)
        self.session.finish(failed)
        return self.run_id

    # -- Write Saturation --------------------------------------------------------------
    def _wsat_params(self) -> dict[str, Any]:
        o = self.o
        return {
            "title": "Write Saturation", "round_seconds": o.round_seconds,
            "max_rounds": o.max_rounds, "max_written": o.max_written,
            "max_hours": o.max_hours, "threads": o.threads, "iodepth": o.iodepth,
            "block_bytes": o.block_bytes, "active_range": dataclasses.asdict(self.p.range),
            "purge": o.purge, "log_msec": o.log_msec, "quick": o.quick,
            "cells": [{"name": WSAT_CELL, "threads": o.threads, "iodepth": o.iodepth,
                       "block_bytes": o.block_bytes, "read_pct": 0, "pattern": "random"}],
        }

    def wsat(self, previous: TestData | None) -> None:
        o, rng = self.o, self.p.range
        params = self._wsat_params()
        rounds = [r for r in previous.rounds if r.status == "ok"] if previous else []
        self.store.set_test(self.run_id, WSAT, status="running", params=params, verdicts={},
                            result={})
        if not rounds:
            if previous is not None:
                self.store.add_event(self.run_id, WSAT, "warning",
                                     "no round was completed before the stop: starting over")
            if o.purge != "none":
                self.session.purge(WSAT, o.purge, rng.offset_bytes, rng.size_bytes)
        else:
            last = rounds[-1]
            idle = time.time() - last.ended_at
            self.store.add_event(
                self.run_id, WSAT, "warning",
                f"resumed after round {last.round_no}: the drive was idle for {idle:,.0f} s, "
                "which may let it recover; the rounds after this point are marked resumed",
                {"after_round": last.round_no, "idle_s": idle},
            )
        state = _WsatState.of(rounds)
        limit_bytes = o.max_written * rng.size_bytes
        while (state.round_no < o.max_rounds and state.written < limit_bytes
               and state.elapsed_s + o.round_seconds * 0.5 <= o.max_seconds):
            self._wsat_round(state)
        self._wsat_finish(params)

    def _wsat_round(self, state: _WsatState) -> None:
        o = self.o
        number = state.round_no + 1
        cell = burst_cell(o, self.p.range, WSAT_CELL, o.round_seconds)
        logdir = Path(tempfile.mkdtemp(prefix="ssdlab-wsat-"))
        try:
            prefix = logdir / "wsat"
            extra = (("write_iops_log", str(prefix)), ("log_avg_msec", str(o.log_msec)))
            text = self.session.fio.job_text((cell,), f"wsat round {number}", extra)
            self.progress.phase("round", number, o.round_seconds)
            run = self.executor.run(text, timeout_for((cell,)), json_plus=True,
                                    on_tick=self.progress.tick)
            job = run.output.jobs[0] if run.output is not None and run.output.jobs else None
            if not run.ok or job is None:
                self.store.add_round(self.run_id, WSAT, number, status="failed", tracking={},
                                     cells=[], fio=fio_record(run, "round"),
                                     started_at=run.started_at, ended_at=run.ended_at)
                raise TestFailed(f"round {number}: {run.error}")
            points = _rate_points(prefix, o.threads, o.log_msec, o.block_bytes)
        finally:
            shutil.rmtree(logdir, ignore_errors=True)
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
        self.store.add_round(self.run_id, WSAT, number, status="ok",
                             tracking={"IOPS": float(measured["iops"])},  # type: ignore[arg-type]
                             cells=[measured], fio=fio_record(run, "round"),
                             started_at=run.started_at, ended_at=run.ended_at)
        self.session.ground_truth(WSAT, f"round {number}")
        self.progress.line(
            f"{WSAT} round {number}: {float(measured['iops']):,.0f} IOPS, p99 "  # type: ignore[arg-type]
            f"{float(measured['lat_p99_us'] or 0):,.0f} us, "  # type: ignore[arg-type]
            f"{state.written / max(self.p.range.size_bytes, 1):.2f}x the range written"
        )

    def _wsat_finish(self, params: dict[str, Any]) -> None:
        test = self.store.load(self.run_id).test(WSAT)
        rounds = [r for r in test.rounds if r.status == "ok"]
        if not rounds:
            raise TestFailed("no complete round was measured")
        result, steady = wsat_result(rounds, self.o, self.p.range.size_bytes)
        self.store.set_test(self.run_id, WSAT, status="steady" if steady else "not_steady",
                            params=params, verdicts={"primary": result["verdict"]},
                            result=result)
        self.progress.line(f"{WSAT}: {result['transition']['message']}")

    # -- Host Idle Recovery --------------------------------------------------------------
    def _hir_params(self) -> dict[str, Any]:
        o = self.o
        return {
            "title": "Host Idle Recovery", "waits_s": list(o.waits_s),
            "burst_seconds": o.burst_seconds, "bursts": o.bursts,
            "baseline_rounds": o.baseline_rounds, "recovery_ratio": o.recovery_ratio,
            "threads": o.threads, "iodepth": o.iodepth, "block_bytes": o.block_bytes,
            "quick": o.quick,
        }

    def hir(self, previous: TestData | None) -> None:
        o = self.o
        params = self._hir_params()
        self.store.set_test(self.run_id, HIR, status="running", params=params, verdicts={},
                            result={})
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
                {"after_round": round_no, "idle_s": idle},
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
        run = self.executor.run(text, timeout_for((cell,)), json_plus=True,
                                on_tick=self.progress.tick)
        cells = []
        if run.output is not None and run.output.jobs:
            measured = cell_from_job(cell, run.output.jobs[0])
            measured.update({"group": group, "kind": "burst", "index": index, "wait_s": wait_s})
            cells = [measured]
        ok = run.ok and bool(cells)
        iops = float(cells[0]["iops"]) if ok else math.nan  # type: ignore[arg-type]
        self.store.add_round(self.run_id, HIR, round_no, status="ok" if ok else "failed",
                             tracking={"IOPS": iops} if ok else {}, cells=cells,
                             fio=fio_record(run, "hir"), started_at=run.started_at,
                             ended_at=run.ended_at)
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
        logdir = Path(tempfile.mkdtemp(prefix="ssdlab-hir-"))
        try:
            prefix = logdir / "base"
            extra = (("write_iops_log", str(prefix)), ("log_avg_msec", str(burst_ms)))
            text = self.session.fio.job_text((cell,), f"hir back to baseline after "
                                                      f"{wait_label(wait_s)}", extra)
            self.progress.phase(f"baseline after {wait_label(wait_s)}")
            run = self.executor.run(text, timeout_for((cell,)), json_plus=True,
                                    on_tick=self.progress.tick)
            points = _rate_points(prefix, o.threads, burst_ms, o.block_bytes) if run.ok else []
        finally:
            shutil.rmtree(logdir, ignore_errors=True)
        self.store.add_step(self.run_id, HIR, "fio", {
            "ok": run.ok, "error": run.error, "baseline_after_wait_s": wait_s,
        }, fio_record(run, "hir-baseline"))
        if not run.ok:
            raise TestFailed(f"baseline after wait {wait_label(wait_s)}: {run.error}")
        index, previous_end = first, 0.0
        outstanding = o.threads * o.iodepth
        for point in points:
            length = point.elapsed_s - previous_end
            previous_end = point.elapsed_s
            if length < o.burst_seconds * 0.5 or index >= o.baseline_rounds or point.rate <= 0:
                continue
            round_no += 1
            record = {"cell": cell.name, "group": group, "kind": "baseline", "index": index,
                      "wait_s": wait_s, "iops": point.rate,
                      "lat_mean_us": outstanding / point.rate * 1e6,
                      "block_bytes": o.block_bytes, "read_pct": 0, "pattern": "random",
                      "threads": o.threads, "iodepth": o.iodepth}
            ended = run.started_at + point.elapsed_s
            self.store.add_round(self.run_id, HIR, round_no, status="ok",
                                 tracking={"IOPS": point.rate}, cells=[record], fio=None,
                                 started_at=ended - length, ended_at=ended)
            index += 1
        self.progress.line(f"{HIR} back to baseline after {wait_label(wait_s)}: "
                           f"{index - first} rounds")
        return round_no

    def _hir_finish(self, params: dict[str, Any]) -> None:
        run = self.store.load(self.run_id)
        result = hir_result(run.test(WSAT), run.test(HIR), self.o)
        status = "recovered" if result["recovered"] else "no_recovery"
        self.store.set_test(self.run_id, HIR, status=status, params=params,
                            verdicts={"primary": {"message": result["message"]}}, result=result)
        self.progress.line(f"{HIR}: {result['message']}")


def _rate_points(prefix: Path, threads: int, log_msec: int, block: int) -> list[Any]:
    """The merged IOPS series of one fio run's averaged per-job logs."""
    follower = RateLogFollower(prefix, "iops", range(1, threads + 1), log_msec)
    return throughput_points(follower.poll(final=True), "iops", block)


@dataclass
class _WsatState:
    round_no: int
    elapsed_s: float
    written: float
    last_end: float  # wall clock of the previous round's end (0: none yet)
    resumed: bool

    @classmethod
    def of(cls, rounds: list[Any]) -> _WsatState:
        if not rounds:
            return cls(0, 0.0, 0.0, 0.0, False)
        cell = rounds[-1].cells[0]
        return cls(rounds[-1].round_no, float(cell["elapsed_s"]), float(cell["written_bytes"]),
                   0.0, True)


def wsat_result(rounds: list[Any], o: SaturationOptions, range_bytes: int
                ) -> tuple[dict[str, Any], bool]:
    """Saturated IOPS (the last window), steady state of that window, the transition."""
    iops = [float(r.cells[0]["iops"]) for r in rounds]
    window = iops[-SNIA_RULE.window:]
    saturated = sum(window) / len(window)
    steady = False
    verdict: dict[str, Any] = {"rule": "snia", "attained": False, "window_rounds": None,
                               "message": f"fewer than {SNIA_RULE.window} rounds"}
    if len(window) == SNIA_RULE.window:
        first = len(iops) - SNIA_RULE.window + 1
        check = check_window("IOPS", window, first, SNIA_RULE)
        steady = check.passed
        verdict = {
            "rule": "snia", "attained": steady, "window_rounds": [first, len(iops)],
            "message": (f"{'saturated' if steady else 'NOT saturated'}: rounds {first}-"
                        f"{len(iops)}, {'; '.join(check.reasons)}"),
        }
    points = [IopsPoint(float(t), float(b), float(v))
              for r in rounds for t, b, v in r.cells[0].get("series", [])]
    transition = find_transition(points, saturated)
    last = rounds[-1].cells[0]
    written = float(last["written_bytes"])
    stop = (
        "round limit" if len(rounds) >= o.max_rounds else
        f"{o.max_written:g}x written" if written >= o.max_written * range_bytes * 0.999 else
        "time limit" if float(last["elapsed_s"]) >= o.max_seconds - o.round_seconds else
        "stopped early"
    )
    result = {
        "steady": steady,
        "rounds_run": len(rounds),
        "window_rounds": verdict["window_rounds"],
        "fob_iops": transition.fob_iops,
        "saturated_iops": saturated,
        "written_bytes": written,
        "written_x": written / max(range_bytes, 1),
        "elapsed_s": float(last["elapsed_s"]),
        "stop_reason": stop,
        "transition": dataclasses.asdict(transition),
        "verdict": verdict,
        "cells": [{**{k: v for k, v in rounds[-1].cells[0].items() if k != "series"},
                   "iops": saturated}],
    }
    return result, steady


def hir_result(wsat: TestData, hir: TestData, o: SaturationOptions) -> dict[str, Any]:
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
    return {
        "recovered": recovered,
        "message": message,
        "wait_states": [dataclasses.asdict(s) for s in states],
        "baseline_iops": sum(wsat_iops[-SNIA_RULE.window:]) / max(
            len(wsat_iops[-SNIA_RULE.window:]), 1),
    }
