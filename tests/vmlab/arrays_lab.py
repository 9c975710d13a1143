"""What the array tests of the VM lab share (md and ZFS, test_arrays_real.py and
test_slow_member_real.py): the guest's four members, the quick 4 KiB random-write PTS run
the matrices measure with, the check that nothing is left on the members, and a matrix
run with its record."""

from __future__ import annotations

import json
import re
import shlex
from typing import Any

from tests.support.vmlab import Guest

MEMBERS = [f"/dev/nvme{i}n1" for i in range(4)]
#: the smallest PTS run that measures 4 KiB random writes: one cell, 5 rounds of 1 s
QUICK_WRITES = ("--profile quick --tests iops --block-sizes 4 --mixes 0/100 "
                "--round-seconds 1 --max-rounds 5 --no-precondition")
#: ZFS's ARC in the guest (bytes): the guest has 1 GiB, and reads of old volblocks
#: should not depend on what else the ARC holds
ZFS_ARC_MAX = 128 << 20


def limit_arc(guest: Guest) -> None:
    """Load ZFS and limit its ARC (ssdlab loads the module itself where it is not; the
    limit is a parameter of the loaded module)."""
    guest.run(f"modprobe zfs && echo {ZFS_ARC_MAX} > /sys/module/zfs/parameters/zfs_arc_max")


def assert_blank(guest: Guest) -> None:
    """No md array or ZFS pool; on no member an md superblock, a ZFS label (on the disk
    or the partition 1 ZFS makes on a whole disk) or any signature; no state file, no
    ZFS mount."""
    assert not re.search(r"^md\d+ :", guest.run("cat /proc/mdstat"), re.M)
    if guest.ssh("test -e /sys/module/zfs").returncode == 0:
        assert guest.run("zpool list -H -o name 2>&1").strip() in ("", "no pools available")
        assert guest.run("findmnt -n -t zfs || true").strip() == ""
    for member in MEMBERS:
        examine = guest.ssh(f"mdadm --examine {member}")
        assert examine.returncode != 0
        assert "No md superblock detected" in examine.stderr, examine.stderr
        assert guest.run(f"ls {member}p* 2>/dev/null || true").strip() == ""  # no partition
        labels = guest.ssh(f"zdb -l {member}")  # no ZFS label anywhere on the disk
        assert labels.returncode != 0 and "failed to unpack label 3" in labels.stdout, labels
        probe = guest.ssh(f"blkid -p {member}")
        assert probe.returncode == 2 and not probe.stdout.strip(), probe.stdout  # nothing
    assert guest.run("ls /var/lib/ssdlab/arrays/*.json 2>/dev/null || true").strip() == ""


def export(guest: Guest, store: str, run_id: str) -> dict[str, Any]:
    """A run's record, as ``ssdlab export --format json`` gives it in the guest."""
    record: dict[str, Any] = json.loads(
        guest.run(f"SSDLAB_STORE={store} ssdlab export {run_id} --format json"))
    return record


def run_matrix(guest: Guest, levels: str, store: str, suite_options: str = QUICK_WRITES,
               backend: str = "md") -> dict[str, dict[str, Any]]:
    """``ssdlab run matrix`` of ``levels`` on the four drives with the quick 4 KiB
    random-write PTS run; each level's result (the run complete), by level (raid0 ...)."""
    done = guest.ssh(
        f"SSDLAB_STORE={store} ssdlab run matrix --members {','.join(MEMBERS)} "
        f"--backend {backend} --levels {levels} --suite pts "
        f"--suite-options {shlex.quote(suite_options)} --member-check-seconds 0 "
        "--destroy-data", timeout=1800)
    out = done.stdout
    assert done.returncode == 0, f"{out[-4000:]}\n{done.stderr[-1000:]}"  # what failed
    found = re.search(r"matrix (\S+): ", out)
    assert found, out
    record = export(guest, store, found[1])
    assert record["run"]["status"] == "complete", record["run"]
    return {t["name"]: t["result"] for t in record["tests"]}
