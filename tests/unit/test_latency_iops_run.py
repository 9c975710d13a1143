"""Latency-vs-IOPS runs against a fake fio whose latency grows with the queue: the ladder,
its stopping rules, host CPU and host-bound points, NUMA, Ctrl-C, failures, the journal,
the export and the report pages."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path
from typing import Any

import pytest

from ssdlab.analysis.ladder import MAX_QD, SATURATED, TARGET
from ssdlab.plan.latency_iops import TEST, LatencyIopsArgs
from ssdlab.plan.latency_records import LatencyIopsResult
from ssdlab.report.build import render
from ssdlab.report.latency_iops_pages import PAGES, latency_iops_overlay, pick_curves
from ssdlab.run.cpu_window import CpuWindow
from ssdlab.run.ladder_progress import LadderProgress
from ssdlab.run.latency_curves import restore_curves
from ssdlab.run.latency_iops_run import LatencyIopsRun
from ssdlab.run.progress import Progress
from ssdlab.run.session import RunInterrupted
from ssdlab.store.db import Store
from ssdlab.store.export import run_to_csv_rows, run_to_json, write_export
from ssdlab.targets.filetarget import create_file_target
from tests.support.fake_fio import FakeProcStat, QueueDevice, QueueFakeFio
from tests.support.golden import load_golden_runs
from tests.support.latency_iops import make_prepared

#: one workload, threads 1 and 2, no purge, no preconditioning: only ladder points run
ONE = LatencyIopsArgs(profile="quick", block_sizes="4", mixes="100/0", threads="1,2",
                      purge="none", precondition=False)


def run_ladder(
    tmp_path: Path,
    args: LatencyIopsArgs = ONE,
    fio: QueueFakeFio | None = None,
    *,
    busy: float = 30.0,
    store: Store | None = None,
    **prepared_kw: Any,
) -> tuple[Store, str, QueueFakeFio, str]:
    fio = fio or QueueFakeFio()
    store = store or Store.open(tmp_path / "store.sqlite")
    prepared = make_prepared(tmp_path, args, **prepared_kw)
    out = io.StringIO()
    runner = LatencyIopsRun(prepared, store, fio, Progress(out, live=False, quick=True),
                            read_stat=FakeProcStat(lambda: busy),
                            fio_cpus=lambda: frozenset({0, 1}))
    return store, runner.execute(["test"]), fio, out.getvalue()


def curves(store: Store, run_id: str) -> list[dict[str, Any]]:
    result: list[dict[str, Any]] = store.load(run_id).test(TEST).result["curves"]
    return result


def test_saturating_device_stops_each_curve_when_iops_stop_rising(tmp_path: Path) -> None:
    # 100 us per I/O up to 50K IOPS: 1 thread 10K, 20K, 40K, 50K (QD 8), 50K (QD 16): flat
    store, run_id, fio, log = run_ladder(tmp_path)
    assert fio.points == [(1, 1), (1, 2), (1, 4), (1, 8), (1, 16),
                          (2, 1), (2, 2), (2, 4), (2, 8)]
    one, two = curves(store, run_id)
    assert [p["iodepth"] for p in one["points"]] == [1, 2, 4, 8, 16]
    assert one["stop"]["kind"] == SATURATED
    assert "IOPS rose only 0.0 % from QD 8 to QD 16 (less than 3 %)" in one["stop"]["reason"]
    assert one["max_iops"] == pytest.approx(50_000, rel=1e-3)
    assert [p["lat_mean_us"] for p in one["points"]] == pytest.approx([100, 100, 100, 160, 320])
    assert two["threads"] == 2 and [p["outstanding"] for p in two["points"]] == [2, 4, 8, 16]
    test = store.load(run_id).test(TEST)
    assert test.status == "complete" and store.load(run_id).status == "complete"
    assert [r.round_no for r in test.rounds] == list(range(1, 10))
    assert "[QUICK]" in log and "1 thread: 5 points; stopped: IOPS rose only" in log


def test_target_latency_stops_the_curve(tmp_path: Path) -> None:
    args = LatencyIopsArgs(**{**ONE.__dict__, "target_latency_us": 150.0})
    store, run_id, _, _ = run_ladder(tmp_path, args)
    one, two = curves(store, run_id)
    assert [p["iodepth"] for p in one["points"]] == [1, 2, 4, 8]  # 160 us at QD 8
    assert one["stop"]["kind"] == TARGET
    assert one["stop"]["reason"] == "mean latency 160.0 us at QD 8 reached the 150 us target"
    assert [p["iodepth"] for p in two["points"]] == [1, 2, 4]  # 8 outstanding: 160 us


def test_full_ladder_runs_every_base_depth_first(tmp_path: Path) -> None:
    args = LatencyIopsArgs(**{**ONE.__dict__, "threads": "1", "target_latency_us": 150.0,
                              "full_ladder": True})
    store, run_id, _, _ = run_ladder(tmp_path, args)
    (one,) = curves(store, run_id)
    assert [p["iodepth"] for p in one["points"]] == [1, 2, 4, 8, 16, 32]
    assert one["stop"]["kind"] == TARGET and "at QD 32" in one["stop"]["reason"]


def test_below_target_at_max_qd_adds_threads(tmp_path: Path) -> None:
    fast = QueueFakeFio(QueueDevice(base_us=100.0, max_iops=1e12))  # never saturates
    args = LatencyIopsArgs(**{**ONE.__dict__, "qds": "1,2", "max_qd": 4, "max_threads": 8})
    store, run_id, _, log = run_ladder(tmp_path, args, fast)
    got = [(c["threads"], [p["iodepth"] for p in c["points"]], c["stop"]["kind"])
           for c in curves(store, run_id)]
    assert got == [(1, [1, 2, 4], MAX_QD), (2, [1, 2, 4], MAX_QD), (4, [1, 2, 4], MAX_QD),
                   (8, [1, 2, 4], MAX_QD)]
    assert "2 threads stayed below 500 us up to QD 4: adding 4 threads" in log


def test_points_carry_latency_cpu_and_are_stored_as_rounds(tmp_path: Path) -> None:
    store, run_id, fio, _ = run_ladder(tmp_path, busy=40.0)
    test = store.load(run_id).test(TEST)
    first = test.rounds[0]
    (cell,) = first.cells
    for key in ("block_bytes", "read_pct", "threads", "iodepth", "iops", "lat_mean_us",
                "lat_p99_us", "lat_p99_9_us", "usr_cpu_pct", "sys_cpu_pct", "host_cpu_pct",
                "host_usr_pct", "host_sys_pct"):
        assert cell[key] is not None, key
    assert cell["host_cpu_pct"] == pytest.approx(40.0)
    assert cell["host_usr_pct"] + cell["host_sys_pct"] == pytest.approx(40.0)
    assert cell["host_cpu_window"] == "whole fio run"  # the fake fio never ticks
    assert first.tracking == {"iops": cell["iops"], "lat_mean_us": cell["lat_mean_us"]}
    assert [r.job_text for r in test.rounds] == fio.calls
    qd16 = test.rounds[4].job_text
    assert qd16 is not None and "iodepth=16" in qd16 and "numjobs=1" in qd16
    assert test.params["qd_ladder"] == [1, 2, 4, 8, 16, 32, 64, 128]
    assert test.verdicts["host_bound"]["host_bound"] is False


def test_busy_host_with_flat_iops_is_host_bound(tmp_path: Path) -> None:
    fio = QueueFakeFio()
    store = Store.open(tmp_path / "store.sqlite")
    prepared = make_prepared(tmp_path, ONE)
    runner = LatencyIopsRun(
        prepared, store, fio, Progress(io.StringIO(), live=False),
        read_stat=FakeProcStat(lambda: 96.0 if fio.outstanding >= 8 else 50.0),
        fio_cpus=lambda: frozenset({0, 1}),
    )
    run_id = runner.execute([])
    result = store.load(run_id).test(TEST).result
    verdict = result["host_bound"]
    assert verdict["host_bound"] is True
    flagged = [(f["threads"], f["iodepth"]) for f in verdict["findings"]]
    assert flagged == [(1, 16), (2, 8)]  # QD 8 of 1 thread still rose 25 %: the drive's
    assert verdict["message"].startswith("HOST-BOUND: 2 point(s)")
    points = {(c["threads"], p["iodepth"]): p for c in result["curves"] for p in c["points"]}
    assert points[(1, 16)]["host_bound"] and "host CPU 96.0 %" in points[(1, 16)][
        "host_bound_reason"]
    assert not points[(1, 8)]["host_bound"]
    end = PAGES.outcome(store.load(run_id), store.path)  # what run prints at the end
    assert end.lines[1].startswith("  HOST-BOUND: 2 point(s) measured the host")


def test_ctrl_c_keeps_completed_points_and_their_curves(tmp_path: Path) -> None:
    fio = QueueFakeFio(interrupt_call=4)
    with pytest.raises(RunInterrupted) as info:
        run_ladder(tmp_path, ONE, fio)
    assert info.value.exit_code == 130
    store = Store.open(tmp_path / "store.sqlite")
    run = store.load(store.resolve("last"))
    assert run.status == "interrupted"
    test = run.test(TEST)
    assert test.status == "interrupted"
    assert [r.round_no for r in test.rounds] == [1, 2, 3]
    (one,) = test.result["curves"]
    assert len(one["points"]) == 3 and one["stop"]["kind"] == "interrupted"


def test_failed_point_fails_the_test_with_the_points_before_it(tmp_path: Path) -> None:
    store, run_id, _, _ = run_ladder(tmp_path, ONE, QueueFakeFio(fail_calls={3}))
    run = store.load(run_id)
    test = run.test(TEST)
    assert run.status == "complete" and "latency-iops" in run.message
    assert test.status == "failed" and "io_u error" in test.result["error"]
    assert [(r.round_no, r.status) for r in test.rounds] == [(1, "ok"), (2, "ok"), (3, "failed")]
    (one,) = test.result["curves"]
    assert len(one["points"]) == 2 and one["stop"]["kind"] == "failed"


def test_purge_and_preconditioning_come_first(tmp_path: Path) -> None:
    create_file_target(str(tmp_path / "target.img"), 64 * 1024 * 1024)
    args = LatencyIopsArgs(**{**ONE.__dict__, "threads": "1", "purge": "auto",
                              "precondition": True})
    store, run_id, fio, _ = run_ladder(tmp_path, args, capacity=64 * 1024 * 1024)
    steps = store.load(run_id).test(TEST).steps
    assert [s.kind for s in steps] == ["purge", "precondition"]
    assert "rw=write" in fio.calls[0] and "io_size=134217728" in fio.calls[0]
    assert len(store.load(run_id).test(TEST).rounds) == len(fio.calls) - 1


def test_numa_mismatch_is_warned_and_recorded(tmp_path: Path) -> None:
    host = {"cpu_count": 4, "numa_nodes": [{"node": 0, "cpulist": "0-1"},
                                           {"node": 1, "cpulist": "2-3"}]}
    store, run_id, _, log = run_ladder(tmp_path, numa_node=1, host=host)
    run = store.load(run_id)
    numa = run.test(TEST).result["numa"]
    assert numa["mismatch"] is True and numa["device_node"] == 1 and numa["fio_nodes"] == [0]
    warnings = [e.message for e in run.events if e.kind == "warning"]
    assert warnings and warnings[0].startswith("NUMA: device on NUMA node 1 but fio ran on "
                                               "CPUs 0-1 (NUMA node 0)")
    assert "NUMA: device on NUMA node 1" in log


def test_cpu_window_starts_after_the_warm_up() -> None:
    level = [10.0]
    window = CpuWindow(FakeProcStat(lambda: level[0]), measure_from_s=0.7)
    window.tick(0.5)  # still warming up
    level[0] = 80.0
    window.tick(1.0)  # measured period starts here: this reading is at 80 % already
    window.tick(1.5)
    host = window.finish(2.7, frozenset({0, 1}))
    assert host["host_cpu_window"] == "measured period"
    assert host["host_cpu_window_s"] == pytest.approx(1.7)
    assert host["host_cpu_pct"] == pytest.approx(80.0)  # the 10 % readings are outside


def test_ladder_progress_eta_is_a_range() -> None:
    out = io.StringIO()
    progress = LadderProgress(out, live=True, quick=True, point_s=2.5)
    progress.left = (2, 10)
    progress.phase("4 KiB 100/0, 1 thread, QD 8", 3, 2.5)
    text = out.getvalue()
    assert "QUICK" in text and "QD 8" in text and re.search(r"ETA 0:0\d-0:\d\d", text)


# ---------------------------------------------------------------- export and report


def test_export_json_and_csv_hold_every_point(tmp_path: Path) -> None:
    store, run_id, _, _ = run_ladder(tmp_path)
    run = store.load(run_id)
    doc = run_to_json(run)
    (test,) = doc["tests"]
    assert test["name"] == TEST and len(test["rounds"]) == 9
    assert all(len(r["cells"]) == 1 and r["job_file"] for r in test["rounds"])
    assert len(test["result"]["curves"][0]["points"]) == 5
    json.loads(json.dumps(doc, allow_nan=False))  # strict JSON
    rows = run_to_csv_rows(run)
    by_round: dict[object, dict[str, object]] = {}
    checks = [row for row in rows if row["scope"] == "checks"]
    # the test's self-consistency checks: each point's Little's law, the cache-bound verdict
    assert [row["metric"] for row in checks] == ["littles_law"] * 9 + ["cache_bound"]
    for row in rows:
        if row["scope"] == "checks":
            continue
        assert row["scope"] == "round" and row["test"] == TEST
        by_round.setdefault(row["round"], {})[str(row["metric"])] = row["value"]
    assert len(by_round) == 9
    for metric in ("iops", "lat_mean_us", "lat_p99_us", "lat_p99_9_us", "threads", "iodepth",
                   "host_cpu_pct", "usr_cpu_pct", "sys_cpu_pct"):
        assert all(metric in values for values in by_round.values()), metric
    out = io.StringIO()
    write_export(run, "csv", out)
    assert len(list(csv.DictReader(io.StringIO(out.getvalue())))) == len(rows)


def test_report_pages_have_the_curves_the_table_and_the_banners(tmp_path: Path) -> None:
    fio = QueueFakeFio()
    store = Store.open(tmp_path / "store.sqlite")
    runner = LatencyIopsRun(
        make_prepared(tmp_path, ONE), store, fio, Progress(io.StringIO(), live=False),
        read_stat=FakeProcStat(lambda: 96.0 if fio.outstanding >= 8 else 50.0),
        fio_cpus=lambda: frozenset({0, 1}),
    )
    run = store.load(runner.execute([]))
    text, _ = render([run])
    assert "Latency vs IOPS: summary" in text and "Latency vs IOPS: 4 KiB 100/0" in text
    assert 'id="run0-t0-w0-mean"' in text and 'id="run0-t0-w0-p999"' in text
    assert "target 500 us" in text
    assert "HOST-BOUND: 2 point(s)" in text
    assert "QUICK PROFILE" in text
    assert "NUMA: the device reports no NUMA node" in text
    assert text.count('class="flag"') >= 4  # 2 host-bound points, in two tables
    assert "IOPS rose only 0.0 % from QD 8 to QD 16" in text
    assert re.search(r"1 thread, QD 16: 50,000 IOPS, mean 320 us HOST-BOUND", text)


def test_comparison_overlays_each_runs_curve_at_a_common_thread_count(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "store.sqlite")
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    _, first, _, _ = run_ladder(tmp_path / "a", store=store)
    slow = QueueFakeFio(QueueDevice(base_us=200.0, max_iops=25_000.0))
    args = LatencyIopsArgs(**{**ONE.__dict__, "threads": "1,2,4"})
    _, second, _, _ = run_ladder(tmp_path / "b", args, slow, store=store)
    runs = [store.load(first), store.load(second)]
    picked, how = pick_curves(runs, 4096, 100)
    assert [(i, c.threads) for i, c in picked] == [(0, 2), (1, 2)]
    assert how == "2 threads in every run"
    html = latency_iops_overlay(runs, ["A", "B"])
    assert "<h3>Latency vs IOPS</h3>" in html and "cmp-latiops-0-latmeanus" in html
    assert "A (2 threads)" in html and "B (2 threads)" in html
    assert latency_iops_overlay(runs[:1], ["A"]) == ""
    text, _ = render(runs)
    assert text.count("<h2>Latency vs IOPS: summary</h2>") == 2
    assert "<h3>Latency vs IOPS</h3>" in text  # the comparison's overlay, from the registry


def test_resume_finishes_the_interrupted_curve_and_the_rest(tmp_path: Path) -> None:
    (tmp_path / "whole").mkdir()
    whole_store, whole_id, _, _ = run_ladder(tmp_path / "whole")
    expected = [(c["threads"], [p["iodepth"] for p in c["points"]], c["stop"]["kind"])
                for c in curves(whole_store, whole_id)]

    with pytest.raises(RunInterrupted):
        run_ladder(tmp_path, ONE, QueueFakeFio(interrupt_call=4))  # during 1 thread, QD 8
    store = Store.open(tmp_path / "store.sqlite")
    stopped = store.load(store.resolve("last"))
    fio = QueueFakeFio()
    runner = LatencyIopsRun(make_prepared(tmp_path, ONE), store, fio,
                            Progress(io.StringIO(), live=False),
                            read_stat=FakeProcStat(lambda: 30.0),
                            fio_cpus=lambda: frozenset({0, 1}))
    assert runner.resume(stopped, ["resume"]) == stopped.run_id
    assert fio.points == [(1, 8), (1, 16), (2, 1), (2, 2), (2, 4), (2, 8)]  # no preconditioning
    run = store.load(stopped.run_id)
    assert run.status == "complete" and run.test(TEST).status == "complete"
    got = [(c["threads"], [p["iodepth"] for p in c["points"]], c["stop"]["kind"])
           for c in curves(store, run.run_id)]
    assert got == expected
    assert [r.round_no for r in run.test(TEST).rounds] == list(range(1, 10))
    resumed = [e for e in run.events if e.kind == "resumed" and e.test == TEST]
    assert resumed and "after point 3" in resumed[0].message


def test_what_run_prints_at_the_end(tmp_path: Path) -> None:
    store, run_id, _, _ = run_ladder(tmp_path)
    run = store.load(run_id)
    end = PAGES.outcome(run, store.path)
    assert end.lines == (
        f"run {run_id} complete (QUICK profile: not a valid result); results in {store.path}",
        f"  see them: ssdlab report {run_id} -o DIR    export: ssdlab export {run_id} "
        "--format json",
    )
    assert end.failure is None
    (tmp_path / "failed").mkdir()
    store, run_id, _, _ = run_ladder(tmp_path / "failed", ONE, QueueFakeFio(fail_calls={3}))
    end = PAGES.outcome(store.load(run_id), store.path)
    assert end.failure is not None and end.failure.startswith(
        "test latency-iops failed: point 3 (4 KiB 100/0, 1 thread, QD 4): ")


def test_points_rebuilt_from_the_golden_cells_are_stored_as_they_were(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    """A point built from its round's cell (``point_of``: the host's CPU use as one
    ``HostCpuUse`` group) writes the document the golden run stored, key for key."""
    (run,) = [r for r in load_golden_runs(tmp_path_factory, ("suites.sqlite",))
              if r.suite == "latency-iops"]
    test = run.tests[0]
    stored = LatencyIopsResult.from_json(test.result).curves
    flagged = {(c.label, p.iodepth): p.host_bound_reason or ""
               for c in stored for p in c.points if p.host_bound}
    rebuilt = {c.key.label: c.record(flagged) for c in restore_curves(test)}
    assert [json.dumps(p.to_json()) for c in stored for p in c.points] == [
        json.dumps(p.to_json()) for c in stored for p in rebuilt[c.label].points]
    assert any(p.host.host_usr_pct is not None for c in stored for p in c.points)
