"""The RAID matrix without a device: its options, what it runs on each level, and its
pages and `show` lines on a real matrix recorded on emulated SSDs (btrfs RAID 0 and 1;
tests/fixtures/store/matrix.sqlite, record.sh's note). Built, killed and resumed for real:
tests/integration/test_matrix_real.py."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ssdlab.errors import UserError
from ssdlab.plan.matrix import LevelResult, MatrixArgs, validate
from ssdlab.report.build import render
from ssdlab.report.matrix_pages import comparison_rows, levels_of, outcome
from ssdlab.report.terminal import render_run
from ssdlab.store.db import Store
from ssdlab.store.records import RunData

STORE = Path(__file__).parent.parent / "fixtures" / "store" / "matrix.sqlite"


@pytest.fixture(scope="module")
def matrix(tmp_path_factory: pytest.TempPathFactory) -> RunData:
    path = tmp_path_factory.mktemp("matrix") / "matrix.sqlite"
    shutil.copy(STORE, path)
    with Store.open(path) as store:
        return next(store.load(r.run_id) for r in store.list_runs() if r.suite == "matrix")


@pytest.mark.parametrize(("args", "error"), [
    (MatrixArgs(members="/dev/a"), "at least two member devices"),
    (MatrixArgs(members="/dev/a,/dev/b", levels="0,7"), "RAID level '7'"),
    (MatrixArgs(members="/dev/a,/dev/b", levels="1,raid1"), "names a level twice"),
    (MatrixArgs(members="/dev/a,/dev/b", suite_options="--target /dev/x"),
     "may not set --target"),
    (MatrixArgs(members="/dev/a,/dev/b", suite_options="--profile 'quick"), "--suite-options"),
    (MatrixArgs(members="/dev/a,/dev/b", chunk="lots"), "--chunk"),
    (MatrixArgs(members="/dev/a,/dev/b", member_check_seconds=-1), "0 (skip)"),
])
def test_bad_options_are_one_line_errors(args: MatrixArgs, error: str) -> None:
    with pytest.raises(UserError, match=error.replace("(", r"\(").replace(")", r"\)")):
        validate(args)


def test_options_as_validated() -> None:
    o = validate(MatrixArgs(members="/dev/a, /dev/b,/dev/c,/dev/d", levels="0, RAID 10,5",
                            suite_options="--profile quick --tests iops", chunk="64KiB"))
    assert o.members == ("/dev/a", "/dev/b", "/dev/c", "/dev/d")
    assert o.levels == ("raid0", "raid10", "raid5") and o.chunk_bytes == 64 * 1024
    assert o.quick and o.suite_argv == ("--profile", "quick", "--tests", "iops")
    assert o.array_name("raid5") == "ssdlab-m-raid5"


def test_the_recorded_matrix_reads_back(matrix: RunData) -> None:
    levels = levels_of(matrix)
    assert [r.level for _, r in levels] == ["raid0", "raid1"]
    for test, r in levels:
        assert test.status == "complete" and r.child_status == "complete"
        assert r.array["backend"] == "btrfs" and len(r.array["members"]) == 2
        assert {m.member for m in r.members} == {"loop0", "loop1"}
        assert r.member_rounds == 5 and len(r.rows) == 2
    penalty = {r.level: r.write_penalty for _, r in levels}
    assert penalty["raid0"] == pytest.approx(1.0, rel=0.15)
    assert penalty["raid1"] == pytest.approx(2.0, rel=0.15)
    assert matrix.target["labels"] == {"controller": "none", "cache": "wb"}


def test_the_levels_side_by_side_mark_the_best(matrix: RunData) -> None:
    header, rows, classes = comparison_rows(levels_of(matrix), "iops")
    assert header == ["measurement", "raid0", "raid1"]
    assert len(rows) == 2 and all(sum(c == "sig-up" for c in cls) == 1 for cls in classes)
    r0, r1 = (LevelResult.from_json(matrix.test(lv).result) for lv in ("raid0", "raid1"))
    at = next(i for i, row in enumerate(rows) if row[0].endswith("_r0"))
    iops = [next(x.iops for x in r.rows if x.cell.endswith("_r0")) for r in (r0, r1)]
    assert classes[at][1 + iops.index(max(iops))] == "sig-up"


def test_show_report_and_outcome(matrix: RunData, tmp_path: Path) -> None:
    shown = render_run(matrix)
    assert "== raid0 [complete]" in shown and "write penalty 1.0" in shown
    assert "target 2 member devices" in shown and "None" not in shown
    html, _ = render([matrix])
    for text in ("RAID levels compared", "Level raid0", "Level raid1", "Member check",
                 "Members per round", "outcome"):
        assert text in html, text
    lines = outcome(matrix, tmp_path).lines
    assert lines[-1] == f"report: ssdlab report {matrix.run_id}"
