"""Run the data-integrity check: one fio write-and-verify job, every failure located."""

from __future__ import annotations

from ssdlab.engine.runner import FioRun
from ssdlab.engine.verifylog import VerifyFailure, ranges, verify_failures
from ssdlab.errors import TargetError, UserError
from ssdlab.plan import verify as plan
from ssdlab.plan.planned import FIO_RUN_OVERHEAD_S, PlannedTime
from ssdlab.plan.results import StoredPlan, Verdict
from ssdlab.plan.verify import (
    MAX_LISTED,
    TEST,
    CorruptRange,
    FailureRecord,
    VerifyArgs,
    VerifyCell,
    VerifyOptions,
    VerifyResult,
    build_options,
    checked_bytes,
    verify_cell,
)
from ssdlab.run.prepare import TargetRequest, checked_range, engine_for, prepare_device
from ssdlab.run.session import SessionRun, TestFailed
from ssdlab.run.suite import PreparedRange, Runner, timeout_for
from ssdlab.store.records import RunData, TestState
from ssdlab.units import format_bytes

#: a verify run checked: the range it writes and reads back
PreparedVerify = PreparedRange[VerifyOptions, VerifyArgs]


def prepare_verify(request: TargetRequest, args: VerifyArgs) -> PreparedVerify:
    """Everything checked before the first byte is written: UserError (one line) otherwise."""
    base = prepare_device(request)
    options = engine_for(base.info, build_options(args, base.info.logical_sector_bytes))
    rng = checked_range(base.info, options.active_range_pct)
    if options.block_bytes > rng.size_bytes:
        raise UserError(f"--block-size {args.block_size!r} is larger than the "
                        f"{format_bytes(rng.size_bytes)} active range")
    if options.verify_only and base.create_file:
        raise TargetError(f"--verify-only needs data written by an earlier verify run; "
                          f"{base.info.path} does not exist yet")
    return PreparedVerify(base, options, args, rng)


def describe(p: PreparedVerify) -> str:
    """``--dry-run``: what will be checked, and the job file; nothing is touched."""
    return plan.describe(p.options, p.range, p.target.info.path, p.job_text)


def planned(p: PreparedVerify) -> PlannedTime:
    """One fio run: the active range written and read back (read only with
    --verify-only), as fast as the drive goes."""
    what = "reading back" if p.options.verify_only else "writing and reading back"
    passes = 1 if p.options.verify_only else 2
    return (PlannedTime.fixed(FIO_RUN_OVERHEAD_S)
            + PlannedTime.io(passes * p.range.size_bytes, f"{what} the active range"))


class VerifyRun(SessionRun[PreparedVerify]):
    """One write-and-verify (or verify-only) pass over the active range."""

    suite = plan.SUITE

    def plan_record(self) -> StoredPlan:
        return plan.plan_record(self.p.options, self.p.args, self.p.range)

    def run_tests(self, previous: RunData | None) -> list[str]:
        return self.one_test(TEST, self._verify)

    def _verify(self) -> None:
        o = self.p.options
        params = plan.test_params(o, self.p.range)
        self.store.set_test(self.run_id, TEST, TestState("running", params))
        cell = verify_cell(o, self.p.range)
        self.progress.phase("verify")
        run = self.session.run_fio(plan.job(o, self.p.range, self.session.fio.job_text),
                                   (cell,), json_plus=False,
                                   timeout_s=timeout_for((cell,), 0.0) * 2 + 60)
        stray = run.output.stray_text if run.output is not None else ""
        failures = verify_failures(run.stderr, stray, run.stdout if run.output is None else "")
        job = run.output.jobs[0] if run.output is not None and run.output.jobs else None
        written, read = (job.write.io_bytes, job.read.io_bytes) if job else (0, 0)
        self.session.fio_round(TEST, 1, run, "verify", status="ok" if job else "failed",
                               tracking={},
                               cells=[self._cell(written, read, len(failures))])
        self.session.ground_truth(TEST, "verify")
        error = _error(run, job.error if job else None, job is not None, failures)
        if error is not None:
            result = self._result(failures, written, read, error=error)
            self.store.set_test(self.run_id, TEST, TestState("failed", params, {}, result))
            raise TestFailed(error)
        status, message = ("corrupt", _corruption(failures)) if failures else (
            "passed", f"no corruption: {format_bytes(read)} read back and checked, every "
            f"{format_bytes(o.interval_bytes)} ({o.checksum})")
        self.store.set_test(self.run_id, TEST, TestState(
            status, params, {"primary": Verdict(message)},
            self._result(failures, written, read, message=message)))
        self.progress.line(f"{TEST}: {message}")

    def _result(self, failures: list[VerifyFailure], written: int, read: int, *,
                error: str | None = None, message: str | None = None) -> VerifyResult:
        return VerifyResult(
            failures=len(failures),
            corrupt_ranges=[CorruptRange(a, b) for a, b in ranges(failures)[:MAX_LISTED]],
            listed=[FailureRecord(f.offset, f.length, f.what, f.file)
                    for f in failures[:MAX_LISTED]],
            written_bytes=written, read_bytes=read,
            checked_bytes=checked_bytes(self.p.options, self.p.range),
            error=error, message=message)

    def _cell(self, written: int, read: int, failures: int) -> VerifyCell:
        """The round's one cell: what was written and read, how many intervals failed."""
        o = self.p.options
        return VerifyCell(TEST, o.block_bytes, 0, o.pattern, written, read, failures)


def _error(run: FioRun, job_error: int | None, has_job: bool,
           failures: list[VerifyFailure]) -> str | None:
    """Why the test failed (None: fio ran through). A verify failure is fio error 84
    (EILSEQ); any other error is the device's."""
    other = job_error not in (None, 0, 84) or not has_job or (
        run.error is not None and not failures)
    return (run.error or f"fio job error {job_error}") if other else None


def _corruption(failures: list[VerifyFailure]) -> str:
    """The verdict when intervals failed: how many, in how many ranges, where."""
    corrupt = ranges(failures)
    where = ", ".join(f"{a:,}+{b:,}" for a, b in corrupt[:5])
    more = f" and {len(corrupt) - 5} more" if len(corrupt) > 5 else ""
    return (f"CORRUPTION: {len(failures)} checksum failure(s) in {len(corrupt)} range(s) "
            f"at byte offset+length {where}{more}")


RUNNER = Runner(
    prepare=prepare_verify,
    describe=describe,
    start=VerifyRun,
    planned=planned,
)
