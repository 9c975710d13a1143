"""The self-consistency checks (docs/consistency.md): Little's law against an independent
computation and fio's own recorded output, the latency a cell shows, the cache-bound
verdict, the stored record, and what the run stores and the views show."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ssdlab.analysis import consistency as cons
from ssdlab.engine.parser import parse_fio_output
from ssdlab.plan.consistency import EVENT_KIND, CacheCheck, CellCheck, ConsistencyChecks, checks_of
from ssdlab.plan.specs import CellSpec, Mix, Pattern
from ssdlab.run.cells import cell_from_job, window_cells
from ssdlab.run.consistency import Stack, check_run, job_verdict, read_stack
from ssdlab.store import records
from ssdlab.store.records import EventData, RoundData, RunData
from tests.support.fakesys import NVME_CTRL, VIRTUAL, FakeSys

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "fio" / "3.33"


# -- Little's law -------------------------------------------------------------------------


def _independent(iops: list[float], lat_us: list[float], clat_us: list[float], jobs: int,
                 depth: int) -> tuple[float, float, str]:
    """In flight by total and by completion latency, and the status, computed apart (an
    asynchronous engine: fio may have one more I/O per job prepared)."""
    total = float(np.dot(iops, lat_us)) / 1e6
    completion = float(np.dot(iops, clat_us)) / 1e6
    if total > 1.1 * jobs * (depth + 1):
        return total, completion, "exceeds"
    return total, completion, "total" if completion < 0.5 * total else "agrees"


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.floats(1.0, 1e6), st.floats(0.1, 1e5), st.floats(0.0, 1.0)),
                min_size=1, max_size=2),
       st.integers(1, 64), st.integers(1, 256))
def test_little_agrees_with_an_independent_computation(
        dirs: list[tuple[float, float, float]], jobs: int, depth: int) -> None:
    iops = [d[0] for d in dirs]
    lat = [d[1] for d in dirs]
    clat = [d[1] * d[2] for d in dirs]  # completion is a share of the total
    verdict = cons.little([cons.Direction(i, c, t) for i, c, t in zip(iops, clat, lat,
                                                                      strict=True)],
                          jobs, depth)
    assert verdict is not None
    total, completion, status = _independent(iops, lat, clat, jobs, depth)
    assert verdict.in_flight == pytest.approx(total)
    assert verdict.in_flight_completion == pytest.approx(completion)
    assert verdict.slots == jobs * depth
    if abs(total - 1.1 * jobs * (depth + 1)) > 1e-9 * total and (
            abs(completion - 0.5 * total) > 1e-9 * total):
        assert verdict.status == status
    # the shown mean latency and IOPS give back the in-flight count
    assert verdict.iops * verdict.lat_us / 1e6 == pytest.approx(total)


def test_the_btrfs_figures_of_the_issue_are_explained_by_total_latency() -> None:
    """RAID 5, 4 KiB QD 1 writes: 1,277 IOPS with a completion latency of 1.1 us."""
    verdict = cons.little([cons.Direction(1277.0, 1.1, 783.0)], 1, 1)
    assert verdict is not None and verdict.status == cons.TOTAL and verdict.marked
    assert verdict.shown_latency == "total"
    assert verdict.in_flight == pytest.approx(1277 * 783e-6)
    assert verdict.message == (
        "completion latency 1.1 us explains 0.00 of 1 in flight; total latency 783 us "
        "explains 1.00: submission blocks (buffered or blocking I/O); latency shown is total")


def test_more_in_flight_than_slots_is_a_contradiction_and_below_is_said() -> None:
    over = cons.little([cons.Direction(50_000.0, 900.0, 900.0)], 1, 32)
    assert over is not None and over.status == cons.EXCEEDS and over.marked
    assert "45.00 in flight of 32 (1 x QD 32): more than the 33 fio can keep" in over.message
    # io_uring on tmpfs at QD 3 (measured 3.98): the I/O prepared ahead, not a contradiction
    ahead = cons.little([cons.Direction(104_128.0, 37.5, 38.2)], 1, 3)
    assert ahead is not None and ahead.status == cons.AGREES
    assert ahead.message.endswith("agrees (with the I/O each job prepares ahead, up to 4)")
    sync = cons.little([cons.Direction(1000.0, 1500.0, 1500.0)], 1, 1, sync=True)
    assert sync is not None and sync.status == cons.EXCEEDS and sync.ceiling == 1
    low = cons.little([cons.Direction(1000.0, 100.0, 100.0)], 2, 8)
    assert low is not None and low.status == cons.AGREES and not low.marked
    assert low.message.endswith("agrees (below the slots: fio's own time between I/Os)")
    assert cons.little([cons.Direction(0.0, 0.0, 0.0)], 1, 1) is None


def test_phases_of_a_job_are_judged_over_their_time_together() -> None:
    """fio's verify: 512 writes in 989 ms at 30.8 ms, then 512 reads in 62 ms at 1.9 ms,
    QD 16 (the golden store's verify run): each phase keeps about 16 in flight."""
    write = cons.Direction(517.7, 30_740.0, 30_822.9, 989)
    read = cons.Direction(8258.1, 1_880.9, 1_900.6, 62)
    verdict = cons.little([write, read], 1, 16)
    assert verdict is not None and verdict.status == cons.AGREES
    seconds = (989 + 62) / 1000
    expected = (517.7 * 0.989 * 30_822.9e-6 + 8258.1 * 0.062 * 1_900.6e-6) / seconds
    assert verdict.in_flight == pytest.approx(expected)
    assert verdict.iops == pytest.approx((517.7 * 0.989 + 8258.1 * 0.062) / seconds)
    together = cons.little([cons.Direction(500.0, 9.0, 10.0, 1000),
                            cons.Direction(500.0, 9.0, 10.0, 1000)], 1, 1)
    assert together is not None and together.in_flight == pytest.approx(0.01)


def test_sync_engines_keep_one_io_per_job_and_rates_open_the_loop() -> None:
    assert cons.queue_depth({"ioengine": "psync"}, 32) == 1
    assert cons.queue_depth({"ioengine": "libaio"}, 32) == 32
    assert cons.closed_loop({"ioengine": "libaio"})
    assert not cons.closed_loop({"rate_iops": "500"})
    assert not cons.closed_loop({"read_iolog": "/x.iolog"})
    rated = cons.little([cons.Direction(500.0, 100.0, 100.0)], 1, 32, closed=False)
    assert rated is not None and rated.status == cons.OPEN


@pytest.mark.parametrize("fixture", sorted(p.name for p in FIXTURES.glob("*.json")))
def test_no_recorded_fio_output_contradicts_itself(fixture: str) -> None:
    """Every job fio 3.33 reported here keeps at most jobs x iodepth in flight."""
    output = parse_fio_output((FIXTURES / fixture).read_text())
    for job in output.jobs:
        verdict = job_verdict(job)
        if verdict is not None:
            assert verdict.status != cons.EXCEEDS, (fixture, job.name, verdict.message)
            assert verdict.in_flight <= verdict.slots * cons.EXCEED_TOLERANCE


def test_a_psync_job_with_iodepth_above_one_is_judged_at_depth_one() -> None:
    output = parse_fio_output((FIXTURES / "d_psync_note.json").read_text())
    for job in output.jobs:
        verdict = job_verdict(job)
        assert verdict is not None and verdict.depth == 1


# -- the latency a cell shows ---------------------------------------------------------------


def _direction(iops: float, clat_us: float, lat_us: float, bins: dict[str, int],
               lat_bins: dict[str, int]) -> dict[str, Any]:
    ios = int(iops)
    return {"io_bytes": ios * 4096, "io_kbytes": ios * 4, "bw_bytes": ios * 4096,
            "bw": ios * 4, "iops": iops, "runtime": 1000 if ios else 0, "total_ios": ios,
            "slat_ns": {"min": 0, "max": 0, "mean": (lat_us - clat_us) * 1000,
                        "stddev": 0.0, "N": ios},
            "clat_ns": {"min": 1.0, "max": clat_us * 3000, "mean": clat_us * 1000,
                        "stddev": 0.0, "N": ios, "bins": bins},
            "lat_ns": {"min": 1.0, "max": lat_us * 3000, "mean": lat_us * 1000,
                       "stddev": 0.0, "N": ios, "bins": lat_bins}}


def fio_doc(name: str, iops: float, clat_us: float, lat_us: float, *, options: dict[str, str]
            | None = None, write: bool = True) -> str:
    """fio json+ output of one job: ``iops`` writes (or reads); in both histograms half
    of them (rounded up) at the stated mean and the rest at three times it."""
    half = (int(iops) + 1) // 2
    bins = {str(int(clat_us * 1000)): half, str(int(clat_us * 3000)): int(iops) - half}
    lat_bins = {str(int(lat_us * 1000)): half, str(int(lat_us * 3000)): int(iops) - half}
    busy = _direction(iops, clat_us, lat_us, bins, lat_bins)
    idle = _direction(0.0, 0.0, 0.0, {}, {})
    job = {"jobname": name, "groupid": 0, "error": 0,
           "job options": options or {"numjobs": "1", "iodepth": "1"},
           "read": idle if write else busy, "write": busy if write else idle,
           "trim": idle, "job_runtime": 1000, "usr_cpu": 1.0, "sys_cpu": 2.0}
    return json.dumps({"fio version": "fio-3.33", "global options": {"ioengine": "libaio"},
                       "jobs": [job]})


def qd1_spec(name: str = "latency_bs4096_r0") -> CellSpec:
    return CellSpec(name, Pattern.RANDOM, 4096, Mix(0), 1, 1, 0, 2**26, runtime_s=1.0)


def test_a_cell_whose_submission_blocks_shows_its_total_latency() -> None:
    job = parse_fio_output(fio_doc("latency_bs4096_r0", 1277.0, 1.1, 783.0)).jobs[0]
    cell = cell_from_job(qd1_spec(), job)
    assert cell["latency_basis"] == "total" and cell["littles_law"] == "total"
    assert cell["lat_mean_us"] == pytest.approx(783.0)
    assert cell["write_lat_mean_us"] == pytest.approx(783.0)
    assert cell["clat_mean_us"] == pytest.approx(1.1)
    assert cell["lat_total_mean_us"] == pytest.approx(783.0)
    assert cell["lat_max_us"] == pytest.approx(783.0 * 3)
    assert cell["lat_p50_us"] == pytest.approx(783.0)  # from the total-latency histogram
    assert cell["lat_p99_us"] == pytest.approx(783.0 * 3)
    assert cell["in_flight"] == pytest.approx(1277 * 783e-6) and cell["io_slots"] == 1


def test_a_direct_cell_keeps_its_completion_latency() -> None:
    job = parse_fio_output(fio_doc("latency_bs4096_r0", 1600.0, 596.0, 611.0)).jobs[0]
    cell = cell_from_job(qd1_spec(), job)
    assert cell["latency_basis"] == "completion" and cell["littles_law"] == "agrees"
    assert cell["lat_mean_us"] == pytest.approx(596.0)
    assert cell["lat_p50_us"] == pytest.approx(596.0)
    assert cell["lat_total_mean_us"] == pytest.approx(611.0)


def test_a_window_of_rounds_that_differ_in_basis_shows_total_latency() -> None:
    total = cell_from_job(qd1_spec(), parse_fio_output(
        fio_doc("latency_bs4096_r0", 1000.0, 10.0, 990.0)).jobs[0])
    completion = cell_from_job(qd1_spec(), parse_fio_output(
        fio_doc("latency_bs4096_r0", 1000.0, 600.0, 900.0)).jobs[0])
    (window,) = window_cells([[total], [completion]])
    assert window["latency_basis"] == "total" and window["littles_law"] == "total"
    assert window["lat_mean_us"] == pytest.approx((990.0 + 900.0) / 2)
    assert window["lat_p50_us"] == pytest.approx(990.0)  # the total-basis round's only
    (same,) = window_cells([[completion], [completion]])
    assert same["latency_basis"] == "completion"
    assert same["lat_mean_us"] == pytest.approx(600.0)


# -- cache-bound ------------------------------------------------------------------------------


def test_cache_bound_verdicts_say_which_layer() -> None:
    loop = cons.Layer("/dev/loop3", "has no direct I/O (loop dio off)")
    verdict = cons.cache_bound([loop])
    assert verdict.memory and verdict.message == (
        "measured memory, not the drive: /dev/loop3 has no direct I/O (loop dio off)")
    designed = cons.cache_bound([cons.Layer("fio", "ran with direct=0", by_design=True)])
    assert not designed.memory and designed.by_design
    assert designed.message == "cached by design: fio ran with direct=0"
    assert not cons.cache_bound([]).memory


def test_pcie_limits_follow_the_encoding() -> None:
    gen3x4 = cons.pcie_limit_bytes_per_s("8.0 GT/s PCIe", "4")
    assert gen3x4 == pytest.approx(8e9 * 128 / 130 / 8 * 4)
    assert cons.pcie_limit_bytes_per_s("2.5 GT/s PCIe", "1") == pytest.approx(2.5e9 * 0.8 / 8)
    assert cons.pcie_limit_bytes_per_s("Unknown", "4") is None
    assert cons.over_limit(5e9, gen3x4, "PCIe link", "/dev/nvme0n1 read") == (
        "/dev/nvme0n1 read measured 5,000 MB/s, above the 3,938 MB/s its PCIe link can carry")
    assert cons.over_limit(3e9, gen3x4, "PCIe link", "x") is None


def test_the_stack_names_loop_devices_without_direct_io(tmp_path: Path) -> None:
    fake = FakeSys(tmp_path)
    for name, devnum, dio in (("loop3", "7:3", "0"), ("loop4", "7:4", "1")):
        fake.disk(name, devnum, parent=VIRTUAL)
        fake.write(name, "loop/dio", dio)
    off = read_stack({"path": "/dev/loop3", "kind": "block", "name": "loop3"}, sysfs=fake.sys)
    assert [layer.text for layer in off.layers] == [
        "/dev/loop3 has no direct I/O (loop dio off)"]
    on = read_stack({"path": "/dev/loop4", "kind": "block", "name": "loop4"}, sysfs=fake.sys)
    assert on.layers == ()


def test_throughput_above_the_pcie_link_is_memory(tmp_path: Path) -> None:
    fake = FakeSys(tmp_path)
    fake.disk("nvme0n1", "259:0", parent=NVME_CTRL)
    pci = fake.sys / "devices/pci0000:00/0000:00:01.1/0000:01:00.0"
    (pci / "current_link_speed").write_text("8.0 GT/s PCIe\n")
    (pci / "current_link_width").write_text("4\n")
    target = {"path": "/dev/nvme0n1", "kind": "block", "name": "nvme0n1"}
    stack = read_stack(target, sysfs=fake.sys)
    assert stack.layers == () and stack.link is not None
    assert stack.link[0] == "PCIe link (8.0 GT/s PCIe x4)"
    assert stack.link[1] == pytest.approx(8e9 * 128 / 130 / 2)
    # 1,000,000 reads of 4 KiB in a second: 4.1 GB/s, above the 3.9 GB/s of the link
    fast = _round(1, fio_doc("seq", 1_000_000.0, 0.9, 1.0, write=False))
    (checks,) = check_run(_run([records.TestData("t", "complete", {}, {}, {}, [fast])],
                               target), stack)
    assert checks.cache.memory and checks.cache.message == (
        "measured memory, not the drive: /dev/nvme0n1 read measured 4,096 MB/s, above the "
        "3,938 MB/s its PCIe link (8.0 GT/s PCIe x4) can carry")
    slow = _round(1, fio_doc("seq", 100_000.0, 9.0, 10.0, write=False))
    (within,) = check_run(_run([records.TestData("t", "complete", {}, {}, {}, [slow])],
                               target), stack)
    assert not within.cache.memory


# -- the stored record and the run's pass ---------------------------------------------------


def _run(tests: list[records.TestData], target: dict[str, Any] | None = None,
         plan: dict[str, Any] | None = None, events: list[EventData] | None = None
         ) -> RunData:
    return RunData("r1", 0.0, 1.0, "pts", "quick", True, "complete", "", "/dev/loop3", None,
                   False, target or {"path": "/dev/loop3", "kind": "block"}, {}, plan or {},
                   {}, [], tests, events or [])


def _round(no: int, stdout: str, job_text: str = "[global]\ndirect=1\n") -> RoundData:
    return RoundData(no, "ok", {}, [], 0.0, 1.0, job_text, 0, "", stdout)


def test_a_test_is_checked_cell_by_cell_and_the_record_reads_back_exactly() -> None:
    rounds = [_round(1, fio_doc("latency_bs4096_r0", 1277.0, 1.1, 783.0)),
              _round(2, fio_doc("latency_bs4096_r0", 1290.0, 1.0, 775.0)),
              _round(3, fio_doc("latency_bs4096_r100", 20_000.0, 45.0, 49.0, write=False))]
    test = records.TestData("latency", "complete", {}, {}, {}, rounds)
    loop = cons.Layer("/dev/loop3", "has no direct I/O (loop dio off)")
    (checks,) = check_run(_run([test]), Stack((loop,)))
    assert checks.jobs_checked == 3 and checks.statuses == {"total": 2, "agrees": 1}
    assert [(c.cell, c.status, c.rounds) for c in checks.cells] == [
        ("latency_bs4096_r0", "total", 2), ("latency_bs4096_r100", "agrees", 1)]
    assert checks.cells[0].message.startswith("round 1: completion latency 1.1 us")
    assert checks.cells[1].message.startswith("round 3: Little's law: 20,000 IOPS")
    assert checks.mark("latency_bs4096_r0") == "*" and checks.mark("latency_bs4096_r100") == ""
    assert checks.cache.memory and checks.flagged
    assert checks.message == (
        "Little's law on 3 fio job(s): 1 agree, 2 submission-bound (total latency shown); "
        "1 cell(s) marked *; measured memory, not the drive: /dev/loop3 has no direct I/O "
        "(loop dio off)")
    stored = json.loads(json.dumps(checks.to_json()))
    back = ConsistencyChecks.from_json(stored, "test")
    assert back == checks and back.to_json() == stored


def test_buffered_fio_is_a_fault_unless_the_run_asked_for_it() -> None:
    rounds = [_round(1, fio_doc("seq", 800.0, 10.0, 1000.0),
                     "[global]\nioengine=libaio\ndirect=0\n")]
    test = records.TestData("t", "complete", {}, {}, {}, rounds)
    (fault,) = check_run(_run([test]), Stack())
    assert fault.cache.memory
    assert fault.cache.message == ("measured memory, not the drive: the I/O is buffered "
                                   "(fio direct=0, through the page cache)")
    (designed,) = check_run(_run([test], plan={"options": {"direct": False}}), Stack())
    assert not designed.cache.memory and designed.cache.by_design
    assert designed.cache.message == (
        "cached by design: the I/O is buffered (fio direct=0, through the page cache), as "
        "the suite defines it")


def test_a_test_without_fio_output_says_it_was_not_checked() -> None:
    (checks,) = check_run(_run([records.TestData("oltp", "complete", {}, {}, {}, [])]), Stack())
    assert checks.jobs_checked == 0 and checks.not_applicable
    assert checks.message.startswith("not checked: no fio output is stored with its measured")


def test_views_read_the_checks_and_old_runs_have_none() -> None:
    from ssdlab.report import consistency as view
    from ssdlab.report.terminal import render_run
    from ssdlab.serve.data import run_view
    from ssdlab.store.export import run_to_csv_rows, run_to_json
    cell = CellCheck("latency_bs4096_r0", "total", 5, "round 1: submission blocks")
    checks = ConsistencyChecks("latency", 5, {"total": 5}, [cell], CacheCheck(
        True, False, "measured memory, not the drive: /dev/loop3 has no direct I/O", []),
        "the line")
    cells = [{"cell": "latency_bs4096_r0", "block_bytes": 4096, "read_pct": 0,
              "littles_law": "total"}]
    test = records.TestData("latency", "complete", {}, {}, {"cells": cells},
                    [RoundData(1, "ok", {}, cells, 0.0, 1.0, None, 0, "")])
    event = EventData("latency", EVENT_KIND, "the line", checks.to_json(), 1.0)
    run = _run([test], events=[event])
    assert checks_of(run.events) == {"latency": checks}
    text = render_run(run)
    assert "WARNING: measured memory, not the drive: /dev/loop3 has no direct I/O" in text
    assert "  checks: the line" in text
    assert "  * 4 KiB 0/100: round 1: submission blocks (and so in 4 more)" in text
    assert view.cell_mark(cells[0]) == "*" and view.cell_mark({"littles_law": "agrees"}) == ""
    doc = run_to_json(run)
    assert doc["tests"][0]["checks"] == checks.to_json()
    rows = [r for r in run_to_csv_rows(run) if r["scope"] == "checks"]
    assert [(r["cell"], r["metric"], r["value"]) for r in rows] == [
        ("latency_bs4096_r0", "littles_law", "total"),
        ("", "cache_bound", checks.cache.message)]
    dash = run_view(run, now=2.0)
    assert dash["memory"] == [checks.cache.message]
    assert dash["tests"][0]["checks"]["marked"][0]["cell"] == "latency_bs4096_r0"
    old = _run([test])
    assert "checks" not in run_to_json(old)["tests"][0]
    assert "checks:" not in render_run(old) and run_view(old, now=2.0)["memory"] == []


def test_the_store_and_the_plan_name_the_event_alike() -> None:
    from ssdlab.store.export import CHECKS_KIND
    assert CHECKS_KIND == EVENT_KIND


def test_what_run_prints_at_the_end() -> None:
    from ssdlab.run.consistency import lines
    cell = CellCheck("c", "exceeds", 1, "too many in flight")
    checks = ConsistencyChecks("iops", 1, {"exceeds": 1}, [cell],
                               CacheCheck(True, False, "mem", []))
    assert lines([checks, checks]) == ["WARNING: mem", "iops: c: too many in flight",
                                       "iops: c: too many in flight"]


def test_fio_total_latency_percentiles_and_bins_are_read() -> None:
    """fio 3.33 json+ with lat_percentiles=1 (recorded): the total latency's percentiles and
    histogram are read beside the completion latency's, and the percentiles recompute
    from the bins exactly as fio computes them."""
    from ssdlab.engine.parser import merged_percentile_ns
    text = (FIXTURES / "k_lat_percentiles_jsonplus.json").read_text()
    raw = json.loads(text)["jobs"][0]
    (job,) = parse_fio_output(text).jobs
    for name, parsed in (("read", job.read), ("write", job.write)):
        lat = raw[name]["lat_ns"]
        assert parsed.lat_percentiles_ns == {float(k): float(v)
                                             for k, v in lat["percentile"].items()}
        assert sum(parsed.lat_bins_ns.values()) == lat["N"] == raw[name]["total_ios"]
        for pct, value in parsed.lat_percentiles_ns.items():
            assert merged_percentile_ns([parsed.lat_bins_ns], pct) == value
        # total latency is never below completion latency
        assert parsed.lat_mean_ns >= parsed.clat_mean_ns
