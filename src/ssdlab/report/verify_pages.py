"""Report page of the data-integrity check: the verdict and every corrupt range found."""

from __future__ import annotations

from ssdlab.errors import command
from ssdlab.plan.verify import TEST, VerifyResult
from ssdlab.report.html import Page, banner, esc, kv_table, note, table
from ssdlab.report.parts import head_left
from ssdlab.report.suite import Outcome, SuitePages, result_of
from ssdlab.store.records import RunData, TestData
from ssdlab.units import format_bytes


def _verdict(test: TestData, r: VerifyResult) -> str:
    return str(r.message or r.error or test.status)


def verify_pages(run: RunData, test: TestData, anchor: str) -> list[Page]:
    r = result_of(test, VerifyResult)
    p = test.params
    kind = {"passed": "reference", "corrupt": "failed"}.get(test.status, "failed")
    body = banner(kind, _verdict(test, r)) + kv_table([
        ("checked", format_bytes(r.checked_bytes)),
        ("written / read back", f"{format_bytes(r.written_bytes)} / "
                                f"{format_bytes(r.read_bytes)}"),
        ("blocks", f"{p.get('pattern')} {format_bytes(int(p.get('block_bytes', 0)))}"),
        ("checksum", f"{p.get('checksum')} every {format_bytes(int(p.get('interval_bytes', 0)))}"),
        ("mode", "verify only (no writes)" if p.get("verify_only") else "write, then verify"),
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
    p, r = test.params, result_of(test, VerifyResult)
    size = (p.get("range") or {}).get("size_bytes", 0)
    mode = "read and check (no writes)" if p.get("verify_only") else "write, read back and check"
    return [f"  {mode} {format_bytes(int(size))} (the first {p.get('active_range_pct', 100):g} "
            f"% of the capacity) in {p.get('pattern')} "
            f"{format_bytes(int(p.get('block_bytes', 0)))} blocks at QD {p.get('iodepth')}, "
            f"{p.get('checksum')} every {format_bytes(int(p.get('interval_bytes', 0)))}",
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
