"""Report page of the SLC-cache probe: throughput (MB/s) against bytes written, the cliffs
marked, the cache size estimate stated; on the emulated SSD, its configured cache beside
the estimate. Everything comes from the stored rounds (one per slice of bytes) and result.
"""

from __future__ import annotations

from ssdlab.errors import command
from ssdlab.plan.results import PurgeStep
from ssdlab.plan.slc_probe import TEST, PassRecord, SlcProbeParams, SlcProbeResult, SliceCell
from ssdlab.report import charts as ch
from ssdlab.report.html import Page, banner, charts, esc, kv_table, note, table
from ssdlab.report.parts import head_left
from ssdlab.report.scales import fmt_value
from ssdlab.report.suite import Outcome, SuitePages, result_of
from ssdlab.report.text import quick_note, run_line, see_line
from ssdlab.store.records import RunData, TestData
from ssdlab.units import format_bytes

MB = 1e6
GIB = float(1 << 30)
MIB = float(1 << 20)
MAX_POINTS = 600  # per series on the chart; the store keeps every slice


def _unit(test: TestData) -> tuple[str, float]:
    """GiB on the x axis, MiB when less than 1 GiB was written (a small emulated drive)."""
    written = max((float(r.cells_as(SliceCell)[0].bytes_written) for r in test.rounds
                   if r.status == "ok" and r.cells), default=0.0)
    return ("GiB", GIB) if written >= GIB else ("MiB", MIB)


def _curve(test: TestData, pass_no: int) -> list[tuple[float, float]]:
    points = [(float(c.bytes_written), float(c.bw_bytes_per_s))
              for r in test.rounds if r.status == "ok" for c in r.cells_as(SliceCell)[:1]
              if c.pass_no == pass_no]
    if len(points) <= MAX_POINTS:
        return points
    step = -(-len(points) // MAX_POINTS)
    return [(points[min(i + step, len(points)) - 1][0],
             sum(p[1] for p in points[i:i + step]) / len(points[i:i + step]))
            for i in range(0, len(points), step)]


def _chart(test: TestData, passes: list[PassRecord], anchor: str) -> str:
    unit, scale = _unit(test)
    series, marks = [], []
    for i, p in enumerate(passes):
        n = p.pass_no
        pts = _curve(test, n)
        name = "first write" if n == 1 else f"after {p.idle_before_s:g} s idle"
        series.append(ch.Series(name, tuple(b / scale for b, _ in pts),
                                tuple(r / MB for _, r in pts), style="line", colour_index=i))
        for k, c in enumerate(p.cliffs):
            label = f"{'cache' if k == 0 else 'cliff'} {fmt_value(c.at_bytes / scale)} {unit}"
            if n > 1:
                label += " (repeat)"
            marks.append(ch.Rule(float(c.at_bytes) / scale, label, "4 3" if n == 1 else "1 3"))
    return ch.line_chart(
        f"{anchor}-slc", "Sequential write throughput against data written", series,
        x_label=f"data written since the purge ({unit})", y_label="throughput (MB/s)",
        y_unit="MB/s", y_log=False, x_rules=marks, x_from_zero=True,
    )


def _cliff_rows(passes: list[PassRecord]) -> list[list[str]]:
    rows = []
    for p in passes:
        for k, c in enumerate(p.cliffs):
            at = float(c.at_bytes)
            rows.append([
                esc(p.pass_no), esc("cache estimate" if k == 0 else f"cliff {k + 1}"),
                esc(format_bytes(at)), esc(f"{at / 1e9:,.2f}"),
                esc(fmt_value(c.rate_before_bytes_per_s / MB, 0)),
                esc(fmt_value(c.rate_after_bytes_per_s / MB, 0)),
                esc(f"x{c.ratio:.2f}"),
            ])
    return rows


def _dip_rows(passes: list[PassRecord]) -> list[list[str]]:
    """The dips (the rate left its level and came back); runs stored before have none."""
    return [[esc(p.pass_no), esc(format_bytes(float(d.at_bytes))),
             esc(format_bytes(float(d.length_bytes))),
             esc(fmt_value(d.rate_level_bytes_per_s / MB, 0)),
             esc(fmt_value(d.rate_during_bytes_per_s / MB, 0)),
             esc(fmt_value(d.rate_back_bytes_per_s / MB, 0))]
            for p in passes for d in p.dips or ()]


def _parameters(test: TestData, log: str) -> list[tuple[str, object]]:
    p = test.params_as(SlcProbeParams)
    step = next((s for s in test.steps if s.kind == "purge"), None)
    purge = PurgeStep.from_json(step.detail, "purge step") if step else None
    purge_text = (f"{purge.method} ({'ok' if purge.ok else 'FAILED'})"
                  if purge else "none")
    return [
        ("write", f"{format_bytes(p.write_bytes)} sequential from offset 0, "
                  f"{format_bytes(p.block_bytes)} blocks, 1 thread x QD "
                  f"{p.iodepth}, no preconditioning"),
        ("purge (whole target)", purge_text),
        ("idle after the purge", f"{p.settle_s:g} s"),
        ("bandwidth logged by fio", log),
        ("points", f"one per {format_bytes(p.slice_bytes)} written "
                   f"({sum(1 for r in test.rounds if r.status == 'ok')} stored)"),
        ("cliff", f"a drop of at least {p.min_drop_pct:g} % of the rate "
                  "before it; the first one is the cache size estimate"),
        ("repeat write", f"after {p.repeat_after_s:g} s idle"
         if p.repeat_after_s else "none"),
    ]


def _truth(result: SlcProbeResult) -> str:
    truth = result.ground_truth
    if truth is None:
        return ""
    slc, error = truth.slc_bytes, truth.estimate_error_pct
    rows: list[tuple[str, object]] = [
        ("configured SLC cache", f"{format_bytes(slc)} ({slc:,} bytes)"),
        ("estimate - configured", f"{error:+.1f} %" if error is not None else "no estimate"),
    ]
    return "<h3>Ground truth of the emulated SSD</h3>" + kv_table(rows)


def slc_probe_pages(run: RunData, test: TestData, anchor: str) -> list[Page]:
    result = result_of(test, SlcProbeResult)
    title = "SLC cache probe"
    if test.status == "failed" or not test.rounds:
        text = f"{test.status.upper()}: {result.error or 'no data'}"
        return [Page(anchor, f"{title}: no results", banner("failed", text), head_left(run),
                     run.quick)]
    parts = []
    if result.cliff_found:
        parts.append(f'<p class="verdict steady">{esc(result.message)}</p>')
    else:
        parts.append(banner("not-steady", f"NO CLIFF FOUND: {result.message}"))
    if result.recovery:
        parts.append(f'<p class="verdict">{esc(result.recovery)}</p>')
    parts.append(charts(_chart(test, result.passes, anchor)))
    parts.append(note("Each point is the throughput over one slice of bytes (MB/s = 10^6 "
                      "bytes/s); dashed vertical lines mark the cliffs found, the first is the "
                      "cache size estimate."))
    rows = _cliff_rows(result.passes)
    if rows:
        parts.append("<h3>Cliffs</h3>" + table(
            ("pass", "cliff", "written", "GB", "MB/s before", "MB/s after", "ratio"), rows))
    dips = _dip_rows(result.passes)
    if dips:
        parts.append("<h3>Dips: the rate came back, not cliffs</h3>" + note(
            "The rate left its level and came back to it: a host stall, or completions fio "
            "reaped late (one slice slow, the next fast). The cache edge is a drop the rate "
            "does not come back from, so these are neither the estimate nor cliffs.") + table(
            ("pass", "at", "length", "MB/s of the level", "MB/s during", "MB/s back"), dips))
    parts.append(_truth(result))
    parts.append("<h3>How it was measured</h3>" + kv_table(_parameters(test, result.log)))
    return [Page(anchor, title, "".join(parts), head_left(run), run.quick)]


# -- ssdlab show, and what ssdlab run prints -------------------------------------------------


def show_lines(run: RunData, test: TestData) -> list[str]:
    p, result = test.params_as(SlcProbeParams), result_of(test, SlcProbeResult)
    lines = [f"  write {format_bytes(p.write_bytes)} sequentially from offset 0, "
             f"{format_bytes(p.block_bytes)} blocks, 1 thread x QD "
             f"{p.iodepth}; purge {p.purge}, {p.settle_s:g} s idle; "
             f"points of {format_bytes(p.slice_bytes)}",
             f"  verdict: {result.message or result.error or test.status}"]
    if result.recovery:
        lines.append(f"  repeat write: {result.recovery}")
    return lines


def outcome(run: RunData, store_path: object) -> Outcome:
    test = run.tests[0] if run.tests else None
    result = result_of(test, SlcProbeResult) if test is not None else SlcProbeResult()
    lines = [run_line(run, store_path, quick_note(run, "")),
             *([f"  {result.message}"] if result.message else []), see_line(run)]
    failed = test is None or test.status == "failed"
    return Outcome(tuple(lines), f"the SLC probe failed (see `{command()} show {run.run_id}`)"
                   if failed else None)


PAGES = SuitePages(pages={TEST: slc_probe_pages}, show={TEST: show_lines}, outcome=outcome)
