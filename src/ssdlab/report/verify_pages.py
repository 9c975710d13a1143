"""Report page of the data-integrity check: the verdict and every corrupt range found."""

from __future__ import annotations

from ssdlab.plan.units import format_bytes
from ssdlab.report.html import Page, banner, esc, kv_table, note, table
from ssdlab.report.run_pages import head_left
from ssdlab.store.records import RunData, TestData


def verify_pages(run: RunData, test: TestData, anchor: str) -> list[Page]:
    r = test.result if isinstance(test.result, dict) else {}
    p = test.params
    kind = {"passed": "reference", "corrupt": "failed"}.get(test.status, "failed")
    message = str(r.get("message") or r.get("error") or test.status)
    body = banner(kind, message) + kv_table([
        ("checked", format_bytes(int(r.get("checked_bytes", 0)))),
        ("written / read back", f"{format_bytes(int(r.get('written_bytes', 0)))} / "
                                f"{format_bytes(int(r.get('read_bytes', 0)))}"),
        ("blocks", f"{p.get('pattern')} {format_bytes(int(p.get('block_bytes', 0)))}"),
        ("checksum", f"{p.get('checksum')} every {format_bytes(int(p.get('interval_bytes', 0)))}"),
        ("mode", "verify only (no writes)" if p.get("verify_only") else "write, then verify"),
    ])
    ranges = r.get("corrupt_ranges") or []
    if ranges:
        body += "<h3>Corrupt ranges</h3>" + note(
            "Each failing block is reported at its first failing interval; byte offsets on "
            "the target.") + table(
            ("offset (bytes)", "length (bytes)", "offset"),
            [[f"{x['offset']:,}", f"{x['length']:,}", esc(format_bytes(x["offset"]))]
             for x in ranges],
        )
    return [Page(anchor, "Data integrity", body, head_left(run), run.quick)]
