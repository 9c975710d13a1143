"""What ``ssdlab show`` and the end of ``ssdlab run`` say of a saturation run, from the
golden store's run (tests/fixtures/store)."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest

from ssdlab.report.saturation_pages import PAGES
from ssdlab.store.db import Store
from ssdlab.store.records import RunData

FIXTURES = Path(__file__).parent.parent / "fixtures" / "store"


@pytest.fixture
def run(tmp_path: Path) -> RunData:
    shutil.copy(FIXTURES / "suites.sqlite", tmp_path / "s.sqlite")
    with Store.open(tmp_path / "s.sqlite") as store:
        return next(store.load(r.run_id) for r in store.list_runs() if r.suite == "saturation")


def test_show_lines_say_the_load_and_the_verdicts(run: RunData) -> None:
    wsat, hir = run.tests
    assert PAGES.show["wsat"](run, wsat) == [
        "  round seconds 1.0, max rounds 8, threads 2, iodepth 16, block bytes 4096, "
        "purge auto",
        "  verdict: FOB 20,581 IOPS -> saturated 11,929 IOPS; transition from 3 s (0.26 GiB "
        "written) to 4 s (0.32 GiB written); NOT saturated: rounds 4-8, data excursion "
        "63.4 % > 20 %; slope excursion 59.0 % > 10 %",
    ]
    assert PAGES.show["hir"](run, hir)[0] == ("  threads 2, iodepth 16, block bytes 4096, waits "
                                         "1 s, bursts 3, burst seconds 0.5")
    running = dataclasses.replace(wsat, status="running", result={})
    assert PAGES.show["wsat"](run, running)[1] == "  verdict: running"


def test_what_run_prints_at_the_end(run: RunData) -> None:
    end = PAGES.outcome(run, Path("S"))
    assert end.lines == (
        f"run {run.run_id} complete (QUICK profile: not a valid PTS result); results in S",
        f"  see them: ssdlab show {run.run_id}    report: ssdlab report {run.run_id} -o DIR",
    )
    assert end.failure is None
    failed = dataclasses.replace(run, tests=[dataclasses.replace(run.tests[0],
                                                                 status="failed")])
    assert PAGES.outcome(failed, Path("S")).failure == (
        f"test(s) failed: wsat (see `ssdlab show {run.run_id}`)")
