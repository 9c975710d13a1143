"""Report tables wrap between words, never inside one, on screen and in print.

Narrow columns once printed "verdi ct": the cells let Chromium break anywhere, so the
table layout squeezed columns below their longest word. Now a cell's text breaks only
between words, and only long tokens (paths, job names, hashes of 24 characters or more:
``span.tok``) may break anywhere. Checked in headless Chromium on the report of every
run of the golden store (tests/fixtures/store: a real run of every suite and six
imported reviews, so every kind of page and comparison tables of many runs): each word
of each table cell is laid out on one line (its ``Range.getClientRects`` all on one
line), on a wide and a narrow window and in print, where no page is wider than A4.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ssdlab.report.build import ReportRequest, write_report
from ssdlab.store.db import Store
from tests.support.browser import Browser, Page, require_chromium

pytestmark = [pytest.mark.browser]

GOLDEN_STORE = Path(__file__).resolve().parents[1] / "fixtures" / "store" / "suites.sqlite"
#: A4 less the report's 10 mm side margins, in CSS pixels (96 per inch)
A4_PRINT_WIDTH_PX = int((210 - 2 * 10) / 25.4 * 96)
SCREEN = (1280, 900)

#: every word (letters, or a number with its "," and "." inside) of every table cell that
#: is not inside a token, whose boxes lie on more than one line
BROKEN_WORDS_JS = r"""
(() => {
  const broken = [];
  const range = document.createRange();
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  let words = 0;
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const parent = node.parentElement;
    const cell = parent.closest('td, th');
    if (!cell || parent.closest('.tok')) continue;
    for (const m of node.data.matchAll(/[\p{L}\p{N}]+(?:[.,][\p{L}\p{N}]+)*/gu)) {
      words += 1;
      range.setStart(node, m.index);
      range.setEnd(node, m.index + m[0].length);
      const lines = new Set([...range.getClientRects()]
        .filter(r => r.width > 0).map(r => Math.round(r.top)));
      if (lines.size > 1) {
        broken.push({word: m[0], lines: lines.size, cell: cell.textContent.slice(0, 60),
                     page: cell.closest('section')?.id});
      }
    }
  }
  return {words, broken};
})()
"""

#: table cells whose words are on more than one line in all: tables really wrap here
WRAPPED_CELLS_JS = r"""
[...document.querySelectorAll('td, th')].filter(cell => {
  const range = document.createRange();
  range.selectNodeContents(cell);
  return new Set([...range.getClientRects()].filter(r => r.width > 0)
    .map(r => Math.round(r.top))).size > 1;
}).length
"""


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """report.html of every run in (a copy of) the golden store."""
    work = tmp_path_factory.mktemp("wrapping")
    store_path = work / "suites.sqlite"
    shutil.copyfile(GOLDEN_STORE, store_path)
    with Store.open(store_path) as store:
        ids = tuple(run.run_id for run in store.list_runs())
        files = write_report(store, ReportRequest(ids, work / "report", pdf=False))
    assert len(ids) >= 20
    return files.html


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    require_chromium()
    with Browser() as opened:
        yield opened


def broken_words(page: Page) -> list[str]:
    """Each word of a table cell that is laid out on more than one line, and where."""
    found: dict[str, Any] = page.evaluate(BROKEN_WORDS_JS)
    assert found["words"] > 10_000  # the check did look at the tables
    return [f"{b['page']}: {b['word']!r} on {b['lines']} lines, in {b['cell']!r}"
            for b in found["broken"]]


@pytest.mark.parametrize("width", [SCREEN[0], 760])
def test_no_table_word_breaks_on_screen(browser: Browser, report: Path, width: int) -> None:
    with browser.open_page(report, viewport=(width, SCREEN[1])) as page:
        assert broken_words(page) == []
        assert page.evaluate(WRAPPED_CELLS_JS) > 0  # the tables do wrap, between words
        # a table too wide for a narrow window scrolls inside its page, not the report
        assert page.evaluate("document.documentElement.scrollWidth") <= width


def test_no_table_word_breaks_in_print(browser: Browser, report: Path) -> None:
    with browser.open_page(report, viewport=(A4_PRINT_WIDTH_PX, 1000)) as page:
        page.emulate_print()
        assert broken_words(page) == []
        assert page.evaluate(WRAPPED_CELLS_JS) > 0
        # words kept whole do not widen the tables past the paper
        wide = page.evaluate(
            "[...document.querySelectorAll('section.page')]"
            ".filter(s => s.scrollWidth > s.clientWidth + 1).map(s => s.id)"
        )
        assert wide == []
        assert page.evaluate("document.documentElement.scrollWidth") <= A4_PRINT_WIDTH_PX
