"""Latency-vs-IOPS options: defaults, ladders, one-line validation errors, the fio cells,
and the dry run (nothing touched)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from ssdlab.cli.main import build_parser
from ssdlab.errors import UserError
from ssdlab.plan.latency_iops import (
    CurveKey,
    LatencyIopsArgs,
    build_options,
    build_plan,
)
from ssdlab.plan.specs import KIB, MIB
from ssdlab.run.latency_iops_run import describe
from tests.support.cli import one_line_error, ssdlab
from tests.support.latency_iops import make_prepared


def test_defaults_are_the_reviews() -> None:
    opts = build_options(LatencyIopsArgs(), cpus=2)
    assert opts.block_bytes == (8 * KIB, 4 * KIB)
    assert opts.mixes == (100, 70, 0)
    assert opts.threads == (1, 2, 4)
    assert opts.qd_ladder == (1, 2, 4, 8, 16, 32, 64, 128)
    assert (opts.warmup_s, opts.measure_s) == (5.0, 30.0)
    assert opts.target_latency_us == 500 and opts.min_iops_rise_pct == 3
    assert (opts.host_bound_cpu_pct, opts.host_bound_rise_pct) == (90, 5)
    assert not opts.quick and opts.extra_threads == ()  # 2 CPUs: no more than 4 threads


def test_quick_profile_and_more_threads_on_big_hosts() -> None:
    quick = build_options(LatencyIopsArgs(profile="quick"), cpus=2)
    assert quick.quick and (quick.warmup_s, quick.measure_s) == (0.5, 2.0)
    big = build_options(LatencyIopsArgs(), cpus=64)
    assert big.max_threads == 16 and big.extra_threads == (8, 16)


def test_ladders_extend_by_doubling_to_max_qd() -> None:
    opts = build_options(LatencyIopsArgs(qds="1,4,16", max_qd=100), cpus=2)
    assert opts.qd_ladder == (1, 4, 16, 32, 64, 100)
    assert build_options(LatencyIopsArgs(qds="1,2,256"), cpus=2).qd_ladder == (1, 2, 256)
    opts = build_options(LatencyIopsArgs(threads="1,3", max_threads=12), cpus=2)
    assert opts.extra_threads == (6, 12)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (LatencyIopsArgs(profile="slow"), "--profile 'slow' is not one of: default, quick"),
        (LatencyIopsArgs(threads="1,x"), "--threads: 'x' is not a whole number from 1 to 256"),
        (LatencyIopsArgs(threads="4,2"), "--threads: '4,2' must be in ascending order"),
        (LatencyIopsArgs(qds="1,1"), "--qd: '1,1' lists a value twice"),
        (LatencyIopsArgs(qds="0,2"), "--qd: '0' is not a whole number from 1 to 4096"),
        (LatencyIopsArgs(max_qd=16), "--max-qd 16 must be at least the ladder's last queue "
         "depth (32) and at most 4096"),
        (LatencyIopsArgs(max_threads=2), "--max-threads 2 must be at least the largest of "
         "--threads (4) and at most 256"),
        (LatencyIopsArgs(target_latency_us=0), "--target-latency-us 0 must be greater than 0 "
         "and at most 1e+07"),
        (LatencyIopsArgs(min_iops_rise_pct=-1), "--min-iops-rise -1 must be at least 0 and at "
         "most 100"),
        (LatencyIopsArgs(host_bound_cpu_pct=120), "--host-bound-cpu 120 must be greater than 0 "
         "and at most 100"),
        (LatencyIopsArgs(measure_s=0.05), "--measure-seconds 0.05 must be at least 0.1 and at "
         "most 3600"),
        (LatencyIopsArgs(warmup_s=0.0005), "--warmup-seconds 0.0005 must be a whole number of "
         "milliseconds"),
        (LatencyIopsArgs(block_sizes="4,1000b"), "--block-sizes: '1000b' must be a positive "
         "multiple of 512 bytes"),
        (LatencyIopsArgs(mixes="60/30"), "--mixes: mix '60/30' does not add up to 100"),
        (LatencyIopsArgs(purge="shred"), "--purge 'shred' is not one of: auto, blkdiscard, "
         "nvme-format, nvme-sanitize, ata-secure-erase, scsi-sanitize, none"),
        (LatencyIopsArgs(active_range_pct=0), "--active-range 0 must be greater than 0 and at "
         "most 100"),
    ],
)
def test_bad_values_are_one_line_errors_naming_value_and_allowed(
    args: LatencyIopsArgs, message: str
) -> None:
    with pytest.raises(UserError) as info:
        build_options(args, cpus=2)
    assert info.value.message == message
    assert "\n" not in info.value.message


def test_points_are_random_time_based_cells_with_warmup_as_ramp() -> None:
    opts = build_options(LatencyIopsArgs(profile="quick", precondition=False), cpus=2)
    plan = build_plan(opts, 1024 * MIB, 512)
    cell = plan.point(CurveKey(4 * KIB, 70, 2), 16)
    assert cell.name == "latiops_bs4096_r70_t2_qd16"
    assert (cell.threads, cell.iodepth, cell.block_bytes, cell.fio_rw) == (2, 16, 4096, "randrw")
    assert (cell.ramp_s, cell.runtime_s) == (0.5, 2.0)
    assert plan.wipc is None
    assert plan.workloads[:3] == ((8 * KIB, 100), (8 * KIB, 70), (8 * KIB, 0))


def test_blocks_below_the_sector_are_skipped_with_a_reason() -> None:
    opts = build_options(LatencyIopsArgs(block_sizes="4,0.5"), cpus=2)
    plan = build_plan(opts, 1024 * MIB, 4096)
    assert plan.block_bytes == (4 * KIB,)
    assert [label for label, _ in plan.skipped] == ["0.5 KiB 100/0", "0.5 KiB 70/30",
                                                    "0.5 KiB 0/100"]
    with pytest.raises(UserError, match="fits the device's 4096-byte logical sector"):
        build_plan(build_options(LatencyIopsArgs(block_sizes="0.5"), cpus=2), MIB, 4096)


def test_dry_run_prints_plan_and_job_files(tmp_path: Path) -> None:
    prepared = make_prepared(tmp_path, LatencyIopsArgs(profile="quick", block_sizes="4",
                                                       mixes="100/0"))
    text = describe(prepared)
    assert text.startswith("DRY RUN: nothing will be written.")
    assert "profile quick (QUICK)" in text
    assert "queue depth per thread: 1, 2, 4, 8, 16, 32, 64, 128" in text
    assert "points: at least 3, at most 24" in text
    assert "[wipc_seq128k_write]" in text and "[latiops_bs4096_r100_t1_qd1]" in text
    assert "ramp_time=500ms" in text and "runtime=2s" in text
    assert not (tmp_path / "target.img").exists()


@pytest.mark.fio  # prepare asks fio its version, dry runs too
def test_cli_refuses_bad_options_before_touching_the_target(tmp_path: Path) -> None:
    target = tmp_path / "t.img"
    result = ssdlab("run", "latency-iops", "--target", str(target), "--size", "256MiB",
                    "--qd", "8,4", "--store", str(tmp_path / "s.sqlite"))
    assert result.returncode == 2
    assert one_line_error(result) == "Error: --qd: '8,4' must be in ascending order"
    assert not target.exists() and not (tmp_path / "s.sqlite").exists()
    missing = ssdlab("run", "latency-iops", "--target", str(tmp_path / "none.img"),
                     "--store", str(tmp_path / "s.sqlite"))
    assert missing.returncode == 2 and "give --size" in one_line_error(missing)


def test_every_option_is_documented() -> None:
    parser = build_parser()
    run = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    suites = next(a for a in run.choices["run"]._actions
                  if isinstance(a, argparse._SubParsersAction))
    command = suites.choices["latency-iops"]
    doc = (Path(__file__).resolve().parents[2] / "docs" / "latency-iops.md").read_text()
    options = {s for a in command._actions for s in a.option_strings if s.startswith("--")}
    assert options - {"--help"} and all(f"`{o}" in doc for o in options - {"--help"}), sorted(
        o for o in options if f"`{o}" not in doc)
