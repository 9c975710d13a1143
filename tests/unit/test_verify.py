"""The data-integrity check without a device: the run against a fake fio that reports
verify failures (or fails), the stored result in the shape it always had, and what
``ssdlab run``, ``show`` and the report say about it."""

from __future__ import annotations

import dataclasses
import io
import json
from pathlib import Path

import pytest

from ssdlab.engine.runner import FioRun, TickFn
from ssdlab.engine.verifylog import ranges, verify_failures
from ssdlab.plan.specs import active_range
from ssdlab.plan.verify import VerifyArgs, VerifyResult, build_options
from ssdlab.report.build import render
from ssdlab.report.verify_pages import PAGES
from ssdlab.run.prepare import PreparedTarget
from ssdlab.run.progress import Progress
from ssdlab.run.session import TargetLost
from ssdlab.run.verify_run import PreparedVerify, VerifyRun
from ssdlab.store.db import Store
from ssdlab.store.location import StoreLocation
from ssdlab.store.records import RunData
from tests.support.fake_fio import FakeFio
from tests.support.prepared import file_info

MIB = 1 << 20
BAD = ("crc32c: verify failed at file T offset 8192, length 4096 (requested block: "
       "offset=0, length=131072)\nverify: bad magic header ac35, wanted acca at file T "
       "offset 12288, length 4096 (requested block: offset=0, length=131072)\n"
       "crc32c: verify failed at file T offset 5242880, length 4096 (requested block: "
       "offset=5242880, length=131072)\n")


@dataclasses.dataclass
class VerifyFio:
    """fio's output for the verify job, with these failures on stderr, or no output."""

    stderr: str = ""
    crash: bool = False

    def run(self, job_text: str, timeout_s: float, *, json_plus: bool = False,
            on_tick: TickFn | None = None) -> FioRun:
        run = FakeFio(lambda name, n: 1000.0).run(job_text, timeout_s)
        if self.crash:
            return dataclasses.replace(run, stdout="", output=None, returncode=1,
                                       error="fio exited with status 1: fio: io_u error")
        return dataclasses.replace(run, stderr=self.stderr)


def verify(tmp_path: Path, fio: VerifyFio) -> tuple[RunData, StoreLocation]:
    path = tmp_path / "t.img"
    path.write_bytes(b"")  # the target exists (checked after a failure)
    args = VerifyArgs(active_range_pct=50.0)
    options = build_options(args, 512)
    target = PreparedTarget(file_info(path, 64 * MIB), False,
                            {"hostname": "test", "cpu_count": 2}, {"ssdlab": "test", "fio": "3.33"})
    prepared = PreparedVerify(target, options, args, active_range(64 * MIB, 50.0))
    store = Store.open(tmp_path / "store.sqlite")
    runner = VerifyRun(prepared, store, fio, Progress(io.StringIO(), live=False))
    try:
        runner.execute(["test"])
    except TargetLost:
        pytest.fail("the target is still there")
    return store.load(runner.run_id), store.path


def test_corruption_is_stored_located_and_fails_the_run(tmp_path: Path) -> None:
    run, store_path = verify(tmp_path, VerifyFio(stderr=BAD))
    test = run.test("verify")
    assert test.status == "corrupt"
    failures = verify_failures(BAD)
    message = ("CORRUPTION: 3 checksum failure(s) in 2 range(s) at byte offset+length "
               "8,192+8,192, 5,242,880+4,096")
    # the document as the run always built it, key for key
    assert json.dumps(test.result) == json.dumps({
        "failures": 3,
        "corrupt_ranges": [{"offset": a, "length": b} for a, b in ranges(failures)],
        "listed": [dataclasses.asdict(f) for f in failures],
        "written_bytes": 1000 * 131072, "read_bytes": 0, "checked_bytes": 32 * MIB,
        "message": message})
    assert test.verdicts == {"primary": {"message": message}}
    assert VerifyResult.from_json(test.result).listed[1].what.startswith("verify: bad magic")
    outcome = PAGES.outcome(run, store_path)
    assert outcome.lines == (f"run {run.run_id} complete; {message}",)
    assert outcome.failure == (f"data corruption found on {tmp_path / 't.img'} "
                               f"(see `ssdlab show {run.run_id}`)")
    assert PAGES.show["verify"](run, test)[-1] == f"  verdict: {message}"
    page, _ = render([run])
    assert "Corrupt ranges" in page and "5,242,880" in page


def test_a_clean_pass_says_what_was_checked(tmp_path: Path) -> None:
    run, store_path = verify(tmp_path, VerifyFio())
    test = run.test("verify")
    assert test.status == "passed"
    assert list(test.result) == ["failures", "corrupt_ranges", "listed", "written_bytes",
                                 "read_bytes", "checked_bytes", "message"]
    assert PAGES.outcome(run, store_path).failure is None
    show = PAGES.show["verify"](run, test)
    assert show[0] == ("  write, read back and check 32 MiB (the first 50 % of the capacity) "
                       "in sequential 128 KiB blocks at QD 16, crc32c every 4 KiB")


def test_a_fio_failure_fails_the_test_with_its_error(tmp_path: Path) -> None:
    run, store_path = verify(tmp_path, VerifyFio(crash=True))
    test = run.test("verify")
    assert test.status == "failed" and test.verdicts == {}
    error = "fio exited with status 1: fio: io_u error"
    assert json.dumps(test.result) == json.dumps({
        "failures": 0, "corrupt_ranges": [], "listed": [], "written_bytes": 0,
        "read_bytes": 0, "checked_bytes": 32 * MIB, "error": error})
    outcome = PAGES.outcome(run, store_path)
    assert outcome.lines == (f"run {run.run_id} {run.status_text}; failed",)
    assert outcome.failure == f"verify failed: {error}"
