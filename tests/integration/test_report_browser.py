"""The report acceptance test: a real quick run on the emulated SSD, a second real run,
and the imported CM5-R and SN640 reviews, rendered in headless Chromium and as PDF.

Screenshots of the SNIA pages go to tests/artifacts/report/ for a person to look at.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.conftest import QUICK_PTS_TIMEOUT_S, QuickPts
from tests.support.browser import Browser, Page, artifact_dir, pdf_text, require_tool
from tests.support.cli import ssdlab

pytestmark = [pytest.mark.root, pytest.mark.fio, pytest.mark.browser, pytest.mark.slow,
              pytest.mark.timeout(QUICK_PTS_TIMEOUT_S)]

PUBLISHED = Path(__file__).resolve().parents[1] / "fixtures" / "reference" / (
    "published-results.csv")


def _run_id(stdout: str) -> str:
    found = re.search(r"\brun (\d{8}-\d{6}-[0-9a-f]{4})\b", stdout)
    assert found, stdout
    return found.group(1)


@pytest.fixture(scope="module")
def report(quick_pts: QuickPts) -> Iterator[tuple[Path, dict[str, str]]]:
    """report.html and report.pdf of: the quick run, a max-op run, the CM5-R, the SN640."""
    assert quick_pts.result.returncode == 0, quick_pts.result.stderr
    env, store = quick_pts.env, str(quick_pts.store)
    started = ssdlab("emulator", "start", "--name", "maxop", "--profile", "max-op",
                     "--size", "512MiB", "--loop", env=env)
    assert started.returncode == 0, started.stderr
    device = next(line.split()[-1] for line in started.stdout.splitlines() if "target:" in line)
    second = ssdlab("run", "pts", "--target", device, "--destroy-data", "--profile", "quick",
                    "--tests", "iops", "--block-sizes", "4,64", "--mixes",
                    "100/0,65/35,0/100", "--max-rounds", "5", "--round-seconds", "0.2",
                    "--store", store, env=env)
    ssdlab("emulator", "stop", "--name", "maxop", env=env)
    assert second.returncode == 0, second.stderr
    imported = ssdlab("import", "published", str(PUBLISHED), "--store", store)
    assert imported.returncode == 0, imported.stderr
    ids = {
        "quick": quick_pts.run_id,
        "maxop": _run_id(second.stdout),
        "cm5r": _run_id(next(x for x in imported.stdout.splitlines() if "CM5-R" in x)),
        "sn640": _run_id(next(x for x in imported.stdout.splitlines() if "SN640" in x)),
    }
    out = quick_pts.workdir / "report"
    made = ssdlab("report", *ids.values(), "-o", str(out), "--store", store)
    assert made.returncode == 0 and made.stderr == "", made.stderr
    assert (out / "report.html").stat().st_size > 100_000
    yield out, ids


@pytest.fixture(scope="module")
def page(report: tuple[Path, dict[str, str]]) -> Iterator[Page]:
    out, _ = report
    with Browser() as browser, browser.open_page(out / "report.html") as opened:
        yield opened


def test_the_report_loads_offline_without_console_errors(page: Page) -> None:
    assert page.console_errors() == []
    assert page.requested_urls() == [page.url]  # nothing fetched: works offline
    assert page.evaluate("document.body.getAttribute('data-ready')") == "1"


def test_every_chart_renders(page: Page) -> None:
    charts = page.evaluate(
        "[...document.querySelectorAll('svg.chart')].map(s => ({id: s.id, "
        "kind: s.dataset.chart, marks: s.querySelectorAll('.pt').length, "
        "w: s.getBoundingClientRect().width, h: s.getBoundingClientRect().height}))"
    )
    assert len(charts) >= 30
    empty = [c["id"] for c in charts if c["marks"] == 0 or c["w"] < 200 or c["h"] < 150]
    assert empty == []
    kinds = {c["kind"] for c in charts}
    assert kinds == {"line", "bar", "bar3d"}
    bars3d = [c for c in charts if c["kind"] == "bar3d"]
    assert any(c["marks"] == 56 for c in bars3d)  # the quick run's full 8 x 7 matrix


def test_hover_shows_values_and_legend_toggles_series(page: Page) -> None:
    page.evaluate("document.getElementById('run0-t0-conv').scrollIntoView()")
    page.hover("#run0-t0-conv-100 .pt")
    tip = page.evaluate("[getComputedStyle(tip).display, tip.textContent]")
    assert tip[0] == "block" and re.search(r"\d IOPS$", tip[1]), tip
    page.click("#run0-t0-conv-100 .legend-item[data-series='0']")
    hidden = page.evaluate(
        "getComputedStyle(document.querySelector("
        "\"#run0-t0-conv-100 .series[data-series='0']\")).display"
    )
    assert hidden == "none"
    page.click("#run0-t0-conv-100 .legend-item[data-series='0']")
    assert page.evaluate(
        "document.querySelector(\"#run0-t0-conv-100 .series[data-series='0']\")"
        ".classList.contains('off')"
    ) is False


def test_screenshots_of_the_snia_pages(page: Page) -> None:
    shots = artifact_dir("report")
    anchors = {
        "cover": "cover", "run-title": "run0", "iops-convergence": "run0-t0-conv",
        "iops-verification": "run0-t0-ver", "iops-results": "run0-t0-res",
        "latency-results": "run0-t3-res", "comparison-charts": "compare-charts",
        "ratios": "compare-ratios-0", "claims-cm5r": "claims-2",
    }
    for name, anchor in anchors.items():
        assert page.evaluate(f"!!document.getElementById('{anchor}')"), anchor
        page.evaluate(f"document.getElementById('{anchor}').scrollIntoView()")
        path = page.screenshot(shots / f"{name}.png", full_page=False)
        assert path.stat().st_size > 20_000, name


#: A4 less the report's 10 mm side margins, in CSS pixels (96 per inch)
A4_PRINT_WIDTH_PX = int((210 - 2 * 10) / 25.4 * 96)


def test_no_page_is_wider_than_a4_in_print(report: tuple[Path, dict[str, str]]) -> None:
    # Chromium shrinks the whole PDF to fit its widest element: one table too wide for A4
    # printed every page of a 20-run report small
    out, _ = report
    with Browser() as browser, browser.open_page(
        out / "report.html", viewport=(A4_PRINT_WIDTH_PX, 1000)
    ) as opened:
        opened.emulate_print()
        wide = opened.evaluate(
            "[...document.querySelectorAll('section.page')]"
            ".filter(s => s.scrollWidth > s.clientWidth + 1).map(s => s.id)"
        )
        assert wide == []
        assert opened.evaluate("document.documentElement.scrollWidth") <= A4_PRINT_WIDTH_PX


def test_the_pdf_has_the_expected_pages(report: tuple[Path, dict[str, str]]) -> None:
    require_tool("pdftotext")
    out, ids = report
    pages = pdf_text(out / "report.pdf")
    assert len(pages) >= 30

    def first(words: str) -> int:  # after the cover, whose contents list every title
        found = [n for n, text in enumerate(pages) if words in text and n > 0]
        assert found, words
        return found[0]

    order = [
        first("IOPS: steady state convergence"), first("IOPS: steady state verification"),
        first("IOPS: results"), first("Throughput 128 KiB: results"),
        first("Latency: results"), first("Comparison: runs and parameters"),
        first("Comparison: all runs on one chart per test"),
        first("Comparison: ratios to the baseline"), first("Leaderboards per workload"),
    ]
    assert order == sorted(order)
    assert "Measurement window" in pages[order[1]]
    assert "IOPS, 3D view" in "".join(pages[order[2]: order[2] + 2])  # vector text
    assert any("Toshiba CM5-R (published): measured against claimed" in p for p in pages)
    assert any("Ultrastar DC SN640 (published): measured against claimed" in p for p in pages)
    quick_pages = [p for p in pages if f"run {ids['quick']}" in p]
    assert len(quick_pages) >= 10
    assert all("QUICK PROFILE" in p for p in quick_pages)
    ratios = "".join(p for p in pages if "ratios to the baseline" in p or "significant" in p)
    assert "significant" in ratios  # the max-op drive's writes differ beyond the noise
