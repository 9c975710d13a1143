"""The run module of ``example-read`` (docs/adding-a-suite.md): prepare (every check
before any I/O), and the run on the shared skeleton: one fio invocation, one round, the
result record."""

from __future__ import annotations

from dataclasses import dataclass

from ssdlab.plan.planned import PlannedTime
from ssdlab.plan.results import Verdict
from ssdlab.run.cells import fio_cell
from ssdlab.run.prepare import TargetRequest, prepare_device
from ssdlab.run.session import SessionRun, TestFailed
from ssdlab.run.suite import PreparedSuite, Runner, dry_run
from ssdlab.store.records import RunData, TestState
from tests.support.example_suite import plan
from tests.support.example_suite.plan import (
    TEST,
    ReadArgs,
    ReadOptions,
    ReadParams,
    ReadPlan,
    ReadResult,
)


@dataclass(frozen=True)
class PreparedRead(PreparedSuite[ReadOptions]):
    pass


def prepare(request: TargetRequest, args: ReadArgs) -> PreparedRead:
    base = prepare_device(request)
    return PreparedRead(base, plan.build_options(args, base.info.capacity_bytes))


def describe(p: PreparedRead) -> str:
    job = p.job_text((p.options.cell(),), f"{TEST} read")
    return dry_run(p, plan.describe(p.options), [job.rstrip()])


class ReadRun(SessionRun[PreparedRead]):
    suite = plan.SUITE

    def plan_record(self) -> ReadPlan:
        return plan.stored_plan(self.p.options)

    def run_tests(self, previous: RunData | None) -> list[str]:
        return self.one_test(TEST, self._read)

    def _read(self) -> None:
        cell, size = self.p.options.cell(), self.p.options.read_bytes
        params = ReadParams("Example read", size)
        self.store.set_test(self.run_id, TEST, TestState("running", params))
        run = self.session.run_fio(self.p.job_text((cell,), f"{TEST} read"), (cell,),
                                   json_plus=True)
        measured = [fio_cell(cell, job) for job in run.output.jobs] if run.output else []
        self.session.fio_round(TEST, 1, run, "read", status="ok" if run.ok else "failed",
                               tracking={}, cells=measured)
        if not run.ok or not measured:
            error = f"the read failed: {run.error or 'no result'}"
            self.store.set_test(self.run_id, TEST, TestState(
                "failed", params, result=ReadResult.partial(error=error)))
            raise TestFailed(error)
        bw, lat = measured[0].bw_bytes_per_s, measured[0].lat_mean_us
        result = ReadResult(size, bw, lat, f"read at {bw / 1e6:,.1f} MB/s")
        self.store.set_test(self.run_id, TEST, TestState(
            "complete", params, {"primary": Verdict(result.message)}, result))
        self.progress.line(f"{TEST}: {result.message}")


def planned(p: PreparedRead) -> PlannedTime:
    """How long the plan takes (the dry run's last line): one size-based read."""
    return PlannedTime.io(p.options.read_bytes, "the read")


RUNNER = Runner(prepare=prepare, describe=describe, start=ReadRun, planned=planned)
