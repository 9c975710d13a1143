"""Report pages of curve runs (``ssdlab run curves``) and trace replays (``run replay``).

Curves: a summary page (the preset and its version, per workload the maximum rate and
the latency at the lowest and highest fraction), then per workload mean and p99 latency
against DELIVERED IOPS, and the table of its points with those short of their target
rate flagged. Replay: the trace, the measured IOPS, MB/s and latency, and the IOPS
timeline. Across runs: :func:`curves_overlay` draws each run's mean-latency curve per
workload. Everything comes from the stored test results.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ssdlab.report import charts as ch
from ssdlab.report.html import Page, banner, charts, esc, kv_table, note, table
from ssdlab.report.run_pages import head_left
from ssdlab.report.scales import fmt_value
from ssdlab.store.records import RunData, TestData

WIDE = ch.Frame(width=900, height=330, right=170)
SHORT_COLOUR = 6
METRICS = (("lat_mean_us", "mean"), ("lat_p99_us", "p99"))


def _num(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) \
        else None


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: object) -> list[dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def workloads_of(test: TestData) -> list[dict[str, Any]]:
    result = test.result if isinstance(test.result, dict) else {}
    return _list(result.get("workloads"))


def curve_points(workload: dict[str, Any]) -> list[dict[str, Any]]:
    """The plotted points: the fractions and the unthrottled 120 % (not the max-rate run)."""
    return [p for p in _list(workload.get("points")) if p.get("kind") != "max"
            and _num(p.get("iops")) is not None]


def _label(p: dict[str, Any]) -> str:
    if p.get("kind") == "max":
        return "max-rate run"
    if p.get("kind") == "unthrottled":
        return f"{p.get('fraction_pct')} % (unthrottled)"
    return f"{p.get('fraction_pct')} %"


def _tip(name: str, p: dict[str, Any], metric: str) -> str:
    short = " SHORT of target" if p.get("short") else ""
    return (f"{name} at {_label(p)}: {fmt_value(_num(p.get('iops')), 0)} IOPS delivered, "
            f"{fmt_value(_num(p.get(metric)))} us{short}")


def latency_chart(chart_id: str, w: dict[str, Any]) -> str:
    pts = curve_points(w)
    series = [ch.Series(name, tuple(float(p["iops"]) for p in pts),
                        tuple(_num(p.get(metric)) for p in pts), colour_index=i,
                        tips=tuple(_tip(name, p, metric) for p in pts))
              for i, (metric, name) in enumerate(METRICS)]
    short = [p for p in pts if p.get("short")]
    if short:
        series.append(ch.Series("short of target rate", tuple(float(p["iops"]) for p in short),
                                tuple(_num(p.get("lat_mean_us")) for p in short),
                                style="markers", colour_index=SHORT_COLOUR,
                                tips=tuple(_tip("mean", p, "lat_mean_us") for p in short)))
    return ch.line_chart(chart_id, f"{w.get('title')}: latency against delivered IOPS",
                         series, x_label="delivered IOPS", y_label="latency (us)",
                         y_unit="us", x_from_zero=True, frame=WIDE)


def _status(test: TestData) -> str:
    result = test.result if isinstance(test.result, dict) else {}
    if test.status == "failed":
        return banner("failed", f"FAILED: {result.get('error', '')}; the points measured "
                      "before the failure are shown")
    if test.status in ("interrupted", "running"):
        return banner("failed", f"{test.status.upper()}: the points stored so far are shown")
    return ""


def _points_table(w: dict[str, Any]) -> str:
    rows, classes = [], []
    for p in _list(w.get("points")):
        target = _num(p.get("target_iops"))
        delivered = _num(p.get("delivered_pct"))
        bw = _num(p.get("bw_bytes_per_s"))
        rows.append([esc(_label(p)), fmt_value(target, 0) if target else "unthrottled",
                     fmt_value(_num(p.get("iops")), 0),
                     "-" if delivered is None else f"{delivered:.1f} %",
                     "-" if bw is None else f"{bw / 1e6:,.1f} MB/s",
                     fmt_value(_num(p.get("lat_mean_us"))), fmt_value(_num(p.get("lat_p99_us"))),
                     esc(p.get("fio_rate") or "-"), _host_cpu(p),
                     "SHORT" if p.get("short") else ""])
        classes.append("failed" if p.get("short") else "")
    return table(("point", "target IOPS", "delivered IOPS", "delivered", "MB/s",
                  "mean (us)", "p99 (us)", "fio rate per job", "host CPU (steal)", ""), rows,
                 row_classes=classes)


def _host_cpu(p: dict[str, Any]) -> str:
    """Host-wide CPU busy share during the point, and the hypervisor's steal share."""
    busy, steal = _num(p.get("host_cpu_pct")), _num(p.get("host_steal_pct"))
    if busy is None:
        return "-"
    return f"{busy:.0f} %" + ("" if steal is None else f" ({steal:.0f} %)")


def _summary_page(run: RunData, test: TestData, anchor: str) -> Page:
    p = test.params
    result = test.result if isinstance(test.result, dict) else {}
    region = _dict(p.get("region"))
    fill = p.get("fill_region_pct")
    rows = []
    for w in workloads_of(test):
        fr = [q for q in _list(w.get("points")) if q.get("kind") == "fraction"]
        lo, hi = (fr[0], fr[-1]) if fr else ({}, {})
        short = sum(1 for q in _list(w.get("points")) if q.get("short"))
        rows.append([esc(w.get("title")), fmt_value(_num(w.get("max_iops")), 0),
                     fmt_value(_num(lo.get("lat_mean_us"))), fmt_value(_num(hi.get("lat_mean_us"))),
                     fmt_value(_num(hi.get("lat_p99_us"))), str(short)])
    body = _status(test) + kv_table([
        ("preset", f"{p.get('preset_title')} ({p.get('preset')} version "
                   f"{p.get('preset_version')})"),
        ("profile", f"{p.get('profile')}{' (QUICK)' if p.get('quick') else ''}"),
        ("per point", f"{p.get('ramp_s')} s ramp + {p.get('measure_s')} s measured"),
        ("fractions of the maximum rate", ", ".join(f"{f} %" for f in p.get(
            "fractions_pct", [])) + (", 120 % unthrottled" if p.get("with_120") else "")),
        ("region", f"{fmt_value(_num(region.get('size_bytes', 0)), 0)} bytes"
                   + (f" ({fill} % of the target, after a whole-target fill)" if fill else "")),
        ("flagged", f"points delivering < {p.get('min_delivered_pct')} % of their target "
                    f"({result.get('short_points', 0)} flagged)"),
    ]) + "<h3>Workloads</h3>" + table(
        ("workload", "max IOPS", "mean at lowest (us)", "mean at 100 % (us)",
         "p99 at 100 % (us)", "short points"), rows)
    return Page(anchor, "Curves (vdbench style)", body, head_left(run), run.quick)


def curves_pages(run: RunData, test: TestData, anchor: str) -> list[Page]:
    pages = [_summary_page(run, test, anchor)]
    for i, w in enumerate(workloads_of(test)):
        body = (note(str(w.get("describe", ""))) + note(f"Source: {w.get('source')}. fio: "
                f"{w.get('jobs')} job(s) x QD {w.get('iodepth')}.")
                + charts(latency_chart(f"{anchor}-w{i}", w)) + _points_table(w))
        pages.append(Page(f"{anchor}-w{i}", f"Curve: {w.get('title')}", body,
                          head_left(run), run.quick))
    return pages


# ------------------------------------------------------------------------ replay


def replay_pages(run: RunData, test: TestData, anchor: str) -> list[Page]:
    r = test.result if isinstance(test.result, dict) else {}
    p = test.params
    trace = _dict(p.get("trace"))
    cell = _dict(r.get("cell"))
    kind = "reference" if test.status == "complete" else "failed"
    message = str(r.get("message") or r.get("error") or test.status)
    timing = ("no stalls (as fast as possible)" if p.get("no_stall") else
              f"the trace's timing at {p.get('time_scale_pct')} % speed")
    bw = _num(cell.get("bw_bytes_per_s"))
    body = banner(kind, message) + kv_table([
        ("trace", f"{trace.get('path')} ({trace.get('format')})"),
        ("trace content", f"{trace.get('ios', 0):,} I/Os: {trace.get('reads', 0):,} reads, "
                          f"{trace.get('writes', 0):,} writes, {trace.get('trims', 0):,} trims"),
        ("extent", f"{trace.get('extent_bytes', 0):,} bytes"),
        ("replayed with", f"{timing}, queue depth {p.get('iodepth')}"),
    ]) + table(("IOPS", "MB/s", "mean (us)", "p50 (us)", "p99 (us)", "p99.9 (us)", "max (us)"),
               [[fmt_value(_num(cell.get("iops")), 0),
                 "-" if bw is None else f"{bw / 1e6:,.1f}",
                 *(fmt_value(_num(cell.get(k))) for k in (
                     "lat_mean_us", "lat_p50_us", "lat_p99_us", "lat_p99_9_us",
                     "lat_max_us"))]])
    series = _list(r.get("timeline"))
    if series:
        body += charts(ch.line_chart(
            f"{anchor}-tl", "IOPS timeline", [
                ch.Series(name, tuple(float(q["t_s"]) for q in series),
                          tuple(_num(q.get(key)) for q in series), colour_index=i)
                for i, (key, name) in enumerate((("iops", "total"), ("read_iops", "read"),
                                                 ("write_iops", "write")))],
            x_label="seconds", y_label="IOPS", frame=WIDE))
    elif r.get("timeline_note"):
        body += note(str(r["timeline_note"]))
    return [Page(anchor, "Trace replay", body, head_left(run), run.quick)]


# ------------------------------------------------------------------------ comparison


def curves_overlay(runs: Sequence[RunData], labels: Sequence[str]) -> str:
    """HTML for the comparison page: per workload, every run's mean latency against
    delivered IOPS. Empty when no workload was run by two runs or more."""
    by_workload: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for run, label in zip(runs, labels, strict=True):
        for test in run.tests:
            if test.name == "curves":
                for w in workloads_of(test):
                    by_workload.setdefault(str(w.get("name")), []).append((label, w))
    parts = []
    for i, (name, entries) in enumerate(by_workload.items()):
        if len(entries) < 2:
            continue
        series = []
        for k, (label, w) in enumerate(entries):
            pts = curve_points(w)
            series.append(ch.Series(label, tuple(float(p["iops"]) for p in pts),
                                    tuple(_num(p.get("lat_mean_us")) for p in pts),
                                    colour_index=k,
                                    tips=tuple(_tip(label, p, "lat_mean_us") for p in pts)))
        title = str(entries[0][1].get("title", name))
        parts.append(charts(ch.line_chart(
            f"cmp-curves-{i}", f"{title}: mean latency against delivered IOPS, all runs",
            series, x_label="delivered IOPS", y_label="mean latency (us)", y_unit="us",
            x_from_zero=True, frame=WIDE)))
    return "<h3>Curves (vdbench style)</h3>" + "".join(parts) if parts else ""
