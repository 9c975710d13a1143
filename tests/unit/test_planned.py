"""A dry run says how long the plan takes: its last line, for every suite (plan/planned.py),
and the run's own ETA agrees with it."""

from __future__ import annotations

import io
import os
import re
import shutil
from pathlib import Path

import pytest

from ssdlab.plan.planned import PlannedTime, longest, span_text, total
from ssdlab.plan.pts import PtsArgs
from ssdlab.plan.suite import TargetKind
from ssdlab.run.progress import Progress
from ssdlab.run.pts_run import planned as pts_planned
from ssdlab.run.suite import rounds_progress
from ssdlab.suites import find, runnable
from tests.support.cli import ssdlab_in_process
from tests.support.prepared import make_prepared

DATA = Path(__file__).resolve().parents[1] / "data"
PLANNED = re.compile(r"^planned time: (\d+(?::\d\d){1,2})(?:-(\d+(?::\d\d){1,2}))?"
                     r"(?: \([^)]+ decides\))?(?:, plus .+)?$")
#: what each suite's dry run needs besides its target (the matrix needs block devices:
#: tests/integration/test_array_refusal_real.py)
EXTRA = {"replay": ["--trace", str(DATA / "replay-sample.iolog")]}
DRY_RUNNABLE = [s.name for s in runnable() if s.spec.target is not TargetKind.MEMBERS]


def seconds(text: str) -> int:
    total_s = 0
    for part in text.split(":"):
        total_s = total_s * 60 + int(part)
    return total_s


def test_every_runnable_suite_has_a_planned_time() -> None:
    assert {s.name for s in runnable()} >= set(DRY_RUNNABLE) and DRY_RUNNABLE
    for suite in runnable():
        assert suite.runner().planned is not None, f"{suite.name} does not say its time"


@pytest.mark.parametrize("name", DRY_RUNNABLE)
def test_every_dry_run_ends_with_the_planned_time(name: str, tmp_path: Path,
                                                  shm_dir: Path) -> None:
    suite = find(name)
    assert suite is not None
    if name == "db":
        if shutil.which("sysbench") is None or os.geteuid() != 0:
            pytest.skip("the db suite's dry run needs sysbench and root")
        shm_dir.chmod(0o755)  # its servers' users pass through it
        tmp_path = shm_dir
    profile = ["--profile", "quick"] if any(o.key == "profile" for o in suite.spec.options) \
        else []
    if suite.spec.target is TargetKind.DIR or name == "db":
        target = ["--dir", str(tmp_path)]
    else:
        target = ["--target", str(tmp_path / "t.img"), "--size", "256MiB"]
    result = ssdlab_in_process("run", name, *target, *profile, *EXTRA.get(name, []),
                               "--dry-run")
    assert result.returncode == 0, result.stderr
    last = result.stdout.rstrip("\n").splitlines()[-1]
    found = PLANNED.match(last)
    assert found, last
    low, high = found.group(1), found.group(2) or found.group(1)
    assert seconds(low) <= seconds(high)
    assert list(tmp_path.iterdir()) == []  # a dry run touches nothing


def test_the_pts_dry_run_and_the_runs_eta_agree(tmp_path: Path) -> None:
    """The dry run's planned time and the ETA the run states when it starts are one
    figure."""
    prepared = make_prepared(tmp_path, PtsArgs(profile="quick", tests="iops,latency",
                                               block_sizes="4", mixes="100/0,0/100"))
    plan = pts_planned(prepared)
    out = io.StringIO()
    progress = rounds_progress(prepared)
    progress.stream, progress.live = out, False
    progress.start(prepared.tests)
    eta = re.search(r"ETA (\S+)", out.getvalue())
    assert eta is not None
    assert eta.group(1) == span_text(plan.low_s, plan.high_s)
    assert plan.low_s < plan.high_s and "steady state decides" in plan.text()
    assert "(preconditioning)" in plan.text()


def test_planned_times_add_up() -> None:
    a = PlannedTime(10, 20, "steady state") + PlannedTime.io(2**30, "preconditioning")
    b = PlannedTime.fixed(5) + PlannedTime.step("a purge")
    both = total([a, b, a])
    assert (both.low_s, both.high_s) == (25, 45)
    assert both.io_bytes == 2 * 2**30 and both.io_what == ("preconditioning",)
    assert both.text() == ("planned time: 0:25-0:45 (steady state decides), plus 2 GiB of "
                           "I/O at the drive's speed (preconditioning), plus a purge")
    assert PlannedTime.fixed(3661).text() == "planned time: 1:01:01"
    assert a.times(3).high_s == 60 and a.times(3).io_bytes == 3 * 2**30


def test_a_run_without_rounds_counts_down_from_its_plan() -> None:
    progress = Progress(io.StringIO(), live=True)
    progress.planned = PlannedTime(30, 90, "the search")
    progress.started -= 10
    progress.phase("probe 1")
    assert "ETA 0:20-1:20" in progress.text()


def test_plans_run_at_once_take_the_longest() -> None:
    a = PlannedTime(10, 50, "steady state") + PlannedTime.io(2**30, "preconditioning")
    b = PlannedTime(20, 30, "steady state") + PlannedTime.io(2**29, "preconditioning")
    both = longest([a, b])
    assert (both.low_s, both.high_s, both.io_bytes) == (20, 50, 2**30)
    assert longest([]).text() == "planned time: 0:00"
