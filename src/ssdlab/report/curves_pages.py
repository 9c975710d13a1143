"""Report pages of curve runs (``ssdlab run curves``), their ``ssdlab show`` lines, what
``ssdlab run curves`` prints at the end, and their overlay in a comparison.

A summary page (the preset and its version, per workload the maximum rate and the
latency at the lowest and highest fraction), then per workload mean and p99 latency
against DELIVERED IOPS, and the table of its points with those short of their target
rate flagged. Across runs: :func:`curves_overlay` draws each run's mean-latency curve per
workload. Everything comes from the stored test results.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ssdlab.errors import command
from ssdlab.plan.curves import TEST, CurvesParams, CurvesResult, PointRecord, WorkloadRecord
from ssdlab.plan.results import Verdict
from ssdlab.report import charts as ch
from ssdlab.report.html import Page, banner, charts, esc, kv_table, note, table
from ssdlab.report.parts import WIDE, head_left
from ssdlab.report.scales import fmt_value
from ssdlab.report.suite import Outcome, SuitePages, result_of
from ssdlab.report.text import num, quick_note, run_line, text_table
from ssdlab.store.records import RunData, TestData

SHORT_COLOUR = 6


def _mean(q: PointRecord) -> float | None:
    return q.lat_mean_us


def _p99(q: PointRecord) -> float | None:
    return q.lat_p99_us


#: the latencies drawn against the delivered IOPS
METRICS: tuple[tuple[str, Callable[[PointRecord], float | None]], ...] = (
    ("mean", _mean), ("p99", _p99))


def curve_points(workload: WorkloadRecord) -> list[PointRecord]:
    """The plotted points: the fractions and the unthrottled 120 % (not the max-rate run)."""
    return [p for p in workload.points if p.kind != "max"]


def _label(p: PointRecord) -> str:
    if p.kind == "max":
        return "max-rate run"
    if p.kind == "unthrottled":
        return f"{p.fraction_pct} % (unthrottled)"
    return f"{p.fraction_pct} %"


def _tip(name: str, p: PointRecord, metric: Callable[[PointRecord], float | None]) -> str:
    short = " SHORT of target" if p.short else ""
    return (f"{name} at {_label(p)}: {fmt_value(p.iops, 0)} IOPS delivered, "
            f"{fmt_value(metric(p))} us{short}")


def _iops(points: list[PointRecord]) -> tuple[float, ...]:
    return tuple(float(p.iops) for p in points)


def latency_chart(chart_id: str, w: WorkloadRecord) -> str:
    pts = curve_points(w)
    series = [ch.Series(name, _iops(pts), tuple(metric(p) for p in pts), colour_index=i,
                        tips=tuple(_tip(name, p, metric) for p in pts))
              for i, (name, metric) in enumerate(METRICS)]
    short = [p for p in pts if p.short]
    if short:
        series.append(ch.Series("short of target rate", _iops(short),
                                tuple(p.lat_mean_us for p in short),
                                style="markers", colour_index=SHORT_COLOUR,
                                tips=tuple(_tip("mean", p, _mean) for p in short)))
    return ch.line_chart(chart_id, f"{w.title}: latency against delivered IOPS",
                         series, x_label="delivered IOPS", y_label="latency (us)",
                         y_unit="us", x_from_zero=True, frame=WIDE)


def _status(test: TestData, result: CurvesResult) -> str:
    if test.status == "failed":
        return banner("failed", f"FAILED: {result.error or ''}; the points measured "
                      "before the failure are shown")
    if test.status in ("interrupted", "running"):
        return banner("failed", f"{test.status.upper()}: the points stored so far are shown")
    return ""


def _points_table(w: WorkloadRecord) -> str:
    rows, classes = [], []
    for p in w.points:
        target, delivered = p.target_iops, p.delivered_pct
        rows.append([esc(_label(p)), fmt_value(target, 0) if target else "unthrottled",
                     fmt_value(p.iops, 0),
                     "-" if delivered is None else f"{delivered:.1f} %",
                     f"{p.bw_bytes_per_s / 1e6:,.1f} MB/s",
                     fmt_value(p.lat_mean_us), fmt_value(p.lat_p99_us),
                     esc(p.fio_rate or "-"), _host_cpu(p), "SHORT" if p.short else ""])
        classes.append("failed" if p.short else "")
    return table(("point", "target IOPS", "delivered IOPS", "delivered", "MB/s",
                  "mean (us)", "p99 (us)", "fio rate per job", "host CPU (steal)", ""), rows,
                 row_classes=classes)


def _host_cpu(p: PointRecord) -> str:
    """Host-wide CPU busy share during the point, and the hypervisor's steal share."""
    busy, steal = p.host_cpu_pct, p.host_steal_pct
    if busy is None:
        return "-"
    return f"{busy:.0f} %" + ("" if steal is None else f" ({steal:.0f} %)")


def _workload_row(w: WorkloadRecord) -> list[str]:
    fr = [q for q in w.points if q.kind == "fraction"]
    lo, hi = (fr[0], fr[-1]) if fr else (None, None)
    return [esc(w.title), fmt_value(w.max_iops, 0),
            fmt_value(lo.lat_mean_us if lo else None),
            fmt_value(hi.lat_mean_us if hi else None),
            fmt_value(hi.lat_p99_us if hi else None), str(sum(1 for q in w.points if q.short))]


def _summary_page(run: RunData, test: TestData, result: CurvesResult, anchor: str) -> Page:
    p = test.params_as(CurvesParams)
    preset, fill = p.identity, p.fill_region_pct
    body = _status(test, result) + kv_table([
        ("preset", f"{preset.preset_title} ({preset.preset} version "
                   f"{preset.preset_version})"),
        ("profile", f"{p.profile}{' (QUICK)' if p.quick else ''}"),
        ("per point", f"{p.ramp_s} s ramp + {p.measure_s} s measured"),
        ("fractions of the maximum rate", ", ".join(f"{f} %" for f in p.fractions_pct)
         + (", 120 % unthrottled" if p.with_120 else "")),
        ("region", f"{fmt_value(p.region.size_bytes, 0)} bytes"
                   + (f" ({fill} % of the target, after a whole-target fill)" if fill else "")),
        ("flagged", f"points delivering < {p.min_delivered_pct} % of their target "
                    f"({result.short_points} flagged)"),
    ]) + "<h3>Workloads</h3>" + table(
        ("workload", "max IOPS", "mean at lowest (us)", "mean at 100 % (us)",
         "p99 at 100 % (us)", "short points"), [_workload_row(w) for w in result.workloads])
    return Page(anchor, "Curves (vdbench style)", body, head_left(run), run.quick)


def curves_pages(run: RunData, test: TestData, anchor: str) -> list[Page]:
    result = result_of(test, CurvesResult)
    pages = [_summary_page(run, test, result, anchor)]
    for i, w in enumerate(result.workloads):
        body = (note(w.describe) + note(f"Source: {w.source}. fio: "
                f"{w.jobs} job(s) x QD {w.iodepth}.")
                + charts(latency_chart(f"{anchor}-w{i}", w)) + _points_table(w))
        pages.append(Page(f"{anchor}-w{i}", f"Curve: {w.title}", body,
                          head_left(run), run.quick))
    return pages


# ------------------------------------------------------------------------ comparison


def curves_overlay(runs: Sequence[RunData], labels: Sequence[str]) -> str:
    """HTML for the comparison page: per workload, every run's mean latency against
    delivered IOPS. Empty when no workload was run by two runs or more."""
    by_workload: dict[str, list[tuple[str, WorkloadRecord]]] = {}
    for run, label in zip(runs, labels, strict=True):
        for test in run.tests:
            if test.name == TEST:
                for w in result_of(test, CurvesResult).workloads:
                    by_workload.setdefault(w.name, []).append((label, w))
    parts = []
    for i, (name, entries) in enumerate(by_workload.items()):
        if len(entries) < 2:
            continue
        series = []
        for k, (label, w) in enumerate(entries):
            pts = curve_points(w)
            series.append(ch.Series(label, _iops(pts), tuple(p.lat_mean_us for p in pts),
                                    colour_index=k,
                                    tips=tuple(_tip(label, p, _mean) for p in pts)))
        title = entries[0][1].title or name
        parts.append(charts(ch.line_chart(
            f"cmp-curves-{i}", f"{title}: mean latency against delivered IOPS, all runs",
            series, x_label="delivered IOPS", y_label="mean latency (us)", y_unit="us",
            x_from_zero=True, frame=WIDE)))
    return "<h3>Curves (vdbench style)</h3>" + "".join(parts) if parts else ""


# ------------------------------------------------------------------------ show, run


def _point_name(q: PointRecord) -> str:
    if q.kind == "max":
        return "max rate"
    return f"{num(q.fraction_pct)} %" if q.fraction_pct is not None else q.kind


def workload_tables(result: CurvesResult) -> list[str]:
    """Per workload, its points as ``ssdlab show`` prints them."""
    lines: list[str] = []
    for w in result.workloads:
        if not w.points:  # its max-rate run failed or was stopped
            lines.append(f"  {w.title or w.name}: no point measured")
            continue
        body = [[_point_name(q), num(q.target_iops), num(q.iops), num(q.delivered_pct, 1),
                 num(q.lat_mean_us, 1), num(q.lat_p99_us, 1), num(q.host_cpu_pct, 0),
                 num(q.host_steal_pct, 0), "SHORT" if q.short else ""] for q in w.points]
        lines += [f"  {w.title or w.name} (max {num(w.max_iops)} IOPS):",
                  *text_table(["point", "target IOPS", "delivered IOPS", "delivered %",
                           "mean us", "p99 us", "host CPU %", "steal %", "flag"], body)]
    return lines


def show_lines(run: RunData, test: TestData) -> list[str]:
    p, result = test.params_as(CurvesParams), result_of(test, CurvesResult)
    verdict = result.error if result.error is not None else test.status
    return [f"  preset {p.identity.preset} v{p.identity.preset_version}, purge "
            f"{p.purge}", f"  verdict: {verdict}", *workload_tables(result)]


def outcome(run: RunData, store_path: object) -> Outcome:
    test = run.test(TEST)
    lines = [run_line(run, store_path, quick_note(run, ": not a valid result")),
             *(f"  {name}: {Verdict.from_json(verdict, name).message}"
               for name, verdict in test.verdicts.items() if isinstance(verdict, dict)),
             f"  see them: {command()} report {run.run_id} -o DIR"]
    error = result_of(test, CurvesResult).error
    failure = f"test curves failed: {error or ''}" if test.status == "failed" else None
    return Outcome(tuple(lines), failure)


PAGES = SuitePages(pages={TEST: curves_pages}, show={TEST: show_lines}, outcome=outcome,
                   overlay=curves_overlay)
