"""Report page of the data-integrity check: the verdict and every corrupt range found."""

from __future__ import annotations

from ssdlab.errors import command
from ssdlab.jsonrecord import StoredDataError
from ssdlab.plan.verify import TEST, VerifyOptions, VerifyParams, VerifyResult
from ssdlab.report.html import Page, banner, esc, kv_table, note, table
from ssdlab.report.parts import head_left
from ssdlab.report.suite import Outcome, SuitePages, result_of
from ssdlab.store.records import RunData, TestData
from ssdlab.units import format_bytes


def _verdict(test: TestData, r: VerifyResult) -> str:
    return str(r.message or r.error or test.status)


def _options(params: VerifyParams, test: TestData) -> VerifyOptions:
    """The options the test ran with (its parameters have them)."""
    if params.options is None:
        raise StoredDataError(f"test {test.name} params: missing the options")
    return params.options


def verify_pages(run: RunData, test: TestData, anchor: str) -> list[Page]:
    r = result_of(test, VerifyResult)
    o = _options(test.params_as(VerifyParams), test)
    kind = {"passed": "reference", "corrupt": "failed"}.get(test.status, "failed")
    body = banner(kind, _verdict(test, r)) + kv_table([
        ("checked", format_bytes(r.checked_bytes)),
        ("written / read back", f"{format_bytes(r.written_bytes)} / "
                                f"{format_bytes(r.read_bytes)}"),
        ("blocks", f"{o.pattern} {format_bytes(o.block_bytes)}"),
        ("checksum", f"{o.checksum} every {format_bytes(o.interval_bytes)}"),
        ("mode", "verify only (no writes)" if o.verify_only else "write, then verify"),
    ])
    if r.corrupt_ranges:
        body += "<h3>Corrupt ranges</h3>" + note(
            "Each failing block is reported at its first failing interval; byte offsets on "
            "the target.") + table(
            ("offset (bytes)", "length (bytes)", "offset"),
            [[f"{x.offset:,}", f"{x.length:,}", esc(format_bytes(x.offset))]
             for x in r.corrupt_ranges],
        )
    return [Page(anchor, "Data integrity", body, head_left(run), run.quick)]


# -- ssdlab show, and what ssdlab run prints -------------------------------------------------


def show_lines(run: RunData, test: TestData) -> list[str]:
    p, r = test.params_as(VerifyParams), result_of(test, VerifyResult)
    o = _options(p, test)
    mode = "read and check (no writes)" if o.verify_only else "write, read back and check"
    return [f"  {mode} {format_bytes(p.range.size_bytes)} (the first "
            f"{o.active_range_pct:g} % of the capacity) in {o.pattern} "
            f"{format_bytes(o.block_bytes)} blocks at QD {o.iodepth}, "
            f"{o.checksum} every {format_bytes(o.interval_bytes)}",
            f"  verdict: {_verdict(test, r)}"]


def outcome(run: RunData, store_path: object) -> Outcome:
    test = next((t for t in run.tests if t.name == TEST), None)
    r = result_of(test, VerifyResult) if test is not None else VerifyResult()
    status = test.status if test is not None else run.status
    lines = (f"run {run.run_id} {run.status_text}; "
             f"{r.message if r.message is not None else status}",)
    if status == "corrupt":
        return Outcome(lines, f"data corruption found on {run.target.get('path')} "
                       f"(see `{command()} show {run.run_id}`)")
    if status == "failed":
        return Outcome(lines, f"verify failed: {r.error}")
    return Outcome(lines)


PAGES = SuitePages(pages={TEST: verify_pages}, show={TEST: show_lines}, outcome=outcome)
