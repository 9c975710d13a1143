"""The hidden-style slow member (issue 32): four guest NVMe drives, each an ssdlab emulated
SSD on the host, one of them with a larger time scale (40: every latency of its model
multiplied). ssdlab's md matrix and its ZFS matrix in the guest (one guest for both) name
that member slow on every level, and only it: the product's verdict of each level (md: the
member slow in most of its rounds; ZFS: over the whole level, standing clear of the next)
is that member, and over the level its mean wait per I/O stands far above every other
member's. A single round may name another member under host noise (a ZFS round named
nvme1n1 at 3.1x at load 3.3): the record says it as an outlier, not the level's slow
member. Judged by ratios of the guest's own counters, never by a guest's speed.

The same guest shows first that a drive backed by an emulated SSD sees the guest's I/O
one to one (the lab's ground truth: its writes and trims in the emulator's counters)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import ssdlab
from tests.support.vmimage import mounts_under
from tests.support.vmlab import Drive, Guest, VmLab
from tests.vmlab.arrays_lab import (
    MEMBERS,
    QUICK_WRITES,
    assert_blank,
    export,
    limit_arc,
    run_matrix,
)
from tests.vmlab.conftest import VMLAB_TEST_TIMEOUT_S

pytestmark = [pytest.mark.root, pytest.mark.vmlab, pytest.mark.timeout(VMLAB_TEST_TIMEOUT_S)]

MiB = 1 << 20
#: the slow one: the third drive, /dev/nvme2n1 in the guest
SLOW = 2
#: every latency of its model 40 times: under md its mean wait per I/O came out 3.0-68x
#: its peers' median in each round (the verdict needs 1.5x). At 20 it was 2.4-16x, but a
#: host at load 7 starves QEMU of CPU, which slows every member alike and left two of
#: RAID 0's five rounds without a verdict
TIME_SCALE = "40"
#: rounds of 2 s: the slow member holds RAID 5 to a few hundred I/Os a second, and a
#: member needs 200 I/Os in a round to be judged
SLOW_WRITES = QUICK_WRITES.replace("--round-seconds 1", "--round-seconds 2")
SIZE = "128MiB"
#: over a whole level the slow member's mean wait per I/O is at least this many times
#: every other member's (it came out 3.0-68x its peers' median per md round, 4.9-8.2x
#: over a ZFS level; a verdict needs 1.5x, a whole ZFS level's 1.5x the next member's)
FAR_ABOVE = 2.0
LEVELS = "0,5,10"  # the NAS review's, the matrix's default
STORE = "/root/md-slow.sqlite"
#: ZFS: the stripe and raidz1 (the NAS review's RAID 0 and 5)
ZFS_LEVELS = {"raid0": "stripe", "raid5": "raidz1"}
ZFS_STORE = "/root/zfs-slow.sqlite"


@pytest.fixture(scope="module")
def guest(vmlab: VmLab) -> Iterator[Guest]:
    env = vmlab.emulator_env
    names = [f"slow{i}" for i in range(len(MEMBERS))]
    started = []
    try:
        for i, name in enumerate(names):
            scale = ["--time-scale", TIME_SCALE] if i == SLOW else []
            done = ssdlab("emulator", "start", "--name", name, "--size", SIZE, *scale, env=env)
            assert done.returncode == 0, done.stderr
            started.append(name)
        disks = [Path(env["SSDLAB_EMU_RUN_DIR"], name, "disk") for name in names]
        with vmlab.guest([Drive.backed_by(disk) for disk in disks]) as running:
            yield running
    finally:
        for name in started:
            stopped = ssdlab("emulator", "stop", "--name", name, env=env)
            assert stopped.returncode == 0, stopped.stderr
        assert not mounts_under(vmlab.dir)  # the stopped emulators left no mount


def _emulator_counters(mountpoint: Path) -> dict[str, int]:
    counters = json.loads((mountpoint / "stats").read_text())["counters"]
    assert isinstance(counters, dict)
    return counters


def test_a_drive_backed_by_the_emulated_ssd_sees_the_guests_writes_1_to_1(
        vmlab: VmLab, guest: Guest) -> None:
    """On the first member (time scale 1): 16 MiB of fio writes in the guest move the
    emulator's host_write_bytes by exactly 16 MiB and its write commands by fio's I/O
    count; a 4 MiB trim moves trimmed_bytes by 4 MiB. The drive is trimmed whole after."""
    mountpoint = Path(vmlab.emulator_env["SSDLAB_EMU_RUN_DIR"], "slow0")
    before = _emulator_counters(mountpoint)
    # queue depth 1: each 128 KiB write reaches the drive as one command
    out = guest.run(f"fio --name=w --filename={MEMBERS[0]} --rw=write --bs=128k --size=16M "
                    "--direct=1 --ioengine=libaio --iodepth=1 --output-format=json")
    job = json.loads(out)["jobs"][0]["write"]
    after = _emulator_counters(mountpoint)
    assert job["io_bytes"] == 16 * MiB
    assert after["host_write_bytes"] - before["host_write_bytes"] == 16 * MiB
    assert after["host_write_cmds"] - before["host_write_cmds"] == job["total_ios"]
    # a trim reaches it too (discard=unmap)
    guest.run(f"blkdiscard -o 0 -l 4M {MEMBERS[0]}")
    trimmed = _emulator_counters(mountpoint)
    assert trimmed["trimmed_bytes"] - after["trimmed_bytes"] == 4 * MiB
    assert trimmed["host_write_bytes"] == after["host_write_bytes"]
    guest.run(f"blkdiscard -f {MEMBERS[0]}")
    assert_blank(guest)


def mean_waits(ios: dict[str, list[int]]) -> dict[str, float]:
    """Each member's mean wait per I/O (ms) from its I/Os and waits summed over a level."""
    return {name: wait / count for name, (count, wait) in ios.items() if count}


def level_waits(result: dict[str, Any], rounds: list[dict[str, Any]],
                backend: str) -> dict[str, float]:
    """Each member's mean wait per I/O over the whole level: ZFS's counts over the level,
    md's rounds summed."""
    if backend == "zfs":
        return mean_waits({n: [m["reads"] + m["writes"], m["wait_ms"]]
                           for n, m in result["zfs"]["members"].items()})
    summed: dict[str, list[int]] = {}
    for r in rounds:
        for m in r["members"]:
            total = summed.setdefault(m["name"], [0, 0])
            total[0] += m["reads"] + m["writes"]
            total[1] += m["read_wait_ms"] + m["write_wait_ms"]
    return mean_waits(summed)


def assert_names_the_slow_member(guest: Guest, results: dict[str, Any], store: str,
                                 backend: str) -> None:
    """The product's verdict of each level names the slow member and no other; over the
    level it waits far longer than every other member (what its time scale guarantees);
    a round that named another member is recorded as an outlier, in a minority of the
    rounds (md), never as the level's."""
    slow = MEMBERS[SLOW].removeprefix("/dev/")
    for level, result in results.items():
        assert result["child_status"] == "complete", (level, result)
        assert result.get("slow_member") == slow, (level, result)
        if backend == "md":  # named in most rounds
            assert 2 * result["slow_rounds"] > result["member_rounds"], (level, result)
        else:  # ZFS: over the whole level (a round's members do not hold its writes)
            assert result["zfs"]["slow_member"] == slow, (level, result["zfs"]["verdict"])
            print(f"zfs {result['level_name']} over the level: {result['zfs']['verdict']}",
                  file=sys.stderr)
        child = export(guest, store, result["child_run"])
        rounds = [e for e in child["events"] if e["kind"] == "members"]
        named: dict[str, int] = {}
        for e in rounds:
            if member := e["detail"].get("slow_member"):
                named[member] = named.get(member, 0) + 1
        print(f"{backend} {result.get('level_name') or level}: "
              + "; ".join(e["detail"]["verdict"] for e in rounds), file=sys.stderr)
        # another member named in a round: an outlier in the record, not the level's
        others = {m: n for m, n in named.items() if m != slow}
        assert (result.get("slow_outliers") or {}) == others, (level, result, named)
        if backend == "md":
            assert named.get(slow, 0) == result["slow_rounds"], (level, named)
            assert all(2 * n < len(rounds) for n in others.values()), (level, named)
        # the model's guarantee, over the level: the slow member far above every other
        waits = level_waits(result, [e["detail"] for e in rounds], backend)
        print(f"{backend} {result.get('level_name') or level}: mean wait per I/O over the "
              f"level {', '.join(f'{n} {w:.2f} ms' for n, w in sorted(waits.items()))}",
              file=sys.stderr)
        assert sorted(waits) == [m.removeprefix("/dev/") for m in MEMBERS], waits
        assert all(waits[slow] >= FAR_ABOVE * w for n, w in waits.items() if n != slow), (
            level, waits)
    assert_blank(guest)


def test_the_md_matrix_names_the_slow_member_and_only_it(guest: Guest) -> None:
    results = run_matrix(guest, LEVELS, STORE, SLOW_WRITES)
    assert set(results) == {"raid0", "raid10", "raid5"}
    assert_names_the_slow_member(guest, results, STORE, "md")


def test_the_zfs_matrix_names_the_slow_member_and_only_it(guest: Guest) -> None:
    limit_arc(guest)
    results = run_matrix(guest, ",".join(lv[4:] for lv in ZFS_LEVELS), ZFS_STORE,
                         SLOW_WRITES, backend="zfs")
    assert {lv: r["level_name"] for lv, r in results.items()} == ZFS_LEVELS
    assert_names_the_slow_member(guest, results, ZFS_STORE, "zfs")
