"""Report page of the SLC-cache probe: throughput (MB/s) against bytes written, the cliffs
marked, the cache size estimate stated; on the emulated SSD, its configured cache beside
the estimate. Everything comes from the stored rounds (one per slice of bytes) and result.
"""

from __future__ import annotations

from typing import Any

from ssdlab.plan.units import format_bytes
from ssdlab.report import charts as ch
from ssdlab.report.html import Page, banner, charts, esc, kv_table, note, table
from ssdlab.report.run_pages import head_left
from ssdlab.report.scales import fmt_value
from ssdlab.store.records import RunData, TestData

MB = 1e6
GIB = float(1 << 30)
MIB = float(1 << 20)
MAX_POINTS = 600  # per series on the chart; the store keeps every slice


def _unit(test: TestData) -> tuple[str, float]:
    """GiB on the x axis, MiB when less than 1 GiB was written (a small emulated drive)."""
    written = max((float(r.cells[0].get("bytes_written", 0)) for r in test.rounds
                   if r.status == "ok" and r.cells), default=0.0)
    return ("GiB", GIB) if written >= GIB else ("MiB", MIB)


def _curve(test: TestData, pass_no: int) -> list[tuple[float, float]]:
    points = [(float(c["bytes_written"]), float(c["bw_bytes_per_s"]))
              for r in test.rounds if r.status == "ok" for c in r.cells[:1]
              if c.get("pass") == pass_no and isinstance(c.get("bw_bytes_per_s"), int | float)]
    if len(points) <= MAX_POINTS:
        return points
    step = -(-len(points) // MAX_POINTS)
    return [(points[min(i + step, len(points)) - 1][0],
             sum(p[1] for p in points[i:i + step]) / len(points[i:i + step]))
            for i in range(0, len(points), step)]


def _passes(test: TestData) -> list[dict[str, Any]]:
    passes = test.result.get("passes") if isinstance(test.result, dict) else None
    return [p for p in passes or [] if isinstance(p, dict)]


def _chart(test: TestData, anchor: str) -> str:
    unit, scale = _unit(test)
    series, marks = [], []
    for i, p in enumerate(_passes(test)):
        n = int(p.get("pass", i + 1))
        pts = _curve(test, n)
        name = "first write" if n == 1 else f"after {p.get('idle_before_s', 0):g} s idle"
        series.append(ch.Series(name, tuple(b / scale for b, _ in pts),
                                tuple(r / MB for _, r in pts), style="line", colour_index=i))
        for k, c in enumerate(p.get("cliffs", [])):
            label = f"{'cache' if k == 0 else 'cliff'} {fmt_value(c['at_bytes'] / scale)} {unit}"
            if n > 1:
                label += " (repeat)"
            marks.append(ch.Rule(float(c["at_bytes"]) / scale, label, "4 3" if n == 1 else "1 3"))
    return ch.line_chart(
        f"{anchor}-slc", "Sequential write throughput against data written", series,
        x_label=f"data written since the purge ({unit})", y_label="throughput (MB/s)",
        y_unit="MB/s", y_log=False, x_rules=marks, x_from_zero=True,
    )


def _cliff_rows(test: TestData) -> list[list[str]]:
    rows = []
    for p in _passes(test):
        for k, c in enumerate(p.get("cliffs", [])):
            at = float(c["at_bytes"])
            rows.append([
                esc(p.get("pass")), esc("cache estimate" if k == 0 else f"cliff {k + 1}"),
                esc(format_bytes(at)), esc(f"{at / 1e9:,.2f}"),
                esc(fmt_value(c["rate_before_bytes_per_s"] / MB, 0)),
                esc(fmt_value(c["rate_after_bytes_per_s"] / MB, 0)),
                esc(f"x{c['ratio']:.2f}"),
            ])
    return rows


def _parameters(run: RunData, test: TestData) -> list[tuple[str, object]]:
    p = test.params
    purge = next((s.detail for s in test.steps if s.kind == "purge"), None)
    purge_text = (f"{purge.get('method')} ({'ok' if purge.get('ok') else 'FAILED'})"
                  if purge else "none")
    log = test.result.get("log") if isinstance(test.result, dict) else None
    return [
        ("write", f"{format_bytes(p.get('write_bytes', 0))} sequential from offset 0, "
                  f"{format_bytes(p.get('block_bytes', 0))} blocks, 1 thread x QD "
                  f"{p.get('iodepth')}, no preconditioning"),
        ("purge (whole target)", purge_text),
        ("idle after the purge", f"{p.get('settle_s', 0):g} s"),
        ("bandwidth logged by fio", log),
        ("points", f"one per {format_bytes(p.get('slice_bytes', 0))} written "
                   f"({sum(1 for r in test.rounds if r.status == 'ok')} stored)"),
        ("cliff", f"a drop of at least {p.get('min_drop_pct', 0):g} % of the rate "
                  "before it; the first one is the cache size estimate"),
        ("repeat write", f"after {p.get('repeat_after_s', 0):g} s idle"
         if p.get("repeat_after_s") else "none"),
    ]


def _truth(test: TestData) -> str:
    truth = test.result.get("ground_truth") if isinstance(test.result, dict) else None
    if not isinstance(truth, dict):
        return ""
    slc = truth.get("slc_bytes")
    error = truth.get("estimate_error_pct")
    rows: list[tuple[str, object]] = [
        ("configured SLC cache", f"{format_bytes(slc)} ({slc:,} bytes)"
         if isinstance(slc, int) else "-"),
        ("estimate - configured", f"{error:+.1f} %" if isinstance(error, int | float) else
         "no estimate"),
    ]
    return "<h3>Ground truth of the emulated SSD</h3>" + kv_table(rows)


def slc_probe_pages(run: RunData, test: TestData, anchor: str) -> list[Page]:
    result = test.result if isinstance(test.result, dict) else {}
    title = "SLC cache probe"
    if test.status == "failed" or not test.rounds:
        text = f"{test.status.upper()}: {result.get('error', 'no data')}"
        return [Page(anchor, f"{title}: no results", banner("failed", text), head_left(run),
                     run.quick)]
    parts = []
    message = str(result.get("message", ""))
    if result.get("cliff_found"):
        parts.append(f'<p class="verdict steady">{esc(message)}</p>')
    else:
        parts.append(banner("not-steady", f"NO CLIFF FOUND: {message}"))
    if result.get("recovery"):
        parts.append(f'<p class="verdict">{esc(result["recovery"])}</p>')
    parts.append(charts(_chart(test, anchor)))
    parts.append(note("Each point is the throughput over one slice of bytes (MB/s = 10^6 "
                      "bytes/s); dashed vertical lines mark the cliffs found, the first is the "
                      "cache size estimate."))
    rows = _cliff_rows(test)
    if rows:
        parts.append("<h3>Cliffs</h3>" + table(
            ("pass", "cliff", "written", "GB", "MB/s before", "MB/s after", "ratio"), rows))
    parts.append(_truth(test))
    parts.append("<h3>How it was measured</h3>" + kv_table(_parameters(run, test)))
    return [Page(anchor, title, "".join(parts), head_left(run), run.quick)]
