"""The block-level presets (cdm, atto, iometer): plans from the preset data, validation,
job files, summaries, and the run's orchestration with a fake fio."""

from __future__ import annotations

import io
import math
import re
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from ssdlab import presets
from ssdlab.analysis.block_presets import summarise, timeline_total
from ssdlab.engine.runner import FioRun, TickFn
from ssdlab.errors import UserError
from ssdlab.plan.block_presets import PresetResult
from ssdlab.plan.preset_defs import (
    AttoArgs,
    CdmArgs,
    IometerArgs,
    PresetPlan,
    build_atto,
    build_cdm,
    build_iometer,
    parse_modes,
    size_label,
    transfer_sizes,
)
from ssdlab.plan.specs import Pattern
from ssdlab.report.block_preset_pages import (
    PAGES,
    atto_pages,
    block_presets_overlay,
    cdm_pages,
    iometer_pages,
    show_lines,
)
from ssdlab.run.block_preset_run import (
    PreparedPreset,
    PresetRun,
    describe,
    job_text,
    prepare_preset,
)
from ssdlab.run.prepare import PreparedTarget, TargetRequest
from ssdlab.run.progress import Progress
from ssdlab.store.db import Store
from ssdlab.targets.filetarget import create_file_target
from ssdlab.targets.identity import TargetInfo
from ssdlab.targets.workdir import DroppedCaches, describe_dir
from tests.support.cli import one_line_error, ssdlab
from tests.support.fake_fio import FakeFio

MIB = 1 << 20


# --------------------------------------------------------------------------- plans


def test_every_preset_is_data_with_a_name_and_version() -> None:
    for name in ("cdm", "atto", "iometer"):
        data = presets.load(name)
        assert presets.identity(data) == {"preset": name, "preset_version": 1,
                                          "preset_title": data["title"]}


def test_cdm_default_plan_is_crystaldiskmarks_tests() -> None:
    plan = build_cdm(CdmArgs())
    assert (plan.size_bytes, plan.direct, plan.quick) == (1 << 30, True, False)
    assert len(plan.measurements) == 4 * 3 * 3  # tests x modes x passes
    first = plan.measurements[:3]
    assert [(m.group, m.mode, m.pass_no) for m in first] == [
        ("SEQ1M Q8T1", "read", 1), ("SEQ1M Q8T1", "read", 2), ("SEQ1M Q8T1", "read", 3)]
    cell = first[0].cell
    assert (cell.pattern, cell.block_bytes, cell.iodepth, cell.threads, cell.runtime_s) == (
        Pattern.SEQUENTIAL, MIB, 8, 1, 5.0)
    assert first[0].idle_before_s == 0 and all(m.idle_before_s == 5.0
                                               for m in plan.measurements[1:])
    mixes = [m for m in plan.measurements if m.mode == "mix"]
    assert {m.cell.mix.read_pct for m in mixes} == {70}
    rnd = [m for m in plan.measurements if m.group == "RND4K Q32T1"]
    assert {(m.cell.block_bytes, m.cell.iodepth, m.cell.pattern) for m in rnd} == {
        (4096, 32, Pattern.RANDOM)}


def test_cdm_quick_and_nvme_set() -> None:
    quick = build_cdm(CdmArgs(profile="quick"))
    assert quick.quick and quick.size_bytes == 16 * MIB and len(quick.measurements) == 12
    assert {m.cell.runtime_s for m in quick.measurements} == {0.5}
    nvme = build_cdm(CdmArgs(set="nvme", modes="write,read", passes=1, mix_read_pct=90))
    assert [m.group for m in nvme.measurements[:4]] == [
        "SEQ1M Q8T1", "SEQ128K Q32T1", "RND4K Q32T16", "RND4K Q1T1"]
    assert nvme.measurements[2].cell.threads == 16
    assert [m.mode for m in nvme.measurements[::4]] == ["read", "write"]  # CDM's order


@pytest.mark.parametrize(("args", "needle"), [
    (CdmArgs(size_bytes=8 * MIB), "--size 8 MiB: the test file must be 16 MiB to 64 GiB"),
    (CdmArgs(size_bytes=128 << 30), "--size 128 GiB"),
    (CdmArgs(passes=0), "--passes 0: give a whole number from 1 to 9"),
    (CdmArgs(modes="read,foo"), "--modes 'read,foo'"),
    (CdmArgs(mix_read_pct=100), "--mix-read-pct 100"),
    (CdmArgs(set="ssd"), "--set 'ssd' is not one of: default, nvme"),
    (CdmArgs(measure_s=math.nan), "--measure-seconds nan"),
    (CdmArgs(interval_s=-1.0), "--interval-seconds -1.0"),
    (CdmArgs(profile="fast"), "--profile 'fast'"),
])
def test_cdm_refusals_name_the_value(args: CdmArgs, needle: str) -> None:
    with pytest.raises(UserError) as info:
        build_cdm(args)
    assert needle in info.value.message and len(info.value.message.splitlines()) == 1


def test_parse_modes_keeps_crystaldiskmarks_order() -> None:
    assert parse_modes("mix, read") == ("read", "mix")
    with pytest.raises(UserError):
        parse_modes("read,read")


def test_atto_sweep_is_512_bytes_to_64_mib_doubling() -> None:
    plan = build_atto(AttoArgs())
    sizes = plan.settings["transfer_sizes"]
    assert sizes == [512 << k for k in range(18)] and sizes[-1] == 64 * MIB
    assert [m.mode for m in plan.measurements[:2]] == ["write", "read"]
    assert {m.cell.iodepth for m in plan.measurements} == {4}
    assert plan.size_bytes == 256 * MIB and plan.direct
    assert not any(m.drop_caches_before for m in plan.measurements)
    assert [size_label(s) for s in (512, 4096, 64 * MIB)] == ["512 B", "4 KiB", "64 MiB"]
    assert transfer_sizes(4096, MIB, 4) == (4096, 16384, 65536, 262144, MIB)
    quick = build_atto(AttoArgs(profile="quick"))
    assert len(quick.measurements) == 10 and quick.size_bytes == 16 * MIB


def test_atto_buffered_drops_caches_before_every_read() -> None:
    plan = build_atto(AttoArgs(no_direct=True, qd=256, size_bytes=64 * MIB,
                               max_size="1MiB"))
    assert not plan.direct
    assert [m.drop_caches_before for m in plan.measurements[:2]] == [False, True]
    assert {m.cell.iodepth for m in plan.measurements} == {256}


@pytest.mark.parametrize(("args", "sector", "needle"), [
    (AttoArgs(size_bytes=32 * MIB), 512, "--max-size 64 MiB is larger than the 32 MiB"),
    (AttoArgs(min_size="1MiB", max_size="64k"), 512, "is larger than --max-size"),
    (AttoArgs(min_size="100"), 512, "--min-size '100'"),
    (AttoArgs(max_size="128MiB"), 512, "--max-size '128MiB'"),
    (AttoArgs(), 4096, "whole 4096-byte sectors"),
    (AttoArgs(qd=0), 512, "--qd 0"),
    (AttoArgs(factor=1), 512, "--factor 1"),
])
def test_atto_refusals(args: AttoArgs, sector: int, needle: str) -> None:
    with pytest.raises(UserError) as info:
        build_atto(args, sector)
    assert needle in info.value.message


def test_iometer_sets() -> None:
    plan = build_iometer(IometerArgs())
    assert len(plan.measurements) == 12 and plan.log_interval_ms == 1000
    assert {(m.cell.threads, m.cell.iodepth, m.cell.runtime_s) for m in plan.measurements} == {
        (1, 32, 30.0)}
    assert {m.cell.block_bytes for m in plan.measurements} == {4096, 8192, 65536}
    assert all(m.log_iops for m in plan.measurements)
    controller = build_iometer(IometerArgs(set="controller"))
    assert [(m.cell.block_bytes, m.cell.mix.read_pct, m.mode)
            for m in controller.measurements] == [
        (262144, 100, "read"), (262144, 0, "write"), (262144, 50, "mix"),
        (4096, 100, "read"), (4096, 0, "write"), (4096, 50, "mix")]
    only = build_iometer(IometerArgs(block_sizes="64"))
    assert [m.group for m in only.measurements] == [
        "64K random read", "64K random write", "64K sequential read", "64K sequential write"]


@pytest.mark.parametrize(("args", "needle"), [
    (IometerArgs(block_sizes="16"), "no access spec of the default set"),
    (IometerArgs(seconds=0.5, log_interval_ms=1000), "--log-interval 1000 ms is longer"),
    (IometerArgs(qd=0), "--qd 0"),
    (IometerArgs(set="x"), "--set 'x'"),
    (IometerArgs(size_bytes=MIB), "--size 1 MiB"),
])
def test_iometer_refusals(args: IometerArgs, needle: str) -> None:
    with pytest.raises(UserError) as info:
        build_iometer(args)
    assert needle in info.value.message


# --------------------------------------------------------------------------- analysis


def test_summary_best_is_the_fastest_pass_and_mean_is_independent() -> None:
    bws = [100e6, 300e6, 200e6]
    cells = [{"group": "SEQ", "mode": "read", "pass": n, "bw_bytes_per_s": bw,
              "iops": bw / MIB, "lat_mean_us": 10.0 * n} for n, bw in enumerate(bws, 1)]
    cells.append({"group": "SEQ", "mode": "write", "pass": 1, "bw_bytes_per_s": 5e6,
                  "iops": 5.0, "lat_mean_us": None})
    rows = summarise(cells)
    assert [(r.group, r.mode, r.passes) for r in rows] == [
        ("SEQ", "read", 3), ("SEQ", "write", 1)]
    read = rows[0]
    assert read.best_pass == 2 and read.best.mb_per_s == 300.0
    assert read.mean.mb_per_s == pytest.approx(statistics.mean(bws) / 1e6)
    assert read.mean.lat_mean_us == pytest.approx(20.0)
    assert rows[1].mean.lat_mean_us is None


def test_timeline_total_adds_directions() -> None:
    assert timeline_total([[(1.0, 10.0), (2.0, 12.0)], [(1.0, 5.0), (2.0, 4.0)]]) == [
        [1.0, 15.0], [2.0, 16.0]]


# --------------------------------------------------------------------------- running


def _planned(tmp_path: Path, plan: PresetPlan, directory: bool = True) -> PreparedPreset:
    if directory:
        d = describe_dir(str(tmp_path))
        info = TargetInfo(str(tmp_path), "directory", "t", "directory", None, None, None,
                          plan.size_bytes, 512, 512, None, None, None, None, d.to_dict())
        target = PreparedTarget(info, False, {"cpu_count": 2},
                                {"ssdlab": "test", "fio": "3.33"})
        return PreparedPreset(target, plan, d)
    raise AssertionError


@dataclass
class LoggingFakeFio:
    """FakeFio that also writes the averaged IOPS log a job asks for (write_iops_log)."""

    inner: FakeFio
    calls: list[str] = field(default_factory=list)

    def run(self, job_text: str, timeout_s: float, *, json_plus: bool = False,
            on_tick: TickFn | None = None) -> FioRun:
        self.calls.append(job_text)
        prefix = re.search(r"^write_iops_log=(.+)$", job_text, re.M)
        if prefix:
            rw = re.search(r"^rw=(\w+)$", job_text, re.M)
            direction = 1 if rw and "write" in rw.group(1) else 0
            lines = [f"{t}, {1000 + t}, {direction}, 0, 0" for t in (250, 500, 750, 1000)]
            Path(f"{prefix.group(1)}_iops.1.log").write_text("\n".join(lines) + "\n")
        return self.inner.run(job_text, timeout_s, json_plus=json_plus, on_tick=on_tick)


def _run(tmp_path: Path, plan: PresetPlan, fio: Any) -> tuple[Store, str, list[float],
                                                              list[str]]:
    share = tmp_path / "share"
    share.mkdir()
    store = Store.open(tmp_path / "store.sqlite")
    slept: list[float] = []
    order: list[str] = []
    fio_calls = fio.calls

    def drop() -> DroppedCaches:
        order.append(f"drop before call {len(fio_calls) + 1}")
        return DroppedCaches(True, True)

    run = PresetRun(_planned(share, plan), store, fio, Progress(live=False, stream=io.StringIO()),
                    sleep=slept.append, drop=drop)
    run_id = run.execute(["run", plan.preset])
    assert list(share.iterdir()) == [], "the work directory is removed"
    return store, run_id, slept, order


def test_cdm_run_stores_every_pass_and_the_summary(tmp_path: Path) -> None:
    plan = build_cdm(CdmArgs(modes="read,write", passes=2, measure_s=1.0, interval_s=3.0))
    fio = FakeFio(lambda name, n: 1000.0 * n)  # later passes are faster
    store, run_id, slept, _ = _run(tmp_path, plan, fio)
    run = store.load(run_id)
    assert run.status == "complete" and run.plan["preset"] == "cdm"
    assert run.plan["definitions"]["tests"][0]["label"] == "SEQ1M Q8T1"
    test = run.test("cdm")
    assert test.params["preset_version"] == 1 and test.status == "complete"
    assert len(test.rounds) == 16 and slept == [3.0] * 15
    assert "rw=write" in fio.calls[0] and "io_size=1073741824" in fio.calls[0]
    assert test.steps[0].kind == "prefill" and test.steps[0].detail["ok"]
    rows = test.result["rows"]
    assert len(rows) == 8
    for row in rows:
        assert row["best"]["pass"] == 2
        assert row["best"]["mb_per_s"] > row["mean"]["mb_per_s"] > 0
    events = [e.kind for e in run.events]
    assert "cleanup" in events
    html = cdm_pages(run, test, "a")[0].body
    assert "SEQ1M Q8T1" in html and "Best of 2 pass(es)" in html and "cdm version 1" in html


def test_atto_buffered_run_drops_caches_before_reads_and_records_it(tmp_path: Path) -> None:
    plan = build_atto(AttoArgs(no_direct=True, min_size="4k", max_size="16k", factor=4,
                               size_bytes=16 * MIB, measure_s=0.5))
    fio = FakeFio(lambda name, n: 500.0)
    store, run_id, slept, order = _run(tmp_path, plan, fio)
    # calls: 1 prefill, 2 write 4k, 3 read 4k, 4 write 16k, 5 read 16k
    assert order == ["drop before call 3", "drop before call 5"]
    assert all("direct=0" in c for c in fio.calls)
    assert "end_fsync=1" in fio.calls[1] and "end_fsync=1" not in fio.calls[2]
    run = store.load(run_id)
    assert [e.message for e in run.events if e.kind == "drop-caches"] == [
        "sync and drop caches before 4 KiB read: dropped",
        "sync and drop caches before 16 KiB read: dropped"]
    cells = [c for r in run.test("atto").rounds for c in r.cells]
    assert [c.get("caches_dropped") for c in cells] == [None, True, None, True]
    assert not slept
    html = atto_pages(run, run.test("atto"), "a")[0].body
    assert 'data-chart="hbar"' in html and "16 KiB" in html and "buffered" in html


def test_iometer_run_keeps_the_timeline(tmp_path: Path) -> None:
    plan = build_iometer(IometerArgs(block_sizes="4", seconds=1.0, log_interval_ms=250,
                                     size_bytes=16 * MIB))
    fio = LoggingFakeFio(FakeFio(lambda name, n: 2000.0))
    store, run_id, _, _ = _run(tmp_path, plan, fio)
    assert all("log_avg_msec=250" in c for c in fio.calls[1:])
    run = store.load(run_id)
    test = run.test("iometer")
    assert test.status == "complete", test.result
    cells = [c for r in test.rounds for c in r.cells]
    assert cells[0]["timeline"] == [[0.25, 1250.0], [0.5, 1500.0], [0.75, 1750.0],
                                    [1.0, 2000.0]]
    html = iometer_pages(run, test, "a")[0].body
    assert "IOPS every 250 ms" in html and "4K random read" in html


def test_a_failed_measurement_fails_the_test_and_removes_the_directory(tmp_path: Path) -> None:
    plan = build_cdm(CdmArgs(profile="quick", modes="read"))
    fio = FakeFio(lambda name, n: 100.0, fail_rounds={3})
    store, run_id, _, _ = _run(tmp_path, plan, fio)
    run = store.load(run_id)
    test = run.test("cdm")
    assert test.status == "failed" and "io_u error" in test.result["error"]
    assert [r.status for r in test.rounds] == ["ok", "failed"]


# --------------------------------------------------------------------------- target and CLI


def test_target_and_dir_are_exclusive(tmp_path: Path) -> None:
    args = CdmArgs(profile="quick")
    for target, directory in ((None, None), ("x", str(tmp_path))):
        with pytest.raises(UserError, match="either --target"):
            prepare_preset(TargetRequest(target, directory), args)
    with pytest.raises(UserError, match="--destroy-data is for block devices"):
        prepare_preset(TargetRequest(None, str(tmp_path), destroy_data=True), args)


def test_dry_run_prints_every_job_file(tmp_path: Path) -> None:
    plan = build_iometer(IometerArgs(profile="quick", set="controller"))
    text = describe(_planned(tmp_path, plan))
    assert text.startswith("DRY RUN: nothing will be written. IOmeter-like preset iometer v1")
    assert text.count("[global]") == 1 + 6 and "write_iops_log=LOGDIR/iops" in text
    assert "ssdlab-work-XXXXXXXX/iometer-test.dat" in text
    assert "rwmixread=50" in text
    buffered = build_atto(AttoArgs(profile="quick", no_direct=True))
    prepared = _planned(tmp_path, buffered)
    assert "direct=0" in job_text(prepared, "/x", buffered.prefill_cell(), "prefill")


@pytest.mark.fio  # prepare asks fio its version, dry runs too
def test_cli_dry_run_and_refusals(tmp_path: Path) -> None:
    result = ssdlab("run", "cdm", "--dir", str(tmp_path), "--profile", "quick", "--dry-run")
    assert result.returncode == 0, result.stderr
    assert result.stderr == "" and result.stdout.count("[global]") == 13
    assert list(tmp_path.iterdir()) == []
    refused = ssdlab("run", "atto", "--dir", str(tmp_path), "--max-size", "1GiB")
    assert refused.returncode == 2
    assert "--max-size '1GiB'" in one_line_error(refused)
    config = tmp_path / "atto.toml"
    config.write_text('[atto]\nqd = 256\nno-direct = true\n')
    printed = ssdlab("run", "atto", "--dir", str(tmp_path), "--config", str(config),
                     "--print-config")
    assert "qd = 256" in printed.stdout and "no-direct = true" in printed.stdout
    listed = ssdlab("run", "iometer", "--dir", str(tmp_path), "--config", str(config),
                    "--dry-run")
    assert listed.returncode == 2 and "atto" in one_line_error(listed)


def test_several_runs_of_a_preset_are_compared_on_one_chart(tmp_path: Path) -> None:
    runs = []
    for n, qd in enumerate((4, 256)):
        plan = build_atto(AttoArgs(min_size="4k", max_size="16k", factor=4, qd=qd,
                                   size_bytes=16 * MIB, measure_s=0.5))
        (tmp_path / str(n)).mkdir()
        store, run_id, _, _ = _run(tmp_path / str(n), plan, FakeFio(lambda name, i: 300.0))
        runs.append(store.load(run_id))
    html = block_presets_overlay(runs, ["a", "b"])
    assert "<h3>ATTO-like</h3>" in html and "Runs differ in preset version or settings" in html
    assert "cmp-atto-read" in html and "qd 256" in html
    assert block_presets_overlay(runs[:1], ["a"]) == ""


@pytest.mark.fio  # prepare asks fio its version, dry runs too
def test_an_existing_test_file_keeps_its_size_unless_size_is_given(tmp_path: Path) -> None:
    path = tmp_path / "t.img"
    create_file_target(str(path), 32 * MIB)

    args = IometerArgs(profile="quick")
    prepared = prepare_preset(TargetRequest(str(path)), args)
    assert prepared.options.size_bytes == 32 * MIB and not prepared.target.create_file
    new = prepare_preset(TargetRequest(str(tmp_path / "new.img")), args)
    assert new.options.size_bytes == 16 * MIB and new.target.create_file
    assert not (tmp_path / "new.img").exists()


# --------------------------------------------------------------------------- run's end, show


def test_a_failed_test_stores_only_its_error_and_run_says_so(tmp_path: Path) -> None:
    plan = build_cdm(CdmArgs(profile="quick", modes="read"))
    store, run_id, _, _ = _run(tmp_path, plan, FakeFio(lambda name, n: 100.0,
                                                       fail_rounds={3}))
    run = store.load(run_id)
    test = run.test("cdm")
    assert list(test.result) == ["error"] and test.verdicts == {}
    assert PresetResult().to_json() == {}  # what a running test stores
    ended = PAGES.outcome(run, tmp_path / "store.sqlite")
    assert ended.lines[0] == (f"run {run_id} complete, 1 test(s) failed: cdm (QUICK "
                              f"profile); CrystalDiskMark-like preset cdm v1; results in "
                              f"{tmp_path / 'store.sqlite'}")
    assert ended.failure == (f"the cdm preset failed: {test.result['error']} "
                             f"(see `ssdlab show {run_id}`)")
    assert show_lines(run, test)[:2] == ["  preset cdm v1", f"  verdict: {test.result['error']}"]


def test_a_complete_run_prints_its_message_and_shows_its_table(tmp_path: Path) -> None:
    plan = build_iometer(IometerArgs(block_sizes="4", seconds=1.0, log_interval_ms=250,
                                     size_bytes=16 * MIB))
    store, run_id, _, _ = _run(tmp_path, plan, LoggingFakeFio(FakeFio(lambda n, i: 2000.0)))
    run = store.load(run_id)
    test = run.test("iometer")
    ended = PAGES.outcome(run, Path("S"))
    message = test.result["message"]
    assert message.startswith("preset iometer v1: 4 results; highest ")
    assert ended.failure is None and ended.lines[1:] == (
        f"  {message}",
        f"  see them: ssdlab show {run_id}    report: ssdlab report {run_id} -o DIR")
    assert test.verdicts == {"primary": {"message": message}}
    shown = show_lines(run, test)
    assert shown[:2] == ["  preset iometer v1", f"  verdict: {message}"]
    assert shown[5].split()[:4] == ["4K", "random", "read", "read"]
    assert len(shown) == 2 + 1 + 2 + 4
