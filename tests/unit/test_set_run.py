"""Sets of PTS runs with the fake fio: one run record per target, a set record naming them,
one fio run per round for the targets still running, each round storing only its own
target's jobs; Ctrl-C and resume; one target's failure is its own; the host check."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from ssdlab.engine.jobmerge import SET_KEY
from ssdlab.engine.jobtext import parse_job_file
from ssdlab.engine.runner import Executor
from ssdlab.plan.pts import PtsArgs
from ssdlab.run.progress import Progress
from ssdlab.run.pts_run import PreparedPts, PtsRun, RunInterrupted
from ssdlab.run.set_run import SET_HOST_KIND, SetMember, SetOutcome, SetRun, short_names, worst
from ssdlab.store.db import Store
from ssdlab.targets.topology import CpuTimes, StatSnapshot
from tests.support.fake_fio import FakeFio
from tests.support.prepared import make_prepared

ARGS = PtsArgs(profile="quick", tests="iops", purge="none", precondition=False,
               block_sizes="4", mixes="100/0,0/100")


def flat(name: str, round_no: int) -> float:
    return 10_000.0


def _prepared(tmp_path: Path, count: int) -> list[PreparedPts]:
    out = []
    for i in range(count):
        where = tmp_path / f"m{i}"
        where.mkdir()
        out.append(make_prepared(where, ARGS))
    return out


def _go(p: PreparedPts, model: Callable[[], None] | None = None
        ) -> Callable[[Store, Executor, Progress], str]:
    def go(store: Store, executor: Executor, progress: Progress) -> str:
        if model is not None:
            model()
        return PtsRun(p, store, executor, progress).execute(["run", "pts"])
    return go


def _members(prepared: list[PreparedPts], out: io.StringIO,
             goes: list[Callable[[Store, Executor, Progress], str]] | None = None
             ) -> list[SetMember]:
    names = short_names([p.target.info.path for p in prepared])
    goes = goes or [_go(p) for p in prepared]
    return [SetMember(n, p.target.info.path, p.target.info,
                      Progress(out, live=False, quick=True), g)
            for n, p, g in zip(names, prepared, goes, strict=True)]


def _set(tmp_path: Path, members: list[SetMember], fio: FakeFio, out: io.StringIO,
         **kw: object) -> SetRun:
    return SetRun(members, tmp_path / "s.sqlite", fio, stream=out, live=False, **kw)  # type: ignore[arg-type]


def test_four_targets_four_runs_one_set_and_one_fio_run_per_round(tmp_path: Path) -> None:
    prepared = _prepared(tmp_path, 4)
    out = io.StringIO()
    fio = FakeFio(flat)
    outcome = _set(tmp_path, _members(prepared, out), fio, out).execute(
        "pts", ["run", "pts", "--target", "..."])
    assert worst(outcome) == 0 and not outcome.interrupted
    assert outcome.fio_runs == len(fio.calls) == 5  # steady at round 5, all four at once
    with Store.open(tmp_path / "s.sqlite") as store:
        data = store.load_set(outcome.set_id)
        assert data.suite == "pts" and data.targets == [p.target.info.path for p in prepared]
        assert [run_id for _, run_id in data.runs] == [o.run_id for o in outcome.members]
        assert data.detail["fio_runs"] == 5 and data.finished_at is not None
        assert store.run_sets() == {o.run_id: outcome.set_id for o in outcome.members
                                    if o.run_id}
        for place, o in enumerate(outcome.members):
            assert o.run_id is not None and o.error is None
            run = store.load(o.run_id, with_raw=True)
            assert run.set_id == outcome.set_id and run.status == "complete"
            assert run.target["path"] == prepared[place].target.info.path
            assert run.test("iops").status == "steady"
            assert [e.kind for e in run.events].count(SET_HOST_KIND) == 1
            for rnd in run.test("iops").rounds:
                assert rnd.job_text is not None and "t1." not in rnd.job_text
                assert f"filename={run.target['path']}" in rnd.job_text
                assert rnd.stdout is not None
                document = json.loads(rnd.stdout)
                # only its own target's cells, under their own names
                assert [j["jobname"] for j in document["jobs"]] == [
                    "iops_bs4096_r100", "iops_bs4096_r0"]
                assert document[SET_KEY]["tag"] == f"t{place + 1}"
                assert document[SET_KEY]["fio_run"] == rnd.round_no
                assert document[SET_KEY]["job_file"].count("[t") == 8
    log = out.getvalue()
    for name in short_names([p.target.info.path for p in prepared]):
        assert f"{name}: [QUICK] iops round 5" in log


def test_a_target_whose_run_ends_leaves_the_others_go_on(tmp_path: Path) -> None:
    prepared = _prepared(tmp_path, 2)

    def model(name: str, round_no: int) -> float:  # t2 never settles: 8 rounds
        return 10_000.0 * (1.3 if name.startswith("t2.") and round_no % 2 else 1.0)

    out = io.StringIO()
    fio = FakeFio(model)
    outcome = _set(tmp_path, _members(prepared, out), fio, out).execute("pts", ["run"])
    assert outcome.fio_runs == 8  # the longest run's rounds
    assert [len(parse_job_file(c).jobs) for c in fio.calls] == [4] * 5 + [2] * 3
    with Store.open(tmp_path / "s.sqlite") as store:
        runs = [store.load(o.run_id or "") for o in outcome.members]
    assert [len(r.test("iops").rounds) for r in runs] == [5, 8]
    assert [r.test("iops").status for r in runs] == ["steady", "not_steady"]


def test_ctrl_c_interrupts_every_run_and_the_set_resumes(tmp_path: Path) -> None:
    prepared = _prepared(tmp_path, 3)
    out = io.StringIO()
    outcome = _set(tmp_path, _members(prepared, out), FakeFio(flat, interrupt_round=3),
                   out).execute("pts", ["run"])
    assert outcome.interrupted and worst(outcome) == 130
    assert all(isinstance(o.error, RunInterrupted) for o in outcome.members)
    store = Store.open(tmp_path / "s.sqlite")
    runs = [store.load(o.run_id or "") for o in outcome.members]
    assert [r.status for r in runs] == ["interrupted"] * 3
    assert [[n.round_no for n in r.test("iops").rounds] for r in runs] == [[1, 2]] * 3

    def resumer(p: PreparedPts, run_id: str) -> Callable[[Store, Executor, Progress], str]:
        def go(st: Store, ex: Executor, pr: Progress) -> str:
            return PtsRun(p, st, ex, pr).resume(st.load(run_id), ["resume"])
        return go

    fio = FakeFio(flat)
    members = [replace(m, run_id=r.run_id) for m, r in zip(
        _members(prepared, out, [resumer(p, r.run_id) for p, r in zip(prepared, runs,
                                                                      strict=True)]),
        runs, strict=True)]
    again = _set(tmp_path, members, fio, out).resume(outcome.set_id)
    assert worst(again) == 0 and again.fio_runs == 3  # rounds 3-5
    done = [store.load(r.run_id) for r in runs]
    assert [r.status for r in done] == ["complete"] * 3
    assert [len(r.test("iops").rounds) for r in done] == [5] * 3
    data = store.load_set(outcome.set_id)
    # the fio runs started: three before Ctrl-C (the third stopped), three after
    assert data.detail["fio_runs"] == 3 + 3 and data.detail["resumed"] == 1
    assert [r for _, r in data.runs] == [r.run_id for r in runs]
    store.close()


def test_one_targets_failure_is_its_own(tmp_path: Path) -> None:
    prepared = _prepared(tmp_path, 3)
    out = io.StringIO()

    def broken() -> None:
        raise RuntimeError("a bug in one run")

    goes = [_go(prepared[0]), _go(prepared[1], broken), _go(prepared[2])]
    outcome = _set(tmp_path, _members(prepared, out, goes), FakeFio(flat), out).execute(
        "pts", ["run"])
    assert [o.error is None for o in outcome.members] == [True, False, True]
    assert outcome.members[1].run_id is None and worst(outcome) == 1
    with Store.open(tmp_path / "s.sqlite") as store:
        data = store.load_set(outcome.set_id)
    assert [p for p, _ in data.runs] == [0, 2]
    assert data.detail["errors"] == {outcome.members[1].member.name:
                                     "RuntimeError: a bug in one run"}


def _stat(busy: int, idle: int) -> StatSnapshot:
    return {"cpu": CpuTimes(busy, 0, 0, idle, 0, 0, 0, 0)}


def test_a_saturated_host_and_a_far_numa_node_are_warned_once(tmp_path: Path) -> None:
    prepared = _prepared(tmp_path, 2)
    prepared[1] = replace(prepared[1], target=replace(
        prepared[1].target, info=replace(prepared[1].target.info, numa_node=1)))
    readings = iter(_stat(100 * n, 5 * n) for n in range(1, 100))
    host = {"numa_nodes": [{"node": 0, "cpulist": "0-1"}, {"node": 1, "cpulist": "2-3"}]}
    out = io.StringIO()
    outcome = _set(tmp_path, _members(prepared, out), FakeFio(flat), out,
                   read_stat=lambda: next(readings), host=host,
                   fio_cpus=lambda: frozenset({0, 1})).execute("pts", ["run"])
    assert outcome.host.host_bound and outcome.host.runs == 5
    assert outcome.host.busy_pct == pytest.approx(100 / 105 * 100)
    assert outcome.warning is not None and "HOST-BOUND" in outcome.warning
    assert "NUMA: " + outcome.members[1].member.name in outcome.warning
    assert out.getvalue().count("WARNING: ") == 1
    with Store.open(tmp_path / "s.sqlite") as store:
        for o in outcome.members:
            run = store.load(o.run_id or "")
            warnings = [e for e in run.events if e.kind == "warning"]
            assert len(warnings) == 1 and "95.2 %" in warnings[0].message
            assert warnings[0].detail and warnings[0].detail["numa"][
                outcome.members[1].member.name]["mismatch"] is True


def test_a_quiet_host_is_not_warned(tmp_path: Path) -> None:
    prepared = _prepared(tmp_path, 2)
    readings = iter(_stat(10 * n, 90 * n) for n in range(1, 100))
    out = io.StringIO()
    outcome: SetOutcome = _set(tmp_path, _members(prepared, out), FakeFio(flat), out,
                               read_stat=lambda: next(readings)).execute("pts", ["run"])
    assert not outcome.host.host_bound and outcome.warning is None
    assert "not host-bound" in outcome.host.message and "WARNING" not in out.getvalue()


def test_short_names_tell_targets_apart() -> None:
    assert short_names(["/dev/loop1", "/x/a.img", "/y/a.img"]) == ["loop1", "a.img#2",
                                                                   "a.img#3"]
