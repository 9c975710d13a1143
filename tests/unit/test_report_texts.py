"""What `show`, `runs`, the report and the export print, as a new user read them (issue
30): no Python ``True``/``False``/``None``; each suite's own QUICK banner (a CrystalDiskMark-
like run is not "a valid PTS result"); the TESTS column of `runs` cut with "..."; the
CrystalDiskMark-like table in four rows with Read and Write columns. On every run of the
golden stores (tests/fixtures/store: a run of every suite, recorded by real fio); the PDF
of their reports is checked in tests/integration/test_report_texts_pdf.py."""

from __future__ import annotations

import html as html_lib
import io
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from ssdlab.cli.main import main
from ssdlab.plan.block_presets import PresetResult
from ssdlab.report.build import render
from ssdlab.report.parts import nvme_text, write_cache_text
from ssdlab.report.terminal import render_run
from ssdlab.report.text import clip, num
from ssdlab.report.words import plain
from ssdlab.store.db import Store
from ssdlab.store.export import write_export
from ssdlab.store.records import RunData
from ssdlab.suites import find, result_json

FIXTURES = Path(__file__).parent.parent / "fixtures" / "store"
STORES = ("suites.sqlite", "matrix.sqlite", "db.sqlite", "peak.sqlite")
#: Python's words for a flag and for nothing, as a value printed with str() shows them
PYTHON_WORDS = re.compile(r"\b(True|False|None)\b")
#: the suites of the SNIA PTS, whose quick runs are not a valid PTS result
PTS_SUITES = {"pts", "saturation", "op-sweep"}


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = {}
    for name in STORES:
        out[name] = tmp_path_factory.mktemp("golden") / name
        shutil.copy(FIXTURES / name, out[name])
    return out


@pytest.fixture(scope="module")
def golden_runs(stores: dict[str, Path]) -> Iterator[list[RunData]]:
    runs = []
    for path in stores.values():
        with Store.open(path) as store:
            runs += [store.load(summary.run_id) for summary in store.list_runs()]
    yield runs


def visible_text(page: str) -> str:
    """The text of an HTML page a reader sees (no tags, script or style)."""
    page = re.sub(r"<(script|style)\b.*?</\1>", "", page, flags=re.S)
    return html_lib.unescape(re.sub(r"<[^>]+>", "\n", page))


def test_values_read_as_words() -> None:
    assert [plain(v) for v in (True, False, None, "", 0, 2.5, "x")] == [
        "yes", "no", "-", "-", "0", "2.5", "x"]
    assert plain({"no_stall": False, "block_sizes": {"4096": 3}, "trace": None}) == (
        "no stall no, block sizes 4096 3, trace -")
    assert plain([True, None, 4]) == "yes, -, 4" and plain([]) == "-"


def test_no_python_words_in_show_the_report_or_the_csv(golden_runs: list[RunData]) -> None:
    for run in golden_runs:
        shown = render_run(run)
        assert not PYTHON_WORDS.search(shown), f"{run.suite}: {PYTHON_WORDS.findall(shown)}"
        csv = io.StringIO()
        write_export(run, "csv", csv, result_json)
        assert not PYTHON_WORDS.search(csv.getvalue()), run.suite
    page = visible_text(render(golden_runs)[0])  # every run's pages and the comparisons
    found = sorted({line.strip() for line in page.splitlines() if PYTHON_WORDS.search(line)})
    assert found == []
    # the flags that printed True/False now say yes or no
    assert re.search(r"\bdirect\s+yes\b", page) and re.search(r"\bpublished\s+yes\b", page)


def test_each_suite_says_what_its_quick_runs_are(golden_runs: list[RunData]) -> None:
    quick = [run for run in golden_runs if run.quick]
    assert {run.suite for run in quick} >= {"pts", "cdm", "atto", "iometer", "db", "matrix"}
    for run in quick:
        suite = find(run.suite)
        assert suite is not None
        banner = f"*** QUICK PROFILE: {suite.spec.quick_text} ***"
        shown = render_run(run).splitlines()
        assert shown[1] == banner and shown[-1] == banner
        assert ("not a valid PTS result" in banner) == (run.suite in PTS_SUITES), banner
        page, _ = render([run])
        assert page.count(f'<div class="banner quick">QUICK PROFILE: '
                          f'{html_lib.escape(suite.spec.quick_text)}</div>') >= 2
    cdm = next(run for run in quick if run.suite == "cdm")
    assert "not the preset's definition" in render_run(cdm)
    db = next(run for run in quick if run.suite == "db")
    assert "not the review's sizes" in render_run(db) and "PTS" not in render_run(db)
    # a report of runs of several suites says what every quick run is, and no suite's
    cover = render(quick)[0].split('<section class="page" id="run0"')[0]
    assert ("QUICK PROFILE: shortened, for demos and tests; not a valid result (marked runs)"
            in cover)


def _runs_table(store: Path, capsys: pytest.CaptureFixture[str]) -> list[str]:
    assert main(["runs", "--store", str(store)]) == 0
    return capsys.readouterr().out.splitlines()


def test_runs_cuts_the_tests_column_with_an_ellipsis(
        stores: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    lines = _runs_table(stores["suites.sqlite"], capsys)
    at, end = lines[0].index("TESTS"), lines[0].index("TARGET")
    with Store.open(stores["suites.sqlite"]) as store:
        tests = {r.run_id: ",".join(r.tests) for r in store.list_runs()}
    cut = 0
    for line in lines[1:-1]:
        shown, whole = line[at:end].rstrip(), tests[line.split()[0]]
        if shown != whole:  # cut: whole test names, then "..."
            cut += 1
            assert shown.endswith(",...") and whole.startswith(shown[:-3]), shown
            assert len(shown) <= 28
    assert cut == 2  # the PTS run and the SN640 review: four and more tests
    # the quick runs of several suites: what every quick run is, and no suite's in its place
    assert lines[-1] == "* quick profile: shortened, for demos and tests; not a valid result"
    assert _runs_table(stores["db.sqlite"], capsys)[-1] == (
        "* quick profile: a few MB and seconds, a try-out; not the review's sizes")


def test_clip() -> None:
    assert clip("iops,latency", 28, ",") == "iops,latency"
    assert clip("iops,throughput-1024k,throughput-128k", 28, ",") == "iops,throughput-1024k,..."
    assert clip("a-single-name-that-is-far-too-long", 10, ",") == "a-singl..."
    assert clip("abcdefghijkl", 8) == "abcde..."


def test_show_of_a_crystaldiskmark_run_is_its_four_row_table(golden_runs: list[RunData]
                                                             ) -> None:
    run = next(r for r in golden_runs if r.suite == "cdm")
    rows = PresetResult.from_json(run.test("cdm").result).rows or []
    assert len(rows) == 12  # four tests x read, write, mix
    shown = render_run(run).splitlines()
    heads = [i for i, line in enumerate(shown) if line.split()[:1] == ["test"]]
    assert len(heads) == 3  # best MB/s, mean MB/s, the best pass's IOPS and latency
    assert shown[heads[0]].split() == ["test", "Read", "MB/s", "Write", "MB/s", "Mix", "(R70)",
                                       "MB/s"]
    groups = ["SEQ1M Q8T1", "SEQ1M Q1T1", "RND4K Q32T1", "RND4K Q1T1"]
    by = {(r.group, r.mode): r for r in rows}
    for head, figure in zip(heads[:2], ("best", "mean"), strict=True):
        body = shown[head + 2: head + 6]
        assert [" ".join(line.split()[:2]) for line in body] == groups
        for group, line in zip(groups, body, strict=True):
            assert line.split()[2:] == [num(getattr(by[(group, m)], figure).mb_per_s, 2)
                                        for m in ("read", "write", "mix")]
    assert "best of 1 pass(es), as CrystalDiskMark shows it" in "\n".join(shown)
    # the other presets keep their table of a row per entry
    atto = render_run(next(r for r in golden_runs if r.suite == "atto"))
    assert "best MB/s" in atto


def test_an_nvme_targets_namespace_and_write_cache_in_words() -> None:
    """What `ssdlab show` and the title page say of a QEMU NVMe namespace's record."""
    target: dict[str, object] = {"details": {
        "nvme_id_ctrl": {"cntlid": 0, "sanicap": 0},
        "nvme_namespace": {"nsid": 1, "lba_format": 0, "lba_data_bytes": 512,
                           "lba_metadata_bytes": 0, "lba_formats": 8},
        "write_cache": {"sysfs": "write back", "nvme_vwc_present": True, "nvme_vwc": False,
                        "ata_write_cache": None, "enabled": False}}}
    assert nvme_text(target) == ("namespace 1 of controller 0, LBA format 0 (512 B data + "
                                 "0 B metadata), sanitize not supported (sanicap 0)")
    assert write_cache_text(target) == ("disabled (the drive's volatile write cache feature, "
                                        "NVMe feature 6); the kernel: write back")
    assert nvme_text({"details": {}}) == "" and write_cache_text({}) == ""
    loop: dict[str, object] = {"details": {"write_cache": {"sysfs": "write through",
                                                          "enabled": False}}}
    assert write_cache_text(loop) == "disabled; the kernel: write through"
