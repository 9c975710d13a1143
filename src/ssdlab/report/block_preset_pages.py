"""Report pages of the block-level presets, drawn the way people know them: the
CrystalDiskMark four-row table, ATTO's horizontal bars per transfer size, IOmeter's
results per access specification with the per-second IOPS timeline.

Each page names the preset and its version and shows the settings it ran with. Reads
only the stored test (its result, :class:`~ssdlab.plan.block_presets.PresetResult`, and
the per-measurement cells of its rounds). Also the three suites' ``ssdlab show`` lines,
their overlay in a comparison and what ``ssdlab run`` prints at the end (:data:`PAGES`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from ssdlab.errors import command
from ssdlab.jsonrecord import JsonObject
from ssdlab.plan.block_presets import (
    BestRecord,
    FiguresRecord,
    PrefillStep,
    PresetCell,
    PresetParams,
    PresetResult,
    PresetStoredPlan,
    RowRecord,
)
from ssdlab.report import charts as ch
from ssdlab.report.consistency import MARK, cell_mark, marked_labels, memory_cells
from ssdlab.report.html import Page, banner, charts, esc, kv_table, note, table
from ssdlab.report.parts import head_left
from ssdlab.report.scales import fmt_value
from ssdlab.report.suite import Outcome, SuitePages, result_of
from ssdlab.report.text import num, quick_note, run_line, see_line, text_table
from ssdlab.report.words import plain
from ssdlab.store.records import RunData, TestData
from ssdlab.units import format_bytes

READ_COLOUR = "#009E73"
WRITE_COLOUR = "#D55E00"
MODE_NAMES = {"read": "Read", "write": "Write", "mix": "Mix"}


def _rows(test: TestData) -> list[RowRecord]:
    return result_of(test, PresetResult).rows or []


def _cells(test: TestData) -> list[PresetCell]:
    return [c for r in test.rounds if r.status == "ok" for c in r.cells_as(PresetCell)]


def _params(test: TestData) -> PresetParams:
    return test.params_as(PresetParams)


def _settings_text(settings: JsonObject) -> str:
    return plain({k: v for k, v in settings.items() if not isinstance(v, list | dict)})


def preset_header(test: TestData) -> str:
    """The preset's name and version and what it ran with, and the state of the test."""
    p = _params(test)
    step = next((s for s in test.steps if s.kind == "prefill"), None)
    prefill = PrefillStep.from_json(step.detail, "prefill step") if step else None
    prefill_text = (f"{format_bytes(prefill.io_bytes or 0)} written sequentially "
                    f"in {format_bytes(prefill.block_bytes)} blocks before "
                    f"measuring ({'ok' if prefill.ok else 'FAILED'})"
                    if prefill else "none")
    preset = p.identity
    pairs = [
        ("preset", f"{preset.preset} version {preset.preset_version} "
                   f"({preset.preset_title})"),
        ("profile", p.profile),
        ("test file", f"{p.test_file} ({format_bytes(p.size_bytes)}, "
                      f"target kind {p.target_kind})"),
        ("I/O", f"{'direct' if p.direct else 'buffered'}, ioengine {p.ioengine}"),
        ("test file written first", prefill_text),
        ("settings", _settings_text(p.settings)),
    ]
    body = ""
    if test.status == "failed":
        body += banner("failed", f"FAILED: {result_of(test, PresetResult).error or ''}")
    return body + kv_table(pairs)


# --------------------------------------------------------------------------- CrystalDiskMark


def _by(rows: list[RowRecord]) -> dict[tuple[str, str], RowRecord]:
    return {(r.group, r.mode): r for r in rows}


def _groups(rows: list[RowRecord]) -> list[str]:
    return list(dict.fromkeys(r.group for r in rows))


def _modes(rows: list[RowRecord]) -> list[str]:
    present = {r.mode for r in rows}
    return [m for m in ("read", "write", "mix") if m in present]


def _mode_name(mode: str, mix_pct: object) -> str:
    """A column's mode as CrystalDiskMark heads it: Read, Write, Mix (R70)."""
    return MODE_NAMES[mode] + (f" (R{mix_pct})" if mode == "mix" else "")


def _settings(test: TestData) -> JsonObject:
    return _params(test).settings


def _cdm_cell(figures: FiguresRecord) -> str:
    return (f"<b>{num(figures.mb_per_s, 2)}</b><br>"
            f"<span class=\"small\">{num(figures.iops, 0)} IOPS &middot; "
            f"{num(figures.lat_mean_us, 1)} us</span>")


def _best(row: RowRecord) -> FiguresRecord:
    return row.best


def _mean(row: RowRecord) -> FiguresRecord:
    return row.mean


def cdm_table(rows: list[RowRecord], which: Callable[[RowRecord], FiguresRecord],
              mix_pct: object) -> str:
    """The four-row table: a row per test, a column per mode; MB/s with IOPS and mean
    latency under it (``which``: the best pass or the mean of the passes)."""
    by, modes = _by(rows), _modes(rows)
    header = ["", *[f"{_mode_name(m, mix_pct)} MB/s" for m in modes]]
    body = [[f"<b>{esc(g)}</b>", *[_cdm_cell(which(by[(g, m)])) if (g, m) in by else "-"
                                   for m in modes]] for g in _groups(rows)]
    return table(header, body, cls="cdm")


def cdm_pages(run: RunData, test: TestData, anchor: str) -> list[Page]:
    rows = _rows(test)
    settings = _settings(test)
    passes, mix = settings.get("passes"), settings.get("mix_read_pct")
    body = preset_header(test)
    if rows:
        body += (f"<h3>Best of {esc(passes)} pass(es), as CrystalDiskMark shows it</h3>"
                 + cdm_table(rows, _best, mix)
                 + f"<h3>Mean of {esc(passes)} pass(es)</h3>" + cdm_table(rows, _mean, mix))
        by = _by(rows)
        series = [ch.Series(MODE_NAMES[m], tuple(range(len(_groups(rows)))),
                            tuple(by[(g, m)].best.mb_per_s if (g, m) in by else None
                                  for g in _groups(rows)), colour_index=i)
                  for i, m in enumerate(_modes(rows))]
        body += charts(ch.bar_chart(f"{anchor}-bars", "Best pass per test",
                                    _groups(rows), series, x_label="test",
                                    y_label="MB/s", y_unit="MB/s"))
        marked = marked_labels(run, test)
        body += "<h3>Every pass</h3>" + table(
            ("test", "mode", "passes", "MB/s per pass", "best pass"),
            [[esc(r.group), esc(r.mode + (MARK if f"{r.group} {r.mode}" in marked else "")),
              esc(r.passes),
              esc(", ".join(num(v, 2) for v in r.per_pass_mb_per_s)),
              esc(r.best.pass_no)] for r in rows])
        body += note("MB/s = 10^6 bytes per second; latency = mean completion latency "
                     f"(the total latency in a test marked {MARK}: submission blocks). "
                     "The test file is written with data before the first read, as "
                     "CrystalDiskMark does.")
    return [Page(anchor, f"CrystalDiskMark-like (cdm v{_version(test)})",
                 body, head_left(run), run.quick)]


def _version(test: TestData) -> int:
    return _params(test).identity.preset_version


# --------------------------------------------------------------------------- ATTO


def nice_ceiling(value: float) -> float:
    """The axis end: 1, 2, 2.5 or 5 times a power of ten, at or above ``value``."""
    if not value > 0:
        return 1.0
    power = 10.0 ** math.floor(math.log10(value))
    return float(next(power * step for step in (1, 2, 2.5, 5, 10) if power * step >= value))


def atto_bars(chart_id: str, labels: list[str], write: list[float | None],
              read: list[float | None]) -> str:
    """ATTO's chart: one row per transfer size, write and read bars side by side
    (horizontal), with their MB/s at the bar ends."""
    row_h, left, right, top = 22, 70, 90, 30
    width = 640
    height = top + row_h * len(labels) + 30
    top_value = nice_ceiling(max([v for v in (*write, *read) if v is not None] or [1.0]))
    span = width - left - right
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" data-chart="hbar" '
           f'id="{esc(chart_id)}" viewBox="0 0 {width} {height}" width="{width}" '
           f'height="{height}" style="{ch.FONT}" role="img" '
           f'aria-label="ATTO-like transfer rates">',
           f'<text x="{left}" y="16" font-size="12" font-weight="bold">Transfer rate per '
           f'transfer size (MB/s)</text>',
           f'<rect x="{width - right + 8}" y="6" width="10" height="10" fill="{WRITE_COLOUR}"/>'
           f'<text x="{width - right + 22}" y="15" font-size="10">write</text>',
           f'<rect x="{width - right + 8}" y="18" width="10" height="10" fill="{READ_COLOUR}"/>'
           f'<text x="{width - right + 22}" y="27" font-size="10">read</text>']
    for i, label in enumerate(labels):
        y = top + i * row_h
        out.append(f'<text x="{left - 6}" y="{y + 14}" font-size="10" '
                   f'text-anchor="end">{esc(label)}</text>')
        for k, (value, colour, name) in enumerate(((write[i], WRITE_COLOUR, "write"),
                                                   (read[i], READ_COLOUR, "read"))):
            if value is None:
                continue
            bar = max(1.0, span * value / top_value)
            yy = y + 2 + k * 9
            out.append(f'<rect x="{left}" y="{yy}" width="{bar:.1f}" height="8" '
                       f'fill="{colour}"><title>{esc(label)} {name}: {value:,.1f} MB/s'
                       f'</title></rect>')
            out.append(f'<text x="{left + bar + 4:.1f}" y="{yy + 7}" font-size="8">'
                       f'{value:,.1f}</text>')
    axis_y = top + row_h * len(labels) + 4
    out.append(f'<line x1="{left}" y1="{axis_y}" x2="{left + span}" y2="{axis_y}" '
               f'stroke="#888"/>')
    for frac in (0.0, 0.25, 0.5, 0.75, 1.0):
        x = left + span * frac
        out.append(f'<text x="{x:.1f}" y="{axis_y + 14}" font-size="9" text-anchor="middle">'
                   f'{fmt_value(top_value * frac)}</text>')
    out.append("</svg>")
    return "".join(out)


def _mb_per_s(f: FiguresRecord) -> float | None:
    return f.mb_per_s


def _iops(f: FiguresRecord) -> float | None:
    return f.iops


def _lat(f: FiguresRecord) -> float | None:
    return f.lat_mean_us


def atto_pages(run: RunData, test: TestData, anchor: str) -> list[Page]:
    rows = _rows(test)
    by = _by(rows)
    labels = _groups(rows)

    def get(label: str, mode: str, metric: Callable[[FiguresRecord], float | None]
            ) -> float | None:
        row = by.get((label, mode))
        value = metric(row.best) if row is not None else None
        return float(value) if value is not None else None

    body = preset_header(test)
    if rows:
        body += charts(atto_bars(f"{anchor}-atto", labels,
                                 [get(g, "write", _mb_per_s) for g in labels],
                                 [get(g, "read", _mb_per_s) for g in labels]))
        body += table(("transfer size", "write MB/s", "read MB/s", "write IOPS", "read IOPS",
                       "write lat us", "read lat us"),
                      [[esc(g), num(get(g, "write", _mb_per_s), 2),
                        num(get(g, "read", _mb_per_s), 2),
                        num(get(g, "write", _iops), 0), num(get(g, "read", _iops), 0),
                        num(get(g, "write", _lat), 1),
                        num(get(g, "read", _lat), 1)] for g in labels])
        dropped = [c for c in _cells(test) if c.caches_dropped is not None]
        if dropped:
            ok = all(c.caches_dropped for c in dropped)
            body += note(f"Buffered I/O: caches were synced and dropped before each of the "
                         f"{len(dropped)} reads ({'done' if ok else 'NOT always possible'}).")
        body += note("Sequential writes, then reads, at each transfer size; MB/s = 10^6 "
                     "bytes per second.")
    return [Page(anchor, f"ATTO-like (atto v{_version(test)})", body,
                 head_left(run), run.quick)]


# --------------------------------------------------------------------------- IOmeter


def _timeline(cell: PresetCell) -> list[tuple[float, float]]:
    return [(float(t), float(rate)) for t, rate in cell.timeline or []]


def iometer_pages(run: RunData, test: TestData, anchor: str) -> list[Page]:
    cells = _cells(test)
    body = preset_header(test)
    memory = memory_cells(run, test)
    if cells:
        rows = []
        for c in cells:
            points = _timeline(c)
            rates = [r for _, r in points]
            span = f"{min(rates):,.0f} - {max(rates):,.0f}" if rates else "-"
            rows.append([esc(f"{c.group}{cell_mark(c.to_json(), memory)}"), num(c.iops, 0),
                         num(c.bw_bytes_per_s / 1e6, 2),
                         num(c.lat_mean_us, 1), num(c.lat_p99_us, 1),
                         num(c.lat_max_us, 1), esc(span), esc(len(points))])
        body += table(("access spec", "IOPS", "MB/s", "mean lat us", "p99 lat us",
                       "max lat us", "IOPS per interval (min - max)", "points"), rows)
        series = []
        for i, c in enumerate(cells):
            points = _timeline(c)
            if points:
                series.append(ch.Series(c.group, tuple(p[0] for p in points),
                                        tuple(p[1] for p in points), colour_index=i))
        if series:
            interval = _settings(test).get("log_interval_ms")
            body += charts(ch.line_chart(
                f"{anchor}-timeline", f"IOPS every {interval} ms per access spec", series,
                x_label="seconds", y_label="IOPS", y_unit="IOPS", x_from_zero=True,
                frame=ch.Frame(width=700, height=340, right=190)))
        body += note("One worker, fio's averaged IOPS log (log_avg_msec) per interval; MB/s "
                     "= 10^6 bytes per second.")
    return [Page(anchor, f"IOmeter-like (iometer v{_version(test)})", body,
                 head_left(run), run.quick)]


# --------------------------------------------------------------------------- comparisons


def _preset_tests(runs: Sequence[RunData], labels: Sequence[str],
                  preset: str) -> list[tuple[int, str, TestData]]:
    return [(i, labels[i], t) for i, run in enumerate(runs) for t in run.tests
            if t.name == preset and _rows(t)]


def _versions_note(found: list[tuple[int, str, TestData]]) -> str:
    """Say so when the runs ran different preset versions or settings."""
    def key(t: TestData) -> str:
        p = _params(t)
        return (f"v{p.identity.preset_version}, {p.profile}, "
                f"{_settings_text(p.settings)}, {'direct' if p.direct else 'buffered'}")

    keys = {key(t) for _, _, t in found}
    if len(keys) == 1:
        return note(f"Same preset version and settings: {keys.pop()}.")
    return banner("warning", "Runs differ in preset version or settings; differences may come "
                  "from the set-up, not the targets: " + "; ".join(
                      f"{label}: {key(t)}" for _, label, t in found))


def _category(r: RowRecord) -> str:
    return f"{r.group} {r.mode}" if r.mode not in r.group.lower() else r.group


def _metric_bars(chart_id: str, title: str, found: list[tuple[int, str, TestData]],
                 metric: Callable[[BestRecord], float | None], unit: str) -> str:
    cats = list(dict.fromkeys(_category(r) for _, _, t in found for r in _rows(t)))
    series = []
    for i, label, t in found:
        values = {_category(r): metric(r.best) for r in _rows(t)}
        series.append(ch.Series(label, tuple(range(len(cats))),
                                tuple(values.get(c) for c in cats), colour_index=i))
    return charts(ch.bar_chart(chart_id, title, cats, series, x_label="test",
                               y_label=unit, y_unit=unit,
                               frame=ch.Frame(width=900, height=320, right=170)))


def _atto_lines(found: list[tuple[int, str, TestData]]) -> str:
    out = ""
    for mode in ("write", "read"):
        cats = list(dict.fromkeys(r.group for _, _, t in found for r in _rows(t)))
        series = []
        for i, label, t in found:
            values = {r.group: r.best.mb_per_s for r in _rows(t) if r.mode == mode}
            series.append(ch.Series(label, tuple(range(len(cats))),
                                    tuple(values.get(c) for c in cats), colour_index=i))
        out += ch.line_chart(f"cmp-atto-{mode}", f"ATTO-like {mode} MB/s per transfer size",
                             series, x_label="transfer size", y_label="MB/s", y_unit="MB/s",
                             x_categories=cats)
    return charts(out)


def block_presets_overlay(runs: Sequence[RunData], labels: Sequence[str]) -> str:
    """CrystalDiskMark-, ATTO- and IOmeter-like results of several runs on one chart each
    ("" where fewer than two runs have the preset)."""
    body = ""
    cdm = _preset_tests(runs, labels, "cdm")
    if len(cdm) >= 2:
        body += ("<h3>CrystalDiskMark-like</h3>" + _versions_note(cdm)
                 + _metric_bars("cmp-cdm", "best pass MB/s per test and mode", cdm,
                                _mb_per_s, "MB/s"))
    atto = _preset_tests(runs, labels, "atto")
    if len(atto) >= 2:
        body += "<h3>ATTO-like</h3>" + _versions_note(atto) + _atto_lines(atto)
    iometer = _preset_tests(runs, labels, "iometer")
    if len(iometer) >= 2:
        body += ("<h3>IOmeter-like</h3>" + _versions_note(iometer)
                 + _metric_bars("cmp-iometer", "IOPS per access spec", iometer, _iops,
                                "IOPS"))
    return body


# --------------------------------------------------------------------------- ssdlab show, run


def _show_head(test: TestData) -> tuple[list[str], list[RowRecord]]:
    """The preset's and its verdict's lines, and its table's rows."""
    preset, result = _params(test).identity, result_of(test, PresetResult)
    return [f"  preset {preset.preset} v{preset.preset_version}",
            f"  verdict: {result.message or result.error or test.status}"], result.rows or []


def show_lines(run: RunData, test: TestData) -> list[str]:
    """The preset, its verdict and its results table (MB/s = 10^6 bytes/s)."""
    lines, rows = _show_head(test)
    if not rows:
        return lines
    marked = marked_labels(run, test)
    body = [[r.group, r.mode + (MARK if f"{r.group} {r.mode}" in marked else ""),
             num(r.best.mb_per_s, 1), num(r.mean.mb_per_s, 1), num(r.best.iops),
             num(r.best.lat_mean_us, 1), str(r.passes)] for r in rows]
    return [*lines,
            "  results (MB/s = 10^6 bytes/s; best pass as the tool shows it, and the mean):",
            *text_table(["test", "mode", "best MB/s", "mean MB/s", "best IOPS",
                     "best mean lat us", "passes"], body)]


def cdm_show_lines(run: RunData, test: TestData) -> list[str]:
    """CrystalDiskMark's table: a row per test (SEQ1M Q8T1 ...), a column per mode (Read,
    Write, and Mix where it ran), in MB/s of the best pass and of the mean of the passes;
    then the best pass's IOPS and mean latency laid out the same way."""
    lines, rows = _show_head(test)
    if not rows:
        return lines
    by, modes, groups = _by(rows), _modes(rows), _groups(rows)
    passes, mix = _settings(test).get("passes"), _settings(test).get("mix_read_pct")

    def grid(*figures: tuple[str, Callable[[RowRecord], float | None], int]) -> list[str]:
        """A row per test; per figure (unit, value, digits) a column per mode."""
        return text_table(
            ["test", *[f"{_mode_name(m, mix)} {unit}" for unit, _, _ in figures for m in modes]],
            [[g, *[num(value(by[(g, m)]) if (g, m) in by else None, digits)
                   for _, value, digits in figures for m in modes]] for g in groups])

    return [*lines,
            f"  best of {passes} pass(es), as CrystalDiskMark shows it (MB/s = 10^6 bytes/s):",
            *grid(("MB/s", lambda r: r.best.mb_per_s, 2)),
            f"  mean of {passes} pass(es):",
            *grid(("MB/s", lambda r: r.mean.mb_per_s, 2)),
            "  best pass: IOPS and mean latency:",
            *grid(("IOPS", lambda r: r.best.iops, 0), ("us", lambda r: r.best.lat_mean_us, 1))]


def outcome(run: RunData, store_path: object) -> Outcome:
    """The run's line (with the preset and its version), the result's message."""
    test = run.tests[0] if run.tests else None
    result = result_of(test, PresetResult) if test is not None else PresetResult()
    p = run.plan_as(PresetStoredPlan).identity
    preset = f"; {p.preset_title} preset {p.preset} v{p.preset_version}"
    lines = [run_line(run, store_path, quick_note(run, "") + preset),
             *([f"  {result.message}"] if result.message else []), see_line(run)]
    failed = test is None or test.status == "failed"
    return Outcome(tuple(lines), f"the {run.suite} preset failed: {result.error} "
                   f"(see `{command()} show {run.run_id}`)" if failed else None)


PAGES = SuitePages(
    pages={"cdm": cdm_pages, "atto": atto_pages, "iometer": iometer_pages},
    show={"cdm": cdm_show_lines, "atto": show_lines, "iometer": show_lines},
    outcome=outcome,
    overlay=block_presets_overlay,
)
