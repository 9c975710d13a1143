"""A Runner's defaults (run/suite.py): a suite that says no other progress gets a
``Progress`` quick as its options are; a run of rounds to steady state gets its rule's
window and its most rounds."""

from __future__ import annotations

from pathlib import Path

from ssdlab.analysis.steady import rule_by_name
from ssdlab.plan.pts import PtsArgs
from ssdlab.run.prepare import PreparedTarget
from ssdlab.run.progress import Progress
from ssdlab.run.suite import quick_progress, rounds_progress
from ssdlab.suites import find
from tests.support.example_suite.plan import ReadOptions
from tests.support.example_suite.run import RUNNER, PreparedRead
from tests.support.prepared import file_info, make_prepared


def _read(tmp_path: Path, quick: bool) -> PreparedRead:
    target = PreparedTarget(file_info(tmp_path / "target.img"), False, {}, {"ssdlab": "test"})
    options = ReadOptions(8 << 20, 8, "libaio", "quick" if quick else "default", quick)
    return PreparedRead(target, options)


def test_a_runner_without_its_own_progress_is_quick_as_its_options(tmp_path: Path) -> None:
    assert RUNNER.progress is quick_progress
    for quick in (True, False):
        progress = RUNNER.progress(_read(tmp_path, quick))
        assert type(progress) is Progress and progress.quick is quick


def test_a_run_of_rounds_shows_its_rules_window_and_its_most_rounds(tmp_path: Path) -> None:
    prepared = make_prepared(tmp_path, PtsArgs(profile="quick", tests="iops", rule="review",
                                               max_rounds=12))
    pts = find("pts")
    assert pts is not None
    progress = pts.runner().progress(prepared)
    assert progress.quick is True and progress.max_rounds == 12
    assert progress.window == rule_by_name("review").window < 12
    op_sweep = find("op-sweep")
    assert op_sweep is not None and op_sweep.runner().progress is rounds_progress
