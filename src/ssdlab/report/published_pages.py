"""The pages of a reference run imported from published reviews (``ssdlab import
published``): its PTS tests as the SNIA results pages (no rounds: results only), its other
figures as a table; and what ``ssdlab show`` prints of them. The PTS tests' pages are the
PTS suite's own (report/pts_pages.py ``test_pages``): published figures are results of
those tests, not a part other suites share, so they stay with that suite."""

from __future__ import annotations

from typing import Any

from ssdlab.reference.published import (
    PublishedFigure,
    PublishedParams,
    PublishedRows,
    PublishedSaturation,
)
from ssdlab.report.figures import test_title
from ssdlab.report.html import Page, esc, kv_table, table
from ssdlab.report.parts import head_left, result_table
from ssdlab.report.pts_pages import test_pages
from ssdlab.report.scales import fmt_value
from ssdlab.report.suite import Outcome, SuitePages, result_of
from ssdlab.report.text import num, text_table
from ssdlab.store.records import RunData, TestData


def _published_lines(test: TestData) -> list[str]:
    """Load and notes of a test imported from published results, and figures no table shows."""
    p = test.params_as(PublishedParams)
    load = []
    if p.threads or p.iodepth:
        load.append(f"threads {p.threads or '-'} x QD {p.iodepth or '-'}")
    if p.active_range_pct:
        load.append(f"active range {num(p.active_range_pct)} %")
    lines = [f"  as published: {', '.join(load)}"] if load else []
    lines += [f"  note: {note}" for note in p.notes]
    if test.name == "write-saturation":
        r = result_of(test, PublishedSaturation)
        lines.append(f"  IOPS fresh out of box {num(r.iops_fob)}, saturated {num(r.iops_steady)}")
    if test.name == "published":
        rows = result_of(test, PublishedRows).rows
        if rows:
            lines += _published_rows_table(rows)
    return lines


def _plain(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.0f}" if value == int(value) else f"{value:,}"
    return str(value)


def _published_rows_table(rows: list[PublishedFigure]) -> list[str]:
    """Published figures no ssdlab test holds, one per row, notes at the end of the line."""
    header = ["test: metric", "value", "block KiB", "read %", "threads", "QD"]
    body = [
        [f"{row.test}: {row.metric}", *[_plain(v) for v in (
            row.value, row.block_kib, row.read_pct, row.threads, row.queue_depth)]]
        for row in rows
    ]
    table = text_table(header, body)
    notes = ["notes", "-----", *[row.notes or "" for row in rows]]
    return [f"{line}  {note}".rstrip() for line, note in zip(table, notes, strict=True)]


def other_results_page(run: RunData, test: TestData, anchor: str) -> Page | None:
    """Published figures that are not a PTS table (saturation, NAS, IOmeter ...)."""
    if test.name == "published":
        keys = ("test", "metric", "value", "block_kib", "read_pct", "threads", "queue_depth",
                "notes")
        figures = [f.to_json() for f in result_of(test, PublishedRows).rows]
        if not figures:
            return None
        rows = [[esc(r[k] if r[k] is not None else "") for k in keys] for r in figures]
        body = table(keys, rows)
    else:
        result = result_of(test, PublishedSaturation).to_json()
        scalars = [(k, v) for k, v in result.items() if isinstance(v, int | float | str)]
        if not scalars:
            return None
        body = kv_table((k.replace("_", " "), fmt_value(v) if isinstance(
            v, int | float) and not isinstance(v, bool) else v) for k, v in scalars)
    return Page(anchor, f"{test_title(test)} (published)", body,
                head_left(run), run.quick, toc=False)




def other_pages(run: RunData, test: TestData, anchor: str) -> list[Page]:
    page = other_results_page(run, test, anchor)
    return [] if page is None else [page]


def show_lines(run: RunData, test: TestData) -> list[str]:
    return _published_lines(test) + result_table(run, test, "as published")


def outcome(run: RunData, store_path: object) -> Outcome:
    return Outcome((f"reference run {run.run_id} in {store_path}",))


PAGES = SuitePages(
    pages={"iops": test_pages, "throughput": test_pages, "write-saturation": other_pages,
           "published": other_pages},
    show={"iops": show_lines, "throughput": show_lines, "write-saturation": show_lines,
          "published": show_lines},
    outcome=outcome, title_table=None,
)
