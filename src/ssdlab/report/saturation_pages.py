"""Report pages of the saturation suite: Write Saturation and Host Idle Recovery.

WSAT: IOPS against time and against capacity written (fio's averaged IOPS log, the
per-round averages as points), the transition marked, and the latency percentiles of
every round (from its fio latency histogram) against time. On the emulated SSD, where its
ground truth says garbage collection started is marked too. HIR: the IOPS of every burst
and baseline round in order, and a table per wait state with its verdict.
"""

from __future__ import annotations

from collections.abc import Sequence

from ssdlab.plan.saturation import HIR, WSAT, HirParams, HirResult, WsatParams, WsatResult
from ssdlab.report import charts as ch
from ssdlab.report.html import NOT_STEADY_TEXT, Page, banner, charts, esc, kv_table, note, table
from ssdlab.report.parts import head_left
from ssdlab.report.scales import fmt_value
from ssdlab.report.suite import Outcome, SuitePages, result_of
from ssdlab.report.text import failed_tests_error, quick_note, run_line, see_line
from ssdlab.store.records import RoundData, RunData, TestData

GIB = float(1 << 30)
MAX_POINTS = 600  # per series on a chart: more only costs layout time


def downsample(points: list[tuple[float, float, float]], limit: int = MAX_POINTS
               ) -> list[tuple[float, float, float]]:
    """Average consecutive points into at most ``limit`` (time, bytes and IOPS alike)."""
    if len(points) <= limit:
        return points
    step = -(-len(points) // limit)
    out = []
    for i in range(0, len(points), step):
        chunk = points[i : i + step]
        out.append((chunk[-1][0], chunk[-1][1], sum(p[2] for p in chunk) / len(chunk)))
    return out


def _series(test: TestData) -> list[tuple[float, float, float]]:
    return [(float(t), float(b), float(v)) for r in test.rounds if r.status == "ok"
            for t, b, v in r.cells[0].get("series", [])]


def gc_start_bytes(run: RunData) -> float | None:
    """The emulator's ground truth: host bytes written when garbage collection started."""
    for event in run.events:
        if event.kind != "emulator-stats" or not event.detail or event.test != "wsat":
            continue
        counters = event.detail.get("counters")
        value = counters.get("gc_start_host_write_bytes") if isinstance(counters, dict) else None
        if isinstance(value, int | float):
            return float(value)
    return None


def _capacity(test: TestData) -> float:
    """The tested range in bytes (the x axis against capacity written is in multiples)."""
    return float(test.params_as(WsatParams).active_range.size_bytes or 1)


def _summary(run: RunData, test: TestData, r: WsatResult) -> str:
    p, t = test.params, r.transition
    capacity = _capacity(test)

    def at(seconds: float | None, written: float | None) -> str:
        if written is None:
            return "-"
        return f"{float(seconds or 0):,.0f} s, {written / GIB:.2f} GiB " \
               f"({written / capacity:.2f}x the range)"

    pairs = [
        ("fresh-out-of-box IOPS", fmt_value(r.fob_iops)),
        ("saturated IOPS (last window)", fmt_value(r.saturated_iops)),
        ("transition starts", at(t.start_s, t.start_bytes)),
        ("transition ends", at(t.end_s, t.end_bytes)),
        ("rounds", f"{r.rounds_run} of {p.get('round_seconds')} s "
                   f"({p.get('threads')} threads x QD {p.get('iodepth')}, 4 KiB random writes)"),
        ("written", f"{r.written_bytes / GIB:.2f} GiB ({r.written_x:.2f}x the range)"),
        ("stopped by", r.stop_reason),
    ]
    gc = gc_start_bytes(run)
    if gc is not None:
        pairs.append(("emulator ground truth", f"garbage collection started at "
                      f"{gc / GIB:.2f} GiB written ({gc / capacity:.2f}x the range)"))
    return kv_table(pairs)


def wsat_pages(run: RunData, test: TestData, anchor: str) -> list[Page]:
    r = result_of(test, WsatResult)
    state = ""
    if test.status == "not_steady":
        state = banner("not-steady", f"{NOT_STEADY_TEXT}: {r.verdict.message}")
    elif test.status == "failed":
        state = banner("failed", f"FAILED: {r.error or ''}")
    rounds = [x for x in test.rounds if x.status == "ok"]
    if not rounds:
        return [Page(anchor, "Write Saturation: no rounds", state, head_left(run), run.quick)]
    transition = r.transition
    fine = downsample(_series(test))
    per_round = [(float(x.cells[0]["elapsed_s"]), float(x.cells[0]["written_bytes"]),
                  float(x.cells[0]["iops"])) for x in rounds]
    capacity = _capacity(test)
    marks_t = [ch.Rule(float(transition.start_s), "transition", "5 3")] if (
        transition.start_s is not None) else []
    marks_b = [ch.Rule(transition.start_bytes / capacity, "transition", "5 3")] if (
        transition.start_bytes is not None) else []
    gc = gc_start_bytes(run)
    if gc is not None:
        marks_b.append(ch.Rule(gc / capacity, "emulator: GC starts", "1 2"))
    sat = r.saturated_iops
    rules = [ch.Rule(float(sat), f"saturated {fmt_value(sat)}")] if sat else []
    by_time = ch.line_chart(
        f"{anchor}-t", "IOPS against time",
        [ch.Series("IOPS (log interval)", tuple(p[0] for p in fine), tuple(p[2] for p in fine),
                   style="line", colour_index=0),
         ch.Series("round average", tuple(p[0] for p in per_round),
                   tuple(p[2] for p in per_round), style="markers", colour_index=1)],
        x_label="time (s)", y_label="IOPS", y_unit="IOPS", y_log=False, rules=rules,
        x_rules=marks_t, x_from_zero=True,
    )
    by_bytes = ch.line_chart(
        f"{anchor}-b", "IOPS against capacity written",
        [ch.Series("IOPS", tuple(p[1] / capacity for p in fine), tuple(p[2] for p in fine),
                   style="line", colour_index=0)],
        x_label="written (multiples of the tested range)", y_label="IOPS", y_unit="IOPS",
        y_log=False, rules=rules, x_rules=marks_b, x_from_zero=True,
    )
    keys = (("lat_p50_us", "median"), ("lat_p99_us", "p99"), ("lat_p99_9_us", "p99.9"),
            ("lat_p99_99_us", "p99.99"))
    latency = ch.line_chart(
        f"{anchor}-lat", "Latency per round (from each round's latency histogram)",
        [ch.Series(name, tuple(p[0] for p in per_round),
                   tuple(float(x.cells[0][k]) if x.cells[0].get(k) is not None else None
                         for x in rounds), colour_index=i,
                   style="line" if len(rounds) > 60 else "line+markers")
         for i, (k, name) in enumerate(keys)],
        x_label="time (s)", y_label="latency (us)", y_unit="us", x_from_zero=True,
    )
    pages = [
        Page(anchor, "Write Saturation",
             state + f'<p class="verdict">{esc(transition.message)}</p>'
             + _summary(run, test, r) + charts(by_time, by_bytes), head_left(run), run.quick),
        Page(f"{anchor}-lat", "Write Saturation: latency per round",
             state + charts(latency) + _round_table(rounds), head_left(run), run.quick,
             toc=False),
    ]
    return pages


def _round_table(rounds: list[RoundData]) -> str:
    shown = rounds if len(rounds) <= 40 else rounds[:10] + rounds[-30:]
    rows = [[str(x.round_no), esc(fmt_value(x.cells[0].get("elapsed_s"), 0)),
             esc(f"{float(x.cells[0]['written_bytes']) / GIB:.2f}"),
             esc(fmt_value(x.cells[0].get("iops"), 0)),
             *[esc(fmt_value(x.cells[0].get(k), 0))
               for k in ("lat_p50_us", "lat_p99_us", "lat_p99_9_us", "lat_p99_99_us")],
             "yes" if x.cells[0].get("resumed") else ""]
            for x in shown]
    skipped = "" if len(shown) == len(rounds) else note(
        f"Rounds 11-{len(rounds) - 30} are left out of this table (all are in the export).")
    return "<h3>Rounds</h3>" + skipped + table(
        ("round", "end (s)", "written (GiB)", "IOPS", "median us", "p99 us", "p99.9 us",
         "p99.99 us", "after resume"), rows)


def hir_pages(run: RunData, test: TestData, anchor: str) -> list[Page]:
    r = result_of(test, HirResult)
    cells = [x.cells[0] for x in test.rounds if x.status == "ok" and x.cells]
    if not cells:
        return [Page(anchor, "Host Idle Recovery: no rounds", "", head_left(run), run.quick)]
    waits = sorted({float(c["wait_s"]) for c in cells})
    series = []
    for i, wait in enumerate(waits):
        picked = [(n, c) for n, c in enumerate(cells, 1)
                  if float(c["wait_s"]) == wait and c["kind"] == "burst"]
        series.append(ch.Series(f"bursts, {wait:g} s idle", tuple(float(n) for n, _ in picked),
                                tuple(float(c["iops"]) for _, c in picked), style="markers",
                                colour_index=i))
    base = [(n, c) for n, c in enumerate(cells, 1) if c["kind"] == "baseline"]
    series.append(ch.Series("back to baseline (continuous)", tuple(float(n) for n, _ in base),
                            tuple(float(c["iops"]) for _, c in base), style="markers",
                            colour_index=6))
    baseline = r.baseline_iops
    iops = ch.line_chart(
        f"{anchor}-iops", "IOPS of every burst and baseline round, in order", series,
        x_label="round", y_label="IOPS", y_unit="IOPS", y_log=False,
        rules=[ch.Rule(float(baseline), "saturated baseline")] if baseline else [],
    )
    lat = ch.line_chart(
        f"{anchor}-lat", "Mean latency of every burst and baseline round",
        [ch.Series(s.name, s.x, tuple(float(cells[int(x) - 1].get("lat_mean_us") or 0)
                                      for x in s.x), style="markers",
                   colour_index=s.colour_index) for s in series],
        x_label="round", y_label="mean latency (us)", y_unit="us",
    )
    rows, classes = [], []
    for w in r.wait_states:
        rows.append([esc(f"{w.wait_s:g} s"), str(len(w.bursts_iops)),
                     esc(fmt_value(w.mean_iops, 0)), esc(fmt_value(w.baseline_mean, 0)),
                     f"{w.ratio:.2f}x" if w.ratio is not None else "-",
                     f"{w.p_value:.2g}" if w.p_value is not None else "-",
                     "recovered" if w.recovered else "no"])
        classes.append(["", "", "", "", "", "", "pass" if w.recovered else "fail"])
    kind = "reference" if r.recovered else "not-steady"
    verdict = banner(kind, r.message)
    body = (
        verdict + note("Each wait state: bursts of writes separated by that idle time, then "
                       "continuous writes back to the baseline. Recovered: the bursts reach the "
                       "recovery ratio over the baseline before them, and the difference is "
                       "larger than the noise (Welch's t-test).")
        + table(("wait", "bursts", "burst IOPS", "baseline IOPS", "ratio", "p", "verdict"),
                rows, cell_classes=classes)
        + charts(iops, lat)
    )
    return [Page(anchor, "Host Idle Recovery", body, head_left(run), run.quick)]


def saturation_overlay(runs: Sequence[RunData], labels: Sequence[str]) -> str:
    """Every run's WSAT IOPS against capacity written, on one chart ("" for fewer than 2)."""
    series = []
    for i, run in enumerate(runs):
        test = next((t for t in run.tests if t.name == WSAT), None)
        if test is None:
            continue
        capacity = _capacity(test)
        fine = downsample(_series(test), MAX_POINTS // 2)
        series.append(ch.Series(labels[i], tuple(p[1] / capacity for p in fine),
                                tuple(p[2] for p in fine), style="line", colour_index=i))
    if len(series) < 2:
        return ""
    svg = ch.line_chart("cmp-wsat", "Write Saturation: IOPS against capacity written", series,
                        x_label="written (multiples of each run's tested range)",
                        y_label="IOPS", y_unit="IOPS", x_from_zero=True)
    return "<h3>Write Saturation</h3>" + charts(svg)


# -- ssdlab show, and what ssdlab run prints -------------------------------------------------


def _load(p: WsatParams | HirParams) -> str:
    return f"threads {p.threads}, iodepth {p.iodepth}, block bytes {p.block_bytes}"


def wsat_show(run: RunData, test: TestData) -> list[str]:
    p, r = test.params_as(WsatParams), result_of(test, WsatResult)
    verdict = r.transition.message
    if verdict and r.verdict.message:
        verdict += f"; {r.verdict.message}"
    return [f"  round seconds {p.round_seconds}, max rounds {p.max_rounds}, "
            f"{_load(p)}, purge {p.purge}",
            f"  verdict: {verdict or r.error or test.status}"]


def hir_show(run: RunData, test: TestData) -> list[str]:
    p, r = test.params_as(HirParams), result_of(test, HirResult)
    waits = ", ".join(f"{w:g}" for w in p.waits_s)
    return [f"  {_load(p)}, waits {waits} s, bursts {p.bursts}, burst seconds "
            f"{p.burst_seconds}",
            f"  verdict: {r.message or test.status}"]


def outcome(run: RunData, store_path: object) -> Outcome:
    return Outcome((run_line(run, store_path, quick_note(run)), see_line(run)),
                   failed_tests_error(run))


PAGES = SuitePages(
    pages={WSAT: wsat_pages, HIR: hir_pages},
    show={WSAT: wsat_show, HIR: hir_show},
    outcome=outcome,
    overlay=saturation_overlay,
)
