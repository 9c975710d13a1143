"""Report page of trace replays (``ssdlab run replay``), their ``ssdlab show`` lines and
what ``ssdlab run replay`` prints at the end: the trace, the measured IOPS, MB/s and
latency, and the IOPS timeline. Everything comes from the stored test result."""

from __future__ import annotations

from ssdlab.errors import command
from ssdlab.plan.replay import TEST, ReplayCell, ReplayParams, ReplayResult, TimelinePoint
from ssdlab.report import charts as ch
from ssdlab.report.html import Page, banner, charts, kv_table, note, table
from ssdlab.report.parts import WIDE, head_left
from ssdlab.report.scales import fmt_value
from ssdlab.report.suite import Outcome, SuitePages, result_of
from ssdlab.report.text import num, text_table
from ssdlab.store.records import RunData, TestData


def _figures(cell: ReplayCell | None) -> list[str]:
    """IOPS, MB/s and the latencies (us) of the replay; "-" before it has any."""
    if cell is None:
        return ["-"] * 7
    return [fmt_value(cell.iops, 0), f"{cell.bw_bytes_per_s / 1e6:,.1f}",
            *(fmt_value(v) for v in (cell.lat_mean_us, cell.lat_p50_us, cell.lat_p99_us,
                                     cell.lat_p99_9_us, cell.lat_max_us))]


def _timeline_chart(chart_id: str, series: list[TimelinePoint]) -> str:
    t = tuple(float(q.t_s) for q in series)
    lines = (("total", [q.iops for q in series]), ("read", [q.read_iops for q in series]),
             ("write", [q.write_iops for q in series]))
    return ch.line_chart(
        chart_id, "IOPS timeline",
        [ch.Series(name, t, tuple(float(v) for v in values), colour_index=i)
         for i, (name, values) in enumerate(lines)],
        x_label="seconds", y_label="IOPS", frame=WIDE)


def replay_pages(run: RunData, test: TestData, anchor: str) -> list[Page]:
    r = result_of(test, ReplayResult)
    p = test.params_as(ReplayParams)
    trace = p.trace
    kind = "reference" if test.status == "complete" else "failed"
    message = r.message or r.error or test.status
    timing = ("no stalls (as fast as possible)" if p.no_stall else
              f"the trace's timing at {p.time_scale_pct} % speed")
    body = banner(kind, message) + kv_table([
        ("trace", f"{trace.path} ({trace.format})"),
        ("trace content", f"{trace.ios:,} I/Os: {trace.reads:,} reads, "
                          f"{trace.writes:,} writes, {trace.trims:,} trims"),
        ("extent", f"{trace.extent_bytes:,} bytes"),
        ("replayed with", f"{timing}, queue depth {p.iodepth}"),
    ]) + table(("IOPS", "MB/s", "mean (us)", "p50 (us)", "p99 (us)", "p99.9 (us)", "max (us)"),
               [_figures(r.cell)])
    if r.timeline:
        body += charts(_timeline_chart(f"{anchor}-tl", r.timeline))
    elif r.timeline_note:
        body += note(r.timeline_note)
    return [Page(anchor, "Trace replay", body, head_left(run), run.quick)]


# ------------------------------------------------------------------------ show, run


def show_lines(run: RunData, test: TestData) -> list[str]:
    r = result_of(test, ReplayResult)
    lines = [f"  iodepth {test.params_as(ReplayParams).iodepth}",
             f"  verdict: {r.message or r.error or test.status}"]
    cell = r.cell
    if cell is not None:
        lines += text_table(["IOPS", "MB/s", "mean us", "p99 us", "max us"],
                        [[num(cell.iops), num(cell.bw_bytes_per_s / 1e6, 1),
                          num(cell.lat_mean_us, 1), num(cell.lat_p99_us, 1),
                          num(cell.lat_max_us, 1)]])
    return lines


def outcome(run: RunData, store_path: object) -> Outcome:
    test = run.test(TEST)
    r = result_of(test, ReplayResult)
    lines = (f"run {run.run_id} {run.status_text}; {r.message or test.status}",
             f"  see them: {command()} report {run.run_id} -o DIR")
    return Outcome(lines, f"replay failed: {r.error}" if test.status == "failed" else None)


PAGES = SuitePages(pages={TEST: replay_pages}, show={TEST: show_lines}, outcome=outcome)
