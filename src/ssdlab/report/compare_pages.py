"""Pages across runs: parameter check, overlays, ratios with significance, leaderboards,
and measured-against-claimed.

Runs are compared figure by figure (:mod:`ssdlab.report.figures`). Before any number is
set beside another, the parameters that change results (threads and queue depth per
test, round length, steady-state rule, active range, quick profile, fio version) are
laid side by side; a test whose parameters differ between runs is flagged on every page
that compares it, never silently compared.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ssdlab.analysis.significance import compare
from ssdlab.plan.results import RoundParams
from ssdlab.plan.specs import Mix, block_label
from ssdlab.reference.published import TEST_STATUS
from ssdlab.reference.specs import VendorSpec
from ssdlab.report import charts as ch
from ssdlab.report.claims import claim_rows
from ssdlab.report.figures import (
    BW,
    IOPS,
    LAT_MEAN,
    LAT_P999,
    Figure,
    FigureKey,
    Metric,
    figures,
    result_cells,
    test_kind,
)
from ssdlab.report.html import Page, banner, charts, esc, note, table
from ssdlab.report.parts import is_reference, run_label, written_by_run
from ssdlab.report.registry import overlays
from ssdlab.report.scales import fmt_value
from ssdlab.report.words import plain
from ssdlab.store.records import RunData

KIB = 1024
RUNS_PER_TABLE = 4


@dataclass(frozen=True)
class Compared:
    runs: list[RunData]
    labels: list[str]
    figs: list[dict[FigureKey, Figure]]
    baseline: int
    mismatched: dict[str, str]  # test kind -> why its runs are not comparable


def _test_signature(run: RunData, kind: str) -> str | None:
    for test in run.tests:
        if test_kind(test.name) != kind:
            continue
        cells = result_cells(test) or test.params_as(RoundParams).cells
        if not cells:
            return None
        first = cells[0]
        return f"{first.get('threads', '?')} x QD {first.get('iodepth', '?')}"
    return None


def _option(run: RunData, key: str) -> Any:
    options = run.plan.get("options")
    return options.get(key) if isinstance(options, dict) else None


def parameter_rows(runs: Sequence[RunData]) -> list[tuple[str, list[str]]]:
    """(parameter, value per run) for everything that changes what a figure means."""
    rows: list[tuple[str, list[str]]] = []
    for kind in ("iops", "throughput", "latency"):
        values = [_test_signature(r, kind) for r in runs]
        if any(values):
            rows.append((f"{kind}: threads x QD", [v or "-" for v in values]))
    for key, name in (("profile", "profile"), ("rule", "steady-state rule"),
                      ("tracking", "IOPS tracking set"), ("cell_seconds", "seconds per cell"),
                      ("active_range_pct", "active range %"), ("ioengine", "ioengine"),
                      ("variant", "variant")):
        rows.append((name, [
            TEST_STATUS if is_reference(r) else plain(_option(r, key)) for r in runs
        ]))
    rows.append(("fio", [str(r.versions.get("fio", "-")) for r in runs]))
    rows.append(("idle CPUs", [TEST_STATUS if is_reference(r) else _idle_policy(r) or "-"
                               for r in runs]))
    return rows


def _idle_policy(run: RunData) -> str | None:
    """"poll" or "system" (how idle CPUs behaved while fio ran, cpuidle.py); None if not
    recorded. "poll" that could not be held counts as "system"."""
    idle = run.host.get("cpu_idle")
    if not isinstance(idle, dict):
        return None
    return "poll" if idle.get("policy") == "poll" and idle.get("held") is True else "system"


def mismatches(runs: Sequence[RunData]) -> dict[str, str]:
    out = {}
    for kind in ("iops", "throughput", "latency"):
        values = {v for r in runs if (v := _test_signature(r, kind)) is not None}
        if len(values) > 1:
            out[kind] = f"threads x QD differ: {', '.join(sorted(values))}"
    idle = {p for r in runs if not is_reference(r) and (p := _idle_policy(r))}
    if len(idle) > 1:
        out["latency"] = (out["latency"] + "; " if "latency" in out else "") + (
            "idle CPUs polled in some runs and slept in others (host wake-up latency)")
    quick = {r.quick for r in runs if not is_reference(r)}
    if len(quick) > 1:
        for kind in ("iops", "throughput", "latency"):
            out[kind] = (out.get(kind, "") + "; " if kind in out else "") + (
                "quick and full-profile runs mixed")
    return out


def build(runs: list[RunData], baseline: int) -> Compared:
    return Compared(runs, unique_labels(runs), [figures(r) for r in runs], baseline,
                    mismatches(runs))


def unique_labels(runs: Sequence[RunData]) -> list[str]:
    labels = [run_label(r) for r in runs]
    seen: dict[str, int] = {}
    for i, label in enumerate(labels):
        if labels.count(label) > 1:
            seen[label] = seen.get(label, 0) + 1
            labels[i] = f"{label} #{seen[label]}"
    return labels


def _swatch(i: int) -> str:
    return f'<span class="swatch" style="background:{ch.colour(i)}"></span>'


def _mismatch_banner(c: Compared, kind: str) -> str:
    why = c.mismatched.get(kind)
    return banner("mismatch", f"Runs differ in parameters for {kind}: {why}. "
                  "Differences below may come from the set-up, not the drives.") if why else ""


#: run columns per table of parameters: five fit an A4 page beside the parameter names
RUNS_PER_PARAMETER_TABLE = 5


def parameters_page(c: Compared) -> Page:
    rows = parameter_rows(c.runs)
    flags = ["flag" if len({v for v in values if v != TEST_STATUS}) > 1 else ""
             for _, values in rows]
    tables = []
    for start in range(0, len(c.runs), RUNS_PER_PARAMETER_TABLE):
        chunk = range(start, min(start + RUNS_PER_PARAMETER_TABLE, len(c.runs)))
        header = ["parameter", *[f"{_swatch(i)}{esc(c.labels[i])}" for i in chunk]]
        body_rows = [[esc(name), *[esc(values[i]) for i in chunk]] for name, values in rows]
        tables.append(table(header, body_rows, row_classes=flags))
    runs_table = table(
        ["", "run", "device", "profile", "status"],
        [[_swatch(i), esc(r.run_id), esc(c.labels[i]), esc(r.profile),
          esc(r.status + (" (baseline)" if i == c.baseline else ""))]
         for i, r in enumerate(c.runs)],
    )
    warn = "".join(banner("mismatch", f"{kind}: {why}") for kind, why in c.mismatched.items())
    return Page(
        "compare", "Comparison: runs and parameters",
        runs_table + warn
        + note("Highlighted rows differ between runs (across all of them, also when the "
               "runs are split over several tables); published figures carry their "
               "review's own set-up.")
        + "".join(tables),
        f"{len(c.runs)} runs, baseline {esc(c.labels[c.baseline])}",
    )


def _iops_overlay(c: Compared) -> str:
    blocks = sorted({k.block_bytes for f in c.figs for k in f if k.kind == "iops"})
    if not blocks:
        return ""
    cats = [block_label(b) for b in blocks]
    svgs = []
    for mix in (100, 65, 0):
        series = []
        for i, figs in enumerate(c.figs):
            # only the block sizes this run measured: a line through them, no gaps
            points = [(float(n), figs[k].value) for n, b in enumerate(blocks)
                      if (k := FigureKey("iops", b, mix, "iops")) in figs]
            if points:
                series.append(ch.Series(c.labels[i], tuple(x for x, _ in points),
                                        tuple(y for _, y in points), colour_index=i))
        if series:
            svgs.append(ch.line_chart(
                f"cmp-iops-{mix}", f"IOPS, {Mix(mix).label} R/W, all runs", series,
                x_label="block size", y_label="IOPS", y_unit="IOPS", x_categories=cats,
            ))
    return "<h3>IOPS</h3>" + _mismatch_banner(c, "iops") + charts(*svgs)


def _bar_overlay(c: Compared, kind: str, metric: str, title: str, unit: str) -> str:
    keys = sorted({k for f in c.figs for k in f if k.kind == kind and k.metric == metric},
                  key=lambda k: (-k.block_bytes, -k.read_pct))
    if not keys:
        return ""
    cats = [k.label for k in keys]
    series = [
        ch.Series(c.labels[i], tuple(float(n) for n in range(len(keys))),
                  tuple(figs[k].value if k in figs else None for k in keys), colour_index=i)
        for i, figs in enumerate(c.figs)
    ]
    svg = ch.bar_chart(f"cmp-{kind}-{metric}", title, cats, series,
                       x_label="workload", y_label=f"{title.split(',')[0]} ({unit})",
                       y_unit=unit, frame=ch.Frame(width=900, height=320, right=170))
    return charts(svg)


def registered_overlays(runs: Sequence[RunData], labels: Sequence[str]) -> str:
    """The overlays of the registered suites (their pages' ``overlay``), in the registry's
    order, each once (suites that share pages share it); each is empty unless at least two
    of ``runs`` have its tests."""
    return "".join(overlay(runs, labels) for overlay in overlays())


def overlay_page(c: Compared) -> Page:
    body = _iops_overlay(c)
    tp = _bar_overlay(c, "throughput", BW.key, "sequential bandwidth, all runs", "MiB/s")
    if tp:
        body += "<h3>Throughput</h3>" + _mismatch_banner(c, "throughput") + tp
    lat = _bar_overlay(c, "latency", LAT_MEAN.key, "mean latency, all runs", "us")
    lat += _bar_overlay(c, "latency", LAT_P999.key, "p99.9 latency, all runs", "us")
    if lat:
        body += "<h3>Latency</h3>" + _mismatch_banner(c, "latency") + lat
    body += registered_overlays(c.runs, c.labels)
    return Page("compare-charts", "Comparison: all runs on one chart per test",
                body or note("No test in common."), f"{len(c.runs)} runs")


def _ratio_cell(fig: Figure | None, base: Figure | None) -> tuple[str, str]:
    if fig is None:
        return "-", ""
    value = esc(fmt_value(fig.value))
    if base is None:
        return value, ""
    result = compare(fig.value, fig.window, base.value, base.window)
    ratio = f"{result.ratio:.2f}x" if result.ratio is not None else "-"
    if result.significant is None:
        return f"{value}<br><span class=small>{ratio}, noise unknown</span>", ""
    better = (fig.value > base.value) == fig.metric.higher_is_better
    cls = ("sig-up" if better else "sig-down") if result.significant else "noise"
    word = "significant" if result.significant else "within noise"
    return (f"{value}<br><span class=small>{ratio}, {word} (p={result.p_value:.2g})</span>",
            cls)


def figure_label(key: FigureKey, metric: Metric) -> str:
    """``4 KiB random read IOPS``, ``128 KiB sequential write MiB/s``, ``... p99 latency us``."""
    if metric.key in ("iops", "bw_bytes_per_s"):
        return f"{key.label} {metric.unit}"
    return f"{key.label}: {metric.label} ({metric.unit})"


def ratio_pages(c: Compared) -> list[Page]:
    keys = sorted({k for f in c.figs for k in f},
                  key=lambda k: (k.kind, -k.block_bytes, -k.read_pct, k.metric))
    others = [i for i in range(len(c.runs)) if i != c.baseline]
    pages = []
    base_figs = c.figs[c.baseline]
    for start in range(0, len(others), RUNS_PER_TABLE):
        chunk = others[start : start + RUNS_PER_TABLE]
        header = ["figure", f"{_swatch(c.baseline)}{esc(c.labels[c.baseline])} (baseline)",
                  *[f"{_swatch(i)}{esc(c.labels[i])}" for i in chunk]]
        rows, classes, flags = [], [], []
        for key in keys:
            base = base_figs.get(key)
            metric = base.metric if base else next(f[key].metric for f in c.figs if key in f)
            cells = [_ratio_cell(c.figs[i].get(key), base) for i in chunk]
            rows.append([esc(figure_label(key, metric)),
                         esc(fmt_value(base.value)) if base else "-",
                         *[text for text, _ in cells]])
            classes.append(["", "", *[cls for _, cls in cells]])
            flags.append("flag" if key.kind in c.mismatched else "")
        title = "Comparison: ratios to the baseline"
        if len(others) > RUNS_PER_TABLE:
            title += f" ({start // RUNS_PER_TABLE + 1} of "
            title += f"{(len(others) + RUNS_PER_TABLE - 1) // RUNS_PER_TABLE})"
        intro = note(
            "Each cell: the run's value, its ratio to the baseline and whether the "
            "difference is larger than the run-to-run noise (Welch's t-test on the rounds "
            "of both measurement windows, p < 0.05). Green: significantly better; red: "
            "significantly worse; grey: within the noise. Published figures have no rounds, "
            "so their noise is unknown. Highlighted rows belong to tests whose parameters "
            "differ between the runs."
        )
        pages.append(Page(f"compare-ratios-{start}", title,
                          intro + table(header, rows, cell_classes=classes, row_classes=flags),
                          f"baseline {esc(c.labels[c.baseline])}", toc=start == 0))
    return pages


#: the workloads ranked on the leaderboard page (their titles come from figure_label)
LEADERBOARDS = tuple(
    FigureKey(kind, block * KIB, read, metric.key)
    for kind, block, read, metric in (
        ("iops", 4, 100, IOPS), ("iops", 4, 0, IOPS), ("iops", 4, 65, IOPS),
        ("iops", 64, 65, IOPS), ("iops", 1024, 100, IOPS),
        ("throughput", 128, 100, BW), ("throughput", 128, 0, BW),
        ("throughput", 1024, 100, BW), ("throughput", 1024, 0, BW),
        ("latency", 4, 100, LAT_MEAN), ("latency", 4, 0, LAT_MEAN), ("latency", 4, 0, LAT_P999),
    )
)


def leaderboard_page(c: Compared) -> Page:
    parts = []
    for key in LEADERBOARDS:
        entries = [(i, f[key]) for i, f in enumerate(c.figs) if key in f]
        if len(entries) < 2:
            continue
        title = figure_label(key, entries[0][1].metric)
        better = entries[0][1].metric.higher_is_better
        entries.sort(key=lambda e: e[1].value, reverse=better)
        best = entries[0][1].value
        rows = [
            [str(rank), f"{_swatch(i)}{esc(c.labels[i])}", esc(fmt_value(fig.value)),
             f"{fig.value / best * 100:.0f} %" if best else "-",
             esc(fig.state)]
            for rank, (i, fig) in enumerate(entries, 1)
        ]
        flag = f" <span class=small>(parameters differ: {esc(c.mismatched[key.kind])})</span>" \
            if key.kind in c.mismatched else ""
        parts.append(f"<h3>{esc(title)}{flag}</h3>" + table(
            ("rank", "run", "value", "of the best", "state"), rows))
    return Page("leaderboard", "Leaderboards per workload",
                "".join(parts) or note("Fewer than two runs share a workload."),
                f"{len(c.runs)} runs")


def run_labels(run: RunData) -> dict[str, str]:
    labels = run.target.get("labels")
    return {str(k): str(v) for k, v in labels.items()} if isinstance(labels, dict) else {}


def label_pages(c: Compared) -> list[Page]:
    """Runs grouped by each ``--label`` key that tells them apart (the controller review:
    the same drives behind several controllers): per value of the key, each workload's
    mean over its runs, the best value of each row marked. None without such a key."""
    parts = []
    for key in sorted({k for r in c.runs for k in run_labels(r)}):
        groups: dict[str, list[int]] = {}
        for i, run in enumerate(c.runs):
            value = run_labels(run).get(key)
            if value is not None:
                groups.setdefault(value, []).append(i)
        if len(groups) >= 2:
            parts.append(_label_table(c, key, groups))
    parts = [p for p in parts if p]
    if not parts:
        return []
    intro = note("Runs grouped by their labels (`--label KEY=VALUE`): each cell is the mean "
                 "of the runs with that value; the best of each row in green.")
    return [Page("compare-labels", "Grouped by label", intro + "".join(parts),
                 f"{len(c.runs)} runs")]


def _label_table(c: Compared, key: str, groups: dict[str, list[int]]) -> str:
    """One label key's table: a row per leaderboard workload, a column per value."""
    names = sorted(groups)
    rows, classes = [], []
    for fig_key in LEADERBOARDS:
        metric = next((f[fig_key].metric for f in c.figs if fig_key in f), None)
        if metric is None:
            continue
        means = []
        for name in names:
            values = [c.figs[i][fig_key].value for i in groups[name] if fig_key in c.figs[i]]
            means.append(sum(values) / len(values) if values else None)
        known = [m for m in means if m is not None]
        if len(known) < 2:
            continue
        best = max(known) if metric.higher_is_better else min(known)
        rows.append([esc(figure_label(fig_key, metric)), *[esc(fmt_value(m)) for m in means]])
        classes.append(["", *["sig-up" if m == best else "" for m in means]])
    if not rows:
        return ""
    header = [f"workload by {esc(key)}",
              *[f"{esc(n)} ({len(groups[n])} run{'s' if len(groups[n]) > 1 else ''})"
                for n in names]]
    return f"<h3>By {esc(key)}</h3>" + table(header, rows, cell_classes=classes)


def endurance_note(run: RunData, spec: VendorSpec) -> str:
    """The run's writes (the drive's own count) against the rated endurance: the share of
    the TBW, and the drive writes per day the rating allows ("" without both)."""
    written = written_by_run(run)
    if written is None or (spec.endurance_tbw is None and spec.dwpd is None):
        return ""
    host = written[0]
    parts = [f"Endurance: this run wrote {host / 1e9:,.2f} GB by the drive's own count"]
    if spec.endurance_tbw:
        parts.append(f"{host / (spec.endurance_tbw * 1e12) * 100:.4f} % of the rated "
                     f"{spec.endurance_tbw:,} TBW")
    if spec.dwpd:
        parts.append(f"{host / (spec.capacity_gb * 1e9):.2f} drive writes against the rated "
                     f"{spec.dwpd} per day"
                     + (f" over {spec.warranty_years} years" if spec.warranty_years else ""))
    return "; ".join(parts) + "."


def claims_page(run: RunData, label: str, spec: VendorSpec, how_matched: str,
                index: int) -> Page:
    rows, classes = [], []
    for row in claim_rows(figures(run), spec):
        ratio = row.ratio
        lower_better = row.unit == "us"
        good = ratio is not None and ((ratio <= 1.0) if lower_better else (ratio >= 1.0))
        rows.append([
            esc(row.figure), esc(fmt_value(row.claimed) if row.claimed is not None else
                                 "not stated"),
            esc(fmt_value(row.measured)), esc(row.unit),
            f"{ratio * 100:.0f} %" if ratio is not None else "-", esc(row.how),
        ])
        classes.append(["", "", "", "", "" if ratio is None else ("pass" if good else "fail"),
                        ""])
    spec_name = f"{spec.vendor} {spec.model} {spec.capacity_gb:g} GB"
    endurance = endurance_note(run, spec)
    body = (
        note(f"Spec sheet: {spec_name} ({spec.interface}, {spec.form_factor}); {how_matched}. "
             "Vendors state fresh-drive, high queue-depth figures; PTS figures are steady "
             "state at the run's threads x QD, so lower measured throughput is expected. "
             "MB/s = 10^6 bytes/s. For latency lower is better.")
        + table(("figure", "claimed", "measured", "unit", "measured / claimed", "how measured"),
                rows, cell_classes=classes)
        + (note(esc(endurance)) if endurance else "")
    )
    return Page(f"claims-{index}", f"{label}: measured against claimed", body,
                f"run {esc(run.run_id)}", run.quick)
