"""The peak finder's report page, ``ssdlab show`` lines and end-of-run table, all from
the stored result (docs/peak.md)."""

from __future__ import annotations

from collections.abc import Sequence

from ssdlab.plan.peak import WORKLOADS, PeakParams, PeakResult, PointRecord
from ssdlab.report import charts as ch
from ssdlab.report.html import Page, banner, charts, esc, kv_table, note, table
from ssdlab.report.parts import head_left
from ssdlab.report.suite import Outcome, SuitePages, result_of
from ssdlab.report.text import failed_tests_error, num, quick_note, run_line, see_line, text_table
from ssdlab.store.records import RunData, TestData

MB = 1e6


def config_text(p: PointRecord) -> str:
    """``io_uring+fixedbufs 4 x QD 32, split``."""
    return f"{p.engine} {p.threads} x QD {p.iodepth}" + (", split" if p.split else "")


def _lat(p: PointRecord | None) -> str:
    if p is None:
        return "-"
    return f"mean {num(p.lat_mean_us, 1)} us, p99 {num(p.lat_p99_us, 1)} us"


def _speed(p: PointRecord | None) -> str:
    if p is None:
        return "-"
    return f"{num(p.iops)} IOPS, {num(p.bw_bytes_per_s / MB, 1)} MB/s"


def _summary(r: PeakResult) -> list[tuple[str, object]]:
    knee = r.knee
    return [
        ("peak", _speed(r.peak)),
        ("configuration", config_text(r.peak) if r.peak else "-"),
        ("fast paths", ", ".join(r.peak.fast_paths) or "none" if r.peak else "-"),
        ("latency at the peak", _lat(r.peak)),
        ("knee", f"{config_text(knee)}: {_speed(knee)}, {_lat(knee)}" if knee else "-"),
        ("", r.knee_message),
        ("limited by", f"{r.limited_by}: {r.host_message}"),
        ("pinning", r.pinning),
        ("latency ceiling", r.ceiling),
        *([("not the peak", r.unconfirmed)] if r.unconfirmed else []),
        ("search", f"{r.probes} probes; stopped: {r.stopped}"),
    ]


def _chart(r: PeakResult, anchor: str) -> str:
    engines = list(dict.fromkeys(s.engine for s in r.steps if s.iops > 0))
    series = []
    for i, engine in enumerate(engines):
        pts = sorted((s.threads * s.iodepth, s.iops) for s in r.steps
                     if s.engine == engine and s.iops > 0 and not s.split)
        if pts:
            series.append(ch.Series(engine, tuple(float(x) for x, _ in pts),
                                    tuple(y for _, y in pts), style="markers", colour_index=i))
    if not series:
        return ""
    return ch.line_chart(f"{anchor}-peak", "IOPS against outstanding I/Os (jobs x QD)",
                         series, x_label="outstanding I/Os", y_label="IOPS", y_unit="IOPS",
                         y_log=False)


def _steps_table(steps: Sequence[PointRecord]) -> str:
    rows = [[esc(s.round_no), esc(s.phase), esc(config_text(s)), esc(num(s.iops)),
             esc(num(s.bw_bytes_per_s / MB, 1)), esc(num(s.lat_mean_us, 1)),
             esc(num(s.lat_p99_us, 1)), esc(num(s.host_cpu_pct, 1)), esc(s.outcome)]
            for s in steps]
    return table(["probe", "phase", "configuration", "IOPS", "MB/s", "mean (us)", "p99 (us)",
                  "host CPU %", "outcome"], rows)


def peak_page(run: RunData, test: TestData, anchor: str) -> list[Page]:
    r = result_of(test, PeakResult)
    title = test.params_as(PeakParams).title or f"Peak: {test.name}"
    if not r.found:
        body = banner("mismatch", r.verdict) if test.status == "complete" else \
            banner("failed", f"{test.status.upper()}: {r.error or r.message or 'no data'}")
        return [Page(anchor, f"{title}: no peak", body + kv_table(
            [("latency ceiling", r.ceiling), ("search", f"{r.probes} probes; stopped: "
                                                        f"{r.stopped}")])
            + _steps_table(r.steps), head_left(run), run.quick)]
    bound = banner("mismatch", "HOST-BOUND: " + r.host_message) if r.limited_by == "host" \
        else note(r.host_message)
    body = (kv_table(_summary(r)) + bound + charts(_chart(r, anchor))
            + "<h3>Every probe, in the order the search made it</h3>" + _steps_table(r.steps))
    return [Page(anchor, title, body, head_left(run), run.quick)]


def show_lines(run: RunData, test: TestData) -> list[str]:
    r = result_of(test, PeakResult)
    if not r.found:
        return [f"  {r.verdict}" if test.status == "complete" else
                f"  {r.error or r.message or test.status}"]
    return [f"  {r.message}", f"  latency at the peak: {_lat(r.peak)}",
            f"  {r.knee_message}", f"  {r.host_message}"]


def peak_table(run: RunData) -> list[str]:
    """The workloads' peaks, then one line per workload without a peak (why) or with
    better points whose second probe broke the ceiling."""
    rows, notes = [], []
    for t in run.tests:
        r = result_of(t, PeakResult)
        p = r.peak
        none = "no peak" if t.status == "complete" else r.error or r.message or t.status
        rows.append([t.name, num(p.iops) if p else "-",
                     num(p.bw_bytes_per_s / MB, 1) if p else "-",
                     config_text(p) if p else none,
                     num(p.lat_mean_us, 1) if p else "-", num(p.lat_p99_us, 1) if p else "-",
                     f"{r.knee.threads} x QD {r.knee.iodepth}" if r.knee else "-",
                     r.limited_by or "-"])
        if p is None and t.status == "complete":
            notes.append(f"{t.name}: {r.verdict}")
        elif r.unconfirmed:
            notes.append(f"{t.name}: {r.unconfirmed}")
    return [*text_table(["workload", "IOPS", "MB/s", "configuration", "mean us", "p99 us",
                         "knee", "limited by"], rows), *notes]


def outcome(run: RunData, store_path: object) -> Outcome:
    lines = (*peak_table(run), run_line(run, store_path, quick_note(run, "")), see_line(run))
    return Outcome(lines, failed_tests_error(run))


PAGES = SuitePages(pages={w.name: peak_page for w in WORKLOADS},
                   show={w.name: show_lines for w in WORKLOADS}, outcome=outcome)
