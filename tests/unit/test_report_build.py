"""The HTML report from stored runs (made with the fake fio): pages, banners, comparisons.

The browser and PDF checks are in tests/integration/test_report_browser.py; here the
report's content is checked as text, fast.
"""

from __future__ import annotations

import html
import io
import os
import random
import re
from collections.abc import Callable
from html.parser import HTMLParser
from pathlib import Path

import pytest

from ssdlab.errors import UserError
from ssdlab.plan.pts import PtsArgs
from ssdlab.report import charts as ch
from ssdlab.report import pdf
from ssdlab.report.build import ReportRequest, _render_pages, render, write_report
from ssdlab.report.html import Page, document, print_parts
from ssdlab.run.progress import Progress
from ssdlab.run.pts_run import PtsRun
from ssdlab.store.db import Store
from tests.support.cli import one_line_error, ssdlab
from tests.support.fake_fio import FakeFio
from tests.support.prepared import make_prepared

QUICK_ALL = PtsArgs(profile="quick", purge="none", precondition=False)


def noisy(level: float, seed: int, spread: float = 0.02) -> Callable[[str, int], float]:
    def model(name: str, round_no: int) -> float:
        rng = random.Random(f"{seed}-{name}-{round_no}")
        return level * (1 + rng.uniform(-spread, spread))

    return model


def oscillating(name: str, round_no: int) -> float:
    return 10_000.0 * (1.4 if round_no % 2 else 0.6)


def stored_run(store: Store, tmp_path: Path, model: Callable[[str, int], float],
               args: PtsArgs = QUICK_ALL) -> str:
    prepared = make_prepared(tmp_path, args)
    runner = PtsRun(prepared, store, FakeFio(model), Progress(io.StringIO(), live=False,
                                                              quick=args.profile == "quick"))
    return runner.execute(["test"])


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store.open(tmp_path / "store.sqlite")


class _Checker(HTMLParser):
    """Counts tags and collects external references."""

    def __init__(self) -> None:
        super().__init__()
        self.opened: dict[str, int] = {}
        self.closed: dict[str, int] = {}
        self.refs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.opened[tag] = self.opened.get(tag, 0) + 1
        self.refs += [v or "" for k, v in attrs if k in ("src", "href") and v]

    def handle_endtag(self, tag: str) -> None:
        self.closed[tag] = self.closed.get(tag, 0) + 1


def check(html_text: str) -> _Checker:
    checker = _Checker()
    checker.feed(html_text)
    for tag in ("section", "svg", "table", "div", "figure"):
        assert checker.opened.get(tag, 0) == checker.closed.get(tag, 0), tag
    assert all(r.startswith("#") for r in checker.refs), "only in-page links: works offline"
    assert "cdn" not in html_text.lower() and "<link" not in html_text
    return checker


def test_one_quick_run_has_the_snia_pages_marked_quick_everywhere(
    store: Store, tmp_path: Path
) -> None:
    run_id = stored_run(store, tmp_path, noisy(10_000, 1))
    text, sections = render([store.load(run_id)])
    checker = check(text)
    for title in ("IOPS: steady state convergence", "IOPS: steady state verification",
                  "IOPS: results", "Throughput 1024 KiB: steady state convergence",
                  "Throughput 128 KiB: results", "Latency: steady state verification",
                  "Latency: results", "Measurement window", "IOPS, 3D view",
                  "IOPS by block size and read/write mix", "Device under test",
                  "Test parameters"):
        assert title in text, title
    assert checker.opened["section"] == sections
    pages_of_run = sections - 1  # all but the cover
    assert text.count('<div class="banner quick">') == pages_of_run + 1  # + the cover's
    assert checker.opened["svg"] >= 7 + 3 + 1 + 2 * 3 + 2  # convergence, verif., results
    assert "STEADY STATE NOT REACHED" not in text
    assert "verdict: steady: rounds 1-5" in text


def test_a_test_that_never_settles_says_so_on_each_of_its_pages(
    store: Store, tmp_path: Path
) -> None:
    args = PtsArgs(profile="quick", tests="iops", purge="none", precondition=False,
                   max_rounds=7)
    run_id = stored_run(store, tmp_path, oscillating, args)
    text, _ = render([store.load(run_id)])
    pages = re.findall(r'<section class="page" id="run0-t0-[a-z]+">.*?</section>', text, re.S)
    assert len(pages) == 3
    for page in pages:
        assert '<div class="banner not-steady">STEADY STATE NOT REACHED' in page
    assert "results are from the last window, rounds 3-7" in text
    assert '<td class="fail">FAIL</td>' in text


def _ratio_classes(text: str) -> list[str]:
    return re.findall(r'<td class="(sig-up|sig-down|noise)( num)?">', text)


def test_comparison_says_which_differences_are_larger_than_the_noise(
    store: Store, tmp_path: Path
) -> None:
    args = PtsArgs(profile="quick", tests="iops", purge="none", precondition=False,
                   block_sizes="4,64", mixes="100/0,0/100")
    base = stored_run(store, tmp_path, noisy(10_000, 1), args)
    same = stored_run(store, tmp_path, noisy(10_000, 2), args)
    faster = stored_run(store, tmp_path, noisy(12_500, 3), args)
    runs = [store.load(r) for r in (base, same, faster)]
    text, _ = render(runs)
    check(text)
    for title in ("Comparison: runs and parameters", "Comparison: all runs on one chart",
                  "Comparison: ratios to the baseline", "Leaderboards per workload"):
        assert title in text
    table = text[text.index('id="compare-ratios-0"'):]
    table = table[: table.index("</table>")]
    rows = re.findall(r"<tr>(.*?)</tr>", table, re.S)[1:]
    assert len(rows) == 2 * 2  # 2 block sizes x 2 mixes
    for row in rows:
        classes = re.findall(r'<td class="(sig-up|sig-down|noise)', row)
        assert classes == ["noise", "sig-up"], row  # same level: noise; +25 %: better
        assert re.search(r"1\.2[0-9]x, significant", row)
    assert "Runs differ in parameters" not in text


def test_runs_with_different_parameters_are_flagged(store: Store, tmp_path: Path) -> None:
    a = PtsArgs(profile="quick", tests="iops", purge="none", precondition=False,
                block_sizes="4", mixes="100/0")
    b = PtsArgs(profile="quick", tests="iops", purge="none", precondition=False,
                block_sizes="4", mixes="100/0", threads=4, iodepth=8)
    runs = [store.load(stored_run(store, tmp_path, noisy(1000, s), args))
            for s, args in ((1, a), (2, b))]
    text, _ = render(runs)
    assert "iops: threads x QD differ: 2 x QD 32, 4 x QD 8" in text
    assert "Runs differ in parameters for iops" in text
    assert '<tr class="flag">' in text


def test_cli_writes_html_and_reports_bad_input_without_writing(
    store: Store, tmp_path: Path
) -> None:
    args = PtsArgs(profile="quick", tests="iops", purge="none", precondition=False,
                   block_sizes="4", mixes="100/0,0/100")
    run_id = stored_run(store, tmp_path, noisy(1000, 1), args)
    other = stored_run(store, tmp_path, noisy(1000, 2), args)
    db = str(tmp_path / "store.sqlite")
    out = tmp_path / "out"
    ok = ssdlab("report", run_id, other, "--baseline", other, "--claims", f"{run_id}=SN640",
                "-o", str(out), "--no-pdf", "--store", db)
    assert ok.returncode == 0 and ok.stderr == "", ok.stderr
    html_text = html.unescape((out / "report.html").read_text())
    assert "measured against claimed" in html_text and "Ultrastar DC SN640" in html_text
    assert "chosen by the user ('SN640')" in html_text
    assert (out / "report.html").stat().st_mode & 0o044 == 0o044  # readable by others
    assert not (out / "report.pdf").exists()

    bad = tmp_path / "bad"
    cases = [
        (("report", "nosuchrun", "-o", str(bad)), 5, "no run matches"),
        (("report", run_id, "--baseline", "nosuch", "-o", str(bad)), 5, "no run matches"),
        (("report", run_id, "--claims", "nonsense", "-o", str(bad)), 2, "RUN=SPEC"),
        (("report", run_id, "--claims", f"{run_id}=Acme 9000", "-o", str(bad)), 2, "Acme"),
        (("report", run_id, "--claims", f"{other}=SN640", "-o", str(bad)), 2, "not in the"),
        (("report", run_id, run_id, "-o", str(bad)), 2, "given twice"),
        (("report", run_id, "-o", str(out / "report.html")), 2, "not a directory"),
    ]
    for argv, code, words in cases:
        result = ssdlab(*argv, "--no-pdf", "--store", db)
        assert result.returncode == code, (argv, result.stderr)
        assert words in one_line_error(result), (argv, result.stderr)
        assert not bad.exists()


def test_write_report_times_and_counts(store: Store, tmp_path: Path) -> None:
    args = PtsArgs(profile="quick", tests="latency", purge="none", precondition=False)
    run_id = stored_run(store, tmp_path, noisy(5000, 1), args)
    files = write_report(store, ReportRequest((run_id,), tmp_path / "r", pdf=False))
    assert files.html.exists() and files.pdf is None
    assert files.pages == 1 + 1 + 3  # cover, title page, three latency pages
    assert files.seconds_html < 5


def _section(text: str, section_id: str) -> str:
    found = re.search(rf'<section class="page" id="{section_id}">(.*?)</section>', text, re.S)
    assert found, section_id
    return html.unescape(found.group(1))


def test_title_page_names_device_host_and_every_parameter(store: Store, tmp_path: Path) -> None:
    run_id = stored_run(store, tmp_path, noisy(10_000, 1))
    run = store.load(run_id)
    text, _ = render([run])
    title = html.unescape(text[: text.index('id="run0-t0-')])
    for value in (run.run_id, run.target_path, "1,073,741,824 bytes", "fio", "3.33",
                  str(run.host["hostname"]), f"x{run.host['cpu_count']}"):
        assert value in title, value
    options = run.plan["options"]
    assert isinstance(options, dict) and len(options) >= 10
    for key in options:  # every stored option has its row on the title page
        assert f">{key.replace('_', ' ')}<" in title, key
    assert "- x-" not in title and "- / -" not in title


def test_snia_pages_carry_bands_fit_percentiles_and_throughput_bars(
    store: Store, tmp_path: Path
) -> None:
    run_id = stored_run(store, tmp_path, noisy(10_000, 1))
    text, _ = render([store.load(run_id)])
    verification = _section(text, "run0-t0-ver")
    for label in ("average +-10 %", "average +-20 %", "+10 %", "-20 %", "fitted line",
                  "data excursion", "slope excursion"):
        assert label in verification, label
    assert verification.count('data-chart="line"') == 3  # the v2.0 IOPS tracking cells
    convergence = _section(text, "run0-t0-conv")
    assert convergence.count('data-chart="line"') == 7  # one chart per mix
    assert convergence.count('class="legend-item"') == 7 * 8  # a series per block size
    latency = next(s for s in re.findall(r'id="(run0-t\d-res)"', text)
                   if "Latency: results" in _section(text, s))
    for column in ("mean", "max", "p99", "p99.9", "p99.99"):
        assert f">{column}" in _section(text, latency), column
    throughput = [s for s in re.findall(r'id="(run0-t\d-res)"', text)
                  if "Throughput" in _section(text, s)]
    assert len(throughput) == 2
    for section in throughput:
        assert 'data-chart="bar"' in _section(text, section)


def test_leaderboards_rank_best_first_and_latency_lowest_first(
    store: Store, tmp_path: Path
) -> None:
    args = PtsArgs(profile="quick", tests="iops,latency", purge="none", precondition=False)
    runs = [store.load(stored_run(store, tmp_path, noisy(level, seed), args))
            for seed, level in ((1, 5_000), (2, 20_000))]  # run 1 is four times faster
    text, _ = render(runs)
    board = _section(text, "leaderboard")

    def ranking(heading: str) -> list[tuple[int, str, float]]:
        part = board[board.index(f"<h3>{heading}</h3>"):]
        rows = re.findall(r'<tr><td>(\d+)</td><td><span class="swatch" '
                          r'style="background:(#[0-9A-F]+)"></span>.*?</td>'
                          r'<td class="num">([\d,.]+)</td>', part[:part.index("</table>")])
        return [(int(rank), colour, float(value.replace(",", ""))) for rank, colour, value
                in rows]

    iops = ranking("4 KiB random read IOPS")
    assert [(rank, colour) for rank, colour, _ in iops] == [(1, ch.colour(1)),
                                                            (2, ch.colour(0))]
    assert iops[0][2] > iops[1][2]
    # the fake fio's latency falls as its level rises: the faster run has the lower mean
    # latency and leads the board with the smaller value
    latency = ranking("4 KiB random read: mean latency (us)")
    assert [(rank, colour) for rank, colour, _ in latency] == [(1, ch.colour(1)),
                                                               (2, ch.colour(0))]
    assert latency[0][2] < latency[1][2]


def test_many_runs_split_the_parameter_table_to_fit_the_page(
    store: Store, tmp_path: Path
) -> None:
    # one table with a column per run made a 20-run report wider than A4, and Chromium
    # then printed every page of the PDF shrunk to fit it (38 %)
    from ssdlab.report.compare_pages import RUNS_PER_PARAMETER_TABLE

    a = PtsArgs(profile="quick", tests="iops", purge="none", precondition=False,
                block_sizes="4", mixes="100/0", max_rounds=5)
    b = PtsArgs(profile="quick", tests="iops", purge="none", precondition=False,
                block_sizes="4", mixes="100/0", max_rounds=5, iodepth=8)
    ids = [stored_run(store, tmp_path, noisy(1000, s), b if s == 11 else a) for s in range(12)]
    text, _ = render([store.load(r) for r in ids])
    page = _section(text, "compare")
    tables = re.findall(r"<table>.*?</table>", page, re.S)[1:]  # after the list of runs
    assert len(tables) == -(-12 // RUNS_PER_PARAMETER_TABLE)
    for tbl in tables:
        header = re.search(r"<thead>(.*?)</thead>", tbl, re.S)
        assert header and header.group(1).count("<th>") <= RUNS_PER_PARAMETER_TABLE + 1
        # the row that differs (in the last run only) is flagged in every table
        assert re.search(r'<tr class="flag"><td>iops: threads x QD</td>', tbl)


def _rendered(store: Store, tmp_path: Path, runs: int) -> tuple[str, list[Page], str]:
    args = PtsArgs(profile="quick", tests="iops,latency", purge="none", precondition=False,
                   block_sizes="4,64", mixes="100/0,0/100", max_rounds=5)
    ids = [stored_run(store, tmp_path, noisy(1000 + 100 * s, s), args) for s in range(runs)]
    return _render_pages([store.load(r) for r in ids], 0, None, None)


_SECTION_ID = re.compile(r'<section class="page" id="([^"]*)"')


def test_the_print_copy_in_one_part_is_the_report_without_its_script(
    store: Store, tmp_path: Path
) -> None:
    name, pages, cover = _rendered(store, tmp_path, 2)
    (only,) = print_parts(name, pages, cover, 1)
    assert only.html == document(name, pages, cover, interactive=False)
    assert only.stand_ins == frozenset()
    assert "<script" not in only.html and "<script" in document(name, pages, cover)


@pytest.mark.parametrize("parts", [2, 3, 5])
def test_print_parts_hold_every_section_once_and_keep_the_links_between_them(
    store: Store, tmp_path: Path, parts: int
) -> None:
    name, pages, cover = _rendered(store, tmp_path, 4)
    whole = document(name, pages, cover, interactive=False)
    cut = print_parts(name, pages, cover, parts)
    assert len(cut) == parts
    bodies = [p.html.split("<main>", 1)[1].split("</main>", 1)[0] for p in cut]
    # the same sections in the same order, each once, the cover with its contents first
    assert [s for b in bodies for s in _SECTION_ID.findall(b)] == _SECTION_ID.findall(whole)
    assert "".join(bodies) == whole.split("<main>", 1)[1].split("</main>", 1)[0]
    assert _SECTION_ID.findall(bodies[0])[0] == "cover"
    work = [b.count("<") for b in bodies]  # tags: what Chromium lays out and paints
    assert max(work) < 2.5 * sum(work) / parts  # about equal: each part has a CPU's work
    ids = [set(re.findall(r'\bid="([^"]*)"', b)) for b in bodies]
    links = [set(re.findall(r'href="#([^"]*)"', b)) for b in bodies]
    crossing = 0
    for n, part in enumerate(cut):
        elsewhere = links[n] - ids[n]
        crossing += len(elsewhere)
        assert part.stand_ins == elsewhere  # every link target is in some part
        tail = part.html.split("</main>", 1)[1]
        # out of sight and of no size: a stand-in target per link leaving the part ...
        assert all(f'<a id="{a}"></a>' in tail for a in elsewhere)
        assert 'style="position:absolute;left:0;top:0;width:0;height:0;' in tail
        # ... and a hidden link to each of its sections that another part links to
        wanted = set().union(*(links[j] for j in range(parts) if j != n)) & ids[n]
        assert set(re.findall(r'<a href="#([^"]*)" style="display:none">', tail)) == wanted
        assert "<script" not in part.html and f"<title>{html.escape(name)}</title>" in part.html
    assert cut[0].stand_ins and crossing >= len(cut[0].stand_ins)  # the cover's contents


def test_print_parts_never_outnumber_the_sections(store: Store, tmp_path: Path) -> None:
    name, pages, cover = _rendered(store, tmp_path, 1)
    cut = print_parts(name, pages, cover, len(pages) + 10)
    assert len(cut) == len(pages) + 1  # the cover and one section per part


def test_print_jobs_one_per_cpu_for_a_large_report_and_as_told(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(pdf.PRINT_JOBS_ENV, raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    assert pdf.print_jobs(300_000) == 1  # a one-run report: not worth a second Chromium
    assert pdf.print_jobs(pdf.BYTES_PER_JOB * 2) == 2
    assert pdf.print_jobs(50_000_000) == 2  # no more than the CPUs
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(64)))
    assert pdf.print_jobs(50_000_000) == pdf.MAX_PRINT_JOBS
    monkeypatch.setenv(pdf.PRINT_JOBS_ENV, "3")
    assert pdf.print_jobs(10) == 3
    monkeypatch.setattr(pdf, "_can_join", lambda: False)  # no pypdf: one Chromium
    assert pdf.print_jobs(50_000_000) == 1
    for bad in ("0", "-1", "two", "2.5", "", "99"):
        monkeypatch.setenv(pdf.PRINT_JOBS_ENV, bad)
        with pytest.raises(UserError, match=r"^SSDLAB_PRINT_JOBS=.*: give a whole number from 1"):
            pdf.print_jobs(10)
