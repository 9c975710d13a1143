"""md for real (issue 32, build item 3): ssdlab builds md RAID 0, 1, 5, 6 and 10 on four
guest NVMe drives, sees them, tears them down and wipes the members; an array keeps its
name across a reboot of the guest; the matrix measures each level's member I/Os per host
4 KiB random write against what md does (RAID 1 on four drives is a four-way mirror; RAID
5 and 6 by the write method md took, named). One guest for the module; every test leaves
its drives blank."""

from __future__ import annotations

import json
import re
import shlex
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.vmlab import Drive, Guest, VmLab
from tests.vmlab.conftest import VMLAB_TEST_TIMEOUT_S

pytestmark = [pytest.mark.root, pytest.mark.vmlab, pytest.mark.timeout(VMLAB_TEST_TIMEOUT_S)]

MiB = 1 << 20
MEMBERS = [f"/dev/nvme{i}n1" for i in range(4)]
LEVELS = ("raid0", "raid1", "raid5", "raid6", "raid10")
#: the smallest PTS run that measures 4 KiB random writes: one cell, 5 rounds of 1 s
QUICK_WRITES = ("--profile quick --tests iops --block-sizes 4 --mixes 0/100 "
                "--round-seconds 1 --max-rounds 5 --no-precondition")
#: member I/Os per host 4 KiB random write that md costs on four drives: RAID 1 is a
#: four-way mirror (every member holds every block: 4, not a two-way mirror's 2); RAID 5
#: and 6 reconstruct (rcw): 2 reads + 2 writes, 1 read + 3 writes
EXPECTED = {"raid0": 1.0, "raid1": 4.0, "raid10": 2.0, "raid5": 4.0, "raid6": 4.0}
EXPECTED_READS = {"raid5": 2.0, "raid6": 1.0}
STORE = "/root/md-test.sqlite"
HOST_WRITES = 1000


@pytest.fixture(scope="module")
def guest(vmlab: VmLab) -> Iterator[Guest]:
    with vmlab.guest([Drive.scratch(256 * MiB)] * 4) as running:
        yield running


def assert_blank(guest: Guest) -> None:
    """No array, no md superblock, no signature on any member, no state file."""
    assert not re.search(r"^md\d+ :", guest.run("cat /proc/mdstat"), re.M)
    for member in MEMBERS:
        examine = guest.ssh(f"mdadm --examine {member}")
        assert examine.returncode != 0
        assert "No md superblock detected" in examine.stderr, examine.stderr
        probe = guest.ssh(f"blkid -p {member}")
        assert probe.returncode == 2 and not probe.stdout.strip(), probe.stdout  # nothing
    assert guest.run("ls /var/lib/ssdlab/arrays/*.json 2>/dev/null || true").strip() == ""


def md_of(guest: Guest, name: str) -> str:
    return guest.run(f"basename $(readlink -f /dev/md/{name})").strip()


def test_each_level_is_built_seen_and_torn_down_with_its_members_wiped(guest: Guest) -> None:
    members = " ".join(MEMBERS)
    for level in LEVELS:
        built = guest.run(f"ssdlab array create --backend md --level {level[4:]} {members} "
                          "--destroy-data")
        assert "target: /dev/md/ssdlab0" in built
        md = md_of(guest, "ssdlab0")
        if level != "raid0":  # no redundancy, nothing to sync
            # ssdlab waited for the initial resync (mdadm --wait): nothing runs, in sync
            assert guest.run(f"cat /sys/block/{md}/md/sync_action").strip() == "idle"
            assert guest.run(f"cat /sys/block/{md}/md/sync_completed").strip() == "none"
        assert guest.run(f"cat /sys/block/{md}/md/level").strip() == level
        assert guest.run(f"cat /sys/block/{md}/md/raid_disks").strip() == "4"
        # the array's own /sys/block/mdX/stat counts the host's I/Os, one for one
        before = guest.run(f"cat /sys/block/{md}/stat").split()
        job = json.loads(guest.run(
            f"fio --name=w --filename=/dev/md/ssdlab0 --rw=randwrite --bs=4k --direct=1 "
            f"--ioengine=libaio --iodepth=4 --size=64M --number_ios={HOST_WRITES} "
            "--randrepeat=0 --output-format=json"))["jobs"][0]["write"]
        after = guest.run(f"cat /sys/block/{md}/stat").split()
        assert job["total_ios"] == HOST_WRITES
        assert int(after[4]) - int(before[4]) == HOST_WRITES  # writes completed
        assert int(after[6]) - int(before[6]) == HOST_WRITES * 8  # 512-byte sectors
        status = guest.run("ssdlab array status")
        assert f"md {level} of 4 members" in status
        in_sync = "4 members" if level == "raid0" else "4 of 4 members in sync"
        assert f"{md} {level}: ok, {in_sync}" in status, status
        destroyed = guest.run("ssdlab array destroy ssdlab0")
        assert f"destroyed ssdlab0; members wiped: {', '.join(MEMBERS)}" in destroyed
        assert_blank(guest)


def test_an_array_keeps_its_name_across_a_reboot_and_is_torn_down_after_it(
        guest: Guest) -> None:
    guest.run(f"ssdlab array create --backend md --level 10 {' '.join(MEMBERS)} "
              "--destroy-data")
    serials = guest.run("for d in /dev/nvme?n1; do echo $d $(cat /sys/block/${d#/dev/}/"
                        "device/serial); done")
    guest.reboot()
    # the guest's udev assembles it again under its name (its homehost is the guest's)
    md = md_of(guest, "ssdlab0")
    assert guest.run(f"cat /sys/block/{md}/md/level").strip() == "raid10"
    status = guest.run("ssdlab array status ssdlab0")
    assert f"{md} raid10: ok, 4 of 4 members in sync" in status, status
    assert "kept until" in status  # an array of `array create` is no leftover after a boot
    after = guest.run("for d in /dev/nvme?n1; do echo $d $(cat /sys/block/${d#/dev/}/"
                      "device/serial); done")
    assert after == serials
    guest.run("ssdlab array destroy ssdlab0")
    assert_blank(guest)


def export(guest: Guest, store: str, run_id: str) -> dict[str, Any]:
    """A run's record, as ``ssdlab export --format json`` gives it in the guest."""
    record: dict[str, Any] = json.loads(
        guest.run(f"SSDLAB_STORE={store} ssdlab export {run_id} --format json"))
    return record


def run_matrix(guest: Guest, levels: str, store: str = STORE,
               suite_options: str = QUICK_WRITES) -> dict[str, dict[str, Any]]:
    """``ssdlab run matrix`` of md ``levels`` on the four drives with the quick 4 KiB
    random-write PTS run; each level's result (the run complete)."""
    out = guest.run(
        f"SSDLAB_STORE={store} ssdlab run matrix --members {','.join(MEMBERS)} --backend md "
        f"--levels {levels} --suite pts --suite-options {shlex.quote(suite_options)} "
        "--member-check-seconds 0 --destroy-data", timeout=1800)
    found = re.search(r"matrix (\S+): ", out)
    assert found, out
    record = export(guest, store, found[1])
    assert record["run"]["status"] == "complete", record["run"]
    return {t["name"]: t["result"] for t in record["tests"]}


def test_the_matrix_measures_what_md_writes_per_host_write(guest: Guest) -> None:
    results = run_matrix(guest, "0,1,5,6,10")
    assert set(results) == set(LEVELS)
    for level, result in results.items():
        assert result["child_status"] == "complete", (level, result)
        array = result["array"]
        assert isinstance(array, dict)
        if level != "raid0":
            assert array["md"]["sync_action"] == "idle"  # measured after the resync
        penalty = result["write_penalty"]
        assert isinstance(penalty, float)
        print(f"md {level}: {penalty:.3f} member I/Os per host write (expected "
              f"{EXPECTED[level]:g}), member reads per write {result.get('reads_per_write')}"
              f", method {result.get('write_method')}: {result.get('write_method_note')}",
              file=sys.stderr)
        assert abs(penalty / EXPECTED[level] - 1) <= 0.10, (level, penalty)
        assert result["textbook_penalty"] == EXPECTED[level]
        if level in EXPECTED_READS:
            # md chose reconstruct-write, and says so; its reads show it
            assert result["write_method"] == "rcw", result
            assert array["small_write"]["method"] == "rcw"
            reads = result["reads_per_write"]
            assert isinstance(reads, float)
            assert abs(reads / EXPECTED_READS[level] - 1) <= 0.10, (level, reads)
        else:
            assert "write_method" not in result
        assert result.get("slow_member") is None
        # the array's own /sys/block/mdX/stat, kept in each round: fio's writes, one for one
        child = export(guest, STORE, result["child_run"])
        rounds = [e["detail"] for e in child["events"] if e["kind"] == "members"]
        assert len(rounds) == 5
        for r in rounds:
            assert r["array"]["writes"] == r["host_writes"] > 0, (level, r)
            member_ios = sum(m["reads"] + m["writes"] for m in r["members"])
            own = (member_ios - r["array"]["reads"]) / r["array"]["writes"]
            assert abs(own / EXPECTED[level] - 1) <= 0.10, (level, own)
        # each member's own count of what it wrote (QEMU's NVMe SMART log), before and after
        assert sorted(w["member"] for w in result["written"]) == MEMBERS
        assert all(w["host_bytes"] > 0 for w in result["written"])
    assert_blank(guest)
