"""The OP sweep without a device: options and plan, the recommendation rule against the NAS
review's numbers, the ground-truth helpers, the runner against the fake fio, the pages."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import pytest

from ssdlab.analysis.op_sweep import (
    SettingOutcome,
    order_agrees,
    recommend,
    window_write_amplification,
)
from ssdlab.errors import UserError
from ssdlab.plan.op_sweep import (
    OpSweepArgs,
    OpSweepResult,
    build_options,
    build_plan,
    namespace_note,
    parse_ops,
)
from ssdlab.report.build import render
from ssdlab.report.op_sweep_pages import PAGES
from ssdlab.run.op_sweep_run import OpSweepRun, PreparedOpSweep, describe
from ssdlab.run.prepare import PreparedTarget
from ssdlab.run.progress import Progress
from ssdlab.run.session import RunInterrupted
from ssdlab.store.db import Store
from ssdlab.targets.purge import PurgeOutcome
from tests.support.cli import one_line_error, ssdlab
from tests.support.fake_fio import FakeFio
from tests.support.prepared import file_info

MIB = 1 << 20
GIB = 1 << 30


# ------------------------------------------------------------------ options and plan


def test_profiles_give_the_settings_and_round_timing() -> None:
    default = build_options(OpSweepArgs(), (2, 32))
    assert default.ops == (0, 7, 14, 20, 28, 40, 50, 60)
    assert (default.round_seconds, default.max_rounds, default.rule) == (60.0, 25, "snia")
    assert (default.threads, default.iodepth, default.min_gain_pct) == (2, 32, 1.0)
    quick = build_options(OpSweepArgs(profile="quick"), (2, 32))
    assert quick.quick and quick.ops == (0, 20, 40)
    assert (quick.round_seconds, quick.max_rounds) == (1.0, 10)


def test_op_lists_are_sorted_and_one_value_is_one_setting() -> None:
    assert parse_ops("40, 0,20 %") == (0.0, 20.0, 40.0)
    assert parse_ops("30") == (30.0,)
    assert parse_ops("12.5") == (12.5,)


@pytest.mark.parametrize(("args", "needle"), [
    (OpSweepArgs(ops="0,20,20"), "--op '0,20,20' lists a setting twice"),
    (OpSweepArgs(ops="0,95"), "'95' is not a percentage from 0 to 90"),
    (OpSweepArgs(ops="-5"), "'-5' is not a percentage"),
    (OpSweepArgs(ops="a"), "'a' is not a percentage"),
    (OpSweepArgs(max_rounds=4), "--max-rounds 4 is smaller than the snia rule's 5-round"),
    (OpSweepArgs(round_seconds=0.05), "--round-seconds 0.05: give at least 0.1"),
    (OpSweepArgs(min_gain_pct=0), "--min-gain 0: give a number greater than 0"),
    (OpSweepArgs(threads=0), "--threads 0"),
    (OpSweepArgs(rule="strict"), "--rule 'strict' is not one of: snia, review"),
    (OpSweepArgs(purge="none"), "--purge 'none' is not one of: auto, blkdiscard"),
    (OpSweepArgs(profile="long"), "--profile 'long' is not one of: default, quick"),
])
def test_bad_values_are_refused_with_one_line(args: OpSweepArgs, needle: str) -> None:
    with pytest.raises(UserError) as info:
        build_options(args, (2, 32))
    assert needle in info.value.message and "\n" not in info.value.message


def test_the_review_rule_may_stop_after_four_rounds() -> None:
    assert build_options(OpSweepArgs(rule="review", max_rounds=4), (2, 32)).max_rounds == 4


def test_settings_leave_the_share_unused_from_the_end_of_the_target() -> None:
    plan = build_plan(build_options(OpSweepArgs(ops="0,20,28"), (2, 32)), GIB, 64 * MIB, "n")
    ranges = [(s.range.offset_bytes, s.range.size_bytes) for s in plan.settings]
    assert ranges == [(0, GIB), (0, 819 * MIB), (0, 737 * MIB)]
    s20 = plan.settings[1]
    assert s20.usable_fraction == pytest.approx(0.7998, abs=1e-4)
    assert s20.actual_op_pct == pytest.approx(20.02, abs=0.01)
    cell = plan.round_cell(s20)
    assert (cell.block_bytes, cell.mix.read_pct, cell.size_bytes) == (4096, 0, 819 * MIB)
    assert cell.runtime_s == 60.0 and str(cell.pattern) == "random"
    pre = plan.precondition_cell(s20)
    assert (pre.block_bytes, pre.size_bytes, pre.io_bytes) == (128 * 1024, 819 * MIB,
                                                               2 * 819 * MIB)


def test_a_range_below_the_minimum_names_the_largest_op_possible() -> None:
    with pytest.raises(UserError) as info:
        build_plan(build_options(OpSweepArgs(ops="0,60"), (2, 32)), 128 * MIB, 64 * MIB, "n")
    assert info.value.message == (
        "--op 60: the active range would be 51 MiB; ssdlab needs at least 64 MiB (on this "
        "128 MiB target: at most 50 % OP)")


def test_namespace_management_is_detected_and_not_used() -> None:
    capable = namespace_note("nvme", {"nvme_id_ctrl": {"oacs": 0x1F}})
    assert "supports namespace management (OACS bit 3)" in capable
    assert "does not manage namespaces" in capable and "active range" in capable
    assert "does not support" in namespace_note("nvme", {"nvme_id_ctrl": {"oacs": 0x7}})
    assert "unknown" in namespace_note("nvme", {})
    assert namespace_note("virtual", {}).startswith("not an NVMe drive (virtual)")


# ------------------------------------------------------------------ the recommendation


def nas(*points: tuple[float, float]) -> list[SettingOutcome]:
    return [SettingOutcome(op, 1 - op / 100, iops, True) for op, iops in points]


def test_the_nas_review_numbers_recommend_thirty_percent() -> None:
    rec = recommend(nas((0, 65_000), (30, 86_000)), 1.0)
    assert rec.op_pct == 30 and rec.iops == 86_000
    step = rec.steps[0]
    assert step.gain_pct == pytest.approx(32.3, abs=0.05)
    assert step.per_point_pct == pytest.approx(1.077, abs=0.001) and step.accepted
    # IOPS per raw capacity would have kept 0 %: 65K against 86K x 0.7 = 60.2K
    assert rec.best_per_raw_op == 0
    assert rec.message.startswith("recommended OP 30 % (86,000 IOPS)")


def test_a_stricter_threshold_keeps_the_smaller_op() -> None:
    rec = recommend(nas((0, 65_000), (30, 86_000)), 1.1)
    assert rec.op_pct == 0 and not rec.steps[0].accepted


def test_each_step_is_measured_from_the_current_choice() -> None:
    rec = recommend(nas((0, 65_000), (10, 65_500), (30, 86_000), (60, 100_000)), 1.0)
    assert rec.op_pct == 30
    assert [(s.from_op, s.to_op, s.accepted) for s in rec.steps] == [
        (0, 10, False), (0, 30, True), (30, 60, False)]  # 30 -> 60: +16 % for 30 points


def test_failed_settings_are_left_out_and_unsteady_ones_flagged() -> None:
    outcomes = [SettingOutcome(0, 1.0, 10_000, True), SettingOutcome(20, 0.8, None, False),
                SettingOutcome(40, 0.6, 20_000, False)]
    rec = recommend(outcomes, 1.0)
    assert rec.op_pct == 40 and [s.to_op for s in rec.steps] == [40]
    assert "NOT STEADY (last window used) at OP 40 %" in rec.message


def test_one_setting_and_no_setting() -> None:
    assert "only one setting was measured" in recommend(nas((20, 5_000)), 1.0).message
    assert recommend([SettingOutcome(0, 1.0, None, False)], 1.0).op_pct is None


def test_write_amplification_over_a_window_from_cumulative_counters() -> None:
    counters: list[tuple[int, int] | None] = [(100, 100), (200, 900), (300, 1600), (400, 2300)]
    assert window_write_amplification(counters, 2, 3) == pytest.approx(7.0)
    assert window_write_amplification(counters, 1, 3) == pytest.approx(2200 / 300)
    assert window_write_amplification([None, (1, 1)], 1, 1) is None
    assert window_write_amplification(counters, 3, 5) is None


def test_ranking_agreement() -> None:
    assert order_agrees([2_700, 11_500, 19_300], [7.06, 2.06, 1.32])
    assert not order_agrees([2_700, 19_300, 11_500], [7.06, 2.06, 1.32])
    assert not order_agrees([100, 100], [2.0, 1.0])
    assert order_agrees([100, 100], [2.0, 2.0])


# ------------------------------------------------------------------ runner (fake fio)


def iops_by_op(name: str, round_no: int) -> float:
    match = re.search(r"op_sweep_op(\d+)_", name)
    op = int(match.group(1)) if match else 0
    return 3_000.0 * (1 + op / 10)


def prepared(tmp_path: Path, **kw: Any) -> PreparedOpSweep:
    info = file_info(tmp_path / "t.img", GIB)
    args = OpSweepArgs(**{"profile": "quick", **kw})
    target = PreparedTarget(info, False, {"hostname": "test", "cpu_count": 2},
                            {"ssdlab": "test", "fio": "3.33"})
    options = build_options(args, (2, 32))
    return PreparedOpSweep(target, options, build_plan(options, GIB, 64 * MIB, "note"), args)


def execute(tmp_path: Path, fio: FakeFio, **kw: Any) -> tuple[Store, OpSweepRun, str]:
    store = Store.open(tmp_path / "store.sqlite")
    out = io.StringIO()
    runner = OpSweepRun(prepared(tmp_path, **kw), store, fio,
                        Progress(out, live=False, quick=True))
    runner.session.purge = lambda *a: _purged()  # type: ignore[method-assign]
    runner.execute(["test"])
    return store, runner, out.getvalue()


def _purged() -> PurgeOutcome:
    return PurgeOutcome("blkdiscard", True, 0.0, ("blkdiscard",), "fake")


def test_every_setting_runs_to_steady_state_and_the_sweep_recommends(tmp_path: Path) -> None:
    fio = FakeFio(iops_by_op)
    store, runner, log = execute(tmp_path, fio)
    run = store.load(runner.run_id)
    test = run.test("op-sweep")
    assert run.status == "complete" and test.status == "steady"
    settings = test.result["settings"]
    assert [s["op_pct"] for s in settings] == [0, 20, 40]
    assert [s["rounds"] for s in settings] == [[1, 5], [6, 10], [11, 15]]
    assert [s["window_rounds"] for s in settings] == [[1, 5]] * 3
    assert [round(s["iops"]) for s in settings] == [3_000, 9_000, 15_000]
    assert settings[1]["iops_per_raw"] == pytest.approx(9_000 * settings[1]["usable_fraction"],
                                                        rel=1e-3)
    assert all(s["lat_mean_us"] > 0 for s in settings)
    assert test.result["recommendation"]["op_pct"] == 40
    assert test.result["ground_truth_order_agrees"] is None  # not an emulator
    cells = [r.cells[0] for r in test.rounds]
    assert [c["setting_round"] for c in cells] == [1, 2, 3, 4, 5] * 3
    assert [c["op_pct"] for c in cells] == [0] * 5 + [20] * 5 + [40] * 5
    # preconditioning of each setting covers its active range only, twice
    pre = [s.detail["io_bytes"] for s in test.steps if s.kind == "precondition"]
    assert pre == [2 * GIB, 2 * 819 * MIB, 2 * 614 * MIB]
    assert "[QUICK]" in log and "op-sweep OP 20 % round 5" in log


def test_one_value_runs_one_setting(tmp_path: Path) -> None:
    store, runner, _ = execute(tmp_path, FakeFio(iops_by_op), ops="30")
    result = store.load(runner.run_id).test("op-sweep").result
    assert [s["op_pct"] for s in result["settings"]] == [30]
    assert "only one setting" in result["recommendation"]["message"]


def test_a_failed_setting_is_recorded_and_the_others_go_on(tmp_path: Path) -> None:
    store, runner, _ = execute(tmp_path, FakeFio(iops_by_op, fail_rounds={7}))
    run = store.load(runner.run_id)
    test = run.test("op-sweep")
    statuses = [s["status"] for s in test.result["settings"]]
    assert statuses == ["steady", "failed", "steady"]
    assert "io_u error" in test.result["settings"][1]["error"]
    assert test.result["recommendation"]["op_pct"] == 40
    assert "op-sweep (OP 20 %)" in run.message
    assert [(r.round_no, r.status) for r in test.rounds][5:8] == [(6, "ok"), (7, "failed"),
                                                                   (8, "ok")]


def test_a_failed_setting_is_stored_as_it_always_was_and_fails_the_run(tmp_path: Path
                                                                       ) -> None:
    store, runner, _ = execute(tmp_path, FakeFio(iops_by_op, fail_rounds={7}))
    run = store.load(runner.run_id)
    test = run.test("op-sweep")
    failed = test.result["settings"][1]
    assert list(failed) == ["op_pct", "label", "usable_bytes", "usable_fraction",
                            "actual_op_pct", "status", "steady", "iops", "iops_per_raw",
                            "error", "emulator_wa"]
    assert list(test.result["settings"][0])[-4:] == ["verdict", "message", "emulator_wa",
                                                      "purge"]
    assert list(test.result) == ["settings", "recommendation", "definition",
                                 "ground_truth_order_agrees", "steady", "error"]
    result = OpSweepResult.from_json(test.result)
    assert [type(s).__name__ for s in result.settings] == ["MeasuredSetting", "FailedSetting",
                                                           "MeasuredSetting"]
    assert json.dumps(result.to_json()) == json.dumps(test.result)
    outcome = PAGES.outcome(run, store.path)
    assert outcome.failure == f"OP sweep: OP 20 % failed (see `ssdlab show {run.run_id}`)"
    assert outcome.lines[1] == f"  {test.result['recommendation']['message']}"
    page, _ = render([run])
    assert "FAILED: round 2: fio exited with status 1" in page


def test_ctrl_c_keeps_the_completed_rounds_and_settings(tmp_path: Path) -> None:
    with pytest.raises(RunInterrupted):
        execute(tmp_path, FakeFio(iops_by_op, interrupt_round=8))
    store = Store.open(tmp_path / "store.sqlite")
    run = store.load(store.resolve("last"))
    assert run.status == "interrupted"
    test = run.test("op-sweep")
    assert len(test.rounds) == 7 and len(test.result["settings"]) == 1


def test_emulator_counters_give_the_window_write_amplification(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "store.sqlite")
    runner = OpSweepRun(prepared(tmp_path), store, FakeFio(iops_by_op),
                        Progress(io.StringIO(), live=False))
    runner.session.purge = lambda *a: _purged()  # type: ignore[method-assign]
    state = {"host": 0, "nand": 0, "wa": 1.0}

    def truth(test: str | None, when: str) -> dict[str, Any]:
        if "preconditioned" in when:  # a new setting: its WA falls with more OP
            state["wa"] = {0: 7.0, 1: 2.0, 2: 1.3}[int(state.get("n", 0))]
            state["n"] = state.get("n", 0) + 1
        elif "round" in when:
            state["host"] += 1000
            state["nand"] += int(1000 * state["wa"])
        return {"counters": {"host_write_bytes": state["host"],
                             "nand_write_bytes": state["nand"]}}

    runner.session.ground_truth = truth  # type: ignore[method-assign]
    runner.execute(["test"])
    result = store.load(runner.run_id).test("op-sweep").result
    assert [s["emulator_wa"] for s in result["settings"]] == pytest.approx([7.0, 2.0, 1.3])
    assert result["ground_truth_order_agrees"] is True
    page, _ = render([store.load(runner.run_id)])
    assert "Write amplification (emulator ground truth" in page
    assert "agrees with" in page


def test_the_report_pages_show_iops_against_op_and_the_table(tmp_path: Path) -> None:
    store, runner, _ = execute(tmp_path, FakeFio(iops_by_op))
    page, _ = render([store.load(runner.run_id)])
    assert "Over-provisioning sweep: results" in page
    assert "Steady-state 4 KiB random-write IOPS against OP" in page
    assert "IOPS x usable share" in page and "recommended: 40: 15,000 IOPS" in page
    assert "OP (% of the capacity left unused)" in page
    assert "IOPS per round, one line per OP setting" in page
    assert "Recommendation rule: at least 1 % more IOPS per point" in page
    assert "QUICK PROFILE" in page


def test_not_steady_settings_are_marked(tmp_path: Path) -> None:
    def oscillating(name: str, round_no: int) -> float:
        return 10_000.0 * (1.4 if round_no % 2 else 0.6)

    store, runner, _ = execute(tmp_path, FakeFio(oscillating), ops="10")
    test = store.load(runner.run_id).test("op-sweep")
    assert test.status == "not_steady"
    assert test.result["settings"][0]["window_rounds"] == [6, 10]
    page, _ = render([store.load(runner.run_id)])
    assert "STEADY STATE NOT REACHED at OP 10 %" in page


def test_dry_run_prints_every_setting_and_its_job_files(tmp_path: Path) -> None:
    text = describe(prepared(tmp_path))
    assert text.startswith("DRY RUN: nothing will be written.")
    assert "profile quick (QUICK); OP = share of the capacity left unused" in text
    assert "namespaces: note" in text
    assert text.count("-- job file of every round:") == 3
    assert "== OP 20 %: active range 819 MiB (80.0 % usable, 20.0 % unused)" in text
    assert "rw=randwrite" in text and "size=643825664" in text


@pytest.mark.fio  # prepare asks fio its version, dry runs too
def test_cli_dry_run_and_refusal(tmp_path: Path) -> None:
    target = str(tmp_path / "new.img")
    result = ssdlab("run", "op-sweep", "--target", target, "--size", "256MiB", "--op",
                    "0,30", "--dry-run")
    assert result.returncode == 0 and result.stderr == ""
    assert "== OP 30 %" in result.stdout and "not an NVMe drive (file)" in result.stdout
    refused = ssdlab("run", "op-sweep", "--target", target, "--size", "128MiB", "--op", "60")
    assert refused.returncode == 2
    assert "at most 50 % OP" in one_line_error(refused)
    assert not Path(target).exists()


def test_a_failed_purge_is_shown_on_the_results_page(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "store.sqlite")
    runner = OpSweepRun(prepared(tmp_path, ops="20"), store, FakeFio(iops_by_op),
                        Progress(io.StringIO(), live=False))
    failed = PurgeOutcome("blkdiscard", False, 0.0, ("blkdiscard",), "not supported")
    runner.session.purge = lambda *a: failed  # type: ignore[method-assign]
    runner.execute(["test"])
    page, _ = render([store.load(runner.run_id)])
    assert "PURGE FAILED at OP 20 %" in page
