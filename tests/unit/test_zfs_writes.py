"""What ZFS writes per small host write (issue 32: measured in the VM lab,
tests/vmlab/test_arrays_real.py), the pool's own count from `zpool iostat`, and where
the members of a ZFS array are found: neither a zvol nor a dataset shows them in sysfs."""

from __future__ import annotations

import pytest

from ssdlab.analysis.member_rounds import raidz_alloc_bytes, zfs_small_write
from ssdlab.plan.array import plan_array
from ssdlab.plan.matrix import LevelResult
from ssdlab.report.matrix_pages import zfs_figure
from ssdlab.run.member_rounds import zfs_members
from ssdlab.run.zfs import counts_record, level_figures
from ssdlab.targets.array_status import parse_zpool_iostat


@pytest.mark.parametrize(("level", "block", "written", "writes"), [
    ("raid0", 16384, 16384, 1),  # the 16 KiB volblock rewritten whole, once
    ("raid1", 16384, 4 * 16384, 4),  # on every member of the four-way mirror
    ("raid10", 16384, 2 * 16384, 2),  # on both members of one pair
    ("raid5", 16384, 6 * 4096, 4),  # 4 data sectors over 3 columns: 2 rows, 2 parity
    ("raid6", 16384, 9 * 4096, 4),  # 4 data, 4 parity, 1 of padding to a multiple of 3
    ("raid5", 4096, 2 * 4096, 2),  # one data sector and its parity
    ("raid6", 4096, 3 * 4096, 3),
    ("raid0", 4096, 4096, 1),
])
def test_what_zfs_writes_for_a_4k_write_by_the_docs(level: str, block: int, written: int,
                                                     writes: int) -> None:
    w = zfs_small_write(level, 4, block)
    assert (w.write_bytes, w.write_ios, w.read_bytes) == (written, writes, block)
    assert w.bytes_per_host_byte == written / 4096
    assert w.to_dict()["why"] == w.why and "volblock" in w.why


def test_raidz_allocates_parity_per_row_and_pads_to_parity_plus_one() -> None:
    assert raidz_alloc_bytes(128 * 1024, 4, 1) == 44 * 4096  # 32 + 11 parity, padded
    assert raidz_alloc_bytes(128 * 1024, 4, 2) == 66 * 4096  # 32 + 32, padded to 66
    assert raidz_alloc_bytes(16384, 6, 2) == 6 * 4096  # one row: 4 + 2


#: `zpool iostat -Hpv -y tp 1`, two reports of a raidz1 of four (ZFS 2.1.11 in the VM lab)
IOSTAT = "".join(
    f"{name}\t1982464\t1004650496\t{r}\t{w}\t{rb}\t{wb}\n"
    for r, w, rb, wb, names in ((0, 30, 0, 305569, ("tp", "raidz1-0")),
                                (0, 7, 0, 75118, ("nvme0n1", "nvme1n1")),
                                (0, 20, 0, 100000, ("tp", "raidz1-0")),
                                (0, 5, 0, 25000, ("nvme0n1", "nvme1n1")))
    for name in names)


def test_zpool_iostat_reports_sum_to_counts() -> None:
    rows = {io.name: io for io in parse_zpool_iostat(IOSTAT + "\n\nnot a row\n")}
    assert list(rows) == ["tp", "raidz1-0", "nvme0n1", "nvme1n1"]
    assert (rows["tp"].writes, rows["tp"].write_bytes) == (50, 405569)
    assert rows["nvme1n1"].to_dict() == {"name": "nvme1n1", "reads": 0, "writes": 12,
                                         "read_bytes": 0, "write_bytes": 100118}


def _stat(reads: int, writes: int, read_sectors: int, write_sectors: int) -> str:
    return f"{reads} 0 {read_sectors} 5 {writes} 0 {write_sectors} 7 0 9 12 0 0 0 0 0 0"


def test_a_levels_counts_side_by_side() -> None:
    plan = plan_array("zfs", "5", [f"/dev/nvme{i}n1" for i in range(4)], name="tp",
                      member_bytes=1 << 28, mount_dir="/m")
    before = {"zd0": _stat(0, 0, 0, 0), **{f"nvme{i}n1": _stat(0, 0, 0, 0) for i in range(4)}}
    after = {"zd0": _stat(0, 100, 0, 800),  # 100 host writes of 4 KiB
             **{f"nvme{i}n1": _stat(0, 40, 0, 1200) for i in range(4)}}  # 600 KiB each
    record = counts_record(plan, "zd0", before, after, 12.5, IOSTAT)
    assert record["host"]["write_bytes"] == 409600
    assert record["member_bytes_per_host_byte"] == 4 * 1200 * 512 / 409600  # 6.0
    assert record["member_writes_per_host_write"] == 1.6
    assert record["pool_write_bytes"] == 405569 and record["member_write_bytes"] == 2457600
    assert record["pool"]["raidz1-0"]["writes"] == 50


def test_a_zfs_arrays_members_come_from_its_record() -> None:
    array = {"backend": "zfs", "members": [{"name": "nvme0n1"}, {"name": "nvme1n1"}, {}]}
    assert zfs_members({"array": array}) == ["nvme0n1", "nvme1n1"]
    assert zfs_members({"array": {**array, "backend": "md"}}) == []
    assert zfs_members({}) == []


def test_the_slow_member_is_judged_over_the_whole_level() -> None:
    """A round's members do not hold its own host writes under ZFS, and a round of merged
    writes may have too few to judge: the level's counts name the member that waits."""
    plan = plan_array("zfs", "5", [f"/dev/nvme{i}n1" for i in range(4)], name="tp",
                      member_bytes=1 << 28, mount_dir="/m")
    zero = _stat(0, 0, 0, 0)
    before = {"zd0": zero, **{f"nvme{i}n1": zero for i in range(4)}}

    def member(wait_ms: int) -> str:
        return f"0 0 0 0 1000 0 16000 {wait_ms} 0 900 {wait_ms} 0 0 0 0 0 0"

    after = {"zd0": _stat(0, 500, 0, 4000), "nvme0n1": member(1000), "nvme1n1": member(1100),
             "nvme2n1": member(40000), "nvme3n1": member(900)}
    record = counts_record(plan, "zd0", before, after, 30.0, "")
    assert record["slow_member"] == "nvme2n1", record["verdict"]
    assert record["pool_write_bytes"] is None  # no report of zpool iostat: not counted
    even = {**after, "nvme2n1": member(1000)}
    assert counts_record(plan, "zd0", before, even, 30.0, "")["slow_member"] is None
    # host noise: a second member slow too, and the first not clear of it: none named
    noisy = {**after, "nvme2n1": member(3300), "nvme1n1": member(3100)}
    record = counts_record(plan, "zd0", before, noisy, 30.0, "")
    assert record["slow_member"] is None
    assert record["verdict"].startswith("no slow member stands clear: nvme2n1 "), record


def test_a_zfs_level_shows_its_figure_beside_the_docs() -> None:
    plan = plan_array("zfs", "6", [f"/dev/nvme{i}n1" for i in range(4)], name="tp",
                      member_bytes=1 << 28, mount_dir="/m")
    counts = {"host": {"writes": 100, "write_bytes": 409600},
              "member_bytes_per_host_byte": 9.49,
              "member_writes_per_host_write": 1.51, "pool_write_bytes": 1_000_000,
              "member_write_bytes": 1_100_000}
    figures = level_figures(plan, {"zfs": {"volblocksize": 16384, "ashift": 12}}, counts)
    assert figures is not None and figures["layout"] == "raidz2"
    assert figures["theory"]["bytes_per_host_byte"] == 9.0
    result = LevelResult("raid6", "zfs", level_name="raidz2", zfs=figures)
    assert result.name == "raidz2"
    text = zfs_figure(result)
    assert text is not None and text.startswith(
        "9.49 member bytes per host byte written (the docs: 9: each 4 KiB write rewrites a "
        "16 KiB volblock: 4 data and 4 parity sectors")
    assert text.endswith("1.51 member writes per host write; bytes written by the pool's "
                         "own count (zpool iostat) 1,000,000, by the members' /sys/block "
                         "1,100,000")
    assert level_figures(plan_array("md", "6", list(plan.members), name="m", member_bytes=1 << 28,
                                    mount_dir="/m"), {}, {}) is None
    assert zfs_figure(LevelResult("raid6", "md")) is None
