"""Pure parts of latency-vs-IOPS: the ladder's stopping rule, host-bound detection (checked
against an independent computation), the NUMA statement, /proc/stat and cpulists."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from ssdlab.analysis.hostbound import CpuPoint, HostBoundRule, host_bound
from ssdlab.analysis.ladder import (
    CONTINUE,
    MAX_QD,
    SATURATED,
    TARGET,
    LadderPoint,
    LadderRule,
    decide,
    rise_pct,
)
from ssdlab.analysis.numa import format_cpulist, numa_check
from ssdlab.targets.topology import (
    CpuTimes,
    busiest_cpu_pct,
    cpu_usage,
    node_cpus,
    parse_cpulist,
    parse_proc_stat,
    pci_attachment,
)

RULE = LadderRule(target_latency_us=500, min_iops_rise_pct=3)


def pts(*triples: tuple[int, float, float]) -> list[LadderPoint]:
    return [LadderPoint(qd, iops, lat) for qd, iops, lat in triples]


# ---------------------------------------------------------------- ladder


def test_rising_iops_below_the_target_goes_on() -> None:
    d = decide(pts((1, 10_000, 100), (2, 20_000, 100)), RULE, 4)
    assert d.kind == CONTINUE and not d.stop


def test_reaching_the_target_latency_stops_and_says_so() -> None:
    d = decide(pts((16, 40_000, 400), (32, 60_000, 533.3)), RULE, 64)
    assert d.kind == TARGET and d.stop
    assert d.reason == "mean latency 533.3 us at QD 32 reached the 500 us target"


def test_iops_that_stopped_rising_stop_the_ladder_even_below_the_target() -> None:
    d = decide(pts((8, 50_000, 160), (16, 50_500, 317)), RULE, 32)
    assert d.kind == SATURATED
    assert "IOPS rose only 1.0 % from QD 8 to QD 16 (less than 3 %)" in d.reason
    falling = decide(pts((8, 50_000, 160), (16, 48_000, 333)), RULE, 32)
    assert falling.kind == SATURATED and "fell 4.0 %" in falling.reason


def test_the_first_point_is_never_judged_saturated() -> None:
    assert decide(pts((1, 10_000, 100)), RULE, 2).kind == CONTINUE
    assert decide(pts((1, 10_000, 600)), RULE, 2).kind == TARGET


def test_the_end_of_the_ladder_below_the_target_is_its_own_reason() -> None:
    d = decide(pts((64, 400_000, 160), (128, 800_000, 160)), RULE, None)
    assert d.kind == MAX_QD
    assert d.reason.startswith("largest queue depth, QD 128, reached at 160.0 us mean")


def test_full_ladder_defers_both_rules_to_the_base_ladders_end() -> None:
    rule = LadderRule(500, 3, enforce_from_qd=32)
    assert decide(pts((8, 50_000, 160), (16, 50_000, 640)), rule, 32).kind == CONTINUE
    assert decide(pts((16, 50_000, 320), (32, 50_000, 640)), rule, 64).kind == TARGET


def test_zero_rise_threshold_stops_only_when_iops_fall() -> None:
    rule = LadderRule(500, 0)
    assert decide(pts((8, 50_000, 160), (16, 50_000, 320)), rule, 32).kind == CONTINUE
    assert decide(pts((8, 50_000, 160), (16, 49_000, 326)), rule, 32).kind == SATURATED


def test_rise_pct() -> None:
    assert rise_pct(100.0, 103.0) == pytest.approx(3.0)
    assert rise_pct(0.0, 5.0) is None


# ---------------------------------------------------------------- host-bound


def test_host_bound_needs_both_busy_cpu_and_flat_iops() -> None:
    curve = [
        CpuPoint(2, 1, 100_000, 50.0),
        CpuPoint(2, 2, 190_000, 95.0),  # busy but still rising 90 %: drive-bound
        CpuPoint(2, 4, 195_000, 97.0),  # busy and +2.6 %: host-bound
        CpuPoint(2, 8, 196_000, 80.0),  # flat but the CPU has room: not the host
    ]
    verdict = host_bound({"4 KiB 100/0, 2 threads": curve})
    assert verdict.host_bound
    assert [(f.threads, f.iodepth) for f in verdict.findings] == [(2, 4)]
    finding = verdict.findings[0]
    assert finding.reason == ("4 KiB 100/0, 2 threads, 2 x QD 4: host CPU 97.0 % >= 90 % and "
                              "IOPS +2.6 % over QD 2 (< 5 %)")
    assert verdict.message.startswith("HOST-BOUND: 1 point(s) measured the host")
    assert verdict.peak is not None and verdict.peak.host_cpu_pct == 97.0


def test_not_host_bound_names_the_peak_and_the_rule() -> None:
    verdict = host_bound({"c": [CpuPoint(1, 1, 1000, 20.0), CpuPoint(1, 2, 1000, 40.0)]},
                         HostBoundRule(cpu_pct=80, max_rise_pct=5))
    assert not verdict.host_bound
    assert verdict.message == ("not host-bound: host CPU peaked at 40.0 % (c, 1 x QD 2); the "
                               "rule needs >= 80 % with IOPS rising < 5 %")
    unmeasured = host_bound({"c": [CpuPoint(1, 1, 1000, None), CpuPoint(1, 2, 1000, None)]})
    assert not unmeasured.host_bound and "not measured" in unmeasured.message


def test_host_bound_matches_an_independent_computation() -> None:
    rng = random.Random(7)
    for _ in range(200):
        curves = {}
        for name in ("a", "b"):
            iops = [rng.uniform(1_000, 100_000) for _ in range(rng.randint(1, 8))]
            cpu = [rng.choice([None, rng.uniform(0, 100)]) for _ in iops]
            curves[name] = [CpuPoint(1, 2**k, i, c) for k, (i, c) in enumerate(zip(iops, cpu,
                                                                                   strict=True))]
        rule = HostBoundRule(rng.uniform(50, 100), rng.uniform(0, 20))
        expected = {
            (name, p.iodepth)
            for name, points in curves.items()
            for k, p in enumerate(points)
            if k > 0 and p.host_cpu_pct is not None and p.host_cpu_pct >= rule.cpu_pct
            and 100 * p.iops / points[k - 1].iops - 100 < rule.max_rise_pct
        }
        verdict = host_bound(curves, rule)
        assert {(f.curve, f.iodepth) for f in verdict.findings} == expected
        assert verdict.host_bound == bool(expected)


# ---------------------------------------------------------------- NUMA


NODES = {0: frozenset({0, 1, 2, 3}), 1: frozenset({4, 5, 6, 7})}


def test_numa_local_remote_and_unknown() -> None:
    local = numa_check(1, {4, 5, 6, 7}, NODES)
    assert not local.mismatch
    assert local.message == "device on NUMA node 1; fio ran on CPUs 4-7 (NUMA node 1): local"
    remote = numa_check(1, range(8), NODES)
    assert remote.mismatch and remote.fio_nodes == (0, 1)
    assert "numactl --cpunodebind=1" in remote.message
    unknown = numa_check(None, {0, 1}, {0: frozenset({0, 1})})
    assert not unknown.mismatch and unknown.message.startswith("the device reports no NUMA")
    no_nodes = numa_check(0, {0, 1}, {})
    assert not no_nodes.mismatch and "the host reports no NUMA nodes" in no_nodes.message


def test_cpulists_round_trip() -> None:
    assert parse_cpulist("0-3,8,10-11\n") == {0, 1, 2, 3, 8, 10, 11}
    assert parse_cpulist("") == frozenset()
    assert format_cpulist({0, 1, 2, 3, 8, 10, 11}) == "0-3,8,10-11"
    assert format_cpulist([5]) == "5" and format_cpulist([]) == ""
    host: dict[str, object] = {
        "numa_nodes": [{"node": 0, "cpulist": "0-1"}, {"node": 1, "cpulist": None}]
    }
    assert node_cpus(host) == {0: frozenset({0, 1}), 1: frozenset()}


# ---------------------------------------------------------------- /proc/stat


STAT_BEFORE = """cpu  100 0 50 800 50 0 0 0 0 0
cpu0 50 0 25 400 25 0 0 0 0 0
cpu1 50 0 25 400 25 0 0 0 0 0
intr 12345
"""
STAT_AFTER = """cpu  180 10 90 820 50 5 5 0 0 0
cpu0 120 10 60 400 25 5 5 0 0 0
cpu1 60 0 30 420 25 0 0 0 0 0
"""


def test_cpu_usage_from_proc_stat() -> None:
    before, after = parse_proc_stat(STAT_BEFORE), parse_proc_stat(STAT_AFTER)
    assert set(before) == {"cpu", "cpu0", "cpu1"}
    usage = cpu_usage(before["cpu"], after["cpu"])
    assert usage is not None
    # 160 ticks passed: 140 busy (80 user + 10 nice + 40 system + 5 irq + 5 softirq), 20 idle
    assert usage.busy_pct == pytest.approx(140 / 160 * 100)
    assert usage.usr_pct == pytest.approx(90 / 160 * 100)
    assert usage.sys_pct == pytest.approx(50 / 160 * 100)
    assert busiest_cpu_pct(before, after, frozenset({0, 1})) == pytest.approx(100.0)  # cpu0
    assert busiest_cpu_pct(before, after, frozenset({1})) == pytest.approx(15 / 35 * 100)
    same = CpuTimes(1, 0, 0, 0, 0, 0, 0, 0)
    assert cpu_usage(same, same) is None


def test_pci_attachment_is_found_above_the_block_device(tmp_path: Path) -> None:
    pci = tmp_path / "devices" / "pci0000:00" / "0000:00:1d.0" / "0000:03:00.0"
    ctrl = pci / "nvme" / "nvme0"
    ctrl.mkdir(parents=True)
    (pci / "current_link_speed").write_text("16.0 GT/s PCIe\n")
    (pci / "current_link_width").write_text("4\n")
    block = tmp_path / "class" / "block" / "nvme0n1"
    block.mkdir(parents=True)
    (block / "device").symlink_to(ctrl)
    found = pci_attachment("nvme0n1", sysfs=tmp_path)
    assert found is not None
    assert found["address"] == "0000:03:00.0" and found["link_width"] == "4"
    assert found["link_speed"] == "16.0 GT/s PCIe"
    (tmp_path / "class" / "block" / "loop0").mkdir()
    assert pci_attachment("loop0", sysfs=tmp_path) is None
