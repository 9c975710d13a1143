"""Orchestration of PTS runs against a fake fio: rounds, steady state, journal, failures."""

from __future__ import annotations

import io
import math
from pathlib import Path

import pytest

from ssdlab.engine.runner import FioRun, TickFn
from ssdlab.plan.pts import PtsArgs
from ssdlab.run.progress import Progress
from ssdlab.run.pts_run import PtsRun, RunInterrupted
from ssdlab.run.session import TargetLost
from ssdlab.store.db import Store
from ssdlab.targets.filetarget import create_file_target
from tests.support.fake_fio import FakeFio
from tests.support.prepared import make_prepared

QUICK_IOPS = PtsArgs(profile="quick", tests="iops", purge="none", precondition=False)


def flat(name: str, round_no: int) -> float:
    return 10_000.0


def oscillating(name: str, round_no: int) -> float:
    return 10_000.0 * (1.3 if round_no % 2 else 0.7)


def _run(tmp_path: Path, args: PtsArgs, fio: FakeFio, **kw: int) -> tuple[Store, str, str]:
    prepared = make_prepared(tmp_path, args, **kw)
    out = io.StringIO()
    store = Store.open(tmp_path / "store.sqlite")
    runner = PtsRun(prepared, store, fio, Progress(out, live=False, quick=True))
    return store, runner.execute(["test"]), out.getvalue()


def test_flat_series_is_steady_at_the_fifth_round(tmp_path: Path) -> None:
    store, run_id, log = _run(tmp_path, QUICK_IOPS, FakeFio(flat))
    run = store.load(run_id)
    iops = run.test("iops")
    assert iops.status == "steady"
    assert [r.round_no for r in iops.rounds] == [1, 2, 3, 4, 5]
    assert iops.verdicts["primary"]["attained"] is True
    assert iops.verdicts["primary"]["window_rounds"] == [1, 5]
    assert len(iops.result["cells"]) == 7 * 8
    assert all(math.isclose(c["iops"], 10_000.0, rel_tol=1e-3) for c in iops.result["cells"])
    assert "[QUICK]" in log


def test_both_tracking_sets_are_recorded(tmp_path: Path) -> None:
    store, run_id, _ = _run(tmp_path, QUICK_IOPS, FakeFio(flat))
    verdicts = store.load(run_id).test("iops").verdicts
    assert set(verdicts) == {"primary", "v1.1", "v2.0"}
    assert verdicts["v1.1"]["tracked"] == ["IOPS 4 KiB 0/100"]
    assert len(verdicts["v2.0"]["tracked"]) == 3


def test_never_steady_is_reported_as_not_steady_with_best_window(tmp_path: Path) -> None:
    store, run_id, _ = _run(tmp_path, QUICK_IOPS, FakeFio(oscillating))
    test = store.load(run_id).test("iops")
    assert test.status == "not_steady"
    assert len(test.rounds) == 8  # the quick profile's round limit
    primary = test.verdicts["primary"]
    assert primary["attained"] is False
    assert primary["message"].startswith("NOT STEADY after 8 rounds")
    assert primary["window_rounds"] is not None
    assert test.result["steady"] is False
    assert test.result["window_rounds"] == [4, 8]  # SNIA: the last window is reported


def test_a_step_settles_after_the_window_moves_past_it(tmp_path: Path) -> None:
    def step(name: str, round_no: int) -> float:
        return 20_000.0 if round_no <= 2 else 10_000.0

    store, run_id, _ = _run(tmp_path, QUICK_IOPS, FakeFio(step))
    test = store.load(run_id).test("iops")
    assert test.status == "steady"
    assert test.verdicts["primary"]["window_rounds"] == [3, 7]


def test_failed_round_is_kept_and_the_run_goes_on(tmp_path: Path) -> None:
    args = PtsArgs(profile="quick", tests="iops,latency", purge="none", precondition=False)
    store, run_id, _ = _run(tmp_path, args, FakeFio(flat, fail_rounds={3}))
    run = store.load(run_id)
    iops = run.test("iops")
    assert iops.status == "failed"
    assert [(r.round_no, r.status) for r in iops.rounds] == [(1, "ok"), (2, "ok"), (3, "failed")]
    assert "io_u error" in iops.result["error"]
    assert list(iops.result) == ["error"]  # as it was stored before the results were typed
    assert run.test("latency").status == "steady"
    assert run.status == "complete" and "iops" in run.message


def test_ctrl_c_keeps_completed_rounds(tmp_path: Path) -> None:
    prepared = make_prepared(tmp_path, QUICK_IOPS)
    store = Store.open(tmp_path / "store.sqlite")
    runner = PtsRun(
        prepared,
        store,
        FakeFio(oscillating, interrupt_round=4),
        Progress(io.StringIO(), live=False),
    )
    with pytest.raises(RunInterrupted) as info:
        runner.execute(["test"])
    assert info.value.exit_code == 130
    run = store.load(store.resolve("last"))
    assert run.status == "interrupted"
    assert [r.round_no for r in run.test("iops").rounds] == [1, 2, 3]


def test_reviews_variant_uses_four_round_window(tmp_path: Path) -> None:
    args = PtsArgs(
        profile="quick", variant="reviews", tests="iops,latency", purge="none", precondition=False
    )
    store, run_id, _ = _run(tmp_path, args, FakeFio(flat))
    run = store.load(run_id)
    iops = run.test("iops")
    assert iops.verdicts["primary"]["rule"] == "review"
    assert len(iops.rounds) == 4
    assert len(iops.result["cells"]) == 7 * 7  # the reviews drop 0.5 KiB
    latency_mixes = {c["read_pct"] for c in run.test("latency").result["cells"]}
    assert latency_mixes == {100, 70, 0}


def test_half_kib_cells_are_skipped_on_4k_sector_devices(tmp_path: Path) -> None:
    store, run_id, _ = _run(tmp_path, QUICK_IOPS, FakeFio(flat), sector=4096)
    test = store.load(run_id).test("iops")
    assert len(test.result["cells"]) == 7 * 7
    assert len(test.result["skipped"]) == 7
    assert all("4096-byte logical sector" in s["reason"] for s in test.result["skipped"])


def test_every_round_job_file_is_stored_verbatim(tmp_path: Path) -> None:
    fio = FakeFio(flat)
    store, run_id, _ = _run(tmp_path, QUICK_IOPS, fio)
    rounds = store.load(run_id).test("iops").rounds
    assert [r.job_text for r in rounds] == fio.calls


def test_preconditioning_and_purge_are_recorded(tmp_path: Path) -> None:
    args = PtsArgs(profile="quick", tests="latency")
    prepared = make_prepared(tmp_path, args, capacity=64 * 1024 * 1024)
    (tmp_path / "target.img").unlink()  # the fake's placeholder: ssdlab makes its own
    create_file_target(str(tmp_path / "target.img"), 64 * 1024 * 1024)
    store = Store.open(tmp_path / "store.sqlite")
    fio = FakeFio(flat)
    run_id = PtsRun(prepared, store, fio, Progress(io.StringIO(), live=False)).execute([])
    steps = store.load(run_id).test("latency").steps
    kinds = [s.kind for s in steps]
    assert kinds == ["purge", "precondition"]
    assert steps[0].detail["method"] == "file-recreate"
    assert "io_size=" in fio.calls[0] and "rw=write" in fio.calls[0]


def test_a_target_that_stops_answering_stops_the_run(tmp_path: Path) -> None:
    fio = FakeFio(flat, fail_rounds={3})
    original = fio.run

    def vanish_then_run(
        job_text: str, timeout_s: float, *, json_plus: bool = False, on_tick: TickFn | None = None
    ) -> FioRun:
        if fio.rounds == 2:  # the device goes away before round 3, which fails
            (tmp_path / "target.img").unlink(missing_ok=True)
        return original(job_text, timeout_s, json_plus=json_plus, on_tick=on_tick)

    fio.run = vanish_then_run  # type: ignore[method-assign]
    args = PtsArgs(profile="quick", tests="iops,latency", purge="none", precondition=False)
    with pytest.raises(TargetLost, match="no longer exists: the run stops here"):
        _run(tmp_path, args, fio)
    store = Store.open(tmp_path / "store.sqlite")
    run = store.load(store.list_runs()[0].run_id)
    assert run.status == "failed" and "no longer exists" in run.message
    assert [r.round_no for r in run.test("iops").rounds if r.status == "ok"] == [1, 2]
    assert [t.name for t in run.tests] == ["iops"]  # latency never started
