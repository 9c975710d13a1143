"""The SLC-cache probe without a device: plan and validation, the log analysis on synthetic
curves, the runner against a fake fio that writes the bandwidth log, and the report page."""

from __future__ import annotations

import io
import json
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ssdlab.analysis.cliff import RatePoint, rate_by_bytes
from ssdlab.analysis.slc_probe import (
    analyse_pass,
    recovery_text,
    transfers_from_bw_samples,
    with_times,
)
from ssdlab.engine.parser import parse_fio_output
from ssdlab.engine.runner import FioRun, TickFn
from ssdlab.errors import UserError
from ssdlab.plan.slc_probe import SlcProbeArgs, build_slc_options
from ssdlab.report.build import render
from ssdlab.report.slc_probe_pages import show_lines
from ssdlab.run.prepare import PreparedTarget
from ssdlab.run.progress import Progress
from ssdlab.run.slc_probe_run import PreparedSlcProbe, SlcProbeRun, describe
from ssdlab.store.db import Store
from tests.support.cli import one_line_error, ssdlab
from tests.support.fake_fio import _job, _sections
from tests.support.prepared import file_info

MIB = 1 << 20
GIB = 1 << 30
MB = 1e6


def options(capacity: int = 512 * MIB, **kw: Any) -> Any:
    return build_slc_options(SlcProbeArgs(**kw), capacity, 512)


# ------------------------------------------------------------------ plan and validation


def test_defaults_write_the_whole_capacity_once_sequentially_with_a_per_io_log() -> None:
    o = options()
    assert (o.write_bytes, o.block_bytes, o.iodepth) == (512 * MIB, 128 * 1024, 32)
    # slices of the bytes in flight (32 x 128 KiB): smaller ones could be made of
    # completions fio reaped at once
    assert (o.log, o.log_interval_ms, o.slice_bytes, o.passes) == ("io", 0, 4 * MIB, 1)
    cell = o.cell(1)
    assert cell.threads == 1 and cell.offset_bytes == 0 and cell.io_bytes == 512 * MIB
    assert o.log_options("/x/slc") == (("write_bw_log", "/x/slc"),)
    assert o.settle_s == 10.0 and not o.quick


def test_a_large_drive_gets_the_averaged_log_and_about_a_thousand_slices() -> None:
    o = options(2000 * GIB)
    assert (o.log, o.log_interval_ms) == ("bw", 100)
    assert o.log_options("/x/slc") == (("write_bw_log", "/x/slc"), ("log_avg_msec", "100"))
    assert 990 <= o.write_bytes // o.slice_bytes <= 1000
    assert o.slice_bytes % MIB == 0


@pytest.mark.parametrize(
    ("kw", "capacity", "expected"),
    [({"iodepth": 1}, 512 * MIB, MIB),  # one 128 KiB write in flight: 1 MiB, the least
     ({"iodepth": 64}, 512 * MIB, 8 * MIB),
     ({"iodepth": 8, "block_size": "1m"}, 512 * MIB, 8 * MIB),
     ({"write_bytes": 16 * MIB}, 512 * MIB, 2 * MIB),  # but 8 slices at least
     ({}, 8000 * MIB, 8 * MIB)],  # the write / 1000 when that is more
)
def test_default_slices_hold_the_bytes_in_flight(
    kw: dict[str, Any], capacity: int, expected: int
) -> None:
    assert options(capacity, **kw).slice_bytes == expected


def test_quick_writes_half_the_capacity_and_settles_briefly() -> None:
    o = options(profile="quick")
    assert o.quick and o.write_bytes == 256 * MIB and o.settle_s == 2.0


def test_options_given_are_kept() -> None:
    o = options(write_bytes=100 * MIB + 5, block_size="1m", iodepth=8, log="bw",
                log_interval_ms=10, slice_bytes=2 * MIB, min_drop_pct=50, settle_s=0,
                repeat_after_s=30)
    assert o.write_bytes == 100 * MIB  # whole blocks
    assert (o.block_bytes, o.iodepth, o.log, o.log_interval_ms) == (MIB, 8, "bw", 10)
    assert (o.slice_bytes, o.min_change, o.settle_s, o.passes) == (2 * MIB, 0.5, 0.0, 2)


@pytest.mark.parametrize(("kw", "needle"), [
    ({"write_bytes": 8 * MIB}, "--write-size 8 MiB: give at least 16 MiB"),
    ({"write_bytes": 3 * GIB}, "at most 4x the capacity (2 GiB)"),
    ({"log": "io", "log_interval_ms": 10}, "--log-interval applies to the averaged log"),
    ({"log_interval_ms": 0}, "--log-interval 0: give a whole number at least 1"),
    ({"slice_bytes": 128 * MIB}, "--slice 128 MiB: give at least the block size"),
    ({"min_drop_pct": 0}, "--min-drop 0: give a number above 0"),
    ({"min_drop_pct": 100}, "--min-drop 100: give a percentage below 100"),
    ({"block_size": "4,8"}, "--block-size '4,8': give one block size"),
    ({"block_size": "0.3"}, "--block-size"),
    ({"iodepth": 0}, "--qd 0"),
    ({"repeat_after_s": -1}, "--repeat-after -1"),
    ({"log": "hist"}, "--log 'hist' is not one of: auto, io, bw"),
    ({"profile": "long"}, "--profile 'long' is not one of: default, quick"),
])
def test_bad_values_are_refused_with_one_line_naming_them(kw: dict[str, Any], needle: str
                                                          ) -> None:
    with pytest.raises(UserError) as info:
        options(**kw)
    assert needle in info.value.message and "\n" not in info.value.message


def test_a_file_target_is_purged_by_recreating_it_or_not_at_all() -> None:
    with pytest.raises(UserError, match="--purge nvme-format applies to block devices"):
        build_slc_options(SlcProbeArgs(purge="nvme-format"), 512 * MIB, 512, file_target=True)


def test_block_size_must_be_whole_sectors() -> None:
    with pytest.raises(UserError, match="not a multiple of the device's 4096-byte"):
        build_slc_options(SlcProbeArgs(block_size="6k"), 512 * MIB, 4096)


# ------------------------------------------------------------------ analysis


def _completions(cache: int, total: int, fast: float, slow: float, block: int = 128 * 1024
                 ) -> list[tuple[float, int]]:
    out, t, done = [], 0.0, 0
    while done < total:
        t += block / (fast if done < cache else slow)
        done += block
        out.append((round(t * 1000) / 1000, block))  # fio logs whole milliseconds
    return out


def test_the_first_cliff_of_a_step_is_the_cache_size() -> None:
    points = rate_by_bytes(_completions(60 * MIB, 160 * MIB, 180 * MB, 36 * MB), MIB)
    verdict = analyse_pass(points, 0.3)
    assert verdict.estimate_bytes == pytest.approx(60 * MIB, rel=0.03)
    assert len(verdict.cliffs) == 1
    cliff = verdict.cliffs[0]
    assert cliff.rate_before == pytest.approx(180 * MB, rel=0.05)
    assert cliff.rate_after == pytest.approx(36 * MB, rel=0.05)
    assert verdict.message.startswith("SLC cache estimate 60.")
    assert re.search(r"1[78]\d MB/s -> 36 MB/s \(x0.20\)", verdict.message)


def test_two_cliffs_are_both_reported_and_the_first_is_the_estimate() -> None:
    transfers = _completions(40 * MIB, 100 * MIB, 300 * MB, 100 * MB)
    t_end = transfers[-1][0]
    for i in range(1, 400):  # then 100 MiB more at 20 MB/s (folding while writing)
        transfers.append((t_end + i * 128 * 1024 / (20 * MB), 128 * 1024))
    verdict = analyse_pass(rate_by_bytes(transfers, MIB), 0.3)
    assert [round(c.at_bytes / MIB) for c in verdict.cliffs] == [40, 100]
    assert verdict.estimate_bytes == pytest.approx(40 * MIB, rel=0.03)
    assert "further cliffs at 100" in verdict.message


def test_a_flat_write_says_honestly_that_no_cliff_was_found() -> None:
    verdict = analyse_pass(rate_by_bytes(_completions(0, 64 * MIB, 36 * MB, 36 * MB), MIB), 0.3)
    assert verdict.estimate_bytes is None and verdict.cliffs == ()
    assert verdict.message.startswith("no cliff found: throughput never dropped by 30 %")
    assert verdict.mean_rate == pytest.approx(36 * MB, rel=0.05)


def _stalled(edge: int, total: int, stall: tuple[int, int]) -> list[tuple[float, int]]:
    """180 MB/s up to the cache edge, 36 MB/s after, 35 MB/s while the host stalled."""
    out, t, done, block = [], 0.0, 0, 128 * 1024
    while done < total:
        stalled = stall[0] <= done < stall[1]
        t += block / (35 * MB if stalled else 180 * MB if done < edge else 36 * MB)
        done += block
        out.append((round(t * 1000) / 1000, block))
    return out


def test_a_stall_the_rate_came_back_from_is_said_and_is_not_the_estimate() -> None:
    points = rate_by_bytes(_stalled(62 * MIB, 160 * MIB, (38 * MIB, 50 * MIB)), MIB)
    verdict = analyse_pass(points, 0.3)
    assert verdict.estimate_bytes == pytest.approx(62 * MIB, abs=MIB)
    assert [round(d.at_bytes / MIB) for d in verdict.dips] == [38]
    assert verdict.message.startswith("SLC cache estimate 62.0 MiB (first cliff at 62.0 MiB")
    assert ("; the rate left its level and came back (a host stall, or late completions "
            "reaped at once): a 12.0 MiB dip at 38.0 MiB written (1") in verdict.message
    assert verdict.message.endswith("not the cache edge")
    # a stall alone: no cliff, said so, and the dip named
    alone = analyse_pass(rate_by_bytes(_stalled(200 * MIB, 64 * MIB, (40 * MIB, 52 * MIB)),
                                       MIB), 0.3)
    assert alone.estimate_bytes is None and len(alone.dips) == 1
    assert alone.message.startswith("no cliff found: throughput never dropped by 30 % or "
                                    "more for good over 64.0 MiB written")
    assert "a 12.0 MiB dip at 40.0 MiB written" in alone.message


def test_too_few_points_and_no_points_are_not_errors() -> None:
    assert "too few slices (3)" in analyse_pass(
        [RatePoint(1.0, 5.0), RatePoint(2.0, 5.0), RatePoint(3.0, 1.0)], 0.3).message
    assert analyse_pass([], 0.3).message.startswith("no throughput points")


def test_fio_reported_bytes_override_the_last_slice() -> None:
    points = rate_by_bytes(_completions(0, 64 * MIB, 36 * MB, 36 * MB), 3 * MIB)
    assert analyse_pass(points, 0.3, 64 * MIB).written_bytes == 64 * MIB


def test_averaged_samples_become_transfers_that_add_up_to_what_fio_wrote() -> None:
    samples = [(100, 100_000), (200, 100_000), (300, 50_000)]  # KiB/s
    transfers = transfers_from_bw_samples(samples, 30_000_000, 350)
    assert [t for t, _ in transfers] == [0.1, 0.2, 0.3, 0.35]
    assert transfers[0][1] == 100_000 * 1024 // 10
    assert sum(b for _, b in transfers) == 30_000_000
    # nothing to add when fio logged everything; duplicate stamps are skipped
    assert len(transfers_from_bw_samples([(100, 1000), (100, 5)], 102_400, 100)) == 1


def test_slice_times_follow_from_bytes_and_rates() -> None:
    timed = with_times([RatePoint(100.0, 100.0), RatePoint(300.0, 50.0)])
    assert [p.seconds for p in timed] == [1.0, 5.0]


def test_recovery_after_idle_is_described_from_both_passes() -> None:
    first = analyse_pass(rate_by_bytes(_completions(60 * MIB, 160 * MIB, 180 * MB, 36 * MB),
                                       MIB), 0.3)
    half = analyse_pass(rate_by_bytes(_completions(30 * MIB, 160 * MIB, 180 * MB, 36 * MB),
                                      MIB), 0.3)
    none = analyse_pass(rate_by_bytes(_completions(0, 160 * MIB, 36 * MB, 36 * MB), MIB), 0.3)
    fast = analyse_pass(rate_by_bytes(_completions(0, 40 * MIB, 180 * MB, 180 * MB), MIB), 0.3)
    assert "came back (50 % of" in recovery_text(first, half, 30, 0.3)
    assert "no cache came back" in recovery_text(first, none, 30, 0.3)
    assert "ran at the cache rate throughout" in recovery_text(first, fast, 30, 0.3)
    assert "the first pass had no cliff" in recovery_text(none, half, 30, 0.3)


# ------------------------------------------------------------------ runner (fake fio)


Curve = Callable[[int, int], float]  # (pass, bytes written) -> bytes/s


class LoggingFakeFio:
    """Writes the bandwidth log the job file asks for from a rate curve, and fio's JSON."""

    def __init__(self, curve: Curve, fail: bool = False) -> None:
        self.curve = curve
        self.fail = fail
        self.calls: list[str] = []

    def run(self, job_text: str, timeout_s: float, *, json_plus: bool = False,
            on_tick: TickFn | None = None) -> FioRun:
        self.calls.append(job_text)
        pass_no = len(self.calls)
        now = time.time()
        if self.fail:
            return FioRun(job_text, ("fake",), "", "EIO", 1, now, now, False, None,
                          "fio exited with status 1: EIO")
        prefix = re.search(r"^write_bw_log=(.+)$", job_text, re.M)
        avg = re.search(r"^log_avg_msec=(\d+)$", job_text, re.M)
        section = _sections(job_text)[-1]
        block, total = int(section["bs"]), int(section["io_size"])
        lines, t, done, next_ms, acc = [], 0.0, 0, 0, 0
        while done < total:
            t += block / self.curve(pass_no, done)
            done += block
            if avg is None:
                lines.append(f"{round(t * 1000)}, 0, 1, {block}, 0")
            else:
                acc += block
                step = int(avg.group(1))
                if t * 1000 >= next_ms + step:
                    next_ms += step
                    lines.append(f"{next_ms}, {round(acc / 1024 / (step / 1000))}, 1, 0, 0")
                    acc = 0
        assert prefix is not None
        Path(prefix.group(1) + "_bw.1.log").write_text("\n".join(lines) + "\n")
        job = _job(section, 1.0)
        job["write"].update(io_bytes=total, runtime=round(t * 1000))  # type: ignore[attr-defined]
        stdout = json.dumps({"fio version": "fio-3.33", "jobs": [job]})
        return FioRun(job_text, ("fake",), stdout, "", 0, now, now, False,
                      parse_fio_output(stdout), None)


def step(cache: int, fast: float = 180 * MB, slow: float = 36 * MB) -> Curve:
    return lambda _pass, done: fast if done < cache else slow


def prepared(tmp_path: Path, **kw: Any) -> PreparedSlcProbe:
    info = file_info(tmp_path / "t.img", 512 * MIB)
    args = SlcProbeArgs(**{"purge": "none", "settle_s": 0, **kw})
    target = PreparedTarget(info, False, {"hostname": "test", "cpu_count": 2},
                            {"ssdlab": "test", "fio": "3.33"})
    return PreparedSlcProbe(target, build_slc_options(args, info.capacity_bytes, 512,
                                                      file_target=True), args)


def execute(tmp_path: Path, fio: LoggingFakeFio, sleeps: list[float] | None = None, **kw: Any
            ) -> tuple[Store, SlcProbeRun]:
    store = Store.open(tmp_path / "store.sqlite")
    runner = SlcProbeRun(prepared(tmp_path, **kw), store, fio,
                         Progress(io.StringIO(), live=False),
                         sleep=(sleeps.append if sleeps is not None else lambda s: None))
    runner.execute(["test"])
    return store, runner


def test_a_probe_stores_the_curve_as_rounds_and_the_estimate(tmp_path: Path) -> None:
    store, runner = execute(tmp_path, LoggingFakeFio(step(60 * MIB)), write_bytes=160 * MIB)
    run = store.load(runner.run_id)
    test = run.test("slc-probe")
    assert run.status == "complete" and test.status == "complete"
    assert 38 <= len(test.rounds) <= 40  # a round per 4 MiB slice (the bytes in flight)
    cells = [r.cells[0] for r in test.rounds]
    assert [c["bytes_written"] for c in cells] == sorted(c["bytes_written"] for c in cells)
    assert cells[0]["bw_bytes_per_s"] == pytest.approx(180 * MB, rel=0.2)
    assert cells[-1]["bw_bytes_per_s"] == pytest.approx(36 * MB, rel=0.2)
    assert test.result["estimate_bytes"] == pytest.approx(60 * MIB, rel=0.03)
    assert test.result["passes"][0]["written_bytes"] == 160 * MIB
    assert test.verdicts["primary"]["message"].startswith("SLC cache estimate")
    write = next(s for s in test.steps if s.kind == "write")
    assert write.fio is not None and "write_bw_log=" in write.fio.job_text
    assert "log_avg_msec" not in write.fio.job_text
    assert test.result["ground_truth"] is None  # not an emulator


def test_the_averaged_log_finds_the_same_cache(tmp_path: Path) -> None:
    store, runner = execute(tmp_path, LoggingFakeFio(step(100 * MIB)), write_bytes=300 * MIB,
                            log="bw", log_interval_ms=20, slice_bytes=4 * MIB)
    test = store.load(runner.run_id).test("slc-probe")
    assert test.result["estimate_bytes"] == pytest.approx(100 * MIB, rel=0.05)
    assert "averaged over 20 ms" in test.result["log"]


def test_settle_and_repeat_write_after_idle(tmp_path: Path) -> None:
    def curve(pass_no: int, done: int) -> float:
        return step(60 * MIB if pass_no == 1 else 20 * MIB)(pass_no, done)

    sleeps: list[float] = []
    store, runner = execute(tmp_path, LoggingFakeFio(curve), sleeps, write_bytes=100 * MIB,
                            settle_s=5, repeat_after_s=30)
    test = store.load(runner.run_id).test("slc-probe")
    assert sleeps == [5, 30]
    passes = test.result["passes"]
    assert [p["pass"] for p in passes] == [1, 2] and passes[1]["idle_before_s"] == 30
    assert passes[1]["estimate_bytes"] == pytest.approx(20 * MIB, rel=0.1)
    assert "came back (33 % of" in test.result["recovery"]
    assert {r.cells[0]["pass"] for r in test.rounds} == {1, 2}
    assert [r.round_no for r in test.rounds] == list(range(1, len(test.rounds) + 1))


def test_a_flat_curve_is_complete_with_no_cliff(tmp_path: Path) -> None:
    store, runner = execute(tmp_path, LoggingFakeFio(step(0)), write_bytes=64 * MIB)
    test = store.load(runner.run_id).test("slc-probe")
    assert test.status == "complete" and test.result["cliff_found"] is False
    assert test.result["estimate_bytes"] is None
    assert test.result["message"].startswith("no cliff found")


def test_a_failed_write_fails_the_test_and_keeps_the_fio_record(tmp_path: Path) -> None:
    store, runner = execute(tmp_path, LoggingFakeFio(step(0), fail=True), write_bytes=64 * MIB)
    run = store.load(runner.run_id)
    test = run.test("slc-probe")
    assert test.status == "failed" and "EIO" in test.result["error"]
    assert list(test.result) == ["error"]  # as it was stored before the results were typed
    assert run.status == "complete" and "slc-probe" in run.message
    assert [s.kind for s in test.steps] == ["write"] and not test.rounds


def test_emulator_ground_truth_gives_the_estimate_error(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "store.sqlite")
    runner = SlcProbeRun(prepared(tmp_path, write_bytes=160 * MIB), store,
                         LoggingFakeFio(step(60 * MIB)), Progress(io.StringIO(), live=False))
    truth = {"profile": "client-slc", "config": {"slc_bytes": 62 * MIB}}
    runner.session.ground_truth = lambda test, when: truth  # type: ignore[method-assign]
    runner.execute(["test"])
    result = store.load(runner.run_id).test("slc-probe").result
    assert result["ground_truth"]["slc_bytes"] == 62 * MIB
    assert result["ground_truth"]["estimate_error_pct"] == pytest.approx(-3.2, abs=1.5)


def test_the_report_page_draws_the_curve_with_the_cliff_and_the_estimate(tmp_path: Path) -> None:
    store, runner = execute(tmp_path, LoggingFakeFio(step(60 * MIB)), write_bytes=160 * MIB,
                            repeat_after_s=10)
    page, _ = render([store.load(runner.run_id)])
    assert "SLC cache probe" in page and "SLC cache estimate 60" in page
    assert "Sequential write throughput against data written" in page
    assert "data written since the purge (MiB)" in page and "throughput (MB/s)" in page
    assert "cache 60" in page  # the cliff marked on the chart
    assert "after 10 s idle" in page


def test_a_stall_is_stored_as_a_dip_and_shown_runs_without_have_no_dips_key(
    tmp_path: Path
) -> None:
    def curve(_pass: int, done: int) -> float:
        return 35 * MB if 38 * MIB <= done < 50 * MIB else step(62 * MIB)(_pass, done)

    store, runner = execute(tmp_path, LoggingFakeFio(curve), write_bytes=160 * MIB)
    run = store.load(runner.run_id)
    result = run.test("slc-probe").result
    assert result["estimate_bytes"] == pytest.approx(62 * MIB, abs=4 * MIB)
    (dip,) = result["passes"][0]["dips"]
    assert list(dip) == ["at_bytes", "length_bytes", "rate_level_bytes_per_s",
                         "rate_during_bytes_per_s", "rate_back_bytes_per_s"]
    assert dip["at_bytes"] == pytest.approx(38 * MIB, abs=4 * MIB)
    assert dip["rate_during_bytes_per_s"] < 0.5 * dip["rate_level_bytes_per_s"]
    assert "dip at" in result["message"] and "not the cache edge" in result["message"]
    page, _ = render([run])
    assert "Dips: the rate came back, not cliffs" in page
    assert "not the cache edge" in "\n".join(show_lines(run, run.test("slc-probe")))
    # without a dip the key is left out, as in the runs stored before dips were told apart
    store, runner = execute(tmp_path / "plain", LoggingFakeFio(step(60 * MIB)),
                            write_bytes=160 * MIB)
    run = store.load(runner.run_id)
    assert "dips" not in run.test("slc-probe").result["passes"][0]
    assert "Dips:" not in render([run])[0]


def test_the_report_says_no_cliff_found(tmp_path: Path) -> None:
    store, runner = execute(tmp_path, LoggingFakeFio(step(0)), write_bytes=64 * MIB)
    page, _ = render([store.load(runner.run_id)])
    assert "NO CLIFF FOUND" in page


def test_dry_run_prints_the_plan_and_the_job_file(tmp_path: Path) -> None:
    text = describe(prepared(tmp_path, write_bytes=160 * MIB, repeat_after_s=5))
    assert text.startswith("DRY RUN: nothing will be written.")
    assert "write_bw_log=LOGDIR/slc" in text and "rw=write" in text and "numjobs=1" in text
    assert "then 5 s idle and the same write again" in text


# ------------------------------------------------------------------ CLI (black box)


@pytest.mark.fio  # prepare asks fio its version, dry runs too
def test_cli_dry_run_on_a_new_file(tmp_path: Path) -> None:
    result = ssdlab("run", "slc-probe", "--target", str(tmp_path / "new.img"), "--size",
                    "1GiB", "--profile", "quick", "--dry-run")
    assert result.returncode == 0 and result.stderr == ""
    assert "profile quick (QUICK)" in result.stdout and "io_size=536870912" in result.stdout
    assert not (tmp_path / "new.img").exists()


@pytest.mark.fio  # prepare asks fio its version, dry runs too
def test_cli_refuses_bad_values_before_any_io(tmp_path: Path) -> None:
    result = ssdlab("run", "slc-probe", "--target", str(tmp_path / "new.img"), "--size",
                    "1GiB", "--write-size", "8GiB")
    assert result.returncode == 2
    assert "--write-size 8 GiB" in one_line_error(result)
    assert not (tmp_path / "new.img").exists()
