"""Every member, every round (issue 15 item 3) with real fio through the command line: a
btrfs RAID 1 of two loop devices mounted with nodatacow, a quick CrystalDiskMark-like run
on an ssdlab test file there. Every measured round has a ``members`` event naming both
loop devices; the rounds that write cost 2 member writes per host write (a mirror, within
15 %, the issue's bound: 4 KiB writes counted in I/Os, every write in bytes, since the
block layer splits a 1 MiB write into several member I/Os); ``ssdlab show`` prints the
members line and the report has the members page."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from ssdlab.plan.member_rounds import member_rounds
from ssdlab.store.db import Store
from tests.conftest import LoopFactory
from tests.support.browser import require_tool
from tests.support.btrfs import make_btrfs
from tests.support.cli import ssdlab_in_process

pytestmark = [pytest.mark.root, pytest.mark.fio]

MIB = 1024 * 1024


def test_every_round_of_a_real_run_has_its_members(loop_device: LoopFactory,
                                                   shm_dir: Path) -> None:
    require_tool("mkfs.btrfs", "btrfs-progs")
    loops = [loop_device(320 * MIB) for _ in range(2)]
    names = sorted(Path(loop).name for loop in loops)
    mount = shm_dir / "mnt"
    make_btrfs(loops, "raid1", mount)
    store = shm_dir / "results.sqlite"
    started = time.monotonic()
    done = ssdlab_in_process(
        "run", "cdm", "--target", str(mount / "ssdlab.test"), "--profile", "quick",
        "--modes", "read,write", "--measure-seconds", "0.3", "--store", str(store))
    print(f"cdm on btrfs raid1: {time.monotonic() - started:.1f} s")
    assert done.returncode == 0, done.stdout + done.stderr
    match = re.search(r"^run (\d{8}-\d{6}-\w{4}) complete", done.stdout, re.M)
    assert match, done.stdout
    run_id = match.group(1)
    with Store.open(store) as opened:
        run = opened.load(run_id)
    test = run.test("cdm")
    rounds = {r.round_no: r for r in member_rounds(run.events)["cdm"]}
    assert sorted(rounds) == [r.round_no for r in test.rounds] and len(rounds) == 8
    writes = 0
    for stored in test.rounds:
        r = rounds[stored.round_no]
        assert [m.name for m in r.members] == names
        cell = stored.cells[0]
        print(f"round {r.round_no} {cell['mode']} {r.phase}: host {r.host_reads} reads "
              f"{r.host_writes} writes; members {[(m.reads, m.writes) for m in r.members]}; "
              f"penalty {r.write_penalty} bytes {r.byte_penalty}; {r.verdict}")
        if cell["mode"] == "read":
            assert r.host_writes == 0 and r.write_penalty is None
            assert sum(m.reads for m in r.members) >= r.host_reads * 0.95
            continue
        writes += 1
        assert r.host_writes > 0 and r.byte_penalty is not None
        assert abs(r.byte_penalty - 2.0) <= 0.3, r.message
        assert all(m.write_bytes >= r.host_write_bytes * 0.95 for m in r.members)
        if r.small_writes:  # 4 KiB: one member write per host write on each mirror
            assert r.write_penalty is not None and abs(r.write_penalty - 2.0) <= 0.3, r.message
    assert writes == 4
    shown = ssdlab_in_process("show", run_id, "--store", str(store))
    assert shown.returncode == 0
    line = next(s for s in shown.stdout.splitlines() if s.startswith("  members "))
    print(line)
    assert line.startswith(f"  members {', '.join(names)}: write penalty ")
    assert "rounds of small writes" in line
    out = shm_dir / "report"
    report = ssdlab_in_process("report", run_id, "-o", str(out), "--no-pdf",
                               "--store", str(store))
    assert report.returncode == 0, report.stderr
    html = (out / "report.html").read_text()
    assert "<h2>Members: " in html and "<h3>Write penalty</h3>" in html
    assert "IOPS per member (read + write)" in html and all(n in html for n in names)


def test_a_warm_up_is_not_counted_against_the_measured_writes(loop_device: LoopFactory,
                                                              shm_dir: Path) -> None:
    """issue 30: a fio run with a warm-up (ramp_time) counted its I/Os in the members'
    counters but not in fio's, so the peak finder's 0.5 s ramp + 1 s probe showed a mirror
    at 3 member writes per host write, not 2. Read from the first tick after the warm-up,
    every round that writes is the mirror's 2 (within 15 %, the issue's bound). The probes
    are 3 s after a 1 s warm-up (counted, it would show 2.67): on a loaded host where a
    period starts and ends is known to a few tenths of a second (fio's start-up, its exit,
    the 0.25 s ticks), which a 1 s probe cannot keep within 15 %."""
    require_tool("mkfs.btrfs", "btrfs-progs")
    loops = [loop_device(320 * MIB) for _ in range(2)]
    mount = shm_dir / "mnt"
    make_btrfs(loops, "raid1", mount)
    store = shm_dir / "results.sqlite"
    done = ssdlab_in_process(
        "run", "peak", "--target", str(mount / "ssdlab.test"), "--size", "128MiB",
        "--profile", "quick", "--workloads", "rnd4k_write", "--engines", "io_uring",
        "--max-threads", "2", "--max-qd", "4", "--max-probes", "3", "--pin", "none",
        "--ramp-seconds", "1", "--probe-seconds", "3",
        "--store", str(store))
    assert done.returncode == 0, done.stdout + done.stderr
    run_id = re.search(r"^run (\S+) complete", done.stdout, re.M)
    assert run_id, done.stdout
    with Store.open(store) as opened:
        run = opened.load(run_id.group(1))
    rounds = member_rounds(run.events)["rnd4k_write"]
    assert len(rounds) == len(run.test("rnd4k_write").rounds) >= 3
    for r in rounds:
        print(r.message, f"members {r.seconds:.2f} s, fio {r.host_seconds} s")
        assert r.host_seconds is not None and 0 < r.seconds < 3.5  # after the ramp only
        assert r.write_penalty is not None, r.message
        # the first round's writes are the first into the file's preallocated extents, and
        # btrfs writes (mirrored) metadata to mark them written: it may honestly be more
        assert r.write_penalty >= 1.7 and (r is rounds[0] or r.write_penalty <= 2.3), r.message
    shown = ssdlab_in_process("show", run_id.group(1), "--store", str(store))
    line = next(s for s in shown.stdout.splitlines() if s.startswith("  members "))
    print(line)
    median = re.search(r"write penalty (\d+\.\d+) \(median of \d+ rounds of small writes\)",
                       line)
    assert median and abs(float(median.group(1)) - 2.0) <= 0.3, line
