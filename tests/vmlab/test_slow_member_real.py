"""The hidden-style slow member (issue 32): four guest NVMe drives, each an ssdlab emulated
SSD on the host, one of them with a larger time scale (40: every latency of its model
multiplied). ssdlab's md matrix and its ZFS matrix in the guest (one guest for both) name
that member slow on every level, and only it; the other three never. Judged by ratios of
the guest's own counters (mean wait per I/O against the peers'), never by a guest's
speed.

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


def assert_names_the_slow_member(guest: Guest, results: dict[str, Any], store: str,
                                 backend: str) -> None:
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
        # no other member in any round
        child = export(guest, store, result["child_run"])
        rounds = [e for e in child["events"] if e["kind"] == "members"]
        named = {e["detail"]["slow_member"] for e in rounds if e["detail"].get("slow_member")}
        print(f"{backend} {result.get('level_name') or level}: "
              + "; ".join(e["detail"]["verdict"] for e in rounds), file=sys.stderr)
        # md names it in rounds (above); ZFS's rounds may have too few I/Os to judge
        assert named == {slow} if backend == "md" else named <= {slow}, (level, named)
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
