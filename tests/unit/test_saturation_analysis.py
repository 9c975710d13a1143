"""Write Saturation transition and Host Idle Recovery verdicts, and the plan's validation."""

from __future__ import annotations

import random

import pytest

from ssdlab.analysis.saturation import (
    IopsPoint,
    find_transition,
    recovery_verdict,
    running_median,
    wait_state,
)
from ssdlab.errors import UserError
from ssdlab.plan.saturation import SaturationArgs, build_options, parse_waits

GIB = 1 << 30


def saturating(fob: float, sat: float, knee_bytes: float, seconds: int, noise: float = 0.05,
               seed: int = 1) -> list[IopsPoint]:
    """FOB IOPS until ``knee_bytes`` are written, then an exponential fall to ``sat``."""
    rng = random.Random(seed)
    points, written, t = [], 0.0, 0.0
    for _ in range(seconds * 10):  # 100 ms intervals
        if written < knee_bytes:
            level = fob
        else:
            level = sat + (fob - sat) * 0.5 ** ((written - knee_bytes) / (knee_bytes / 4))
        iops = level * (1 + rng.uniform(-noise, noise))
        t += 0.1
        written += iops * 0.1 * 4096
        points.append(IopsPoint(t, written, iops))
    return points


def test_running_median_ignores_single_outliers() -> None:
    assert running_median([1, 1, 100, 1, 1], 5) == [1, 1, 1, 1, 1]
    assert running_median([5.0], 5) == [5.0]


def test_transition_is_found_where_the_fall_begins() -> None:
    knee = 1.0 * GIB
    points = saturating(40_000, 4_000, knee, 60)
    result = find_transition(points, 4_000)
    assert result.found
    assert result.fob_iops == pytest.approx(40_000, rel=0.05)
    assert result.start_bytes is not None and result.end_bytes is not None
    assert abs(result.start_bytes - knee) / knee < 0.05
    assert result.start_s is not None and result.end_s is not None
    assert result.end_bytes > result.start_bytes and result.end_s > result.start_s
    assert "transition from" in result.message and "GiB written" in result.message


@pytest.mark.parametrize("seed", range(5))
def test_noise_does_not_move_the_transition_much(seed: int) -> None:
    knee = 0.5 * GIB
    points = saturating(30_000, 6_000, knee, 50, noise=0.15, seed=seed)
    result = find_transition(points, 6_000)
    assert result.start_bytes is not None
    assert abs(result.start_bytes - knee) / knee < 0.10


def test_a_host_hiccup_on_the_plateau_is_not_the_transition() -> None:
    # as measured on the emulated SSD with a CPU hog beside it: FOB 38.5K IOPS dipping to
    # 34-36K (a fifth of the way to the saturated 17K) for most of a second, long before
    # the real fall at 1 GiB
    points = saturating(38_500, 17_000, GIB, 60, noise=0.02)
    dip = range(40, 49)
    points = [IopsPoint(p.elapsed_s, p.written_bytes, 34_500 if i in dip else p.iops)
              for i, p in enumerate(points)]
    t = find_transition(points, 17_000)
    assert t.found and t.start_bytes is not None
    assert abs(t.start_bytes - GIB) < 0.05 * GIB, t.message


def test_a_drive_without_fob_burst_has_no_transition() -> None:
    points = saturating(4_200, 4_000, 10**15, 20)
    result = find_transition(points, 4_000)
    assert not result.found and "no fresh-out-of-box burst" in result.message
    assert not find_transition([], 1.0).found


def test_a_run_that_never_left_fob_says_so() -> None:
    points = [IopsPoint(i * 0.1, i * 1e6, 40_000) for i in range(1, 50)]
    result = find_transition(points, 4_000)
    assert not result.found and "stayed near FOB" in result.message


def test_idle_recovery_needs_a_large_and_significant_gain() -> None:
    baseline = [4000.0, 4100.0, 3950.0, 4050.0, 4000.0]
    strong = wait_state(5, [9000.0, 9500.0, 8800.0, 9200.0], baseline, 1.2)
    assert strong.recovered and strong.ratio == pytest.approx(2.27, rel=0.01)
    weak = wait_state(5, [4300.0, 4250.0, 4400.0, 4350.0], baseline, 1.2)
    assert not weak.recovered  # significant, but only 1.07x
    noisy = wait_state(5, [2000.0, 9000.0, 3000.0, 8000.0], baseline, 1.2)
    assert not noisy.recovered  # 1.38x on average, but within the noise
    ok, message = recovery_verdict([weak, strong], 1.2)
    assert ok and "after 5 s idle reach 2.27x" in message
    ok, message = recovery_verdict([weak, noisy], 1.2)
    assert not ok and "no recovery" in message
    assert recovery_verdict([], 1.2) == (False, "no wait states were run")


def test_plan_defaults_and_validation() -> None:
    quick = build_options(SaturationArgs(profile="quick"), (4, 16), 2)
    assert quick.round_seconds == 1.0 and quick.threads == 2 and quick.iodepth == 16
    assert quick.waits_s == pytest.approx((1, 2, 3, 5, 10))
    assert quick.log_msec <= 250
    full = build_options(SaturationArgs(), (16, 8), 32)
    assert full.max_seconds == 360 * 60 and full.bursts == 360 and full.waits_s[-1] == 50
    assert parse_waits("5, 10") == (5.0, 10.0)
    for bad, words in (
        (SaturationArgs(profile="slow"), "--profile 'slow'"),
        (SaturationArgs(round_seconds=-1), "--round-seconds -1"),
        (SaturationArgs(max_rounds=0), "--max-rounds 0"),
        (SaturationArgs(bursts=2.5), "--bursts 2.5"),  # type: ignore[arg-type]
        (SaturationArgs(active_range_pct=0), "--active-range 0"),
        (SaturationArgs(recovery_ratio=0.9), "--recovery-ratio 0.9"),
        (SaturationArgs(waits="5,x"), "--waits '5,x'"),
        (SaturationArgs(waits="5,-1"), "--waits '5,-1'"),
    ):
        with pytest.raises(UserError, match=words.replace("(", r"\(")):
            build_options(bad, (4, 16), 2)


def _stalled(fob: float, sat: float, knee_bytes: float, seconds: int, stall: range,
             stall_iops: float, noise: float = 0.05, seed: int = 1,
             share: float = 0.0) -> list[IopsPoint]:
    """:func:`saturating`, with the host letting the writes go no faster than
    ``stall_iops`` (or ``share`` of what it would) over the intervals ``stall`` (the
    drive's state follows the bytes written, not the time)."""
    rng = random.Random(seed)
    points, written, t = [], 0.0, 0.0
    for i in range(seconds * 10):
        if written < knee_bytes:
            level = fob
        else:
            level = sat + (fob - sat) * 0.5 ** ((written - knee_bytes) / (knee_bytes / 4))
        if i in stall:  # the host lets the drive do no more than this, or this share
            level = level * share if share else min(level, stall_iops)
        iops = level * (1 + rng.uniform(-noise, noise))
        t += 0.1
        written += iops * 0.1 * 4096
        points.append(IopsPoint(t, written, iops))
    return points


KNEE = 136 * (1 << 20)  # the emulated SSD in the integration test: GC starts there


def test_a_dip_the_iops_come_back_from_is_named_not_taken_as_the_transition() -> None:
    # as measured on the emulated SSD at a load of 10-12 on 2 cores: FOB 5K IOPS fell to
    # a tenth for a second, then came back, long before GC started (read as the
    # transition at 16 MiB instead of 136 MiB)
    points = _stalled(5_000, 1_300, KNEE, 14, range(20, 32), 300)
    t = find_transition(points, 1_300)
    assert t.found and t.start_bytes is not None
    assert abs(t.start_bytes - KNEE) < 0.05 * KNEE, t.message
    assert len(t.dips) == 1
    dip = t.dips[0]
    assert 1.8 <= dip.start_s <= 2.1 and 3.1 <= dip.end_s <= 3.4, dip
    assert dip.iops_during < 700 and dip.iops_back > 4_500 and dip.fob_iops == t.fob_iops
    assert dip.start_bytes < dip.end_bytes < KNEE / 3
    assert (f"; a fall the IOPS came back from (not the transition): at "
            f"{dip.start_s:.1f} s (0.04 GiB written) for {dip.seconds:.1f} s: 4,986 -> "
            f"{dip.iops_during:,.0f} IOPS, back at {dip.iops_back:,.0f}") in t.message
    # without the dip rule the stall was the transition
    assert t.start_bytes > 3 * dip.end_bytes


def test_a_long_shallow_slowdown_on_a_loaded_host_is_a_dip_too() -> None:
    # a busy host kept FOB at 72 % for 3 s, then let it go; later it kept it at 88 % up to
    # GC start: the fall starts where that lower level ended, not where FOB last was
    points = _stalled(5_000, 1_300, KNEE, 14, range(20, 50), 3_600, noise=0.03)
    t = find_transition(points, 1_300)
    assert t.found and t.start_bytes is not None and len(t.dips) == 1, t.message
    assert abs(t.start_bytes - KNEE) < 0.05 * KNEE, t.message
    lower = _stalled(5_000, 1_300, KNEE, 14, range(60, 400), 0, noise=0.03, share=0.88)
    t = find_transition(lower, 1_300)
    assert t.found and t.start_bytes is not None and not t.dips, t.message
    assert abs(t.start_bytes - KNEE) < 0.05 * KNEE, t.message


def test_a_fall_that_does_not_come_back_before_the_run_ends_is_the_transition() -> None:
    # a stall at the very end: the IOPS never came back within the run
    end = _stalled(5_000, 1_300, 10**12, 5, range(44, 50), 200, noise=0.03)
    last = find_transition(end, 1_300)
    assert last.found and not last.dips and last.end_s is not None
    assert last.start_s is not None and 4.2 <= last.start_s <= 4.5
