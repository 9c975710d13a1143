"""What a small random write costs md (the VM lab measured it: tests/vmlab/test_arrays_real.py):
RAID 1 is an n-way mirror, and RAID 5/6 take the write method md's rule picks, which the
member reads per host write show where the two methods differ."""

from __future__ import annotations

from pathlib import Path

import pytest

from ssdlab.analysis.member_rounds import (
    RMW_DISABLED,
    RMW_PREFERRED,
    md_small_write,
    method_from_reads,
    textbook_penalty,
)
from ssdlab.run.array import md_attributes
from tests.support.fakesys import VIRTUAL, FakeSys


def test_raid1_of_n_members_is_an_n_way_mirror_on_md_and_zfs_not_on_btrfs() -> None:
    assert textbook_penalty("raid1", "md", 4) == 4.0
    assert textbook_penalty("raid1", "zfs", 3) == 3.0
    assert textbook_penalty("raid1", "btrfs", 4) == 2.0
    assert textbook_penalty("raid1", None, None) == 2.0
    assert textbook_penalty("raid10", "md", 4) == 2.0


@pytest.mark.parametrize(("level", "members", "method", "reads", "writes"), [
    ("raid0", 4, None, 0, 1), ("raid1", 4, None, 0, 4), ("raid10", 4, None, 0, 2),
    # four drives: RAID 5's methods tie at 2 reads (md reconstructs), RAID 6 reconstructs
    # with 1 read against 3
    ("raid5", 4, "rcw", 2, 2), ("raid6", 4, "rcw", 1, 3),
    ("raid5", 3, "rcw", 1, 2), ("raid5", 6, "rmw", 2, 2),
    ("raid6", 6, "rcw", 3, 3), ("raid6", 8, "rmw", 3, 3),
])
def test_md_takes_the_method_that_reads_fewer_blocks(level: str, members: int,
                                                     method: str | None, reads: float,
                                                     writes: float) -> None:
    small = md_small_write(level, members)
    assert small is not None
    assert (small.method, small.reads, small.writes) == (method, reads, writes)
    assert small.penalty == reads + writes


def test_the_rmw_level_decides_a_tie_or_forbids_rmw() -> None:
    preferred = md_small_write("raid5", 4, RMW_PREFERRED)
    assert preferred is not None and preferred.method == "rmw" and preferred.penalty == 4
    never = md_small_write("raid6", 8, RMW_DISABLED)
    assert never is not None and never.method == "rcw" and never.penalty == 8
    six = md_small_write("raid6", 4)
    assert six is not None and (six.rmw, six.rcw) == (6.0, 4.0)
    assert "reconstruct-write" in six.why and "rmw_level 1" in six.why


def test_the_reads_name_the_method_where_the_methods_differ() -> None:
    six = md_small_write("raid6", 4)
    assert six is not None
    assert method_from_reads(six, 1.01)[0] == "rcw"
    method, how = method_from_reads(six, 2.95)
    assert method == "rmw" and "not the rcw md's rule says" in how
    five = md_small_write("raid5", 4)
    assert five is not None
    method, how = method_from_reads(five, 1.99)
    assert method == "rcw" and "cannot tell them apart" in how
    zero = md_small_write("raid0", 4)
    assert zero is not None and method_from_reads(zero, 0.0) == (None, "")


def test_an_md_arrays_own_attributes_are_read(tmp_path: Path) -> None:
    fake = FakeSys(tmp_path)
    fake.disk("md127", "9:127", parent=VIRTUAL)
    for attr, value in (("rmw_level", "1"), ("stripe_cache_size", "256"),
                        ("sync_action", "idle")):
        fake.write("md127", f"md/{attr}", f"{value}\n")
    assert md_attributes("md127", sysfs=fake.sys) == {
        "device": "md127", "rmw_level": 1, "stripe_cache_size": 256, "sync_action": "idle"}
