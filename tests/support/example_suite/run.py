"""The run module of ``example-read`` (docs/adding-a-suite.md): prepare (every check
before any I/O), and the run on the shared skeleton: one fio invocation, one round, the
result record."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ssdlab.plan.planned import PlannedTime
from ssdlab.run.cells import cell_from_job
from ssdlab.run.prepare import TargetRequest, prepare_device
from ssdlab.run.progress import Progress
from ssdlab.run.session import SessionRun, TestFailed
from ssdlab.run.suite import PreparedSuite, Runner, dry_run
from ssdlab.store.records import RunData
from tests.support.example_suite import plan
from tests.support.example_suite.plan import TEST, ReadArgs, ReadOptions, ReadResult


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

    def plan_dict(self) -> dict[str, Any]:
        return plan.plan_dict(self.p.options)

    def run_tests(self, previous: RunData | None) -> list[str]:
        return self.one_test(TEST, self._read)

    def _read(self) -> None:
        cell = self.p.options.cell()
        params = {"title": "Example read", "read_bytes": cell.io_bytes}
        self.store.set_test(self.run_id, TEST, status="running", params=params, verdicts={},
                            result={})
        run = self.session.run_fio(self.p.job_text((cell,), f"{TEST} read"), (cell,),
                                   json_plus=True)
        measured = [cell_from_job(cell, job) for job in run.output.jobs] if run.output else []
        self.session.fio_round(TEST, 1, run, "read", status="ok" if run.ok else "failed",
                               tracking={}, cells=list(measured))
        if not run.ok or not measured:
            error = f"the read failed: {run.error or 'no result'}"
            self.store.set_test(self.run_id, TEST, status="failed", params=params,
                                verdicts={}, result=ReadResult.partial(error=error).to_json())
            raise TestFailed(error)
        bw, lat = measured[0]["bw_bytes_per_s"], measured[0]["lat_mean_us"]
        assert isinstance(bw, float) and isinstance(lat, float | None)
        result = ReadResult(int(cell.io_bytes or 0), bw, lat, f"read at {bw / 1e6:,.1f} MB/s")
        self.store.set_test(self.run_id, TEST, status="complete", params=params,
                            verdicts={"primary": {"message": result.message}},
                            result=result.to_json())
        self.progress.line(f"{TEST}: {result.message}")


def planned(p: PreparedRead) -> PlannedTime:
    """How long the plan takes (the dry run's last line): one size-based read."""
    return PlannedTime.io(p.options.read_bytes, "the read")


RUNNER = Runner(prepare=prepare, describe=describe, progress=lambda p: Progress(),
                start=ReadRun, planned=planned)
