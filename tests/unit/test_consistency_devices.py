"""The cache-bound check from the devices below (issue 30, docs/consistency.md): what fio
and the devices moved over each gate position, stored as a ``devices`` event per round; the
verdict per cell (reads or writes far below fio's, direct I/O not aligned to a btrfs
sector), its reasons and margins; the cells named by their labels in every footnote (the
RAID matrix's too); and the gate's watcher that gives the readings between cells."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from ssdlab.analysis import consistency as cons
from ssdlab.engine.gate import Gate, gate_job, gated, namespace_works, watching
from ssdlab.engine.parser import parse_fio_output
from ssdlab.plan.consistency import EVENT_KIND as CHECKS_KIND
from ssdlab.plan.consistency import CacheCheck, CellCheck, ConsistencyChecks, footnotes
from ssdlab.plan.device_rounds import EVENT_KIND, DeviceIO, DeviceRound, device_rounds, mib
from ssdlab.plan.member_rounds import EVENT_KIND as MEMBERS_KIND
from ssdlab.report import consistency as view
from ssdlab.report.terminal import render_run
from ssdlab.run.consistency import Stack, check_run, lines
from ssdlab.run.member_rounds import MemberSampler, Sample, device_round
from ssdlab.serve.data import run_view
from ssdlab.store import records
from ssdlab.store.db import Store
from ssdlab.store.records import EventData, RoundData, RunData, RunHead
from ssdlab.targets.members import StatReading, btrfs_sector
from tests.support.fakesys import VIRTUAL, FakeSys
from tests.support.records import doc

KIB = 1024
MIB = 1024 * KIB

JOB_FILE = """[global]
filename=/mnt/t/ssdlab.test
direct=1

[latency_bs4096_r100]
stonewall
rw=randread
bs=4096

[latency_bs512_r100]
stonewall
rw=randread
bs=512

[latency_bs512_r0]
stonewall
rw=randwrite
bs=512
"""


def _direction(io_bytes: int, bs: int) -> dict[str, Any]:
    ios = io_bytes // bs
    return {"io_bytes": io_bytes, "io_kbytes": io_bytes // KIB, "bw_bytes": io_bytes,
            "bw": io_bytes // KIB, "iops": float(ios), "runtime": 1000 if ios else 0,
            "total_ios": ios,
            "slat_ns": {"min": 0, "max": 0, "mean": 100.0, "stddev": 0.0, "N": ios},
            "clat_ns": {"min": 1.0, "max": 9000.0, "mean": 3000.0, "stddev": 0.0, "N": ios},
            "lat_ns": {"min": 1.0, "max": 9100.0, "mean": 3100.0, "stddev": 0.0, "N": ios}}


def fio_output(jobs: dict[str, tuple[int, int, int]], direct: str = "1") -> str:
    """fio's JSON of ``jobs``: name -> (read bytes, write bytes, block size)."""
    docs = [{"jobname": name, "groupid": n, "error": 0,
             "job options": {"bs": str(bs), "numjobs": "1", "iodepth": "1"},
             "read": _direction(r, bs), "write": _direction(w, bs), "trim": _direction(0, bs),
             "job_runtime": 1000, "usr_cpu": 1.0, "sys_cpu": 2.0}
            for n, (name, (r, w, bs)) in enumerate(jobs.items())]
    return json.dumps({"fio version": "fio-3.33",
                       "global options": {"ioengine": "libaio", "direct": direct},
                       "jobs": docs})


def stat(read_bytes: int, write_bytes: int) -> str:
    """A /sys/block/X/stat line with these bytes read and written."""
    return (f"{read_bytes // 4096} 0 {read_bytes // 512} 5 {write_bytes // 4096} 0 "
            f"{write_bytes // 512} 5 0 10 10\n")


def reading(at: float, **devices: tuple[int, int]) -> StatReading:
    return StatReading(at, {name: stat(*moved) for name, moved in devices.items()})


# -- what the devices moved over each position ------------------------------------------------


def test_each_gate_position_gets_what_fio_and_the_devices_moved_in_it() -> None:
    output = parse_fio_output(fio_output({"latency_bs4096_r100": (40 * MIB, 0, 4096),
                                          "latency_bs512_r100": (30 * MIB, 0, 512),
                                          "latency_bs512_r0": (0, 5 * MIB, 512)}))
    # before; then right before each of the three positions; then after fio
    points = [(0, 0), (0, 0), (40 * MIB, 0), (40 * MIB + 64 * KIB, 0),
              (40 * MIB + 64 * KIB, 80 * MIB)]
    readings = [reading(float(n), loop4=p) for n, p in enumerate(points)]
    sample = Sample(readings[0], readings[-1],
                    opened=tuple((n, r) for n, r in enumerate(readings[1:4])))
    record = device_round(sample, 3, "round", output, JOB_FILE)
    assert record is not None and record.devices == ["loop4"]
    assert record.total == DeviceIO(
        ["latency_bs4096_r100", "latency_bs512_r100", "latency_bs512_r0"], 4.0,
        70 * MIB, 5 * MIB, 40 * MIB + 64 * KIB, 80 * MIB, (40 * MIB + 64 * KIB) // 4096,
        80 * MIB // 4096)
    assert [(c.cells, c.host_read_bytes, c.device_read_bytes, c.host_write_bytes,
             c.device_write_bytes) for c in record.cells] == [
        (["latency_bs4096_r100"], 40 * MIB, 40 * MIB, 0, 0),
        (["latency_bs512_r100"], 30 * MIB, 64 * KIB, 0, 0),
        (["latency_bs512_r0"], 0, 0, 5 * MIB, 80 * MIB)]
    assert record.message == (
        "devices loop4 over round 3: fio read 70 MiB, wrote 5.0 MiB; the devices below read "
        "40 MiB, wrote 80 MiB (3 cells apart)")
    stored = json.loads(json.dumps(record.to_json()))
    assert DeviceRound.from_json(stored, "t") == record and "last_round" not in stored
    # without the gate's readings (no gate, or one missing) the round is one stretch
    for opened in ((), sample.opened[:2]):
        alone = device_round(Sample(readings[0], readings[-1], opened=opened), 3, "round",
                             output, JOB_FILE)
        assert alone is not None and alone.cells == [] and alone.total == record.total
    # a counter that went backwards (a device made again) makes no record
    assert device_round(Sample(readings[-1], readings[0]), 3, "round", output) is None


def test_mib_reads_small_and_large_counts() -> None:
    assert (mib(0), mib(300 * KIB), mib(20 * KIB), mib(120 * MIB), mib(5 * MIB)) == (
        "0 MiB", "0.3 MiB", "0.020 MiB", "120 MiB", "5.0 MiB")


def test_the_gate_reads_before_it_releases_each_position(tmp_path: Path) -> None:
    seen: list[tuple[int, bool]] = []

    def on_open(number: int) -> None:
        seen.append((number, (tmp_path / f"go{number}").exists()))

    with Gate((1, 2), tmp_path, on_open=on_open) as gate:
        gate.said("r0")
        assert seen == []  # not every job is ready
        gate.said("r1")
        gate.said("r1")
        assert seen == [(0, False)] and gate.opened == 1
        gate.said("0")
        assert seen == [(0, False), (1, False)] and gate.opened == 2


def test_a_watcher_that_fails_never_stops_the_round(tmp_path: Path) -> None:
    def broken(number: int) -> None:
        raise OSError("gone")

    with Gate((1, 1), tmp_path, on_open=broken) as gate:
        gate.said("r0")
        gate.said("r1")
        gate.said("0")
        assert gate.opened == 2


def test_fio_runs_inside_watching_give_their_gate_the_watcher() -> None:
    if not namespace_works():
        pytest.skip("the gate needs root and unshare")

    def on_open(number: int) -> None:
        pass

    gates: list[Gate] = []
    with watching(on_open), gated(JOB_FILE, gates.append) as (_, cwd):
        assert cwd is not None and gates[0].on_open is on_open
    with gated(JOB_FILE, gates.append):
        assert gates[1].on_open is None
    assert gate_job(JOB_FILE, Path("/tmp/x")) is not None


# -- the verdict --------------------------------------------------------------------------------


def _cells() -> list[dict[str, Any]]:
    return [{"cell": name, "block_bytes": bs, "read_pct": read}
            for name, bs, read in (("latency_bs4096_r100", 4096, 100),
                                   ("latency_bs512_r100", 512, 100),
                                   ("latency_bs512_r0", 512, 0))]


def _run(moved: list[tuple[list[str], int, int, int, int]], *, direct: str = "1",
         target: dict[str, Any] | None = None, plan: dict[str, Any] | None = None,
         never_written: float | None = None, rounds: int = 2) -> RunData:
    """A latency test of ``rounds`` rounds; each round's devices event has ``moved``
    stretches: (cells, host read, host write, device read, device write)."""
    jobs = {"latency_bs4096_r100": (40 * MIB, 0, 4096), "latency_bs512_r100": (30 * MIB, 0, 512),
            "latency_bs512_r0": (0, 5 * MIB, 512)}
    stdout = fio_output(jobs, direct)
    stretches = [DeviceIO(cells, 1.0, hr, hw, dr, dw) for cells, hr, hw, dr, dw in moved]
    total = DeviceIO(list(jobs), 3.0, *(sum(getattr(s, k) for s in stretches) for k in (
        "host_read_bytes", "host_write_bytes", "device_read_bytes", "device_write_bytes")))
    events = [EventData("latency", EVENT_KIND, "", DeviceRound(
        n, "round", ["loop4"], total, stretches if len(stretches) > 1 else [], None,
        never_written).to_json(), 0.0) for n in range(1, rounds + 1)]
    test = records.TestData("latency", "complete", {}, {}, {"cells": _cells()}, [
        RoundData(n, "ok", {}, _cells(), 0.0, 1.0, JOB_FILE.replace("direct=1", f"direct={direct}"),
                  0, "", stdout)
        for n in range(1, rounds + 1)])
    return RunData("r1", 0.0, 1.0, "pts", "quick", True, "complete", "", "/mnt/t/ssdlab.test",
                   None, False, target or {"path": "/mnt/t/ssdlab.test", "kind": "file"}, {},
                   plan or {}, {}, [], [test], events)


APART = [(["latency_bs4096_r100"], 40 * MIB, 0, 40 * MIB, 0),
         (["latency_bs512_r100"], 30 * MIB, 0, 64 * KIB, 0),
         (["latency_bs512_r0"], 0, 5 * MIB, 0, 80 * MIB)]


def test_reads_the_devices_never_saw_are_memory_and_named_by_label() -> None:
    (checks,) = check_run(_run(APART), Stack())
    by = {c.cell: c for c in checks.cells}
    assert by["latency_bs512_r100"].memory == (
        "reads: fio read 60 MiB, the devices below read 0.1 MiB over 2 rounds: served from "
        "a cache above the devices")
    assert by["latency_bs4096_r100"].memory is None  # the devices read what fio read
    assert by["latency_bs512_r0"].memory is None  # writes reached them (and more)
    assert {c.cell: c.label for c in checks.cells} == {
        "latency_bs4096_r100": "4 KiB 100/0", "latency_bs512_r100": "0.5 KiB 100/0",
        "latency_bs512_r0": "0.5 KiB 0/100"}
    assert checks.cache.memory and checks.flagged
    assert checks.cache.message == (
        "measured memory, not the drive: reads of 0.5 KiB 100/0: fio read 60 MiB, the "
        "devices below read 0.1 MiB: served from a cache above the devices")
    assert checks.memory_cells == {"latency_bs512_r100"}
    assert [c.cell for c in checks.marked] == ["latency_bs512_r100"]
    assert footnotes(checks) == [
        "* 0.5 KiB 100/0: measured memory, not the drive: reads: fio read 60 MiB, the devices "
        "below read 0.1 MiB over 2 rounds: served from a cache above the devices"]  # Little's
    # law agreeing is no news beside it
    back = ConsistencyChecks.from_json(json.loads(json.dumps(checks.to_json())), "t")
    assert back == checks


def test_margins_the_accounting_cannot_cross() -> None:
    assert cons.far_below(30 * MIB, 14.9 * MIB) and not cons.far_below(30 * MIB, 15 * MIB)
    assert not cons.far_below(cons.MIN_JUDGED_BYTES - 1, 0)  # too little to judge
    # a mirror reads one copy: the devices read what fio read, never half of it
    (mirror,) = check_run(_run([(["latency_bs4096_r100"], 40 * MIB, 0, 40 * MIB, 0),
                                (["latency_bs512_r100"], 30 * MIB, 0, 30 * MIB, 0),
                                (["latency_bs512_r0"], 0, 5 * MIB, 0, 10 * MIB)]), Stack())
    assert not mirror.cache.memory and not mirror.marked


def test_writes_the_devices_never_got_are_memory_unless_the_suite_meant_it() -> None:
    deferred = [*APART[:1], (["latency_bs512_r100"], 30 * MIB, 0, 30 * MIB, 0),
                (["latency_bs512_r0"], 0, 5 * MIB, 0, 16 * KIB)]
    (buffered,) = check_run(_run(deferred, direct="0"), Stack())
    assert buffered.cache.message == (
        "measured memory, not the drive: the I/O is buffered (fio direct=0, through the page "
        "cache); writes of 0.5 KiB 0/100: fio wrote 10 MiB, the devices below wrote 0.031 "
        "MiB: held in the page cache (buffered I/O: fio direct=0)")
    assert buffered.memory_cells == {"latency_bs512_r0"}
    (designed,) = check_run(_run(deferred, direct="0", plan={"options": {"direct": False}}),
                            Stack())
    assert not designed.cache.memory and designed.cache.by_design
    assert designed.cache.message.startswith("cached by design: the I/O is buffered")
    assert "writes of 0.5 KiB 0/100: fio wrote 10 MiB" in designed.cache.message
    assert designed.memory_cells == frozenset()  # by design: no cell is marked for it


def test_direct_io_not_aligned_to_a_btrfs_sector_goes_through_the_page_cache() -> None:
    """Measured here (fio 3.33, Linux 6.18, btrfs RAID 1 of two loop devices, a file written
    in full): 512 B direct random reads moved 3 to 4.5 times their bytes on the devices
    (whole pages, cold cache), 512 B direct writes 16 times (read-modify-write of a page,
    mirrored); 4 KiB direct reads exactly their bytes. Neither is below fio's, so the rule
    is the plan's own: direct I/O not aligned to the sector is buffered."""
    cold = [(["latency_bs4096_r100"], 40 * MIB, 0, 40 * MIB, 0),
            (["latency_bs512_r100"], 30 * MIB, 0, 110 * MIB, 0),
            (["latency_bs512_r0"], 0, 5 * MIB, 40 * MIB, 80 * MIB)]
    (checks,) = check_run(_run(cold), Stack(btrfs_sector=4096))
    assert checks.memory_cells == {"latency_bs512_r100", "latency_bs512_r0"}
    by = {c.cell: c for c in checks.cells}
    assert by["latency_bs512_r0"].memory == (
        "through the page cache (btrfs falls back to buffered I/O for direct I/O not aligned "
        "to its 4 KiB sector) (fio read 0 MiB, wrote 10 MiB; the devices below read 80 MiB, "
        "wrote 160 MiB over 2 rounds)")
    assert checks.cache.message == (
        "measured memory, not the drive: 0.5 KiB 0/100, 0.5 KiB 100/0: through the page "
        "cache (btrfs falls back to buffered I/O for direct I/O not aligned to its 4 KiB "
        "sector); fio read 60 MiB, wrote 10 MiB; the devices below read 300 MiB, wrote "
        "160 MiB")
    # warm: the devices read almost nothing; the reason is still the fallback
    (warm,) = check_run(_run(APART), Stack(btrfs_sector=4096))
    assert {c.cell: c.memory for c in warm.cells}["latency_bs512_r100"] == (
        "reads: fio read 60 MiB, the devices below read 0.1 MiB over 2 rounds: served from "
        "the page cache (btrfs falls back to buffered I/O for direct I/O not aligned to its "
        "4 KiB sector)")
    # a file system whose sector the cells are aligned to, or not btrfs: no rule
    assert not check_run(_run(cold), Stack(btrfs_sector=512))[0].cache.memory
    assert not check_run(_run(cold), Stack())[0].cache.memory
    assert cons.misaligned([512], 4096) and not cons.misaligned([4096, 8192], 4096)


def test_reads_of_space_never_written_say_so() -> None:
    """A test file is allocated in full (posix_fallocate): before a write reaches a range,
    btrfs and ext4 read it as zeros without reading the drive (measured: 4 KiB direct reads
    of a fresh file on btrfs RAID 1 at 1,589 MiB/s, the devices read nothing)."""
    fresh = [(["latency_bs4096_r100"], 40 * MIB, 0, 0, 0),
             (["latency_bs512_r100"], 30 * MIB, 0, 30 * MIB, 0),
             (["latency_bs512_r0"], 0, 5 * MIB, 0, 10 * MIB)]
    (checks,) = check_run(_run(fresh, never_written=1.0), Stack())
    assert checks.cache.message == (
        "measured memory, not the drive: reads of 4 KiB 100/0: fio read 80 MiB, the devices "
        "below read 0 MiB: read as zeros without the drive: up to 100% of the test file had "
        "never been written (allocated space no write had reached)")
    (written,) = check_run(_run(fresh, never_written=0.0), Stack())
    assert written.cache.message.endswith("served from a cache above the devices")


def test_cells_a_round_did_not_tell_apart_are_judged_together_and_named() -> None:
    together = [(["latency_bs4096_r100", "latency_bs512_r100", "latency_bs512_r0"],
                 70 * MIB, 5 * MIB, 1 * MIB, 10 * MIB)]
    (checks,) = check_run(_run(together), Stack())
    assert checks.cache.message == (
        "measured memory, not the drive: reads of 0.5 KiB 0/100, 0.5 KiB 100/0, 4 KiB 100/0: "
        "fio read 140 MiB, the devices below read 2.0 MiB: served from a cache above the "
        "devices")
    assert checks.memory_cells == {"latency_bs4096_r100", "latency_bs512_r100",
                                   "latency_bs512_r0"}


def test_the_views_mark_memory_cells_and_name_them_by_label() -> None:
    run = _run(APART)
    (checks,) = check_run(run, Stack())
    run = dataclasses.replace(run, events=[
        *run.events, EventData("latency", CHECKS_KIND, checks.message, checks.to_json(), 1.0)])
    test = run.tests[0]
    assert view.memory_cells(run, test) == {"latency_bs512_r100"}
    assert view.cell_mark(_cells()[1], view.memory_cells(run, test)) == "*"
    assert view.cell_mark(_cells()[0], view.memory_cells(run, test)) == ""
    text = render_run(run)
    assert "WARNING: measured memory, not the drive: reads of 0.5 KiB 100/0" in text
    assert "  * 0.5 KiB 100/0: measured memory, not the drive: reads: fio read 60 MiB" in text
    assert "latency_bs" not in text
    marked = run_view(run, now=2.0)["tests"][0]["checks"]["marked"]
    assert [(m["cell"], m["memory"]) for m in marked] == [("0.5 KiB 100/0", True)]
    assert lines([checks])[1].startswith("latency: 0.5 KiB 100/0: measured memory")


def test_a_matrix_levels_footnotes_name_cells_by_test_and_label() -> None:
    """issue 30: "latency: latency_bs4096_r100: round 1: ..." where every table shows
    "latency: 4 KiB 100/0"."""
    child = _run(APART)
    (checks,) = check_run(child, Stack())
    child = dataclasses.replace(child, events=[
        *child.events, EventData("latency", CHECKS_KIND, checks.message, checks.to_json(), 1.0)])
    level = records.TestData("raid1", "complete", {}, {}, {"child_run": "r1"}, [])
    matrix = RunData("m1", 0.0, 1.0, "matrix", "quick", True, "complete", "", "/dev/loop4",
                     None, False, {"path": "/dev/loop4", "kind": "block"}, {}, {}, {}, [],
                     [level], [])
    (merged,) = check_run(matrix, Stack(), lambda run_id: child)
    assert [c.name for c in merged.marked] == ["latency: 0.5 KiB 100/0"]
    assert footnotes(merged)[0].startswith("* latency: 0.5 KiB 100/0: measured memory")
    assert all("latency_bs" not in line for line in lines([merged]))
    # checks stored before they kept labels still read, named by their ids
    old = CellCheck("latency_bs512_r100", "total", 1, "round 1: submission blocks")
    assert footnotes(ConsistencyChecks("t", 1, {}, [old], CacheCheck())) == [
        "* latency_bs512_r100: round 1: submission blocks"]
    assert "label" not in old.to_json() and "memory" not in old.to_json()


# -- which targets are sampled -----------------------------------------------------------------


def test_a_plain_drive_stores_devices_events_and_no_member_figures(tmp_path: Path) -> None:
    fake = FakeSys(tmp_path)
    fake.disk("loop0", "7:0", parent=VIRTUAL)
    fake.write("loop0", "stat", stat(0, 0))
    sampler = MemberSampler(["loop0"], sysfs=fake.sys, figures=False)
    store = Store.open(tmp_path / "s.sqlite")
    run_id = store.new_run(RunHead("pts", "quick", True, {}, {}, doc(), {}, []))
    output = fio_output({"latency_bs4096_r100": (8 * MIB, 0, 4096)})

    def measured() -> str:
        fake.write("loop0", "stat", stat(8 * MIB, 0))
        return output

    _, sample = sampler.sample(measured)
    assert sample is not None and sample.opened == ()
    assert sampler.store(store, run_id, "latency", sample, 1, "round",
                         parse_fio_output(output), job_text=JOB_FILE) is None
    run = store.load(run_id)
    assert not [e for e in run.events if e.kind == MEMBERS_KIND]
    (devices,) = device_rounds(run.events)["latency"]
    assert devices.total.host_read_bytes == devices.total.device_read_bytes == 8 * MIB


def test_the_sector_of_the_btrfs_a_file_is_on(tmp_path: Path) -> None:
    fake = FakeSys(tmp_path)
    fake.disk("loop4", "7:4", parent=VIRTUAL)
    fake.mount("0:55", "/mnt/t", "btrfs", "/dev/loop4")
    fs = fake.sys / "fs" / "btrfs" / "abcd"
    (fs / "devices").mkdir(parents=True)
    (fs / "devices" / "loop4").symlink_to(fake.sys / "class" / "block" / "loop4")
    (fs / "sectorsize").write_text("4096\n")
    assert btrfs_sector("/mnt/t/ssdlab.test", sysfs=fake.sys, proc=fake.proc) == 4096
    fake.mount("7:4", "/mnt/e", "ext4", "/dev/loop4")
    assert btrfs_sector("/mnt/e/f", sysfs=fake.sys, proc=fake.proc) is None


def test_unaligned_cells_without_counts_of_their_own_are_named_without_figures() -> None:
    """No gate (the cells of a round together), or no devices read (another host's
    target): the btrfs rule still names the unaligned cells, with no figures of theirs."""
    together = [(["latency_bs4096_r100", "latency_bs512_r100", "latency_bs512_r0"],
                 70 * MIB, 5 * MIB, 140 * MIB, 80 * MIB)]
    for run in (_run(together), _run([], rounds=2)):
        (checks,) = check_run(run, Stack(btrfs_sector=4096))
        assert checks.memory_cells == {"latency_bs512_r100", "latency_bs512_r0"}
        assert checks.cache.message == (
            "measured memory, not the drive: 0.5 KiB 0/100, 0.5 KiB 100/0: through the page "
            "cache (btrfs falls back to buffered I/O for direct I/O not aligned to its 4 KiB "
            "sector)")
        assert {c.cell: c.memory for c in checks.cells}["latency_bs512_r0"] == (
            "through the page cache (btrfs falls back to buffered I/O for direct I/O not "
            "aligned to its 4 KiB sector)")
