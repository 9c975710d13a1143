"""Every report says what it is, in its suite's words (``SuiteSpec.report_title``): a
CrystalDiskMark-like run's report is not a "SNIA PTS report" (issue 31). The PTS and the
database suites' reports keep their titles; a published reference run compared with a PTS
run makes a PTS report, as before. Checked on the golden stores' runs."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence

import pytest

from ssdlab.report.build import render
from ssdlab.report.registry import COMPARISON_TITLE, UNKNOWN_TITLE, report_title
from ssdlab.store.records import RunData
from ssdlab.suites import SUITES, find
from tests.support.golden import load_golden_runs

PTS_TITLE = "SNIA PTS report"
DB_TITLE = "database benchmark report"


@pytest.fixture(scope="module")
def golden_runs(tmp_path_factory: pytest.TempPathFactory) -> list[RunData]:
    return load_golden_runs(tmp_path_factory)


def _runs(runs: list[RunData], suite: str) -> list[RunData]:
    found = [r for r in runs if r.suite == suite]
    assert found, f"the golden stores have no {suite} run"
    return found


def _titles(runs: Sequence[RunData], title: str | None = None) -> tuple[str, str]:
    """The report's <title> and its cover's heading."""
    html, _ = render(runs, title=title)
    head = re.search(r"<title>([^<]*)</title>", html)
    cover = re.search(r'<section class="page" id="cover"><h1>([^<]*)</h1>', html)
    assert head is not None and cover is not None
    return head.group(1), cover.group(1)


def _spec_title(suite: str) -> str:
    found = find(suite)
    assert found is not None
    return found.spec.report_title


@pytest.mark.parametrize("suite", ["cdm", "atto", "verify", "peak", "matrix"])
def test_a_suites_report_carries_its_own_title(golden_runs: list[RunData], suite: str
                                               ) -> None:
    run = _runs(golden_runs, suite)[0]
    title, cover = _titles([run])
    assert title == cover
    assert title.endswith(f": {_spec_title(suite)}"), title
    assert PTS_TITLE not in title


def test_the_pts_and_database_reports_keep_their_titles(golden_runs: list[RunData]) -> None:
    assert _spec_title("pts") == PTS_TITLE and _spec_title("db") == DB_TITLE
    pts = _runs(golden_runs, "pts")
    assert _titles(pts[:1])[0].endswith(f": {PTS_TITLE}")
    assert _titles(pts[:2])[0] == f"2 runs compared: {PTS_TITLE}"
    assert _titles(_runs(golden_runs, "db"))[0].endswith(f": {DB_TITLE}")


def test_published_runs_take_the_kind_of_the_runs_they_are_compared_with(
        golden_runs: list[RunData]) -> None:
    published = _runs(golden_runs, "published")
    assert all(r.read_only for r in published)
    pts = _runs(golden_runs, "pts")[0]
    assert _titles([pts, *published])[0] == f"{1 + len(published)} runs compared: {PTS_TITLE}"
    assert report_title([published[0], _runs(golden_runs, "cdm")[0]]) == _spec_title("cdm")
    assert report_title(published) == _spec_title("published") == "published reference report"


def test_runs_of_suites_of_different_kinds_make_a_comparison_report(
        golden_runs: list[RunData]) -> None:
    cdm, atto = _runs(golden_runs, "cdm")[0], _runs(golden_runs, "atto")[0]
    assert _titles([cdm, atto])[0] == f"2 runs compared: {COMPARISON_TITLE}"
    matrix = _runs(golden_runs, "matrix")[0]
    assert report_title([matrix, *_runs(golden_runs, "pts")]) == COMPARISON_TITLE


def test_a_run_of_a_suite_this_ssdlab_does_not_know_makes_a_plain_report(
        golden_runs: list[RunData]) -> None:
    gone = dataclasses.replace(_runs(golden_runs, "cdm")[0], suite="gone")
    assert report_title([gone]) == UNKNOWN_TITLE


def test_the_title_given_is_the_title(golden_runs: list[RunData]) -> None:
    assert _titles(_runs(golden_runs, "cdm")[:1], title="Drive A") == ("Drive A", "Drive A")


def test_every_suite_has_a_title_of_its_own() -> None:
    titles = [s.spec.report_title for s in SUITES]
    assert len(set(titles)) == len(titles), titles
    assert COMPARISON_TITLE not in titles


def _cover_says(runs: Sequence[RunData]) -> str:
    """What the cover says the report holds (after the results store, before the units)."""
    html, _ = render(runs)
    said = re.search(r"from the results store\. ([^;]*);", html)
    assert said is not None
    return said.group(1)


def test_the_cover_says_what_its_runs_pages_are_and_claims_no_pts_for_others(
        golden_runs: list[RunData]) -> None:
    cdm, atto = _runs(golden_runs, "cdm")[0], _runs(golden_runs, "atto")[0]
    pts, published = _runs(golden_runs, "pts")[0], _runs(golden_runs, "published")[0]
    gone = dataclasses.replace(cdm, suite="gone")
    assert _cover_says([cdm]) == "Pages per run: CrystalDiskMark-like report"
    assert _cover_says([atto, cdm, atto]) == (
        "Pages per run: ATTO-like report, CrystalDiskMark-like report")
    assert _cover_says([pts, published]) == (
        f"Pages per run: {PTS_TITLE}, published reference report")
    assert _cover_says([gone]) == f"Pages per run: {UNKNOWN_TITLE}"
    for run in golden_runs:
        if run.suite not in ("pts", "published"):
            assert "SNIA" not in _cover_says([run]), run.suite
