"""Report pages of a latency-vs-IOPS test (methodology 1.6, 1.9), and its comparison
across runs.

Per run: a summary page (parameters, the HOST-BOUND banner when points measured the
host, the NUMA statement, and per curve its peak and why it stopped), then per block
size and mix a page with mean latency against IOPS (one curve per thread count, the
target as a rule line), p99 and p99.9 against IOPS, and the table of the points.
Across runs: :func:`latency_iops_overlay` draws each run's curve per block size and mix.
Everything comes from the stored test result (``result["curves"]``).
"""

from __future__ import annotations

from collections.abc import Sequence

from ssdlab.errors import command
from ssdlab.plan.latency_iops import TEST
from ssdlab.plan.latency_records import (
    CurveRecord,
    LatencyIopsParams,
    LatencyIopsResult,
    PointRecord,
)
from ssdlab.plan.specs import cell_label
from ssdlab.report import charts as ch
from ssdlab.report.html import Page, banner, charts, esc, kv_table, note, table
from ssdlab.report.parts import head_left
from ssdlab.report.scales import fmt_value
from ssdlab.report.suite import Outcome, SuitePages, result_of
from ssdlab.report.text import quick_note, run_line
from ssdlab.store.records import RunData, TestData

WIDE = ch.Frame(width=900, height=330, right=170)
SMALL = ch.Frame(width=470, height=270, left=58, right=110, top=28, bottom=40)
#: host-bound points are overdrawn with black markers
HOST_BOUND_COLOUR = 6
METRICS = (("lat_mean_us", "mean"), ("lat_p99_us", "p99"), ("lat_p99_9_us", "p99.9"))



def _params(test: TestData) -> LatencyIopsParams:
    return test.params_as(LatencyIopsParams)


def _result(test: TestData) -> LatencyIopsResult:
    return result_of(test, LatencyIopsResult)


def _metric(p: PointRecord, metric: str) -> float | None:
    """One of :data:`METRICS` of a point (None: fio gave none)."""
    value: float | None = getattr(p, metric)
    return None if value is None else float(value)


def _g(value: object) -> str:
    return f"{value:g}" if isinstance(value, int | float) else "-"


def workloads(curves: Sequence[CurveRecord]) -> list[tuple[int, int]]:
    """(block size, read %) in the order they were run."""
    seen: dict[tuple[int, int], None] = {}
    for c in curves:
        seen[(c.block_bytes, c.read_pct)] = None
    return list(seen)


def _threads_text(threads: int) -> str:
    return f"{threads} thread{'s' if threads != 1 else ''}"


# ------------------------------------------------------------------------ charts


def _tip(curve_name: str, p: PointRecord, metric: str, name: str) -> str:
    flag = " HOST-BOUND" if p.host_bound else ""
    return (f"{curve_name}, QD {p.iodepth}: {fmt_value(p.iops, 0)} IOPS, "
            f"{name} {fmt_value(_metric(p, metric))} us{flag}")


def curve_series(
    name: str, curve: CurveRecord, metric: str, metric_name: str, colour_index: int
) -> ch.Series | None:
    pts = curve.points
    if not pts:
        return None
    return ch.Series(
        name, tuple(float(p.iops) for p in pts), tuple(_metric(p, metric) for p in pts),
        colour_index=colour_index, tips=tuple(_tip(name, p, metric, metric_name) for p in pts),
    )


def _host_bound_series(
    curves: Sequence[CurveRecord], metric: str, name: str
) -> ch.Series | None:
    marked = [(c, p) for c in curves for p in c.points if p.host_bound]
    if not marked:
        return None
    return ch.Series(
        "host-bound point", tuple(float(p.iops) for _, p in marked),
        tuple(_metric(p, metric) for _, p in marked), style="markers",
        colour_index=HOST_BOUND_COLOUR,
        tips=tuple(_tip(_threads_text(c.threads), p, metric, name) + ": "
                   + (p.host_bound_reason or "") for c, p in marked),
    )


def latency_chart(
    chart_id: str, title: str, curves: Sequence[CurveRecord], metric: str, metric_name: str,
    *, target_us: float | None, frame: ch.Frame,
) -> str:
    """``metric`` latency (us) against IOPS, one line per curve (its name: threads)."""
    series = []
    for i, curve in enumerate(curves):
        s = curve_series(_threads_text(curve.threads), curve, metric, metric_name, i)
        if s is not None:
            series.append(s)
    marks = _host_bound_series(curves, metric, metric_name)
    if marks is not None:
        series.append(marks)
    rules = [ch.Rule(target_us, f"target {target_us:g} us")] if target_us else []
    return ch.line_chart(
        chart_id, title, series, x_label="IOPS", y_label=f"{metric_name} latency (us)",
        y_unit="us", rules=rules, x_from_zero=True, frame=frame,
    )


# ------------------------------------------------------------------------ pages


def _status_banner(test: TestData, result: LatencyIopsResult) -> str:
    if test.status == "failed":
        return banner("failed", f"FAILED: {result.error or ''}; the points measured "
                      "before the failure are shown")
    if test.status == "interrupted":
        return banner("failed", "INTERRUPTED (Ctrl-C): the points completed before the "
                      "interruption are shown")
    if test.status == "running":
        return banner("failed", "INCOMPLETE: the run never finished this test (crash or "
                      "still running); the points stored so far are shown")
    return ""


def host_bound_banner(result: LatencyIopsResult) -> str:
    verdict = result.host_bound
    if verdict is not None and verdict.host_bound:
        return banner("not-steady", verdict.message)
    return ""


def numa_html(result: LatencyIopsResult) -> str:
    numa, pcie = result.numa, result.pcie
    parts = []
    if numa is not None:
        text = f"NUMA: {numa.message}"
        parts.append(banner("mismatch", "WARNING: " + text) if numa.mismatch else note(text))
    if pcie is not None:
        parts.append(note(
            f"PCIe: {pcie.address}, link {pcie.link_speed or '?'} x{pcie.link_width or '?'} "
            f"(maximum {pcie.max_link_speed or '?'} x{pcie.max_link_width or '?'})"))
    return "".join(parts)


def _params_rows(test: TestData) -> list[tuple[str, object]]:
    p = _params(test)
    rule = p.host_bound_rule
    ladder = ", ".join(str(q) for q in p.qd_ladder)
    extra = ", ".join(str(t) for t in p.extra_threads)
    return [
        ("threads", ", ".join(str(t) for t in p.threads)
         + (f" (then {extra} while below the target)" if extra else "")),
        ("queue depth per thread", ladder + (" (full base ladder)" if p.full_ladder else "")),
        ("per point", f"{p.warmup_s} s warm-up + {p.measure_s} s measured"),
        ("stop a curve at", f"mean latency >= {_g(p.target_latency_us)} us, or IOPS "
         f"rise < {_g(p.min_iops_rise_pct)} % over the previous queue depth"),
        ("host-bound rule", f"host CPU >= {_g(rule and rule.cpu_pct)} % and IOPS rise < "
         f"{_g(rule and rule.max_rise_pct)} %"),
        ("purge / preconditioning", f"{p.purge} / "
         f"{'2x the active range, 128 KiB sequential' if p.precondition else 'none'}"),
    ]


def _qd_range(curve: CurveRecord) -> str:
    qds = [p.iodepth for p in curve.points]
    if not qds:
        return "-"
    return f"{min(qds)}-{max(qds)}" if len(qds) > 1 else str(qds[0])


def _host_bound_points(curve: CurveRecord) -> int:
    return sum(1 for p in curve.points if p.host_bound)


def _summary_rows(curves: Sequence[CurveRecord]) -> tuple[list[list[str]], list[str]]:
    rows, classes = [], []
    for c in curves:
        hb = _host_bound_points(c)
        rows.append([
            esc(cell_label(c.block_bytes, c.read_pct)), esc(c.threads), esc(len(c.points)),
            esc(_qd_range(c)), esc(fmt_value(c.max_iops, 0)), esc(c.max_iops_qd or "-"),
            esc(fmt_value(c.max_iops_lat_mean_us, 1)), esc(str(hb) if hb else "-"),
            esc(c.stop.reason if c.stop is not None else "-"),
        ])
        classes.append("flag" if hb else "")
    return rows, classes


def summary_page(run: RunData, test: TestData, anchor: str) -> Page:
    result = _result(test)
    rows, classes = _summary_rows(result.curves)
    body = (
        _status_banner(test, result) + host_bound_banner(result) + numa_html(result)
        + kv_table(_params_rows(test))
        + "<h3>Curves</h3>"
        + table(("workload", "threads", "points", "QD", "peak IOPS", "at QD",
                 "mean us at peak", "host-bound points", "stopped because"),
                rows, row_classes=classes)
        + "".join(note(f"skipped {s.cell}: {s.reason}") for s in result.skipped)
        + note("Latency is fio's completion latency. Host CPU is the busy share of all "
               "CPUs over each point's measured period (/proc/stat); on an emulated SSD it "
               "includes the emulator's own CPU.")
    )
    return Page(anchor, f"{_params(test).title or 'Latency vs IOPS'}: summary", body,
                head_left(run), run.quick)


def _point_rows(curves: Sequence[CurveRecord]) -> tuple[list[list[str]], list[str]]:
    rows, classes = [], []
    for c in curves:
        for p in c.points:
            rows.append([
                esc(c.threads), esc(p.iodepth), esc(p.outstanding), esc(fmt_value(p.iops, 0)),
                *[esc(fmt_value(_metric(p, k), 1)) for k, _ in METRICS],
                esc(f"{fmt_value(p.usr_cpu_pct, 1)} / {fmt_value(p.sys_cpu_pct, 1)}"),
                esc(fmt_value(p.host.host_cpu_pct, 1)),
                esc(f"{fmt_value(p.host.host_usr_pct, 1)} / {fmt_value(p.host.host_sys_pct, 1)}"),
                esc("HOST-BOUND" if p.host_bound else "-"),
            ])
            classes.append("flag" if p.host_bound else "")
    return rows, classes


def workload_page(run: RunData, test: TestData, anchor: str, block: int, read_pct: int,
                  index: int) -> Page:
    label = cell_label(block, read_pct)
    result = _result(test)
    curves = [c for c in result.curves if c.block_bytes == block and c.read_pct == read_pct]
    target = _params(test).target_latency_us
    cid = f"{anchor}-w{index}"
    mean = latency_chart(f"{cid}-mean", f"{label}: mean latency against IOPS", curves,
                         "lat_mean_us", "mean", target_us=target, frame=WIDE)
    tails = [latency_chart(f"{cid}-{name.replace('.', '')}", f"{label}: {name} latency",
                           curves, key, name, target_us=None, frame=SMALL)
             for key, name in METRICS[1:]]
    rows, classes = _point_rows(curves)
    stops = [f"{_threads_text(c.threads)}: {c.stop.reason}" for c in curves
             if c.stop is not None]
    body = (
        _status_banner(test, result) + host_bound_banner(result)
        + note("One curve per thread count; each point is one queue depth per thread, "
               "rising along the curve. The dashed line is the target mean latency. "
               "Black markers: host-bound points.")
        + charts(mean) + charts(*tails, two=True)
        + "<h3>Points</h3>"
        + table(("threads", "QD", "outstanding", "IOPS", "mean us", "p99 us", "p99.9 us",
                 "fio usr / sys CPU %", "host CPU %", "host usr / sys %", "host-bound"),
                rows, row_classes=classes)
        + "".join(note(s) for s in stops)
    )
    return Page(f"{cid}", f"Latency vs IOPS: {label}", body, head_left(run), run.quick,
                toc=False)


def latency_iops_pages(run: RunData, test: TestData, anchor: str) -> list[Page]:
    """The pages of one stored latency-iops test."""
    curves = _result(test).curves
    if not curves and not test.rounds:
        return []
    pages = [summary_page(run, test, anchor)]
    for i, (block, read_pct) in enumerate(workloads(curves)):
        pages.append(workload_page(run, test, anchor, block, read_pct, i))
    return pages


# ------------------------------------------------------------------------ across runs


def _run_curves(run: RunData) -> list[CurveRecord]:
    return [c for t in run.tests if t.name == TEST for c in _result(t).curves]


def pick_curves(
    runs: Sequence[RunData], block: int, read_pct: int
) -> tuple[list[tuple[int, CurveRecord]], str]:
    """Each run's curve of one workload at the highest thread count all of them measured
    (else each run's highest, and a note saying so): [(run index, curve)], note."""
    per_run = {
        i: {c.threads: c for c in _run_curves(r)
            if c.block_bytes == block and c.read_pct == read_pct and c.points}
        for i, r in enumerate(runs)
    }
    per_run = {i: cs for i, cs in per_run.items() if cs}
    if not per_run:
        return [], ""
    common = set.intersection(*(set(cs) for cs in per_run.values()))
    if common:
        t = max(common)
        return [(i, cs[t]) for i, cs in per_run.items()], f"{_threads_text(t)} in every run"
    picked = [(i, cs[max(cs)]) for i, cs in per_run.items()]
    return picked, "no thread count common to all runs: each run's highest"


def latency_iops_overlay(runs: Sequence[RunData], labels: Sequence[str]) -> str:
    """HTML for the comparison page: per block size and mix, each run's curve (mean and
    p99.9 latency against IOPS). Empty when fewer than two runs have a latency-iops test."""
    with_test = [r for r in runs if _run_curves(r)]
    if len(with_test) < 2:
        return ""
    found: dict[tuple[int, int], None] = {}
    for r in runs:
        found.update((w, None) for w in workloads(_run_curves(r)))
    parts = []
    for n, (block, read_pct) in enumerate(found):
        picked, how = pick_curves(runs, block, read_pct)
        if len(picked) < 2:
            continue
        label = cell_label(block, read_pct)
        names = [f"{labels[i]} ({_threads_text(c.threads)})" for i, c in picked]
        svgs = [
            _overlay_chart(f"cmp-latiops-{n}-{key.replace('_', '')}",
                           f"{label}: {name} latency, all runs", picked, names, key, name)
            for key, name in (METRICS[0], METRICS[2])
        ]
        parts.append(f"<h4>{esc(label)}</h4>" + note(f"Curves: {how}.")
                     + charts(*svgs, two=True))
    if not parts:
        return ""
    return "<h3>Latency vs IOPS</h3>" + "".join(parts)


def _overlay_chart(chart_id: str, title: str, picked: Sequence[tuple[int, CurveRecord]],
                   names: Sequence[str], metric: str, metric_name: str) -> str:
    series = [s for (i, c), name in zip(picked, names, strict=True)
              if (s := curve_series(name, c, metric, metric_name, i)) is not None]
    return ch.line_chart(chart_id, title, series, x_label="IOPS",
                         y_label=f"{metric_name} latency (us)", y_unit="us", x_from_zero=True,
                         frame=SMALL)


# ------------------------------------------------------------------------ show and run's end


def show_lines(run: RunData, test: TestData) -> list[str]:
    p, result = test.params, _result(test)
    extra = ", ".join(str(t) for t in p.get("extra_threads", []))
    threads = ", ".join(str(t) for t in p.get("threads", [])) + (
        f" (then {extra} while below the target)" if extra else "")
    ladder = ", ".join(str(q) for q in p.get("qd_ladder", []))
    verdict = result.error or (result.host_bound.message if result.host_bound else "")
    lines = [f"  threads {threads}; queue depth per thread {ladder}; target mean latency "
             f"{_g(p.get('target_latency_us'))} us; purge {p.get('purge')}",
             f"  verdict: {verdict or test.status}"]
    if result.numa is not None:
        lines.append(f"  NUMA: {result.numa.message}")
    lines += [f"  skipped {s.cell}: {s.reason}" for s in result.skipped]
    for c in result.curves:
        peak = (f"peak {fmt_value(c.max_iops, 0)} IOPS at QD {c.max_iops_qd} "
                f"({fmt_value(c.max_iops_lat_mean_us, 1)} us mean)"
                if c.max_iops is not None else "no points")
        hb = _host_bound_points(c)
        flag = f", {hb} host-bound" if hb else ""
        lines.append(f"  {c.label}: QD {_qd_range(c)}, {peak}{flag}; stopped: "
                     f"{c.stop.reason if c.stop is not None else '-'}")
    return lines


def outcome(run: RunData, store_path: object) -> Outcome:
    test = next((t for t in run.tests if t.name == TEST), None)
    result = _result(test) if test is not None else LatencyIopsResult()
    lines = [run_line(run, store_path, quick_note(run, ": not a valid result"))]
    if result.host_bound is not None and result.host_bound.host_bound:
        lines.append(f"  {result.host_bound.message}")
    cmd = command()
    lines.append(f"  see them: {cmd} report {run.run_id} -o DIR    export: {cmd} export "
                 f"{run.run_id} --format json")
    failed = test is None or test.status == "failed"
    return Outcome(tuple(lines), f"test {TEST} failed: {result.error or ''}" if failed else None)


PAGES = SuitePages(
    pages={TEST: latency_iops_pages},
    show={TEST: show_lines},
    outcome=outcome,
    overlay=latency_iops_overlay,
)
