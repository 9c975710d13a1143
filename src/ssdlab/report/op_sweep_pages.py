"""Report pages of the over-provisioning sweep.

Results: steady-state 4 KiB random-write IOPS against OP and IOPS x usable share, the
recommendation (marked) and the rule's steps, a table per setting (OP, usable bytes,
steady or not, IOPS, latency, and on the emulated SSD its write amplification over the
measurement window), and the emulator's WA per setting. Convergence: IOPS per round of
every setting, so a setting that never settled shows why.
"""

from __future__ import annotations

from dataclasses import dataclass

from ssdlab.errors import command
from ssdlab.jsonrecord import Record
from ssdlab.plan.op_sweep import (
    TEST,
    FailedSetting,
    MeasuredSetting,
    OpSweepParams,
    OpSweepResult,
    RecommendationRecord,
    SettingRecord,
)
from ssdlab.report import charts as ch
from ssdlab.report.html import NOT_STEADY_TEXT, Page, banner, charts, esc, note, table
from ssdlab.report.parts import head_left
from ssdlab.report.scales import fmt_value
from ssdlab.report.suite import Outcome, SuitePages, result_of
from ssdlab.report.text import quick_note, run_line, see_line
from ssdlab.store.records import RunData, TestData
from ssdlab.units import format_bytes

TITLE = "Over-provisioning sweep"


def _g(value: float | None) -> str:
    """A setting or threshold as typed: 0, 7, 12.5."""
    return "-" if value is None else f"{value:g}"


def _measured(settings: list[SettingRecord]) -> list[MeasuredSetting]:
    return [s for s in settings if isinstance(s, MeasuredSetting)]


def _iops_chart(settings: list[SettingRecord], anchor: str, recommended: float | None) -> str:
    measured = [s for s in settings if s.iops is not None]
    x = tuple(s.op_pct for s in measured)
    series = [
        ch.Series("steady IOPS", x, tuple(s.iops for s in measured), colour_index=0),
        ch.Series("IOPS x usable share", x, tuple(s.iops_per_raw for s in measured),
                  style="dashed", colour_index=1),
    ]
    chosen = [s for s in measured if s.op_pct == recommended]
    if chosen:
        series.append(ch.Series("recommended", (chosen[0].op_pct,),
                                (chosen[0].iops,), style="markers", colour_index=3))
    return ch.line_chart(
        f"{anchor}-iops", "Steady-state 4 KiB random-write IOPS against OP", series,
        x_label="OP (% of the capacity left unused)", y_label="IOPS", y_unit="IOPS",
        y_log=False, x_from_zero=True,
    )


def _wa_chart(settings: list[SettingRecord], anchor: str) -> str:
    shown = [s for s in settings if s.emulator_wa is not None]
    if not shown:
        return ""
    return ch.bar_chart(
        f"{anchor}-wa", "Write amplification (emulator ground truth, measurement window)",
        [s.label for s in shown],
        [ch.Series("write amplification", tuple(float(i) for i in range(len(shown))),
                   tuple(s.emulator_wa for s in shown))],
        x_label="OP setting", y_label="write amplification", y_log=False,
    )


def _status(s: SettingRecord) -> str:
    if isinstance(s, FailedSetting):
        return f"FAILED: {s.error}"
    window = [str(n) for n in s.window_rounds] or ["-", "-"]
    if s.steady:
        return f"steady, rounds {window[0]}-{window[1]} of {s.rounds_run}"
    return f"{NOT_STEADY_TEXT} ({s.rounds_run} rounds; last window used)"


def _setting_rows(settings: list[SettingRecord], recommended: float | None
                  ) -> tuple[list[list[str]], list[str]]:
    rows, classes = [], []
    for s in settings:
        latency = (s.lat_mean_us, s.lat_p99_us) if isinstance(s, MeasuredSetting) else (None,
                                                                                       None)
        rows.append([
            esc(_g(s.op_pct)),
            esc(f"{format_bytes(s.usable_bytes)} ({fmt_value(s.usable_fraction * 100, 1)} %)"),
            esc(_status(s)),
            esc(fmt_value(s.iops, 0)),
            esc(fmt_value(s.iops_per_raw, 0)),
            esc(fmt_value(latency[0], 1)),
            esc(fmt_value(latency[1], 1)),
            esc(fmt_value(s.emulator_wa, 2) if s.emulator_wa is not None else "-"),
        ])
        classes.append("pass" if s.op_pct == recommended else "")
    return rows, classes


def _step_rows(rec: RecommendationRecord) -> list[list[str]]:
    return [
        [esc(f"{_g(st.from_op)} -> {_g(st.to_op)} %"),
         esc(f"{st.gain_pct:+.1f} %"), esc(f"{st.per_point_pct:+.2f} %"),
         esc("taken" if st.accepted else "not taken")]
        for st in rec.steps
    ]


def _banners(settings: list[SettingRecord]) -> list[str]:
    """What went wrong at which settings: not steady, failed, not purged."""
    parts = []
    unsteady = [s.label for s in settings if s.status == "not_steady"]
    if unsteady:
        parts.append(banner("not-steady", f"{NOT_STEADY_TEXT} at {', '.join(unsteady)}"
                            ": their IOPS are the last window's average"))
    failed = [s.label for s in settings if s.status == "failed"]
    if failed:
        parts.append(banner("failed", f"FAILED: {', '.join(failed)}"))
    unpurged = [s.label for s in _measured(settings) if s.purge is not None and not s.purge.ok]
    if unpurged:
        parts.append(banner("failed", f"PURGE FAILED at {', '.join(unpurged)}: the "
                            "unused part may not have been trimmed, so it may not be spare"))
    return parts


def _results_body(run: RunData, result: OpSweepResult, anchor: str) -> str:
    rec = result.recommendation or RecommendationRecord(message="no recommendation")
    recommended = rec.op_pct
    settings = result.settings
    parts = _banners(settings)
    parts.append(f'<p class="verdict steady">{esc(rec.message)}</p>')
    agrees = result.ground_truth_order_agrees
    if agrees is not None:
        parts.append(note(
            "Emulator ground truth: ranking the settings by steady IOPS "
            + ("agrees with" if agrees else "DISAGREES with")
            + " ranking them by measured write amplification (lower WA = higher IOPS)."))
    wa = _wa_chart(settings, anchor)
    parts.append(charts(_iops_chart(settings, anchor, recommended), *([wa] if wa else [])))
    rows, classes = _setting_rows(settings, recommended)
    parts.append("<h3>Per setting (measurement-window averages)</h3>" + table(
        ("OP %", "usable", "steady state", "IOPS", "IOPS x usable", "mean lat (us)",
         "p99 lat (us)", "WA (emulator)"), rows, row_classes=classes))
    steps = _step_rows(rec)
    if steps:
        parts.append(
            f"<h3>Recommendation rule: at least {_g(rec.min_gain_pct)} % "
            "more IOPS per point of capacity given up</h3>"
            + table(("step (from current choice)", "IOPS gain", "per point of OP", "outcome"),
                    steps))
    namespaces = run.plan.get("namespaces")
    parts.append(note(
        f"{result.definition}. IOPS x usable share is the IOPS per unit of raw capacity; it is "
        f"highest at OP {_g(rec.best_iops_per_raw_op_pct)} % here, and is shown, not used to "
        "decide." + (f" Namespaces: {namespaces}." if namespaces else "")))
    return "".join(parts)


@dataclass(frozen=True)
class _RoundPoint(Record):
    """What the convergence chart reads of a stored round's cell."""

    op_pct: float | None = None
    setting_round: int | None = None
    iops: float | None = None


def _convergence_body(test: TestData, anchor: str) -> str:
    by_op: dict[float, list[tuple[float, float]]] = {}
    for r in test.rounds:
        if r.status != "ok" or not r.cells:
            continue
        cell = _RoundPoint.from_json(r.cells[0], f"{test.name} round {r.round_no}")
        if cell.op_pct is not None and cell.setting_round is not None and cell.iops is not None:
            by_op.setdefault(cell.op_pct, []).append((cell.setting_round, cell.iops))
    series = [ch.Series(f"OP {op:g} %", tuple(n for n, _ in pts),
                        tuple(v for _, v in pts), colour_index=i)
              for i, (op, pts) in enumerate(sorted(by_op.items()))]
    chart = ch.line_chart(f"{anchor}-conv", "IOPS per round, one line per OP setting", series,
                          x_label="round of the setting", y_label="IOPS", y_unit="IOPS")
    rule = test.params_as(OpSweepParams).rule
    return note(f"4 KiB random writes on the active range after purge and preconditioning; "
                f"steady state by the {rule} rule.") + charts(chart)


def op_sweep_pages(run: RunData, test: TestData, anchor: str) -> list[Page]:
    result = result_of(test, OpSweepResult)
    if not result.settings:
        return [Page(anchor, f"{TITLE}: no results", banner("failed", f"{test.status.upper()}: "
                                                          f"{result.error or 'no data'}"),
                     head_left(run), run.quick)]
    return [
        Page(f"{anchor}-res", f"{TITLE}: results", _results_body(run, result, anchor),
             head_left(run), run.quick),
        Page(f"{anchor}-conv", f"{TITLE}: steady state convergence",
             _convergence_body(test, anchor), head_left(run), run.quick, toc=False),
    ]


# -- ssdlab show, and what ssdlab run prints -------------------------------------------------


def _verdict(test: TestData, result: OpSweepResult) -> str:
    if result.recommendation is not None:
        return result.recommendation.message
    return result.error or test.status


def show_lines(run: RunData, test: TestData) -> list[str]:
    p, result = test.params, result_of(test, OpSweepResult)
    cell = (p.get("cells") or [{}])[0]
    return [f"  rule {p.get('rule')} ({p.get('window')}-round window), tracking "
            f"{p.get('tracking_set')}, threads {cell.get('threads')} x QD "
            f"{cell.get('iodepth')}, {p.get('cell_seconds')} s per cell, purge {p.get('purge')}",
            f"  verdict: {_verdict(test, result)}"]


def outcome(run: RunData, store_path: object) -> Outcome:
    test = run.tests[0] if run.tests else None
    result = result_of(test, OpSweepResult) if test is not None else OpSweepResult()
    rec = result.recommendation
    lines = [run_line(run, store_path, quick_note(run)),
             *([f"  {rec.message}"] if rec is not None else []), see_line(run)]
    failed = [s.label for s in result.settings if s.status == "failed"]
    if test is None or test.status == "failed" or failed:
        what = ", ".join(failed) or "every setting"
        return Outcome(tuple(lines), f"OP sweep: {what} failed (see `{command()} show "
                       f"{run.run_id}`)")
    return Outcome(tuple(lines))


PAGES = SuitePages(pages={TEST: op_sweep_pages}, show={TEST: show_lines}, outcome=outcome)
