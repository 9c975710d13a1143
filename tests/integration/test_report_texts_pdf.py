"""The printed report says what a reader reads (issue 30: the PDF printed Python's
``True``/``False``): the PDF of the reports of every run of the golden stores
(tests/fixtures/store: a run of every suite, by real fio), printed by Chromium and read
back with pdftotext, holds no ``True``, ``False`` or ``None``, and a quick run's pages carry
its own suite's QUICK banner (a CrystalDiskMark-like run's is not about the PTS). The
same on show, the HTML and the export: tests/unit/test_report_texts.py."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from ssdlab.report.build import ReportRequest, write_report
from ssdlab.store.db import Store
from tests.support.browser import pdf_text, require_chromium

pytestmark = [pytest.mark.browser]

STORES = Path(__file__).resolve().parents[1] / "fixtures" / "store"
PYTHON_WORDS = re.compile(r"\b(True|False|None)\b")


@pytest.mark.parametrize("name", ["suites", "matrix", "db", "peak"])
def test_the_pdf_of_every_golden_run_says_yes_or_no(name: str, tmp_path: Path) -> None:
    require_chromium()
    shutil.copyfile(STORES / f"{name}.sqlite", tmp_path / "store.sqlite")
    with Store.open(tmp_path / "store.sqlite") as store:
        runs = {r.run_id: r.suite for r in store.list_runs()}
        files = write_report(store, ReportRequest(tuple(runs), tmp_path / "report"))
    assert files.pdf is not None
    pages = pdf_text(files.pdf)
    assert len(pages) >= len(runs)
    found = [f"page {n}: {line.strip()}" for n, page in enumerate(pages, 1)
             for line in page.splitlines() if PYTHON_WORDS.search(line)]
    assert found == []
    text = re.sub(r"\s+", " ", "\n".join(pages))
    # the flags a title page lists, as words (every run's options hold some)
    assert re.search(r"\bquick (yes|no)\b", text) or re.search(r"\bdirect (yes|no)\b", text)
    if "cdm" in runs.values():
        assert "QUICK PROFILE: a 16 MiB file and short measurements" in text
    if name == "db":
        assert "not a valid PTS result" not in text
