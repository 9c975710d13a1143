"""The pages module of ``example-read`` (docs/adding-a-suite.md): its report page, its
``ssdlab show`` lines and what ``ssdlab run`` prints at the end, all from the stored run."""

from __future__ import annotations

from ssdlab.report.html import Page, banner, kv_table
from ssdlab.report.parts import head_left
from ssdlab.report.suite import Outcome, SuitePages, result_of
from ssdlab.report.text import failed_tests_error, num, run_line, see_line
from ssdlab.store.records import RunData, TestData
from ssdlab.units import format_bytes
from tests.support.example_suite.plan import TEST, ReadResult


def read_page(run: RunData, test: TestData, anchor: str) -> list[Page]:
    r = result_of(test, ReadResult)
    if r.error is not None:
        return [Page(anchor, "Example read: failed", banner("failed", r.error),
                     head_left(run), run.quick)]
    rows = [("read", format_bytes(r.read_bytes)), ("MB/s", num(r.bw_bytes_per_s / 1e6, 1)),
            ("mean latency (us)", num(r.lat_mean_us, 1))]
    return [Page(anchor, "Example read", kv_table(rows), head_left(run), run.quick)]


def show_lines(run: RunData, test: TestData) -> list[str]:
    r = result_of(test, ReadResult)
    return [f"  {r.message or r.error or test.status}"]


def outcome(run: RunData, store_path: object) -> Outcome:
    return Outcome((run_line(run, store_path), see_line(run)), failed_tests_error(run))


PAGES = SuitePages(pages={TEST: read_page}, show={TEST: show_lines}, outcome=outcome)
