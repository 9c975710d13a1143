"""Run the SLC-cache probe: purge, settle, one sequential write with its bandwidth logged,
optionally an idle period and a second write; journal the curve and the cliffs.

The write is one fio invocation; its log is read when fio has finished and cut into
slices of equal bytes, each stored as a round (bytes written, MB/s), so the whole curve is
in the store and the report draws it from there.
"""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ssdlab.analysis.cliff import rate_by_bytes
from ssdlab.analysis.slc_probe import (
    PassVerdict,
    TimedPoint,
    analyse_pass,
    recovery_text,
    transfers_from_bw_samples,
    with_times,
)
from ssdlab.engine.fiolog import FioLogError, completions, read_log
from ssdlab.engine.runner import Executor, FioRun
from ssdlab.errors import TargetError
from ssdlab.plan.slc_probe import TEST, SlcProbeArgs, SlcProbeOptions, build_slc_options
from ssdlab.plan.units import format_bytes, format_duration
from ssdlab.run.prepare import MIN_ACTIVE_RANGE, PreparedTarget, prepare_target
from ssdlab.run.progress import Progress
from ssdlab.run.session import FioSetup, RunSession, TestFailed, fio_record, timeout_for
from ssdlab.store.db import Store
from ssdlab.targets.filetarget import create_file_target
from ssdlab.targets.safety import DestroyData

SUITE = "slc-probe"
CELL = "slc-probe"
TRACKING = "write bandwidth"
LOG_PLACEHOLDER = "LOGDIR/slc"


@dataclass(frozen=True)
class PreparedSlcProbe:
    target: PreparedTarget
    options: SlcProbeOptions
    args: SlcProbeArgs


def prepare_slc_probe(
    target: str, size_bytes: int | None, destroy_data: DestroyData, fio: str, args: SlcProbeArgs
) -> PreparedSlcProbe:
    """Everything checked before the first byte is written: UserError (one line) otherwise."""
    base = prepare_target(target, size_bytes, destroy_data, fio)
    info = base.info
    options = build_slc_options(args, info.capacity_bytes, info.logical_sector_bytes,
                                file_target=info.kind == "file")
    if info.capacity_bytes < MIN_ACTIVE_RANGE:
        raise TargetError(f"target {info.path} is too small: {format_bytes(info.capacity_bytes)}"
                          f", ssdlab needs at least {format_bytes(MIN_ACTIVE_RANGE)}")
    return PreparedSlcProbe(base, options, args)


def fio_setup(p: PreparedSlcProbe) -> FioSetup:
    info = p.target.info
    return FioSetup(info.path, p.options.ioengine, p.target.versions["ssdlab"],
                    info.device_class, p.options.profile)


def job_text(p: PreparedSlcProbe, pass_no: int, prefix: str) -> str:
    o = p.options
    return fio_setup(p).job_text((o.cell(pass_no),), f"{TEST} sequential write, pass {pass_no}",
                                 o.log_options(prefix))


def describe(p: PreparedSlcProbe) -> str:
    """``--dry-run``: the plan and the job file; nothing is touched."""
    o, info = p.options, p.target.info
    purge = "recreate the file" if info.kind == "file" and o.purge != "none" else o.purge
    lines = [
        f"DRY RUN: nothing will be written. Plan for {info.path} ({info.device_class}, "
        f"{format_bytes(info.capacity_bytes)}, {info.logical_sector_bytes}-byte sectors)",
        f"profile {o.profile}{' (QUICK)' if o.quick else ''}",
    ]
    if p.target.create_file:
        lines.append(f"would create and fully allocate {info.path} "
                     f"({format_bytes(info.capacity_bytes)})")
    lines += [
        f"== {TEST}: purge ({purge}) over the whole target, then {o.settle_s:g} s idle",
        f"one sequential write of {format_bytes(o.write_bytes)} from offset 0 "
        f"({o.write_bytes / o.capacity_bytes * 100:.0f} % of the capacity), "
        f"{format_bytes(o.block_bytes)} blocks, 1 thread x QD {o.iodepth}, no preconditioning",
        f"logged: {o.describe_log()}; cut into slices of {format_bytes(o.slice_bytes)} "
        f"(about {o.write_bytes // o.slice_bytes} points); cliffs: drops of at least "
        f"{o.min_drop_pct:g} %; the first is the cache size estimate",
    ]
    if o.passes == 2:
        lines.append(f"then {o.repeat_after_s:g} s idle and the same write again, to see how "
                     "much cache came back")
    lines += [f"-- job file of the write ({LOG_PLACEHOLDER.split('/')[0]} is a temporary "
              "directory made at run time):", job_text(p, 1, LOG_PLACEHOLDER).rstrip()]
    return "\n".join(lines) + "\n"


def plan_dict(p: PreparedSlcProbe) -> dict[str, Any]:
    opts = dataclasses.asdict(p.options)
    opts["quick"] = p.options.quick
    return {
        "suite": SUITE,
        "args": dataclasses.asdict(p.args),
        "options": opts,
        "tests": [TEST],
        "ioengine": p.options.ioengine,
        "direct": True,
        "data_pattern": "fio default (random, scrambled per I/O)",
    }


def test_params(o: SlcProbeOptions) -> dict[str, Any]:
    cell = o.cell(1)
    return {
        "title": "SLC cache probe",
        "rule": "none (one write from purge; no steady state)",
        "window": "-",
        "tracking_set": TRACKING,
        "cells": [{"cell": cell.name, "block_bytes": cell.block_bytes, "read_pct": 0,
                   "pattern": str(cell.pattern), "threads": 1, "iodepth": cell.iodepth,
                   "io_bytes": cell.io_bytes, "offset_bytes": 0,
                   "size_bytes": cell.size_bytes}],
        "purge": o.purge,
        "settle_s": o.settle_s,
        "repeat_after_s": o.repeat_after_s,
        "write_bytes": o.write_bytes,
        "block_bytes": o.block_bytes,
        "iodepth": o.iodepth,
        "log": o.log,
        "log_interval_ms": o.log_interval_ms,
        "slice_bytes": o.slice_bytes,
        "min_drop_pct": o.min_drop_pct,
        "quick": o.quick,
    }


def _cliff_dicts(verdict: PassVerdict) -> list[dict[str, float]]:
    return [{"at_bytes": c.at_bytes, "rate_before_bytes_per_s": c.rate_before,
             "rate_after_bytes_per_s": c.rate_after, "ratio": c.ratio} for c in verdict.cliffs]


class WriteProgress(Progress):
    """The live line of one long write: how long it has run; its end is not predictable
    (the rate falls at the cliff), so no ETA is guessed."""

    def _eta(self) -> str:
        return "unknown (one sequential write)"


class SlcProbeRun:
    """One SLC probe on one target, journaled to ``store``."""

    def __init__(
        self,
        prepared: PreparedSlcProbe,
        store: Store,
        executor: Executor,
        progress: Progress,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.p = prepared
        self.o = prepared.options
        self.store = store
        self.executor = executor
        self.progress = progress
        self.sleep = sleep
        self.session = RunSession(prepared.target.info, store, executor, progress,
                                  fio_setup(prepared))
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
        failed: list[str] = []
        with self.session.running():
            try:
                self.run_test()
            except TestFailed as exc:
                failed.append(TEST)
                self.progress.line(f"{TEST}: FAILED: {exc}")
        self.session.finish(failed)
        return self.run_id

    def run_test(self) -> None:
        params = test_params(self.o)
        self.store.set_test(self.run_id, TEST, status="running", params=params, verdicts={},
                            result={})
        try:
            self._probe(params)
        except TestFailed as exc:
            self.store.set_test(self.run_id, TEST, status="failed", params=params, verdicts={},
                                result={"error": str(exc)})
            raise

    def _idle(self, seconds: float, why: str) -> None:
        if seconds <= 0:
            return
        self.progress.phase(why)
        self.progress.line(f"{TEST}: {why}: idle for {seconds:g} s")
        self.sleep(seconds)

    def _probe(self, params: dict[str, Any]) -> None:
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
        message = str(result["message"])
        self.store.set_test(self.run_id, TEST, status="complete", params=params,
                            verdicts={"primary": {"message": message}}, result=result)
        self.progress.line(f"{TEST}: {message}")
        if recovery:
            self.progress.line(f"{TEST}: {recovery}")

    def _result(self, passes: list[tuple[PassVerdict, float]], recovery: str | None,
                truth: dict[str, Any] | None, purged: bool) -> dict[str, Any]:
        first = passes[0][0]
        out: dict[str, Any] = {
            "estimate_bytes": first.estimate_bytes,
            "cliff_found": first.estimate_bytes is not None,
            "message": first.message if purged else
            f"{first.message} (the purge failed: the write did not start from an empty cache)",
            "passes": [
                {"pass": n, "idle_before_s": idle, "written_bytes": v.written_bytes,
                 "mean_rate_bytes_per_s": v.mean_rate, "estimate_bytes": v.estimate_bytes,
                 "cliffs": _cliff_dicts(v), "message": v.message}
                for n, (v, idle) in enumerate(passes, 1)
            ],
            "recovery": recovery,
            "slice_bytes": self.o.slice_bytes,
            "log": self.o.describe_log(),
            "ground_truth": _slc_truth(truth, first.estimate_bytes),
        }
        return out

    # -- one write -------------------------------------------------------------------------
    def _pass(self, pass_no: int) -> tuple[PassVerdict, dict[str, Any] | None]:
        cell = self.o.cell(pass_no)
        logdir = Path(tempfile.mkdtemp(prefix="ssdlab-slc-"))
        try:
            prefix = str(logdir / "slc")
            text = job_text(self.p, pass_no, prefix)
            self.progress.phase(f"sequential write, pass {pass_no}")
            self.progress.line(f"{TEST}: writing {format_bytes(self.o.write_bytes)} "
                               f"sequentially (pass {pass_no})")
            run = self.executor.run(text, timeout_for((cell,)), json_plus=False,
                                    on_tick=self.progress.tick)
            seconds = run.ended_at - run.started_at
            self.store.add_step(self.run_id, TEST, "write", {
                "pass": pass_no, "io_bytes": cell.io_bytes, "block_bytes": cell.block_bytes,
                "iodepth": cell.iodepth, "log": self.o.describe_log(), "ok": run.ok,
                "error": run.error, "seconds": seconds,
            }, fio_record(run, f"write pass {pass_no}"))
            truth = self.session.ground_truth(TEST, f"write pass {pass_no}")
            if not run.ok:
                raise TestFailed(f"the sequential write (pass {pass_no}) failed: {run.error}")
            points = rate_by_bytes(self._transfers(run, prefix), self.o.slice_bytes)
        finally:
            shutil.rmtree(logdir, ignore_errors=True)
        self._store_points(pass_no, with_times(points), run.started_at)
        assert run.output is not None
        verdict = analyse_pass(points, self.o.min_change, run.output.jobs[0].write.io_bytes)
        self.progress.line(f"{TEST} pass {pass_no}: {format_bytes(verdict.written_bytes)} in "
                           f"{format_duration(seconds)}; {verdict.message}")
        return verdict, truth

    def _transfers(self, run: FioRun, prefix: str) -> list[tuple[float, int]]:
        path = SlcProbeOptions.log_file(prefix)
        try:
            entries = read_log(path)
        except (OSError, FioLogError) as exc:
            raise TestFailed(f"could not read fio's bandwidth log {path}: {exc}") from None
        if self.o.log == "io":
            return completions(entries, "write")
        assert run.output is not None
        job = run.output.jobs[0]
        samples = [(e.time_ms, e.value) for e in entries if e.direction == "write"]
        return transfers_from_bw_samples(samples, job.write.io_bytes, job.write.runtime_ms)

    def _store_points(self, pass_no: int, points: list[TimedPoint], started: float) -> None:
        """One round per slice, in order: bytes written at its end and its rate."""
        previous_bytes, previous_s = 0.0, 0.0
        for point in points:
            self._round_no += 1
            cell = {
                "cell": CELL, "pass": pass_no, "bytes_written": point.bytes_done,
                "slice_bytes": point.bytes_done - previous_bytes, "bw_bytes_per_s": point.rate,
                "write_bw_bytes_per_s": point.rate, "seconds": point.seconds,
            }
            self.store.add_round(
                self.run_id, TEST, self._round_no, status="ok", tracking={TRACKING: point.rate},
                cells=[cell], fio=None, started_at=started + previous_s,
                ended_at=started + point.seconds,
            )
            previous_bytes, previous_s = point.bytes_done, point.seconds


def _slc_truth(truth: dict[str, Any] | None, estimate: float | None) -> dict[str, Any] | None:
    """On the emulated SSD: its configured cache, and how far the estimate is from it."""
    if truth is None:
        return None
    config = truth.get("config") if isinstance(truth.get("config"), dict) else {}
    assert isinstance(config, dict)
    slc = config.get("slc_bytes")
    if not isinstance(slc, int):
        return None
    error = (estimate - slc) / slc * 100 if estimate is not None and slc > 0 else None
    return {"slc_bytes": slc, "estimate_error_pct": error, "profile": truth.get("profile"),
            "fold_rate_bytes_per_s": config.get("slc_fold_rate_bytes_per_s")}
