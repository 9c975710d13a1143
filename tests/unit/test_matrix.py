"""The RAID matrix without a device: its options, what it runs on each level, and its
pages and `show` lines on a real matrix recorded on emulated SSDs (btrfs RAID 0 and 1;
tests/fixtures/store/matrix.sqlite, record.sh's note). Built, killed and resumed for real:
tests/integration/test_matrix_real.py."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import pytest

from ssdlab.errors import UserError
from ssdlab.plan.matrix import BY_LATENCY, LevelResult, MatrixArgs, validate
from ssdlab.plan.pts import PtsArgs
from ssdlab.report.build import render
from ssdlab.report.matrix_pages import comparison_rows, levels_of, outcome, show_level
from ssdlab.report.terminal import render_run
from ssdlab.run.matrix_rows import level_rows
from ssdlab.run.matrix_run import MatrixRun, PreparedMatrix, prepare
from ssdlab.run.prepare import PreparedTarget, TargetRequest
from ssdlab.run.progress import Progress
from ssdlab.run.pts_run import PtsRun
from ssdlab.run.suite import SuiteLookup
from ssdlab.store import records
from ssdlab.store.db import Store
from ssdlab.store.records import RunData, RunHead
from ssdlab.store.records import TestData as StoredTest
from ssdlab.suites import Suite, find
from tests.support.fake_fio import FakeFio
from tests.support.prepared import file_info, make_prepared
from tests.support.records import doc

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
    # each measurement by the PTS suite's cell label, not its cell id (iops_bs4096_r0)
    assert [row[0] for row in rows] == ["iops: 4 KiB 0/100", "iops: 4 KiB 100/0"]
    iops = [next(x.iops for x in r.rows if x.cell.endswith("_r0")) for r in (r0, r1)]
    assert classes[0][1 + iops.index(max(iops))] == "sig-up"  # the most IOPS: the best
    assert comparison_rows(levels_of(matrix), "lat_mean_us")[1] == []  # rates, not latency


def test_show_report_and_outcome(matrix: RunData, tmp_path: Path) -> None:
    shown = render_run(matrix)
    assert "== raid0 [complete]" in shown and "write penalty 1.0" in shown
    assert "target 2 member devices" in shown and "None" not in shown
    assert "iops: 4 KiB 100/0" in shown and "_bs4096" not in shown
    # a matrix of PTS runs: the matrix says what its quick runs are, its levels' PTS
    # runs (in their outcome lines) that they are not valid PTS results
    assert "*** QUICK PROFILE: each level's run in its suite's quick profile" in shown
    html, _ = render([matrix])
    for text in ("RAID levels compared", "Level raid0", "Level raid1", "Member check",
                 "Members per round", "outcome"):
        assert text in html, text
    lines = outcome(matrix, tmp_path).lines
    assert lines[-1] == f"report: ssdlab report {matrix.run_id}"


# -- a latency test on the levels, the member check's lines ----------------------------


def _latency_child(tmp_path: Path, store: Store, iops: float) -> RunData:
    """A PTS latency test's run (the fake fio: mean latency 1e6 / IOPS us, p99 twice it)."""
    tmp_path.mkdir()
    prepared = make_prepared(tmp_path, PtsArgs(profile="quick", tests="latency", purge="none",
                                               precondition=False))
    fio = FakeFio(lambda name, round_no: iops)
    return store.load(PtsRun(prepared, store, fio, Progress(io.StringIO(), live=False))
                      .execute(["t"]))


def test_a_latency_test_is_compared_by_its_latency_lower_is_better(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "s.sqlite")
    # raid0 answers in 100 us, raid1 in 250 us
    rows = {lv: level_rows(_latency_child(tmp_path / lv, store, iops))
            for lv, iops in (("raid0", 10_000.0), ("raid1", 4_000.0))}
    assert {r.by for rs in rows.values() for r in rs} == {BY_LATENCY}
    assert all(r.lat_mean_us == pytest.approx(100.0) and r.lat_p99_us == pytest.approx(200.0)
               for r in rows["raid0"])
    tests = [records.TestData(lv, "complete", {}, {}, LevelResult(lv, "btrfs", rows=rs).to_json())
             for lv, rs in rows.items()]
    run = RunData("20990101-000000-0000", 0.0, None, "matrix", "quick", True, "complete", "",
                  "/dev/a,/dev/b", None, False, {}, {}, {}, {}, [], tests)
    levels = levels_of(run)
    assert comparison_rows(levels, "iops")[1] == []  # not compared by IOPS ...
    for metric in ("lat_mean_us", "lat_p99_us"):  # ... but by mean and p99 latency
        header, table_rows, classes = comparison_rows(levels, metric)
        assert header == ["measurement", "raid0", "raid1"] and len(table_rows) == 9
        assert all(cls == ["", "sig-up", ""] for cls in classes)  # the lowest is the best
        assert {row[0] for row in table_rows} >= {"latency: 8 KiB 100/0", "latency: 0.5 KiB 0/100"}
    html, _ = render([run])
    assert "mean latency (us) per level (lower is better)" in html
    assert "p99 latency (us) per level (lower is better)" in html
    assert "IOPS per level" not in html and "latency_bs" not in html
    shown = [line.split() for line in show_level(run, tests[1])]
    assert ["measurement", "mean", "us", "p99", "us", "IOPS"] in shown
    assert ["latency:", "4", "KiB", "65/35", "250.0", "500.0", "4,000"] in shown


def _pts() -> Suite:
    suite = find("pts")
    assert suite is not None
    return suite


def test_the_member_check_says_its_verdict_once_and_its_time_rounded(tmp_path: Path) -> None:
    paths = [tmp_path / f"m{i}.img" for i in range(4)]
    options = validate(MatrixArgs(members=",".join(map(str, paths)), levels="0",
                                  member_check_seconds=5.0))
    members = tuple(file_info(p) for p in paths)
    target = PreparedTarget(members[0], False, {}, {"ssdlab": "test"})
    prepared = PreparedMatrix(target, options, MatrixArgs(members="x"), members, (), True,
                              "fio", (), _pts())
    store = Store.open(tmp_path / "s.sqlite")
    out = io.StringIO()
    run = MatrixRun(prepared, store, FakeFio(lambda name, _round: 1000.0),
                    Progress(out, live=False))
    run.session.run_id = store.new_run(RunHead("matrix", "default", False, {}, {}, doc(), {}, []))
    run._member_check()
    text = out.getvalue()
    assert "member check: member check:" not in text
    assert text.count("member check: no outlier among 4 members") == 1
    # 4 members x 2 reads x 3 passes of 1.667 s: about 40 s, as durations are written
    assert "(about 0:40)" in text and "40.008" not in text


def test_the_registry_hands_the_matrix_its_lookup() -> None:
    lookup: SuiteLookup = find  # the registry's suites are what the matrix runs
    suite = find("matrix")
    assert suite is not None and lookup("pts") is _pts()
    assert suite.runner().start is MatrixRun


@pytest.mark.parametrize(("words", "error"), [
    (["--nonsense"], "--suite-options: unrecognized arguments: --nonsense"),
    (["--profile", "nope"], "--suite-options: argument --profile: invalid choice: 'nope'"),
])
def test_the_childs_options_are_checked_as_its_command_line_checks_them(
        words: list[str], error: str) -> None:
    # before fio or any member is looked at (neither exists here)
    args = MatrixArgs(members="/nonexistent/a,/nonexistent/b", suite_options=" ".join(words))
    with pytest.raises(UserError) as err:
        prepare(TargetRequest(None, fio="/nonexistent/fio"), args, find)
    assert str(err.value).startswith(error)
    values = _pts().spec.option_values(["--target", "/dev/null", "--profile", "quick"],
                                       "--suite-options")
    assert values["target"] == ["/dev/null"] and values["profile"] == "quick"


def test_an_md_parity_level_shows_the_write_method_its_penalty_is_of(
        matrix: RunData) -> None:
    """The VM lab's md RAID 6 on four drives: 4.00, by reconstruct-write, not the textbook
    6 of read-modify-write."""
    result = LevelResult("raid6", "md", "run-6", "complete", write_penalty=4.003,
                         textbook_penalty=4.0, write_method="rcw",
                         write_method_note="rcw: 1.00 member reads per host write")
    test = StoredTest("raid6", "complete", {}, {}, result.to_json())
    lines = show_level(matrix, test)
    assert "write penalty 4.00 (4 by reconstruct-write)" in lines[0]
    assert lines[1] == "  write method: rcw: 1.00 member reads per host write"
