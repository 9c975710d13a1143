"""Report pages of the over-provisioning sweep.

Results: steady-state 4 KiB random-write IOPS against OP and IOPS x usable share, the
recommendation (marked) and the rule's steps, a table per setting (OP, usable bytes,
steady or not, IOPS, latency, and on the emulated SSD its write amplification over the
measurement window), and the emulator's WA per setting. Convergence: IOPS per round of
every setting, so a setting that never settled shows why.
"""

from __future__ import annotations

from typing import Any

from ssdlab.plan.units import format_bytes
from ssdlab.report import charts as ch
from ssdlab.report.html import NOT_STEADY_TEXT, Page, banner, charts, esc, note, table
from ssdlab.report.run_pages import head_left
from ssdlab.report.scales import fmt_value
from ssdlab.store.records import RunData, TestData

TITLE = "Over-provisioning sweep"


def _settings(test: TestData) -> list[dict[str, Any]]:
    settings = test.result.get("settings") if isinstance(test.result, dict) else None
    return [s for s in settings or [] if isinstance(s, dict)]


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _g(value: Any) -> str:
    """A setting or threshold as typed: 0, 7, 12.5."""
    number = _num(value)
    return "-" if number is None else f"{number:g}"


def _iops_chart(test: TestData, anchor: str, recommended: float | None) -> str:
    measured = [s for s in _settings(test) if _num(s.get("iops")) is not None]
    x = tuple(float(s["op_pct"]) for s in measured)
    series = [
        ch.Series("steady IOPS", x, tuple(_num(s.get("iops")) for s in measured),
                  colour_index=0),
        ch.Series("IOPS x usable share", x, tuple(_num(s.get("iops_per_raw")) for s in measured),
                  style="dashed", colour_index=1),
    ]
    chosen = [s for s in measured if _num(s.get("op_pct")) == recommended]
    if chosen:
        series.append(ch.Series("recommended",
                                (float(chosen[0]["op_pct"]),), (_num(chosen[0].get("iops")),),
                                style="markers", colour_index=3))
    return ch.line_chart(
        f"{anchor}-iops", "Steady-state 4 KiB random-write IOPS against OP", series,
        x_label="OP (% of the capacity left unused)", y_label="IOPS", y_unit="IOPS",
        y_log=False, x_from_zero=True,
    )


def _wa_chart(test: TestData, anchor: str) -> str:
    shown = [s for s in _settings(test) if _num(s.get("emulator_wa")) is not None]
    if not shown:
        return ""
    return ch.bar_chart(
        f"{anchor}-wa", "Write amplification (emulator ground truth, measurement window)",
        [str(s.get("label")) for s in shown],
        [ch.Series("write amplification", tuple(float(i) for i in range(len(shown))),
                   tuple(_num(s.get("emulator_wa")) for s in shown))],
        x_label="OP setting", y_label="write amplification", y_log=False,
    )


def _status(s: dict[str, Any]) -> str:
    if s.get("status") == "failed":
        return f"FAILED: {s.get('error', '')}"
    window = s.get("window_rounds") or ["-", "-"]
    if s.get("steady"):
        return f"steady, rounds {window[0]}-{window[1]} of {s.get('rounds_run')}"
    return f"{NOT_STEADY_TEXT} ({s.get('rounds_run')} rounds; last window used)"


def _setting_rows(test: TestData, recommended: float | None) -> tuple[list[list[str]],
                                                                        list[str]]:
    rows, classes = [], []
    for s in _settings(test):
        usable = s.get("usable_bytes") or 0
        share = (_num(s.get("usable_fraction")) or 0.0) * 100
        wa = _num(s.get("emulator_wa"))
        rows.append([
            esc(_g(s.get("op_pct"))),
            esc(f"{format_bytes(usable)} ({fmt_value(share, 1)} %)"),
            esc(_status(s)),
            esc(fmt_value(_num(s.get("iops")), 0)),
            esc(fmt_value(_num(s.get("iops_per_raw")), 0)),
            esc(fmt_value(_num(s.get("lat_mean_us")), 1)),
            esc(fmt_value(_num(s.get("lat_p99_us")), 1)),
            esc(fmt_value(wa, 2) if wa is not None else "-"),
        ])
        classes.append("pass" if s.get("op_pct") == recommended else "")
    return rows, classes


def _step_rows(rec: dict[str, Any]) -> list[list[str]]:
    return [
        [esc(f"{_g(st['from_op'])} -> {_g(st['to_op'])} %"),
         esc(f"{st['gain_pct']:+.1f} %"), esc(f"{st['per_point_pct']:+.2f} %"),
         esc("taken" if st["accepted"] else "not taken")]
        for st in rec.get("steps", []) if isinstance(st, dict)
    ]


def _results_body(run: RunData, test: TestData, anchor: str) -> str:
    result = test.result if isinstance(test.result, dict) else {}
    rec = result.get("recommendation") if isinstance(result.get("recommendation"), dict) else {}
    assert isinstance(rec, dict)
    recommended = _num(rec.get("op_pct"))
    parts = []
    unsteady = [s.get("label") for s in _settings(test) if s.get("status") == "not_steady"]
    if unsteady:
        parts.append(banner("not-steady", f"{NOT_STEADY_TEXT} at {', '.join(map(str, unsteady))}"
                            ": their IOPS are the last window's average"))
    failed = [s.get("label") for s in _settings(test) if s.get("status") == "failed"]
    if failed:
        parts.append(banner("failed", f"FAILED: {', '.join(map(str, failed))}"))
    unpurged = [s.get("label") for s in _settings(test)
                if isinstance(s.get("purge"), dict) and not s["purge"].get("ok")]
    if unpurged:
        parts.append(banner("failed", f"PURGE FAILED at {', '.join(map(str, unpurged))}: the "
                            "unused part may not have been trimmed, so it may not be spare"))
    parts.append(f'<p class="verdict steady">{esc(rec.get("message", "no recommendation"))}</p>')
    agrees = result.get("ground_truth_order_agrees")
    if isinstance(agrees, bool):
        parts.append(note(
            "Emulator ground truth: ranking the settings by steady IOPS "
            + ("agrees with" if agrees else "DISAGREES with")
            + " ranking them by measured write amplification (lower WA = higher IOPS)."))
    wa = _wa_chart(test, anchor)
    parts.append(charts(_iops_chart(test, anchor, recommended), *([wa] if wa else [])))
    rows, classes = _setting_rows(test, recommended)
    parts.append("<h3>Per setting (measurement-window averages)</h3>" + table(
        ("OP %", "usable", "steady state", "IOPS", "IOPS x usable", "mean lat (us)",
         "p99 lat (us)", "WA (emulator)"), rows, row_classes=classes))
    steps = _step_rows(rec)
    if steps:
        parts.append(
            f"<h3>Recommendation rule: at least {_g(rec.get('min_gain_pct'))} % "
            "more IOPS per point of capacity given up</h3>"
            + table(("step (from current choice)", "IOPS gain", "per point of OP", "outcome"),
                    steps))
    best_raw = rec.get("best_iops_per_raw_op_pct")
    definition = str(result.get("definition", ""))
    namespaces = run.plan.get("namespaces")
    parts.append(note(
        f"{definition}. IOPS x usable share is the IOPS per unit of raw capacity; it is highest "
        f"at OP {_g(best_raw)} % here, and is shown, not used to decide."
        + (f" Namespaces: {namespaces}." if namespaces else "")))
    return "".join(parts)


def _convergence_body(test: TestData, anchor: str) -> str:
    by_op: dict[float, list[tuple[float, float]]] = {}
    for r in test.rounds:
        if r.status != "ok" or not r.cells:
            continue
        cell = r.cells[0]
        op, n, iops = _num(cell.get("op_pct")), _num(cell.get("setting_round")), _num(
            cell.get("iops"))
        if op is not None and n is not None and iops is not None:
            by_op.setdefault(op, []).append((n, iops))
    series = [ch.Series(f"OP {op:g} %", tuple(n for n, _ in pts),
                        tuple(v for _, v in pts), colour_index=i)
              for i, (op, pts) in enumerate(sorted(by_op.items()))]
    chart = ch.line_chart(f"{anchor}-conv", "IOPS per round, one line per OP setting", series,
                          x_label="round of the setting", y_label="IOPS", y_unit="IOPS")
    rule = test.params.get("rule")
    return note(f"4 KiB random writes on the active range after purge and preconditioning; "
                f"steady state by the {rule} rule.") + charts(chart)


def op_sweep_pages(run: RunData, test: TestData, anchor: str) -> list[Page]:
    if not _settings(test):
        error = test.result.get("error", "no data") if isinstance(test.result, dict) else ""
        return [Page(anchor, f"{TITLE}: no results", banner("failed", f"{test.status.upper()}: "
                                                          f"{error}"), head_left(run), run.quick)]
    return [
        Page(f"{anchor}-res", f"{TITLE}: results", _results_body(run, test, anchor),
             head_left(run), run.quick),
        Page(f"{anchor}-conv", f"{TITLE}: steady state convergence",
             _convergence_body(test, anchor), head_left(run), run.quick, toc=False),
    ]
