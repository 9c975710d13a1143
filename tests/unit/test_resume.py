"""``ssdlab resume`` for PTS runs, with the fake fio: nothing completed is lost or redone."""

from __future__ import annotations

import dataclasses
import io
from pathlib import Path

import pytest

from ssdlab.cli.resume_cmd import check_resumable
from ssdlab.errors import TargetError, UserError
from ssdlab.plan.pts import PtsArgs
from ssdlab.run.prepare import PreparedTarget, check_same_target
from ssdlab.run.progress import Progress, round_estimate
from ssdlab.run.pts_run import PtsRun, RunInterrupted
from ssdlab.store.db import Store
from ssdlab.store.records import RunHead
from ssdlab.units import format_duration
from tests.support.fake_fio import FakeFio
from tests.support.prepared import make_prepared
from tests.support.records import doc

ARGS = PtsArgs(profile="quick", tests="iops,latency", purge="none", block_sizes="4",
               mixes="100/0,0/100", latency_block_sizes="4", latency_mixes="0/100")


def drifting(name: str, round_no: int) -> float:
    """Settles at round 6 of the IOPS test (the window 2-6), flat for latency."""
    return 10_000.0 * (1.0 + 2.0 * max(0, 2 - round_no)) if name.startswith("iops") else 5000.0


def _runner(tmp_path: Path, store: Store, fio: FakeFio) -> PtsRun:
    prepared = make_prepared(tmp_path, ARGS)
    return PtsRun(prepared, store, fio, Progress(io.StringIO(), live=False, quick=True))


def test_an_interrupted_run_resumes_after_its_last_round(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "s.sqlite")
    first = FakeFio(drifting, interrupt_round=4)
    with pytest.raises(RunInterrupted, match="ssdlab resume"):
        _runner(tmp_path, store, first).execute(["test"])
    run_id = store.list_runs()[0].run_id
    stopped = store.load(run_id)
    assert stopped.status == "interrupted"
    assert [r.round_no for r in stopped.test("iops").rounds] == [1, 2, 3]
    preconditions = len([s for s in stopped.steps if s.kind == "precondition"])
    check_resumable(stopped)

    second = FakeFio(drifting)
    second.rounds = 3  # the fake's round counter continues, as the drive does
    _runner(tmp_path, store, second).resume(stopped, ["resume", run_id])
    run = store.load(run_id)
    assert run.status == "complete"
    iops = run.test("iops")
    assert [r.round_no for r in iops.rounds] == [1, 2, 3, 4, 5, 6]
    assert iops.status == "steady" and iops.result["window_rounds"] == [2, 6]
    assert run.test("latency").status == "steady"
    # no new preconditioning for the resumed test; the latency test had its own
    assert len([s for s in run.steps if s.kind == "precondition"]) == preconditions + 1
    kinds = [e.kind for e in run.events]
    assert "resumed" in kinds and kinds.count("process") == 2
    assert any("resumed after round 3" in e.message for e in run.events)
    with pytest.raises(UserError, match="complete; nothing to resume"):
        check_resumable(run)


def test_a_run_stopped_after_a_finished_test_goes_on_with_the_next(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "s.sqlite")
    flat = FakeFio(lambda name, n: 1000.0, interrupt_round=7)  # iops done in 5, then latency
    with pytest.raises(RunInterrupted):
        _runner(tmp_path, store, flat).execute(["test"])
    run_id = store.list_runs()[0].run_id
    stopped = store.load(run_id)
    assert stopped.test("iops").status == "steady"
    assert [r.round_no for r in stopped.test("latency").rounds] == [1]
    again = FakeFio(lambda name, n: 1000.0)
    _runner(tmp_path, store, again).resume(stopped, ["resume"])
    run = store.load(run_id)
    assert [r.round_no for r in run.test("iops").rounds] == [1, 2, 3, 4, 5]
    assert [r.round_no for r in run.test("latency").rounds] == [1, 2, 3, 4, 5]
    assert not any("iops" in call for call in again.calls)  # the finished test was not rerun


def test_resume_refuses_another_target(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "s.sqlite")
    with pytest.raises(RunInterrupted):
        _runner(tmp_path, store, FakeFio(drifting, interrupt_round=2)).execute(["t"])
    run = store.load(store.list_runs()[0].run_id)
    info = make_prepared(tmp_path, ARGS).info
    same = PreparedTarget(info, False, {}, {})
    check_same_target(run, same)
    for change in ({"capacity_bytes": info.capacity_bytes * 2}, {"serial": "OTHER"},
                   {"model": "Other drive"}):
        other = PreparedTarget(dataclasses.replace(info, **change), False, {}, {})
        with pytest.raises(TargetError, match="not the same target"):
            check_same_target(run, other)


def test_reference_runs_are_not_resumable(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "s.sqlite")
    run_id = store.import_reference_run(
        RunHead("published", "reference", False, {"path": "p"}, {}, doc(), {}, []), [],
        status="reference")
    with pytest.raises(UserError, match="read-only reference run"):
        check_resumable(store.load(run_id))


def _plan_eta(out: str) -> tuple[str, str]:
    """The tests and the ETA the ``plan:`` line of a run's output names."""
    line = next(ln for ln in out.splitlines() if "plan: " in ln)
    names, _, eta = line.split("plan: ", 1)[1].partition("; ETA ")
    return names, eta


def test_after_resume_the_eta_is_what_is_left(tmp_path: Path) -> None:
    """The ETA of a resumed run counts the rounds still to run, not the whole run's: a
    finished test adds nothing, a test with stored rounds only those it may still need."""
    store = Store.open(tmp_path / "s.sqlite")
    flat = FakeFio(lambda name, n: 1000.0, interrupt_round=7)  # iops done in 5, then latency
    first_out = io.StringIO()
    prepared = make_prepared(tmp_path, ARGS)
    with pytest.raises(RunInterrupted):
        PtsRun(prepared, store, flat, Progress(first_out, live=False, quick=True)).execute(["t"])
    stopped = store.load(store.list_runs()[0].run_id)
    assert stopped.test("iops").status == "steady"
    latency_done = len(stopped.test("latency").rounds)
    assert latency_done == 1

    out = io.StringIO()
    progress = Progress(out, live=False, quick=True)
    PtsRun(prepared, store, FakeFio(lambda name, n: 1000.0), progress).resume(stopped, ["r"])
    whole_names, whole_eta = _plan_eta(first_out.getvalue())
    names, eta = _plan_eta(out.getvalue())
    assert whole_names == "iops, latency" and names == "latency (iops done)"
    # independently: the latency test's rounds still needed at least (window) / at most
    latency = next(t for t in prepared.tests if t.name == "latency")
    rules = progress.window, progress.max_rounds
    expected = [format_duration(max(0, n - latency_done) * round_estimate(latency))
                for n in rules]
    assert eta == "-".join(expected), (eta, whole_eta)
    assert eta != whole_eta
