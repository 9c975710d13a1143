"""The headless-browser harness and the PDF printer, on small hand-written pages.

Tests marked ``browser`` share one Chromium for the module and are skipped when it is
not installed; the error paths of :mod:`ssdlab.report.pdf` use fake Chromium scripts.
"""

from __future__ import annotations

import contextlib
import os
import struct
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ssdlab.errors import EnvironmentProblem, ExitCode
from ssdlab.report.pdf import CHROMIUM_ENV, find_chromium, html_to_pdf
from tests.support.browser import (
    Browser,
    BrowserError,
    artifact_dir,
    pdf_info,
    pdf_page_count,
    pdf_text,
    require_chromium,
    require_tool,
)

CHART_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>harness fixture</title>
<style>
  @page { size: A5; margin: 12mm }
  body { font-family: "DejaVu Sans", sans-serif }
  .bar { fill: steelblue } .bar.selected { fill: darkorange }
  .next { break-before: page }
</style></head>
<body>
<h1>Harness fixture</h1>
<p>First page text ALPHA-1.</p>
<svg id="chart" width="420" height="220" viewBox="0 0 420 220" role="img">
  <rect class="bar" x="20" y="70" width="60" height="130" data-value="130"/>
  <rect class="bar" x="120" y="40" width="60" height="160" data-value="160"/>
  <rect class="bar" x="220" y="100" width="60" height="100" data-value="100"/>
  <rect class="bar" x="320" y="150" width="60" height="50" data-value="50"/>
  <line x1="10" y1="200" x2="410" y2="200" stroke="#333"/>
  <text x="210" y="20" text-anchor="middle">SVG-LABEL-IOPS</text>
</svg>
<div id="tooltip" hidden></div>
<section class="next"><h2>Second page BRAVO-2</h2></section>
<section style="page-break-before: always"><h2>Third page CHARLIE-3</h2></section>
<script>
  const tip = document.getElementById("tooltip");
  for (const bar of document.querySelectorAll("#chart .bar")) {
    bar.addEventListener("mouseenter", () => {
      tip.textContent = "value " + bar.dataset.value;
      tip.hidden = false;
    });
    bar.addEventListener("mouseleave", () => { tip.hidden = true; });
    bar.addEventListener("click", () => bar.classList.toggle("selected"));
  }
</script>
</body></html>
"""

BROKEN_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>broken fixture</title></head>
<body><p>broken</p><img src="missing.png" alt="">
<script>console.error("deliberate console error", 42); console.warn("deliberate warning");
console.log("an ordinary log line");</script>
<script>throw new Error("deliberate exception");</script>
</body></html>
"""

browser_test = pytest.mark.browser


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("pages")
    (directory / "chart.html").write_text(CHART_PAGE)
    (directory / "broken.html").write_text(BROKEN_PAGE)
    return directory


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with Browser() as shared:  # skips the tests using it when Chromium is missing
        yield shared


@browser_test
def test_a_clean_page_has_no_console_messages_and_loads_only_itself(
    browser: Browser, pages: Path
) -> None:
    with browser.open_page(pages / "chart.html") as page:
        assert page.console_errors() == []
        assert page.console_warnings() == []
        assert page.requested_urls() == [page.url]
        assert page.evaluate("document.readyState") == "complete"


@browser_test
def test_console_errors_page_exceptions_and_failed_loads_are_caught(
    browser: Browser, pages: Path
) -> None:
    with browser.open_page(pages / "broken.html") as page:
        errors = page.console_errors()
        warnings = page.console_warnings()
    assert "console.error: deliberate console error 42" in errors
    assert any(e.startswith("exception: Error: deliberate exception (file://") for e in errors)
    assert any("Failed to load resource" in e and "missing.png" in e for e in errors)
    assert len(errors) == 3, errors
    assert warnings == ["console.warning: deliberate warning"]


@browser_test
def test_svg_children_can_be_read(browser: Browser, pages: Path) -> None:
    with browser.open_page(pages / "chart.html") as page:
        assert page.evaluate("document.querySelector('#chart').childElementCount") == 6
        values = page.evaluate("[...document.querySelectorAll('.bar')].map(b => b.dataset.value)")
        assert values == ["130", "160", "100", "50"]
        with pytest.raises(BrowserError, match="nope"):
            page.evaluate("(() => { throw new Error('nope') })()")


@browser_test
def test_hover_and_click_change_the_dom(browser: Browser, pages: Path) -> None:
    tip = "document.getElementById('tooltip')"
    tooltip = f"[{tip}.hidden, {tip}.textContent]"
    with browser.open_page(pages / "chart.html") as page:
        assert page.evaluate(tooltip) == [True, ""]
        page.hover("#chart .bar:nth-of-type(2)")
        assert page.evaluate(tooltip) == [False, "value 160"]
        page.hover("h1")
        assert page.evaluate(tooltip) == [True, "value 160"]
        page.click("#chart .bar:nth-of-type(4)")
        assert page.evaluate("document.querySelectorAll('.bar.selected').length") == 1
        with pytest.raises(BrowserError, match="no element matches"):
            page.hover("#nothing")
        assert page.console_errors() == []


@browser_test
def test_full_page_screenshot_is_a_png_of_the_whole_page(
    browser: Browser, pages: Path, request: pytest.FixtureRequest
) -> None:
    shot = artifact_dir(request.node.name) / "chart.png"
    shot.unlink(missing_ok=True)
    with browser.open_page(pages / "chart.html", viewport=(800, 300)) as page:
        page_height = page.evaluate("document.documentElement.scrollHeight")
        page.screenshot(shot)
    data = shot.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 1000
    width, height = struct.unpack(">II", data[16:24])
    assert (width, height) == (800, page_height) and page_height > 300


@browser_test
def test_pdf_keeps_the_pages_the_css_asks_for_and_svg_text_as_text(
    pages: Path, request: pytest.FixtureRequest
) -> None:
    require_chromium()
    pdfimages = require_tool("pdfimages")
    pdf = artifact_dir(request.node.name) / "chart.pdf"
    pdf.unlink(missing_ok=True)
    html_to_pdf(pages / "chart.html", pdf)
    assert pdf_page_count(pdf) == 3
    assert pdf_info(pdf)["Page size"].endswith("(A5)")
    first, second, third = pdf_text(pdf)
    assert "ALPHA-1" in first and "SVG-LABEL-IOPS" in first  # the chart's label is text
    assert "BRAVO-2" in second and "CHARLIE-3" in third
    images = subprocess.run([pdfimages, "-list", str(pdf)], capture_output=True, text=True)
    assert images.stdout.splitlines()[2:] == []  # header only: the chart is vector, not an image
    assert [p.name for p in pdf.parent.iterdir()] == ["chart.pdf"]


def test_no_chromium_is_a_one_line_environment_problem(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(CHROMIUM_ENV, "/nonexistent")
    with pytest.raises(EnvironmentProblem) as excinfo:
        html_to_pdf(tmp_path / "report.html", tmp_path / "report.pdf")
    message = excinfo.value.message
    assert "\n" not in message and "/nonexistent" in message
    assert "apt-get install chromium" in message
    assert excinfo.value.exit_code == ExitCode.ENVIRONMENT
    monkeypatch.delenv(CHROMIUM_ENV)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(EnvironmentProblem, match=r"not found \(tried chromium, .*apt-get install"):
        find_chromium()


def _fake_chromium(tmp_path: Path, body: str) -> Path:
    """A script standing in for Chromium: it records its pid, then runs ``body``."""
    script = tmp_path / "fake-chromium"
    script.write_text(f'#!/bin/sh\necho $$ > "{tmp_path}/pid"\n{body}\n')
    script.chmod(0o755)
    return script


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"


def _gone(pid: int, within_s: float = 5.0) -> bool:
    """``pid`` is dead (or a zombie) within ``within_s``: a SIGKILL sent to a process group
    takes effect on each of its processes a moment after ``killpg`` returns (a busy CPU
    can hold that moment back), so the check waits for it, with a bound."""
    end = time.monotonic() + within_s
    while _alive(pid):
        if time.monotonic() > end:
            return False
        time.sleep(0.02)
    return True


def _report(tmp_path: Path) -> tuple[Path, Path]:
    """A source page and a previous PDF that a failed print must leave alone."""
    html, pdf = tmp_path / "out" / "report.html", tmp_path / "out" / "report.pdf"
    html.parent.mkdir()
    html.write_text("<p>x</p>")
    pdf.write_bytes(b"previous report")
    return html, pdf


HANGING = 'sleep 600 &\necho $! > "$(dirname "$0")/child"\n{}exec sleep 600'


def test_a_chromium_that_hangs_is_killed_with_its_children(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(CHROMIUM_ENV, str(_fake_chromium(tmp_path, HANGING.format(""))))
    html, pdf = _report(tmp_path)
    with pytest.raises(EnvironmentProblem, match=r"did not finish within 1 s and was stopped"):
        html_to_pdf(html, pdf, timeout_s=1)
    for name in ("pid", "child"):
        assert _gone(int((tmp_path / name).read_text()))
    assert sorted(p.name for p in html.parent.iterdir()) == ["report.html", "report.pdf"]
    assert pdf.read_bytes() == b"previous report"


def test_ctrl_c_stops_chromium_and_leaves_no_part_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    interrupt = "sleep 0.5; kill -INT $PPID\n"  # the parent is this test's process
    monkeypatch.setenv(CHROMIUM_ENV, str(_fake_chromium(tmp_path, HANGING.format(interrupt))))
    html, pdf = _report(tmp_path)
    with pytest.raises(KeyboardInterrupt):
        html_to_pdf(html, pdf, timeout_s=60)
    for name in ("pid", "child"):
        assert _gone(int((tmp_path / name).read_text()))
    assert sorted(p.name for p in html.parent.iterdir()) == ["report.html", "report.pdf"]


def test_a_failing_chromium_leaves_no_half_pdf_and_says_why_in_one_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    half_pdf_then_fail = """for arg; do
  case "$arg" in --print-to-pdf=*) out="${arg#*=}";; esac
done
printf '%%PDF-1.4 half' > "$out"
echo '[1:2:1123/085403.02:ERROR:dbus/bus.cc:405] Failed to connect to the bus' >&2
echo '[1:1:1123/085403.03:FATAL:renderer.cc:7] renderer crashed: out of memory' >&2
echo '[1:2:1123/085403.04:ERROR:dbus/bus.cc:405] Failed to connect to the bus' >&2
exit 5"""
    monkeypatch.setenv(CHROMIUM_ENV, str(_fake_chromium(tmp_path, half_pdf_then_fail)))
    html, pdf = _report(tmp_path)
    with pytest.raises(EnvironmentProblem) as excinfo:
        html_to_pdf(html, pdf)
    assert excinfo.value.message == (
        f"Chromium could not print {html} to PDF: exit status 5: renderer crashed: out of memory"
    )
    assert sorted(p.name for p in html.parent.iterdir()) == ["report.html", "report.pdf"]
    assert pdf.read_bytes() == b"previous report"


HALF_PDF = """for arg; do
  case "$arg" in --print-to-pdf=*) printf '%%PDF-1.4 half' > "${arg#*=}";; esac
done"""


@pytest.mark.parametrize("writes", ["", HALF_PDF], ids=["nothing", "half"])
def test_an_incomplete_pdf_is_refused_even_when_chromium_exits_0(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, writes: str
) -> None:
    quiet = "echo '[1:1:1123/085403.03:ERROR:handler.cc:403] Page load failed: net::ERR_X' >&2"
    monkeypatch.setenv(CHROMIUM_ENV, str(_fake_chromium(tmp_path, f"{writes}\n{quiet}")))
    html, pdf = _report(tmp_path)
    with pytest.raises(EnvironmentProblem, match=r"to PDF: Page load failed: net::ERR_X$"):
        html_to_pdf(html, pdf)
    assert sorted(p.name for p in html.parent.iterdir()) == ["report.html", "report.pdf"]


def _processes_with(marker: str) -> list[int]:
    """Live processes whose environment holds ``marker`` (Chromium and all its helpers)."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit() and int(proc.name) != os.getpid():
            with contextlib.suppress(OSError):
                if marker.encode() in (proc / "environ").read_bytes() and _alive(int(proc.name)):
                    found.append(int(proc.name))
    return found


@browser_test
def test_a_real_chromium_is_killed_with_all_its_helpers_on_timeout(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    require_chromium()
    marker = f"SSDLAB_TEST_MARK={tmp_path.name}"
    monkeypatch.setenv("SSDLAB_TEST_MARK", tmp_path.name)
    html, pdf = _report(tmp_path)
    html.write_text("<p>busy</p><script>while (true) {}</script>")
    with pytest.raises(EnvironmentProblem, match=r"did not finish within 1\.5 s"):
        html_to_pdf(html, pdf, timeout_s=1.5)
    assert _processes_with(marker) == []
    assert sorted(p.name for p in html.parent.iterdir()) == ["report.html", "report.pdf"]
