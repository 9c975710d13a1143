"""The self-consistency checks run on the cells of every registered runnable suite
(docs/consistency.md): on the golden store's run of each suite (recorded by real fio, its
raw output stored), every fio job of every measured round is judged, and the suites'
runs end through the pass that stores the checks."""

from __future__ import annotations

import inspect
import io
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from ssdlab.engine.parser import parse_fio_output
from ssdlab.errors import UserError
from ssdlab.plan.consistency import EVENT_KIND, checks_of
from ssdlab.plan.pts import PtsArgs
from ssdlab.run.consistency import Stack, check_run
from ssdlab.run.progress import Progress
from ssdlab.run.pts_run import PtsRun
from ssdlab.run.session import SessionRun
from ssdlab.store.db import Store
from ssdlab.store.records import RunData
from ssdlab.suites import runnable
from tests.support.fake_fio import FakeFio
from tests.support.prepared import make_prepared

STORE = Path(__file__).resolve().parents[1] / "fixtures" / "store"
#: suites whose figures are not fio's (sysbench and pgbench; cp): their tests say they were
#: not checked, and why (the matrix's member check keeps figures only: its levels are
#: checked through their own runs)
NOT_FIO = {"db", "copy"}


@pytest.fixture(scope="module")
def golden(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, list[RunData]]]:
    """Every golden run, with its raw fio output, by suite."""
    by_suite: dict[str, list[RunData]] = {}
    for name in ("suites.sqlite", "matrix.sqlite", "db.sqlite", "peak.sqlite"):
        path = tmp_path_factory.mktemp("golden") / name
        shutil.copy(STORE / name, path)
        with Store.open(path) as store:
            for summary in store.list_runs():
                run = store.load(summary.run_id, with_raw=True)
                by_suite.setdefault(run.suite, []).append(run)
    yield by_suite


def _fio_jobs(run: RunData, test: str, runs: dict[str, RunData]) -> int:
    """The fio jobs of a test's measured rounds (and measured steps: the SLC probe's
    write), or of the run it stands for (a matrix level's), counted apart from the checks."""
    child = run.test(test).result.get("child_run")
    if isinstance(child, str):
        return sum(_fio_jobs(runs[child], t.name, runs) for t in runs[child].tests)
    outputs = [r.stdout for r in run.test(test).rounds] + [
        s.fio.stdout for s in run.test(test).steps if s.kind in ("write", "fio") and s.fio]
    count = 0
    for stdout in outputs:
        if stdout:
            try:
                output = parse_fio_output(stdout)
            except UserError:
                continue
            count += sum(1 for job in output.jobs if job.read.iops + job.write.iops > 0)
    return count


@pytest.mark.parametrize("suite", [s.name for s in runnable()])
def test_every_runnable_suite_has_its_cells_checked(suite: str,
                                                    golden: dict[str, list[RunData]]) -> None:
    runs = golden.get(suite)
    assert runs, f"the golden store has no run of {suite}"
    by_id = {r.run_id: r for rs in golden.values() for r in rs}
    checked = 0
    for run in runs:
        for checks in check_run(run, Stack(), by_id.get):
            jobs = _fio_jobs(run, checks.test, by_id)
            assert checks.jobs_checked == jobs, (suite, checks.test)
            assert sum(checks.statuses.values()) == jobs
            assert len(checks.cells) == len({c.cell for c in checks.cells})
            if jobs == 0:
                assert checks.not_applicable, (suite, checks.test)
            else:
                assert checks.not_applicable is None and checks.cells
                # nothing the golden store recorded contradicts itself
                assert "exceeds" not in checks.statuses, (suite, checks.message)
            checked += checks.jobs_checked
    if suite in NOT_FIO:
        assert checked == 0
    else:
        assert checked > 0, f"no fio job of {suite} was checked"


@pytest.mark.parametrize("suite", [s.name for s in runnable()])
def test_every_runnable_suites_run_ends_through_the_checks(suite: str) -> None:
    """Its run class is a SessionRun (whose end stores the checks), or its module stores
    them itself (the file-system presets, the RAID matrix)."""
    from ssdlab.suites import find
    found = find(suite)
    assert found is not None
    start = found.runner().start
    if isinstance(start, type) and issubclass(start, SessionRun):
        return
    source = inspect.getsource(inspect.getmodule(start))  # type: ignore[arg-type]
    assert "finish_complete(" in source or "record_checks(" in source, suite


def test_a_run_stores_each_tests_checks_when_it_ends(tmp_path: Path) -> None:
    args = PtsArgs(profile="quick", tests="iops,latency", purge="none", precondition=False,
                   block_sizes="4", mixes="100/0")
    store = Store.open(tmp_path / "store.sqlite")
    out = io.StringIO()
    run_id = PtsRun(make_prepared(tmp_path, args), store, FakeFio(lambda n, r: 10_000.0),
                    Progress(out, live=False, quick=True)).execute(["test"])
    run = store.load(run_id)
    checks = checks_of(run.events)
    assert set(checks) == {t.name for t in run.tests} == {"iops", "latency"}
    for test in run.tests:
        rounds_jobs = sum(len(r.cells) for r in test.rounds)
        assert checks[test.name].jobs_checked == rounds_jobs > 0
        assert sum(1 for e in run.events if e.kind == EVENT_KIND and e.test == test.name) == 1
    # every stored cell carries its Little's law verdict and the latency it shows
    for cell in (c for t in run.tests for r in t.rounds for c in r.cells):
        assert cell["littles_law"] in ("agrees", "total", "exceeds", "open")
        assert cell["latency_basis"] in ("completion", "total")
