"""Run the data-integrity check: one fio write-and-verify job, every failure located."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from ssdlab.engine.runner import Executor
from ssdlab.engine.verifylog import ranges, verify_failures
from ssdlab.errors import TargetError, UserError
from ssdlab.plan.pts import ActiveRange, active_range
from ssdlab.plan.units import format_bytes
from ssdlab.plan.verify import VerifyArgs, VerifyOptions, build_options, verify_cell, verify_options
from ssdlab.run.prepare import MIN_ACTIVE_RANGE, PreparedTarget, prepare_target
from ssdlab.run.progress import Progress
from ssdlab.run.session import FioSetup, RunSession, TestFailed, fio_record, timeout_for
from ssdlab.store.db import Store
from ssdlab.targets.filetarget import create_file_target
from ssdlab.targets.safety import DestroyData

TEST = "verify"
#: failures listed in the result and the report (all are counted; fio's output has all)
MAX_LISTED = 1000


@dataclass(frozen=True)
class PreparedVerify:
    target: PreparedTarget
    options: VerifyOptions
    args: VerifyArgs
    range: ActiveRange


def prepare_verify(target: str, size_bytes: int | None, destroy_data: DestroyData, fio: str,
                   args: VerifyArgs) -> PreparedVerify:
    base = prepare_target(target, size_bytes, destroy_data, fio)
    options = build_options(args, base.info.logical_sector_bytes)
    rng = active_range(base.info.capacity_bytes, options.active_range_pct)
    if rng.size_bytes < MIN_ACTIVE_RANGE:
        raise TargetError(f"target {base.info.path} is too small: its active range is "
                          f"{format_bytes(rng.size_bytes)}, ssdlab needs at least "
                          f"{format_bytes(MIN_ACTIVE_RANGE)}")
    if options.block_bytes > rng.size_bytes:
        raise UserError(f"--block-size {args.block_size!r} is larger than the "
                        f"{format_bytes(rng.size_bytes)} active range")
    if options.verify_only and base.create_file:
        raise TargetError(f"--verify-only needs data written by an earlier verify run; "
                          f"{base.info.path} does not exist yet")
    return PreparedVerify(base, options, args, rng)


def _setup(p: PreparedVerify) -> FioSetup:
    info = p.target.info
    return FioSetup(info.path, p.options.ioengine, p.target.versions["ssdlab"],
                    info.device_class, "default")


def job_text(p: PreparedVerify) -> str:
    what = "verify only" if p.options.verify_only else "write and verify"
    return _setup(p).job_text((verify_cell(p.options, p.range),), what,
                              verify_options(p.options))


def describe(p: PreparedVerify) -> str:
    o = p.options
    what = "Read and check" if o.verify_only else "Write, read back and check"
    return (
        f"DRY RUN: nothing will be written. {what} "
        f"{format_bytes(p.range.size_bytes)} of {p.target.info.path} in "
        f"{o.pattern} {format_bytes(o.block_bytes)} blocks, {o.checksum} every "
        f"{format_bytes(o.interval_bytes)}\n{job_text(p)}"
    )


class VerifyRun:
    def __init__(self, prepared: PreparedVerify, store: Store, executor: Executor,
                 progress: Progress) -> None:
        self.p = prepared
        self.store = store
        self.executor = executor
        self.progress = progress
        self.session = RunSession(prepared.target.info, store, executor, progress,
                                  _setup(prepared))

    def execute(self, argv: list[str]) -> str:
        t, o = self.p.target, self.p.options
        if t.create_file:
            self.session.info = create_file_target(t.info.path, t.info.capacity_bytes)
        plan = {"suite": "verify", "args": dataclasses.asdict(self.p.args),
                "options": dataclasses.asdict(o), "tests": [TEST],
                "active_range": dataclasses.asdict(self.p.range)}
        self.session.open(suite="verify", profile="default", quick=False, host=t.host,
                          plan=plan, versions=dict(t.versions), argv=argv)
        failed: list[str] = []
        with self.session.running():
            try:
                self._verify()
            except TestFailed as exc:
                failed.append(TEST)
                self.session.after_failure(TEST, exc)
        self.session.finish(failed)
        return self.session.run_id

    def _params(self) -> dict[str, Any]:
        o = self.p.options
        return {"title": "Data integrity", **dataclasses.asdict(o),
                "range": dataclasses.asdict(self.p.range)}

    def _verify(self) -> None:
        run_id, o = self.session.run_id, self.p.options
        params = self._params()
        self.store.set_test(run_id, TEST, status="running", params=params, verdicts={},
                            result={})
        cell = verify_cell(o, self.p.range)
        self.progress.phase("verify")
        run = self.executor.run(job_text(self.p), timeout_for((cell,), 0.0) * 2 + 60,
                                json_plus=False, on_tick=self.progress.tick)
        stray = run.output.stray_text if run.output is not None else ""
        failures = verify_failures(run.stderr, stray, run.stdout if run.output is None else "")
        job = run.output.jobs[0] if run.output is not None and run.output.jobs else None
        read_bytes = job.read.io_bytes if job else 0
        written = job.write.io_bytes if job else 0
        error = job.error if job else None
        cells = [{"cell": "verify", "block_bytes": o.block_bytes, "read_pct": 0,
                  "pattern": o.pattern, "written_bytes": written, "read_bytes": read_bytes,
                  "failures": len(failures)}]
        self.store.add_round(run_id, TEST, 1, status="ok" if job else "failed",
                             tracking={}, cells=cells, fio=fio_record(run, "verify"),
                             started_at=run.started_at, ended_at=run.ended_at)
        self.session.ground_truth(TEST, "verify")
        # a verify failure is fio error 84 (EILSEQ); any other error is the device's
        other_error = error not in (None, 0, 84) or (job is None) or (
            run.error is not None and not failures)
        corrupt = ranges(failures)
        result = {
            "failures": len(failures),
            "corrupt_ranges": [{"offset": a, "length": b} for a, b in corrupt[:MAX_LISTED]],
            "listed": [dataclasses.asdict(f) for f in failures[:MAX_LISTED]],
            "written_bytes": written,
            "read_bytes": read_bytes,
            "checked_bytes": self.p.range.size_bytes - self.p.range.size_bytes % o.block_bytes,
        }
        if other_error:
            result["error"] = run.error or f"fio job error {error}"
            self.store.set_test(run_id, TEST, status="failed", params=params, verdicts={},
                                result=result)
            raise TestFailed(str(result["error"]))
        if failures:
            where = ", ".join(f"{a:,}+{b:,}" for a, b in corrupt[:5])
            more = f" and {len(corrupt) - 5} more" if len(corrupt) > 5 else ""
            message = (f"CORRUPTION: {len(failures)} checksum failure(s) in {len(corrupt)} "
                       f"range(s) at byte offset+length {where}{more}")
            status = "corrupt"
        else:
            message = (f"no corruption: {format_bytes(read_bytes)} read back and checked, "
                       f"every {format_bytes(o.interval_bytes)} ({o.checksum})")
            status = "passed"
        result["message"] = message
        self.store.set_test(run_id, TEST, status=status, params=params,
                            verdicts={"primary": {"message": message}}, result=result)
        self.progress.line(f"{TEST}: {message}")
