"""Chart labels never overlap, on screen and in print (issue 30: the RAID matrix's PDF
chart printed its x-axis names on top of each other).

Measured in headless Chromium: every text of every chart (title, axis names and ticks,
axis titles, reference-line labels; not the legend, which has a column of its own) as
laid out, its box (``getBBox``) through its transform to the page (``getScreenCTM``), so
that a name turned 45 degrees is a turned box; no two boxes of a chart may overlap, and
none may reach outside its chart (an SVG clips what is outside). On the reports of every
run of the golden stores (every suite's charts), and on charts of crowded axes: the RAID
matrix's comparison of a PTS latency test on three levels (the case of the issue: nine
measurements on each level), all 56 cells of the PTS IOPS test, long names without a
space, a line chart over categories, and a numeric axis of large values.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ssdlab.plan.matrix import BY_LATENCY, LevelResult, LevelRow
from ssdlab.plan.specs import cell_label, cell_name
from ssdlab.report import charts as ch
from ssdlab.report.build import ReportRequest, write_report
from ssdlab.report.html import Page, document
from ssdlab.report.matrix_pages import comparison_page
from ssdlab.store import records
from ssdlab.store.db import Store
from tests.support.browser import Browser, require_chromium
from tests.support.browser import Page as BrowserPage

pytestmark = [pytest.mark.browser]

STORES = Path(__file__).resolve().parents[1] / "fixtures" / "store"
#: A4 less the report's 10 mm side margins, in CSS pixels: the printed page's width
A4_PRINT_WIDTH_PX = int((210 - 2 * 10) / 25.4 * 96)

#: each chart's texts that overlap another of its texts or reach outside the chart, and
#: how many texts were measured
OVERLAPS_JS = r"""
(() => {
  const corners = (el) => {
    const b = el.getBBox(), m = el.getScreenCTM();
    return [[b.x, b.y], [b.x + b.width, b.y], [b.x + b.width, b.y + b.height],
            [b.x, b.y + b.height]].map(([x, y]) => [m.a * x + m.c * y + m.e,
                                                    m.b * x + m.d * y + m.f]);
  };
  // two convex quadrilaterals are apart when some edge's normal separates them
  const apart = (p, q) => [p, q].some(poly => poly.some(([x1, y1], i) => {
    const [x2, y2] = poly[(i + 1) % poly.length];
    const nx = y1 - y2, ny = x2 - x1, len = Math.hypot(nx, ny) || 1;
    const along = pts => pts.map(([x, y]) => (x * nx + y * ny) / len);
    const a = along(p), b = along(q);
    return Math.max(...a) <= Math.min(...b) + 0.5 || Math.max(...b) <= Math.min(...a) + 0.5;
  }));
  const found = [];
  let texts = 0, turned = 0;
  for (const svg of document.querySelectorAll('svg.chart')) {
    const box = svg.getBoundingClientRect();
    const shown = [...svg.querySelectorAll('text')].filter(
      t => !t.closest('.legend-item') && t.textContent.trim() && t.getBBox().width > 0);
    const quads = shown.map(corners);
    texts += shown.length;
    turned += shown.filter(t => (t.getAttribute('transform') || '').includes('rotate')).length;
    shown.forEach((t, i) => {
      const out = quads[i].some(([x, y]) => x < box.left - 0.5 || x > box.right + 0.5
                                         || y < box.top - 0.5 || y > box.bottom + 0.5);
      if (out) found.push(`${svg.id}: ${JSON.stringify(t.textContent)} outside the chart`);
      for (let j = i + 1; j < shown.length; j++) {
        if (!apart(quads[i], quads[j])) {
          found.push(`${svg.id}: ${JSON.stringify(t.textContent)} overlaps `
                     + JSON.stringify(shown[j].textContent));
        }
      }
    });
  }
  return {charts: document.querySelectorAll('svg.chart').length, texts, turned, found};
})()
"""


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    require_chromium()
    with Browser() as opened:
        yield opened


def overlaps(browser: Browser, html: Path, width: int, print_layout: bool) -> dict[str, Any]:
    with browser.open_page(html, viewport=(width, 1000)) as page:
        if print_layout:
            page.emulate_print()
        result: dict[str, Any] = page.evaluate(OVERLAPS_JS)
        _no_console_errors(page)
    return result


def _no_console_errors(page: BrowserPage) -> None:
    assert page.console_errors() == []


@pytest.fixture(scope="module")
def golden_reports(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """report.html of every run of each golden store (a copy of it)."""
    out = []
    for name in ("suites", "matrix", "db", "peak"):
        work = tmp_path_factory.mktemp(name)
        shutil.copyfile(STORES / f"{name}.sqlite", work / "store.sqlite")
        with Store.open(work / "store.sqlite") as store:
            ids = tuple(r.run_id for r in store.list_runs())
            out.append(write_report(store, ReportRequest(ids, work / "report", pdf=False)).html)
    return out


def test_no_chart_text_overlaps_another_in_the_golden_reports(
        browser: Browser, golden_reports: list[Path]) -> None:
    charts = 0
    for html in golden_reports:
        for width, print_layout in ((1280, False), (A4_PRINT_WIDTH_PX, True)):
            found = overlaps(browser, html, width, print_layout)
            assert found["found"] == [], f"{html.parent.parent.name}: {found['found']}"
            charts += found["charts"]
    assert charts > 2 * 60  # every suite's charts were looked at


def _level(level: str, rows: list[LevelRow]) -> records.TestData:
    result = LevelResult(level, "btrfs", rows=rows).to_json()
    return records.TestData(level, "complete", {}, {}, result)


def matrix_run(levels: list[records.TestData]) -> records.RunData:
    """A stored matrix run of ``levels`` (as the report reads it)."""
    return records.RunData("20990101-000000-0000", 0.0, None, "matrix", "quick", True,
                           "complete", "", "/dev/a,/dev/b", None, False, {}, {}, {}, {}, [],
                           levels)


def crowded_charts() -> str:
    """A report page of crowded axes: the matrix's latency comparison, 56 PTS cells, long
    names, categories on a line chart, large numbers on a numeric axis."""
    latency = [(b, m) for b in (8192, 4096, 512) for m in (100, 65, 0)]
    levels = [_level(level, [
        LevelRow("latency", cell_name("latency", b, m), 1e6 / (80 + k + n), 8.0, m, b,
                 80.0 + k + n, 160.0 + k, BY_LATENCY)
        for n, (b, m) in enumerate(latency)]) for k, level in
        enumerate(("raid0", "raid5", "raid10"))]
    matrix = comparison_page(matrix_run(levels), "m")
    cells = [cell_label(b * 1024, m) for b in (1024, 128, 64, 32, 16, 8, 4)
             for m in (100, 95, 65, 50, 35, 5, 0)] + [cell_label(512, m) for m in (100, 0)]
    values = tuple(float(1000 + 37 * i) for i in range(len(cells)))
    many = ch.bar_chart("pts56", "Every PTS IOPS cell", cells,
                        [ch.Series("run", tuple(range(len(cells))), values)],
                        x_label="cell", y_label="IOPS")
    words = [f"workload_{i}_without_any_space_in_its_name" for i in range(12)]
    long = ch.bar_chart("long", "Long names", words,
                        [ch.Series(str(s), tuple(range(12)), tuple(range(1, 13)))
                         for s in range(3)], x_label="workload", y_label="MB/s")
    line = ch.line_chart("line", "Categories on a line", [
        ch.Series("a", tuple(float(i) for i in range(20)),
                  tuple(float(i * i) for i in range(20)))],
        x_label="block size and mix", y_label="IOPS",
        x_categories=[f"{cells[i]} extra words" for i in range(20)])
    numeric = ch.line_chart("numeric", "Large numbers", [
        ch.Series("a", (1_000_000.0, 1_234_567.0, 9_876_543.0), (1.0, 2.0, 3.0))],
        x_label="IOPS", y_label="latency (us)")
    more = Page("crowded", "Crowded axes",
                "".join(f"<figure>{svg}</figure>" for svg in (many, long, line, numeric)))
    return document("crowded", [matrix, more], "<h1>crowded</h1>")


def test_crowded_axes_never_overlap(browser: Browser, tmp_path: Path) -> None:
    html = tmp_path / "crowded.html"
    html.write_text(crowded_charts(), encoding="utf-8")
    for width, print_layout in ((1280, False), (A4_PRINT_WIDTH_PX, True)):
        found = overlaps(browser, html, width, print_layout)
        assert found["found"] == []
        assert found["charts"] == 5  # the matrix's mean latency, and four more
        assert found["turned"] >= 12  # crowded names are turned, not dropped ...
        # ... and most are still shown: 9 + 58 + 12 + 20 names, 3 titles, 2 axis titles
        # and ticks each
        assert found["texts"] > 80
