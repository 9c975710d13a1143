"""The SNIA PTS report pages of a PTS test (and of the PTS tests of a published
reference run): steady-state convergence (the tracking variable of every cell, per
round), steady-state verification (the measurement window with its average, +-10 % and
+-20 % bands and the least-squares line, and the window table with the excursions
against the rule's limits), then the results: the IOPS table (block size x mix) with a
2D plot and a 3D bar chart; throughput bars; the latency table with percentiles. A test
that did not reach steady state says so on each of its pages. Also the PTS suite's
table on the run's title page, its ``ssdlab show`` lines and what ``ssdlab run pts``
prints at the end.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from ssdlab.analysis.predict import LABEL as PREDICTED_LABEL
from ssdlab.analysis.steady import SteadyRule, WindowCheck, check_window, rule_by_name
from ssdlab.errors import command
from ssdlab.plan.pts import PtsParams, PtsResult
from ssdlab.plan.specs import Mix, block_label
from ssdlab.reference.published import TEST_STATUS
from ssdlab.report import charts as ch
from ssdlab.report.bars3d import bars_3d
from ssdlab.report.consistency import cell_mark, memory_cells
from ssdlab.report.figures import (
    MIB,
    result_cells,
    round_matrix,
    test_kind,
    test_title,
    window_rounds,
)
from ssdlab.report.html import NOT_STEADY_TEXT, Page, banner, charts, esc, figure, note, table
from ssdlab.report.parts import SMALL, head_left, is_reference, result_table
from ssdlab.report.scales import fmt_value
from ssdlab.report.suite import Outcome, SuitePages, result_of
from ssdlab.report.text import (
    failed_tests_error,
    params_line,
    prediction_line,
    quick_note,
    run_line,
    verdict_line,
)
from ssdlab.store.records import RunData, TestData
from ssdlab.units import format_bytes


def _params(test: TestData) -> PtsParams:
    return test.params_as(PtsParams)


def _rule(test: TestData) -> SteadyRule:
    return rule_by_name(_params(test).rule or "snia")


def _unit(metric: str) -> tuple[str, float]:
    if metric.startswith("bw"):
        return "MiB/s", float(MIB)
    if metric.startswith("lat"):
        return "us", 1.0
    return "IOPS", 1.0


def _state_banner(test: TestData) -> str:
    predicted = prediction_line(test)
    if test.status == "predicted" and predicted is not None:
        return _not_steady_banner(test) + banner(
            "predicted", f"{predicted}; every measured round is kept, and `{command()} resume` "
            "continues the test to the SNIA rule")
    if test.status == "not_steady":
        return _not_steady_banner(test)
    if test.status not in ("steady", TEST_STATUS):
        error = result_of(test, PtsResult).error or ""
        return banner("failed", f"{test.status.upper()}: {error}")
    return ""


def _not_steady_banner(test: TestData) -> str:
    best = test.verdicts.get("primary", {}).get("message", "") if isinstance(
        test.verdicts, dict) else ""
    window = window_rounds(test)
    where = f"results are from the last window, rounds {window[0]}-{window[1]}; " if (
        window) else ""
    return banner("not-steady", f"{NOT_STEADY_TEXT}: {where}{best}")


def _rounds(test: TestData) -> list[int]:
    return [r.round_no for r in test.rounds if r.status == "ok"]


def convergence_body(test: TestData, cid: str) -> str:
    """The tracking variable of every cell per round: one chart per mix for IOPS."""
    kind = test_kind(test.name)
    metric = {"iops": "iops", "throughput": "bw_bytes_per_s"}.get(kind, "lat_mean_us")
    unit, scale = _unit(metric)
    matrix = round_matrix(test, metric)
    cells = result_cells(test)
    rounds = _rounds(test)
    x = tuple(float(r) for r in rounds)

    def series_for(picked: Sequence[dict[str, Any]], name_of: Any) -> list[ch.Series]:
        out = []
        for i, cell in enumerate(picked):
            values = matrix.get(str(cell.get("cell")), {})
            y = tuple(values[r] / scale if r in values else None for r in rounds)
            out.append(ch.Series(name_of(cell), x, y, colour_index=i))
        return out

    svgs = []
    if kind == "iops":
        mixes = sorted({int(c["read_pct"]) for c in cells}, reverse=True)
        for mix in mixes:
            picked = sorted((c for c in cells if int(c["read_pct"]) == mix),
                            key=lambda c: -int(c["block_bytes"]))
            svgs.append(ch.line_chart(
                f"{cid}-conv-{mix}", f"IOPS per round, {Mix(mix).label} R/W",
                series_for(picked, lambda c: block_label(int(c["block_bytes"]))),
                x_label="round", y_label="IOPS", y_unit="IOPS", frame=SMALL,
            ))
        intro = ("Each line is one block size; one chart per read/write mix. The tracking "
                 "variables that decide steady state are on the verification page.")
        return note(intro) + charts(*svgs, two=True)
    name_of = (
        (lambda c: "read" if int(c["read_pct"]) == 100 else "write")
        if kind == "throughput"
        else (lambda c: f"{block_label(int(c['block_bytes']))} {Mix(int(c['read_pct'])).label}")
    )
    title = "bandwidth per round" if kind == "throughput" else "mean latency per round"
    svgs.append(ch.line_chart(
        f"{cid}-conv", f"{test_title(test)}: {title}",
        series_for(cells, name_of), x_label="round",
        y_label=f"{'bandwidth' if kind == 'throughput' else 'mean latency'} ({unit})",
        y_unit=unit,
    ))
    return charts(*svgs)


def _window_check(test: TestData, name: str, window: tuple[int, int]) -> WindowCheck | None:
    rule = _rule(test)
    by_round = {r.round_no: r.tracking.get(name) for r in test.rounds if r.status == "ok"}
    values = [by_round.get(r) for r in range(window[0], window[1] + 1)]
    if len(values) != rule.window or any(not isinstance(v, int | float) for v in values):
        return None
    return check_window(name, [float(v) for v in values if v is not None], window[0], rule)


def verification_body(test: TestData, cid: str) -> str:
    window = window_rounds(test)
    params = _params(test)
    variables = params.tracking.get(params.tracking_set, [])
    if window is None or not variables:
        return note("No measurement window: the test did not complete enough rounds.")
    rule = _rule(test)
    svgs, rows, classes = [], [], []
    for i, var in enumerate(variables):
        check = _window_check(test, var.name, window)
        if check is None:
            continue
        unit, scale = _unit(var.metric)
        avg = check.average / scale
        rounds = tuple(float(r) for r in range(check.first_round, check.last_round + 1))
        fitted = tuple(
            (check.intercept + check.slope * k) / scale for k in range(len(check.values))
        )
        svgs.append(ch.line_chart(
            f"{cid}-ver-{i}", var.name,
            [
                # the chart's title names the variable; the legend column is narrow
                ch.Series("measured", rounds, tuple(v / scale for v in check.values),
                          colour_index=0),
                ch.Series("fitted line", rounds, fitted, style="dashed",
                          colour_index=3),
            ],
            x_label="round (measurement window)", y_label=unit, y_unit=unit,
            y_log=False, y_include_zero=False,
            bands=[ch.Band(avg * 0.8, avg * 1.2, "average +-20 %", 0.08),
                   ch.Band(avg * 0.9, avg * 1.1, "average +-10 %", 0.12)],
            rules=[ch.Rule(avg, f"average {fmt_value(avg)}"),
                   ch.Rule(avg * 1.1, "+10 %", "1 4"), ch.Rule(avg * 0.9, "-10 %", "1 4"),
                   ch.Rule(avg * 1.2, "+20 %", "1 2"), ch.Rule(avg * 0.8, "-20 %", "1 2")],
            frame=SMALL,
        ))
        rows.append(_window_row(check, rule, scale))
        classes.append(["", "", "", "", "", "", "pass" if check.passed else "fail"])
    limits = []
    if rule.max_data_excursion is not None:
        limits.append(f"data excursion <= {rule.max_data_excursion * 100:g} %")
    if rule.max_slope_excursion is not None:
        limits.append(f"slope excursion <= {rule.max_slope_excursion * 100:g} %")
    if rule.line_band is not None:
        limits.append(f"least-squares line within {100 - rule.line_band * 100:g}-"
                      f"{100 + rule.line_band * 100:g} % of the average")
    header = ("tracking variable", "window rounds", "average", "data excursion",
              "slope excursion", "fitted line (min-max % of avg)", "verdict")
    return (
        note(f"Rule {rule.name}: {', '.join(limits)}, over {rule.window} rounds.")
        + charts(*svgs, two=True)
        + "<h3>Measurement window</h3>" + table(header, rows, cell_classes=classes)
    )


def _window_row(check: WindowCheck, rule: Any, scale: float) -> list[str]:
    data = f"{fmt_value(check.data_excursion / scale)} ({check.data_excursion_pct:.1f} %)"
    slope = f"{fmt_value(check.slope_excursion / scale)} ({check.slope_excursion_pct:.1f} %)"
    return [
        esc(check.variable), f"{check.first_round}-{check.last_round}",
        esc(fmt_value(check.average / scale)), esc(data), esc(slope),
        f"{check.line_min_pct:.1f}-{check.line_max_pct:.1f} %",
        "pass" if check.passed else "FAIL",
    ]


def _iops_grid(test: TestData) -> tuple[list[int], list[int], dict[tuple[int, int], float]]:
    cells = result_cells(test)
    blocks = sorted({int(c["block_bytes"]) for c in cells}, reverse=True)
    mixes = sorted({int(c["read_pct"]) for c in cells}, reverse=True)
    values = {
        (int(c["block_bytes"]), int(c["read_pct"])): float(c["iops"])
        for c in cells if isinstance(c.get("iops"), int | float)
    }
    return blocks, mixes, values


def iops_results_body(test: TestData, cid: str, memory: Collection[str] = ()) -> str:
    blocks, mixes, values = _iops_grid(test)
    by_key = {(int(c["block_bytes"]), int(c["read_pct"])): c for c in result_cells(test)}
    rows = [
        [esc(block_label(b)), *[esc(fmt_value(values.get((b, m)), 0)
                                    + cell_mark(by_key.get((b, m)), memory)) for m in mixes]]
        for b in blocks
    ]
    tbl = table(["block size \\ R/W mix", *[Mix(m).label for m in mixes]], rows)
    ascending = list(reversed(blocks))
    cats = [block_label(b) for b in ascending]
    series = [
        ch.Series(Mix(m).label, tuple(float(i) for i in range(len(ascending))),
                  tuple(values.get((b, m)) for b in ascending), colour_index=i)
        for i, m in enumerate(mixes)
    ]
    line = ch.line_chart(f"{cid}-iops2d", "IOPS by block size and read/write mix", series,
                         x_label="block size", y_label="IOPS", y_unit="IOPS",
                         x_categories=cats)
    grid = [[values.get((b, m)) for m in mixes] for b in ascending]  # small blocks at the back
    bars = bars_3d(f"{cid}-iops3d", "IOPS, 3D view", [block_label(b) for b in ascending],
                   [Mix(m).label for m in mixes], grid, row_label="block size",
                   col_label="read/write mix", z_label="IOPS", z_unit="IOPS")
    return (
        "<h3>IOPS (measurement-window average)</h3>" + tbl
        + charts(figure(line, "2D plot: one line per read/write mix"))
        + charts(figure(bars, "3D plot: block size x read/write mix"))
    )


def throughput_results_body(test: TestData, cid: str, memory: Collection[str] = ()) -> str:
    cells = result_cells(test)
    block = int(cells[0]["block_bytes"]) if cells else 0
    by_dir = {("read" if int(c["read_pct"]) == 100 else "write"): c for c in cells}
    rows = []
    for direction in ("read", "write"):
        c = by_dir.get(direction)
        bw = c.get("bw_bytes_per_s") if c else None
        if isinstance(bw, int | float):
            rows.append([esc(f"{block_label(block)} sequential {direction}{cell_mark(c, memory)}"),
                         esc(fmt_value(bw / MIB, 1)), esc(fmt_value(bw / 1e6, 1)),
                         esc(fmt_value(c.get("iops") if c else None, 0))])
    dirs = [d for d in ("read", "write") if d in by_dir]
    bw_values = tuple(
        float(by_dir[d]["bw_bytes_per_s"]) / MIB if isinstance(
            by_dir[d].get("bw_bytes_per_s"), int | float) else None
        for d in dirs
    )
    bars = ch.bar_chart(
        f"{cid}-bw", f"Sequential {block_label(block)} throughput", dirs,
        [ch.Series("MiB/s", tuple(float(i) for i in range(len(dirs))), bw_values)],
        x_label="direction", y_label="bandwidth (MiB/s)", y_unit="MiB/s", y_log=False,
        frame=SMALL,
    )
    return (
        "<h3>Throughput (measurement-window average)</h3>"
        + table(("workload", "MiB/s", "MB/s", "IOPS"), rows)
        + charts(bars)
    )


LATENCY_COLUMNS = (
    ("lat_mean_us", "mean"), ("lat_max_us", "max"), ("lat_p99_us", "p99"),
    ("lat_p99_9_us", "p99.9"), ("lat_p99_99_us", "p99.99"),
)


def latency_results_body(test: TestData, cid: str, memory: Collection[str] = ()) -> str:
    cells = sorted(result_cells(test), key=lambda c: (-int(c["block_bytes"]), -int(c["read_pct"])))
    labels = [f"{block_label(int(c['block_bytes']))} {Mix(int(c['read_pct'])).label}"
              for c in cells]
    rows = [
        [esc(label + cell_mark(c, memory)),
         *[esc(fmt_value(c.get(key), 1)) for key, _ in LATENCY_COLUMNS]]
        for label, c in zip(labels, cells, strict=True)
    ]
    first = (_params(test).cells or [{}])[0]
    header = [f"cell ({first.get('threads', 1)} thread, QD {first.get('iodepth', 1)})",
              *[f"{name} (us)" for _, name in LATENCY_COLUMNS]]
    series = [
        ch.Series(name, tuple(float(i) for i in range(len(cells))),
                  tuple(float(c[key]) if isinstance(c.get(key), int | float) else None
                        for c in cells), colour_index=i)
        for i, (key, name) in enumerate((LATENCY_COLUMNS[0], LATENCY_COLUMNS[2],
                                         LATENCY_COLUMNS[3], LATENCY_COLUMNS[1]))
    ]
    bars = ch.bar_chart(f"{cid}-lat", "Latency by cell", labels, series,
                        x_label="block size and read/write mix", y_label="latency (us)",
                        y_unit="us")
    return (
        "<h3>Latency (measurement-window average; max over the window)</h3>"
        + table(header, rows) + charts(bars)
    )


RESULT_BODIES = {
    "iops": iops_results_body,
    "throughput": throughput_results_body,
    "latency": latency_results_body,
}


def test_pages(run: RunData, test: TestData, anchor: str) -> list[Page]:
    kind = test_kind(test.name)
    title = test_title(test)
    body_of = RESULT_BODIES.get(kind)
    if body_of is None or not result_cells(test):
        if not test.rounds:
            return []
        return [Page(anchor, f"{title}: no results", _state_banner(test), head_left(run),
                     run.quick)]
    state = _state_banner(test)
    verdict = test.verdicts.get("primary", {}) if isinstance(test.verdicts, dict) else {}
    message = verdict.get("message", "") if isinstance(verdict, dict) else ""
    verdict_html = (
        f'<p class="verdict {"steady" if test.status == "steady" else "not-steady"}">'
        f"verdict: {esc(message)}</p>" if message else ""
    )
    pages = []
    if test.rounds:
        pages.append(Page(f"{anchor}-conv", f"{title}: steady state convergence",
                          state + verdict_html + convergence_body(test, anchor),
                          head_left(run), run.quick))
        pages.append(Page(f"{anchor}-ver", f"{title}: steady state verification",
                          state + verification_body(test, anchor), head_left(run), run.quick,
                          toc=False))
    results_title = f"{title}: results" + (" (published)" if is_reference(run) else "")
    pages.append(Page(f"{anchor}-res", results_title,
                      state + body_of(test, anchor, memory_cells(run, test)),
                      head_left(run), run.quick, toc=not test.rounds))
    return pages


# -- ssdlab show, and what ssdlab run prints ------------------------------------------------


def show_lines(run: RunData, test: TestData) -> list[str]:
    lines = [params_line(test), f"  verdict: {verdict_line(test)}"]
    predicted = prediction_line(test)
    if predicted is not None:
        lines.append(f"  {predicted}")
    lines += [f"  skipped {s.cell}: {s.reason}" for s in result_of(test, PtsResult).skipped]
    return lines + result_table(run, test, "window average")


def outcome(run: RunData, store_path: object) -> Outcome:
    cmd = command()
    return Outcome((run_line(run, store_path, quick_note(run)),
                    f"  see them: {cmd} show {run.run_id}    export: {cmd} export "
                    f"{run.run_id} --format json"), failed_tests_error(run))


# -- the run's title page -------------------------------------------------------------------


def title_table(run: RunData, tests: Sequence[TestData]) -> str:
    """The title page's table of the run's tests with rounds: rule, tracking, load, time
    per round, purge, preconditioning and outcome of each."""
    with_rounds = [t for t in run.tests if t.rounds]
    if not with_rounds:
        return ""
    return "<h3>Tests</h3>" + table(
        ("test", "steady-state rule", "tracking", "threads x QD", "per round",
         "purge", "preconditioning", "outcome"),
        [_test_params(t) for t in with_rounds],
    )


def _test_params(test: TestData) -> list[str]:
    p = _params(test)
    cells = p.cells or [{}]
    first = cells[0]
    purge = next((s.detail for s in test.steps if s.kind == "purge"), None)
    precondition = next((s.detail for s in test.steps if s.kind == "precondition"), None)
    purge_text = (
        f"{purge.get('method')} ({'ok' if purge.get('ok') else 'FAILED'})" if purge else "none"
    )
    pre_text = (
        f"{format_bytes(precondition.get('io_bytes', 0))} of "
        f"{block_label(int(precondition.get('block_bytes', 0)))} sequential writes"
        if precondition else "none"
    )
    return [
        esc(test_title(test)),
        esc(f"{p.rule} ({p.window} rounds)"),
        esc(p.tracking_set or "-"),
        esc(f"{first.get('threads', '-')} x QD {first.get('iodepth', '-')}"),
        esc(f"{p.cell_seconds} s x {len(cells)} cells"),
        esc(purge_text),
        esc(pre_text),
        esc(_status_text(test)),
    ]


def _status_text(test: TestData) -> str:
    rounds = PtsResult.from_json(test.result).rounds_run
    window = window_rounds(test)
    if test.status == "steady" and window:
        return f"steady, rounds {window[0]}-{window[1]} of {rounds}"
    if test.status == "not_steady":
        return f"{NOT_STEADY_TEXT} in {rounds} rounds"
    if test.status == "predicted":
        return f"{NOT_STEADY_TEXT} in {rounds} rounds; {PREDICTED_LABEL}"
    return test.status


_PAGES = {"iops": test_pages, "throughput": test_pages, "latency": test_pages}
_SHOW = {"iops": show_lines, "throughput": show_lines, "latency": show_lines}
PAGES = SuitePages(pages=_PAGES, show=_SHOW, outcome=outcome, title_table=title_table)
