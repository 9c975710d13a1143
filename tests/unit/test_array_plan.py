"""Array plans (issue 15): every command line md, ZFS and btrfs arrays are built and torn
down with, the target the suites run on, and the refusals before any device is looked at.
md and ZFS cannot run on this machine's kernel; their command lines are checked here."""

from __future__ import annotations

import pytest

from ssdlab.errors import UserError
from ssdlab.plan.array import (
    ArrayPlan,
    create_commands,
    destroy_commands,
    parse_level,
    plan_array,
    zfs_member_partition,
)

GIB = 1024**3
FOUR = ["/dev/sdb", "/dev/sdc", "/dev/sdd", "/dev/sde"]


def _plan(backend: str, level: str, members: list[str] = FOUR,
          chunk: int | None = None) -> ArrayPlan:
    return plan_array(backend, level, members, name="lab1", member_bytes=100 * GIB,
                      mount_dir="/run/ssdlab/arrays/lab1", chunk_bytes=chunk)


@pytest.mark.parametrize(("text", "level"), [("0", "raid0"), ("RAID 10", "raid10"),
                                             ("raid-5", "raid5"), ("Raid6", "raid6"),
                                             (" raid_1 ", "raid1")])
def test_levels_are_read_as_people_write_them(text: str, level: str) -> None:
    assert parse_level(text) == level


def test_md_raid10_commands() -> None:
    plan = _plan("md", "10", chunk=256 * 1024)
    assert create_commands(plan) == [
        ["mdadm", "--create", "/dev/md/lab1", "--run", "--metadata=1.2", "--level=10",
         "--raid-devices=4", "--chunk=256", *FOUR],
        ["mdadm", "--wait", "/dev/md/lab1"],
    ]
    assert destroy_commands(plan) == [
        ["mdadm", "--stop", "/dev/md/lab1"],
        ["mdadm", "--zero-superblock", *FOUR],
        ["wipefs", "--all", "--quiet", *FOUR],
    ]
    assert plan.target == "/dev/md/lab1" and plan.usable_bytes == 200 * GIB


def test_md_raid1_has_no_chunk_and_raid5_the_default_one() -> None:
    mirror = create_commands(_plan("md", "1", FOUR[:2]))[0]
    assert not any(word.startswith("--chunk") for word in mirror)
    assert "--chunk=512" in create_commands(_plan("md", "5"))[0]
    with pytest.raises(UserError, match="raid1 has no chunk size"):
        _plan("md", "1", FOUR[:2], chunk=64 * 1024)


@pytest.mark.parametrize(("level", "vdevs", "name"), [
    ("0", FOUR, "stripe"),
    ("1", ["mirror", *FOUR], "mirror"),
    ("10", ["mirror", *FOUR[:2], "mirror", *FOUR[2:]], "striped mirrors"),
    ("5", ["raidz1", *FOUR], "raidz1"),
    ("6", ["raidz2", *FOUR], "raidz2"),
])
def test_zfs_pool_layouts_the_zvol_and_the_dataset(level: str, vdevs: list[str],
                                                   name: str) -> None:
    plan = _plan("zfs", level)
    available = 300 * GIB  # what the built pool says it has
    # raidz charges a 16 KiB block 24 KiB (raidz1 of 4) where the available space is
    # reckoned by 128 KiB blocks (44 sectors for 32): 1.5 / 1.375; a mirror or stripe 1
    charge = {"5": 1.5 / 1.375, "6": 2.25 / (66 / 32)}.get(level, 1.0)
    zvol = int(available * 0.8 / charge) // 2**20 * 2**20
    assert create_commands(plan, available) == [
        ["zpool", "create", "-f", "-o", "ashift=12", "-m", "none", "lab1", *vdevs],
        ["zfs", "create", "-s", "-V", str(zvol), "-o", "volblocksize=16384", "lab1/ssdlab"],
        ["zfs", "create", "-o", "mountpoint=/run/ssdlab/arrays/lab1", "-o", "atime=off",
         "lab1/files"],
    ]
    assert plan.target == "/dev/zvol/lab1/ssdlab"
    # ZFS labels the partition 1 it made on each whole disk: labelclear goes there
    assert destroy_commands(plan) == [
        ["zpool", "destroy", "-f", "lab1"],
        *(["zpool", "labelclear", "-f", f"{m}1"] for m in FOUR),
        ["wipefs", "--all", "--quiet", *FOUR],
    ]
    assert plan.level_name == name
    assert plan.describe().startswith(f"zfs {name} of 4 members")
    assert plan.describe().endswith("the file presets on /run/ssdlab/arrays/lab1 "
                                    "(dataset lab1/files)")


def test_a_dry_run_sizes_the_zvol_by_the_usable_size_less_zfs_slop_space() -> None:
    """Before the pool exists its available space is estimated: ZFS keeps 1/32 back, at
    least 128 MiB (a 4 x 256 MiB stripe: 1024 - 128 MiB; 80 % of that is 716 MiB)."""
    small = plan_array("zfs", "0", FOUR, name="lab1", member_bytes=256 * 2**20,
                       mount_dir="/m")
    assert small.zvol_bytes() == 716 * 2**20
    assert _plan("zfs", "0").zvol_bytes() == int(400 * GIB * 31 / 32 * 0.8) // 2**20 * 2**20


@pytest.mark.parametrize(("member", "label"), [
    ("/dev/nvme0n1", "/dev/nvme0n1p1"), ("/dev/sdb", "/dev/sdb1"),
    ("/dev/loop3", "/dev/loop3p1"),
    ("/dev/disk/by-id/nvme-QEMU_VMLAB0", "/dev/disk/by-id/nvme-QEMU_VMLAB0-part1"),
])
def test_zfs_labels_are_cleared_on_the_partition_zfs_made(member: str, label: str) -> None:
    assert zfs_member_partition(member) == label


@pytest.mark.parametrize(("level", "metadata"), [("0", "raid1"), ("1", "raid1"),
                                                 ("10", "raid1"), ("5", "raid1"),
                                                 ("6", "raid1c3")])
def test_btrfs_profiles_mount_and_test_file(level: str, metadata: str) -> None:
    plan = _plan("btrfs", level)
    data = parse_level(level)
    assert create_commands(plan) == [
        ["mkfs.btrfs", "-f", "-L", "lab1", "-d", data, "-m", metadata, *FOUR],
        ["btrfs", "device", "scan", *FOUR],
        ["mount", "-t", "btrfs", "-o", "nodatacow,noatime", FOUR[0],
         "/run/ssdlab/arrays/lab1"],
    ]
    assert plan.target == "/run/ssdlab/arrays/lab1/ssdlab.test"
    assert destroy_commands(plan) == [["umount", "/run/ssdlab/arrays/lab1"],
                                      ["wipefs", "--all", "--quiet", *FOUR]]
    assert "64 KiB stripe per device (fixed)" in plan.describe()


def test_describe_says_level_members_geometry_and_target() -> None:
    assert _plan("md", "5").describe() == (
        "md raid5 of 4 members (/dev/sdb, /dev/sdc, /dev/sdd, /dev/sde), 512 KiB chunk, "
        "300 GiB usable; target /dev/md/lab1")


@pytest.mark.parametrize(("args", "message"), [
    (("lvm", "0", FOUR, None), "array backend 'lvm' is not one of: md, zfs, btrfs"),
    (("md", "3", FOUR, None), "RAID level '3' is not one of 0, 1, 5, 6, 10"),
    (("md", "6", FOUR[:3], None), "raid6 needs at least 4 members, got 3"),
    (("zfs", "10", [*FOUR, "/dev/sdf", "/dev/sdg"][:5], None),
     "raid10 is built of mirrored pairs: an even number of members, not 5"),
    (("md", "0", [FOUR[0], FOUR[0]], None), "a member is named twice"),
    (("btrfs", "0", FOUR, 128 * 1024), "btrfs stripes are 64 KiB per device"),
    (("md", "0", FOUR, 6144), "give a power of two of at least 4KiB"),
    (("md", "0", FOUR, 2048), "give a power of two of at least 4KiB"),
    (("zfs", "0", FOUR, 256 * 1024), "volblocksize is at most 128KiB"),
])
def test_refusals_are_one_line(args: tuple[str, str, list[str], int | None],
                               message: str) -> None:
    backend, level, members, chunk = args
    with pytest.raises(UserError, match=message) as err:
        _plan(backend, level, members, chunk)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("name", ["", "Lab", "1lab", "a" * 33, "lab/1", "lab 1"])
def test_names_that_cannot_be_a_pool_or_md_name_are_refused(name: str) -> None:
    with pytest.raises(UserError, match="array name"):
        plan_array("md", "0", FOUR, name=name, member_bytes=GIB, mount_dir="/m")
