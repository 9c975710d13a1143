"""Pure parts of ssdlab.targets, fed with fake sysfs/proc trees and fake command runners."""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import FrozenInstanceError, replace
from pathlib import Path
from typing import Any

import pytest

from ssdlab.errors import EnvironmentProblem, ExitCode, TargetError, UserError
from ssdlab.plan.results import PurgeStep
from ssdlab.run.prepare import check_device_purge, check_file_purge
from ssdlab.targets import purge, safety
from ssdlab.targets.identity import (
    MountEntry,
    TargetInfo,
    check_fio_version,
    classify_device,
    describe_block,
    fio_version,
    host_info,
    mount_containing,
    parse_selected,
    parse_vpd_serial,
    read_mountinfo,
    transport_from_devpath,
)
from ssdlab.targets.nvme import nvme_controller_of, parse_nvme_id_ns
from ssdlab.targets.purge import PurgeOutcome, parse_sanitize_status, purge_block
from ssdlab.targets.safety import (
    SafetyContext,
    check_block_target,
    check_mounted,
    mounted_block_devices,
    root_disks,
    whole_disk_of,
)
from tests.support.fakesys import NVME_CTRL, SAS_HOST, SATA_HOST, VIRTIO, VIRTUAL, FakeSys


@pytest.fixture
def fake(tmp_path: Path) -> FakeSys:
    return FakeSys(tmp_path)


class FakeRunner:
    """Records commands; answers with queued (returncode, stdout, stderr) or raises."""

    def __init__(self, *results: tuple[int, str, str] | BaseException) -> None:
        self.results = list(results)
        self.calls: list[list[str]] = []

    def __call__(self, command: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        self.calls.append(list(command))
        result = self.results.pop(0) if self.results else (0, "", "")
        if isinstance(result, BaseException):
            raise result
        code, out, err = result
        return subprocess.CompletedProcess(command, code, out, err)


def has(*tools: str) -> Any:
    return lambda tool: f"/usr/sbin/{tool}" if tool in tools else None


def info(**changes: Any) -> TargetInfo:
    base = TargetInfo(
        path="/dev/sdx",
        kind="block",
        name="sdx",
        device_class="sata_ssd",
        model="Model",
        serial="SERIAL",
        firmware="1.0",
        capacity_bytes=1 << 30,
        logical_sector_bytes=512,
        physical_sector_bytes=4096,
        rotational=False,
        numa_node=None,
        scheduler="none",
        discard_max_bytes=2147450880,
        details={},
    )
    return replace(base, **changes)


NVME_INFO = info(path="/dev/nvme0n1", name="nvme0n1", device_class="nvme")


# --------------------------------------------------------------------------- pure parsing


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[mq-deadline] none\n", "mq-deadline"),
        ("none [mq-deadline] kyber bfq", "mq-deadline"),
        ("[none] mq-deadline", "none"),
        ("none", "none"),
        ("[lzo-rle] lzo lz4 zstd", "lzo-rle"),
        ("", None),
        ("lzo lz4", None),
    ],
)
def test_parse_selected(text: str, expected: str | None) -> None:
    assert parse_selected(text) == expected


def test_parse_vpd_serial() -> None:
    page = b"\x00\x80\x00\x0c" + b"  S6PXNS0T12"
    assert parse_vpd_serial(page) == "S6PXNS0T12"
    assert parse_vpd_serial(b"\x00\x83\x00\x04abcd") is None
    assert parse_vpd_serial(b"\x00") is None


@pytest.mark.parametrize(
    ("devpath", "expected"),
    [
        (f"/sys/{SATA_HOST}/block/sda", "sata"),
        (f"/sys/{SAS_HOST}/block/sdb", "sas"),
        (f"/sys/{NVME_CTRL}/nvme0n1", "nvme"),
        (f"/sys/{VIRTIO}/block/vdq", "virtio"),
        ("/sys/devices/virtual/block/loop0", "virtual"),
        ("/sys/devices/pci0000:00/0000:00:14.0/usb2/2-1/2-1:1.0/host6/block/sdc", "usb"),
        ("/sys/devices/vbd-51712/block/xvda", "xen"),
        ("/sys/devices/platform/mmc/block/mmcblk0", None),
    ],
)
def test_transport_from_devpath(devpath: str, expected: str | None) -> None:
    assert transport_from_devpath(devpath) == expected


@pytest.mark.parametrize(
    ("name", "rotational", "transport", "expected"),
    [
        ("nvme0n1", False, "nvme", "nvme"),
        ("nvme1n2p3", None, None, "nvme"),
        ("loop0", False, "virtual", "virtual"),
        ("zram0", False, None, "virtual"),
        ("ram0", None, None, "virtual"),
        ("nbd3", False, None, "virtual"),
        ("dm-0", False, None, "virtual"),
        ("md127", False, None, "virtual"),
        ("vdq", True, "virtio", "virtual"),
        ("sda", True, "sata", "hdd"),
        ("sdb", True, "sas", "hdd"),
        ("sdc", False, "sas", "sas_ssd"),
        ("sdd", False, "sata", "sata_ssd"),
        ("sde", None, None, "sata_ssd"),
        ("sdf", False, "usb", "sata_ssd"),
    ],
)
def test_classify_device(
    name: str, rotational: bool | None, transport: str | None, expected: str
) -> None:
    assert classify_device(name, rotational=rotational, transport=transport) == expected


def test_read_mountinfo_unescapes_and_longest_prefix_wins(fake: FakeSys) -> None:
    fake.mount("8:2", "/", "ext4", "/dev/sda2")
    fake.mount("8:17", "/mnt/my disk", "xfs", "/dev/sdb1")
    fake.mount("0:40", "/mnt/a", "tmpfs", "tmpfs")
    fake.mount("8:33", "/mnt/a", "ext4", "/dev/sdc1")  # mounted over the tmpfs
    mounts = read_mountinfo(proc=fake.proc)
    assert mounts[1] == MountEntry(8, 17, "/mnt/my disk", "xfs", "/dev/sdb1")

    def where(path: str) -> str | None:
        entry = mount_containing(path, mounts)
        return entry.source if entry else None

    assert where("/mnt/my disk/f") == "/dev/sdb1"
    assert where("/mnt/ab/f") == "/dev/sda2"
    assert where("/mnt/a/f") == "/dev/sdc1"
    assert where("/mnt/a") == "/dev/sdc1"
    assert mount_containing("/x", []) is None


def test_target_info_is_frozen_and_serializable() -> None:
    target = info(details={"transport": "sata", "nvme_id_ctrl": {"vid": 1}})
    as_dict = target.to_dict()
    assert json.loads(json.dumps(as_dict)) == as_dict
    assert as_dict["name"] == "sdx" and as_dict["details"] == target.details
    with pytest.raises(FrozenInstanceError):
        target.name = "sdy"  # type: ignore[misc]


# --------------------------------------------------------------------------- describe_block


def test_describe_sata_ssd(fake: FakeSys) -> None:
    fake.disk(
        "sda",
        "8:0",
        queue={"scheduler": "mq-deadline [none]"},
        device={
            "model": "Samsung SSD 870 \n",
            "rev": "SVT02B6Q\n",
            "vendor": "ATA     \n",
            "numa_node": "-1\n",
            "vpd_pg80": b"\x00\x80\x00\x08S6PXNS0T",
            "vpd_pg89": b"\x00\x89",
        },
    )
    target = describe_block("sda", sysfs=fake.sys, which=has())
    assert (target.name, target.path, target.kind) == ("sda", "/dev/sda", "block")
    assert (target.model, target.serial, target.firmware) == (
        "Samsung SSD 870",
        "S6PXNS0T",
        "SVT02B6Q",
    )
    assert target.device_class == "sata_ssd"
    assert target.capacity_bytes == 2_000_000 * 512
    assert (target.logical_sector_bytes, target.physical_sector_bytes) == (512, 4096)
    assert target.rotational is False
    assert target.numa_node is None
    assert target.scheduler == "none"
    assert target.discard_max_bytes == 2147450880
    assert target.details["transport"] == "sata"
    assert target.details["vendor"] == "ATA"


def test_describe_sas_ssd_and_hdd(fake: FakeSys) -> None:
    fake.disk("sdb", "8:16", parent=SAS_HOST, device={"model": "PM1643\n", "numa_node": "1"})
    fake.disk("sdc", "8:32", queue={"rotational": "1"}, parent=SATA_HOST.replace("ata1", "ata2"))
    sas = describe_block("sdb", sysfs=fake.sys, which=has())
    assert (sas.device_class, sas.numa_node, sas.details["transport"]) == ("sas_ssd", 1, "sas")
    hdd = describe_block("sdc", sysfs=fake.sys, which=has())
    assert (hdd.device_class, hdd.rotational, hdd.model) == ("hdd", True, None)


def test_describe_partition_uses_parent_disk(fake: FakeSys) -> None:
    fake.disk("sda", "8:0", queue={"logical_block_size": "4096"}, device={"model": "M\n"})
    fake.partition("sda", "sda1", "8:1", 1, size=8192)
    part = describe_block("sda1", path="/dev/disk/by-id/x-part1", sysfs=fake.sys, which=has())
    assert part.path == "/dev/disk/by-id/x-part1"
    assert (part.name, part.model, part.capacity_bytes) == ("sda1", "M", 8192 * 512)
    assert part.logical_sector_bytes == 4096
    assert part.details["partition_of"] == "sda"
    assert part.details["partition_number"] == 1
    assert part.details["partition_start_bytes"] == 2048 * 512
    assert whole_disk_of("sda1", sysfs=fake.sys) == "sda"
    assert whole_disk_of("sda", sysfs=fake.sys) == "sda"


def _nvme(fake: FakeSys) -> None:
    fake.disk(
        "nvme0n1",
        "259:0",
        parent=NVME_CTRL,
        device={"model": "sysfs model", "serial": "SYSSN", "firmware_rev": "1.0", "numa_node": "0"},
    )
    fake.write("nvme0n1", "wwid", "eui.0025385b71b1b3c4\n")


ID_CTRL = {
    "vid": 5197,
    "ssvid": 5197,
    "sn": "S5GXNX0T123456     ",
    "mn": "Samsung SSD 980 PRO 1TB                 ",
    "fr": "5B2QGXA7",
    "oacs": 23,
    "sanicap": 3,
    "rab": 2,
}


#: ``nvme id-ns -o json`` of a QEMU 7.2 namespace (nvme-cli 2.3), cut to what is read:
#: LBA format 0 of 8 in use, 512 B of data and no metadata
ID_NS = {"nsze": 262144, "flbas": 0, "nlbaf": 7, "lbafs": [
    {"ms": 0, "ds": 9, "rp": 0}, {"ms": 8, "ds": 9, "rp": 0}, {"ms": 16, "ds": 9, "rp": 0},
    {"ms": 64, "ds": 9, "rp": 0}, {"ms": 0, "ds": 12, "rp": 0}, {"ms": 8, "ds": 12, "rp": 0},
    {"ms": 16, "ds": 12, "rp": 0}, {"ms": 64, "ds": 12, "rp": 0}]}


def test_describe_nvme_uses_id_ctrl(fake: FakeSys) -> None:
    _nvme(fake)
    fake.write("nvme0n1", "nsid", "1\n")
    runner = FakeRunner((0, json.dumps(ID_CTRL), ""), (0, json.dumps(ID_NS), ""))
    target = describe_block("nvme0n1", sysfs=fake.sys, runner=runner, which=has("nvme"))
    assert runner.calls == [["nvme", "id-ctrl", "/dev/nvme0n1", "-o", "json"],
                            ["nvme", "id-ns", "/dev/nvme0n1", "-o", "json"]]
    assert target.details["nvme_namespace"] == {
        "nsid": 1, "lba_format": 0, "lba_data_bytes": 512, "lba_metadata_bytes": 0,
        "lba_formats": 8}
    assert (target.model, target.serial, target.firmware) == (
        "Samsung SSD 980 PRO 1TB",
        "S5GXNX0T123456",
        "5B2QGXA7",
    )
    assert target.device_class == "nvme" and target.numa_node == 0
    kept = target.details["nvme_id_ctrl"]
    assert isinstance(kept, dict) and kept["sanicap"] == 3 and "rab" not in kept
    assert target.details["wwid"] == "eui.0025385b71b1b3c4"


def test_nvme_lba_format_in_use() -> None:
    assert parse_nvme_id_ns({**ID_NS, "flbas": 0x15})["lba_format"] == 5  # type: ignore[index]
    four_k = parse_nvme_id_ns({**ID_NS, "flbas": 4})
    assert four_k is not None and four_k["lba_data_bytes"] == 4096
    assert four_k["lba_metadata_bytes"] == 0
    assert parse_nvme_id_ns({"flbas": 9, "lbafs": ID_NS["lbafs"]}) is None  # no format 9
    assert parse_nvme_id_ns({"flbas": 0}) is None
    assert parse_nvme_id_ns([]) is None


def test_describe_nvme_falls_back_to_sysfs(fake: FakeSys) -> None:
    _nvme(fake)
    runner = FakeRunner((1, "", "permission denied"))
    target = describe_block("nvme0n1", sysfs=fake.sys, runner=runner, which=has("nvme"))
    assert (target.model, target.serial, target.firmware) == ("sysfs model", "SYSSN", "1.0")
    assert target.details["nvme_id_ctrl_error"] == "permission denied"
    quiet = FakeRunner()
    describe_block("nvme0n1", sysfs=fake.sys, runner=quiet, which=has())
    assert quiet.calls == []


def test_describe_loop_zram_virtio(fake: FakeSys) -> None:
    fake.disk("loop3", "7:3", parent=VIRTUAL, queue={"scheduler": "none"})
    fake.write("loop3", "loop/backing_file", "/dev/shm/x.img\n")
    fake.write("loop3", "loop/dio", "0\n")
    fake.write("loop3", "loop/offset", "0\n")
    fake.disk("zram1", "252:1", parent=VIRTUAL)
    fake.write("zram1", "comp_algorithm", "lzo [lz4] zstd\n")
    fake.write("zram1", "disksize", "1073741824\n")
    fake.disk("vdq", "252:16", parent=VIRTIO, queue={"rotational": "1"})
    loop = describe_block("loop3", sysfs=fake.sys, which=has())
    assert loop.device_class == "virtual" and loop.scheduler == "none"
    assert loop.details["backing_file"] == "/dev/shm/x.img" and loop.details["dio"] is False
    zram = describe_block("zram1", sysfs=fake.sys, which=has())
    assert zram.details["comp_algorithm"] == "lz4" and zram.details["disksize"] == 1 << 30
    vdq = describe_block("vdq", sysfs=fake.sys, which=has())
    assert (vdq.device_class, vdq.details["transport"]) == ("virtual", "virtio")


# --------------------------------------------------------------------------- root disks


def test_root_disks_partitions_boot_and_swap(fake: FakeSys) -> None:
    for disk, major_minor in (("sda", "8:0"), ("sdb", "8:16"), ("sdc", "8:32"), ("sdd", "8:48")):
        fake.disk(disk, major_minor)
        major, minor = major_minor.split(":")
        fake.partition(disk, f"{disk}1", f"{major}:{int(minor) + 1}", 1)
    fake.partition("sda", "sda2", "8:2", 2)
    fake.mount("0:21", "/proc", "proc", "proc")
    fake.mount("8:2", "/", "ext4", "/dev/sda2")
    fake.mount("8:17", "/boot/efi", "vfat", "/dev/sdb1")
    fake.mount("8:49", "/data", "xfs", "/dev/sdd1")
    fake.mount("0:23", "/dev/shm", "tmpfs", "tmpfs")
    fake.set_swaps([("/dev/sdc1", "partition")])
    assert root_disks(sysfs=fake.sys, proc=fake.proc) == {"sda", "sdb", "sdc"}
    mounted = mounted_block_devices(sysfs=fake.sys, proc=fake.proc)
    assert mounted == {"sda2", "sdb1", "sdc1", "sdd1"}


def test_root_disks_through_dm_and_md(fake: FakeSys) -> None:
    fake.disk("sda", "8:0")
    fake.disk("sdb", "8:16")
    fake.partition("sda", "sda1", "8:1", 1)
    fake.partition("sdb", "sdb1", "8:17", 1)
    fake.disk("md0", "9:0", parent=VIRTUAL)
    fake.disk("dm-0", "253:0", parent=VIRTUAL)
    fake.stack("md0", "sda1")
    fake.stack("md0", "sdb1")
    fake.stack("dm-0", "md0")
    fake.mount("253:0", "/", "ext4", "/dev/mapper/vg-root")
    assert root_disks(sysfs=fake.sys, proc=fake.proc) == {"dm-0", "md0", "sda", "sdb"}


def test_root_disks_btrfs_anonymous_devnum_uses_source(fake: FakeSys) -> None:
    fake.disk("nvme0n1", "259:0", parent=NVME_CTRL)
    fake.partition("nvme0n1", "nvme0n1p2", "259:2", 2)
    fake.mount("0:35", "/", "btrfs", "/dev/nvme0n1p2")
    assert root_disks(sysfs=fake.sys, proc=fake.proc) == {"nvme0n1"}


def test_root_disks_follow_loop_backing_file_and_swap_file(fake: FakeSys) -> None:
    fake.disk("loop0", "7:0", parent=VIRTUAL)
    fake.write("loop0", "loop/backing_file", "/images/root.img (deleted)\n")
    fake.disk("sdd", "8:48")
    fake.partition("sdd", "sdd1", "8:49", 1)
    fake.disk("sde", "8:64")
    fake.mount("7:0", "/", "ext4", "/dev/loop0")
    fake.mount("8:49", "/images", "ext4", "/dev/sdd1")
    fake.mount("8:64", "/var/swap", "ext4", "/dev/sde")
    fake.set_swaps([("/var/swap/swapfile", "file")])
    assert root_disks(sysfs=fake.sys, proc=fake.proc) == {"loop0", "sdd", "sde"}


def test_root_disks_empty_when_root_is_not_a_block_device(fake: FakeSys) -> None:
    fake.mount("0:30", "/", "overlay", "overlay")
    assert root_disks(sysfs=fake.sys, proc=fake.proc) == frozenset()


# --------------------------------------------------------------------------- check_block_target


@pytest.fixture
def system(fake: FakeSys) -> FakeSys:
    """sda: root disk (sda2 on /), sdd: sdd1 mounted on /data, sde: held by dm-2,
    sdf: unused, dm-1: built on sda3, sdg: swap partition on sdg1 checked directly."""
    fake.disk("sda", "8:0")
    for number in (1, 2, 3):
        fake.partition("sda", f"sda{number}", f"8:{number}", number)
    fake.disk("sdd", "8:48")
    fake.partition("sdd", "sdd1", "8:49", 1)
    fake.disk("sde", "8:64")
    fake.partition("sde", "sde1", "8:65", 1)
    fake.disk("sdf", "8:80")
    fake.disk("dm-1", "253:1", parent=VIRTUAL)
    fake.disk("dm-2", "253:2", parent=VIRTUAL)
    fake.write("dm-2", "dm/name", "vg-data\n")
    fake.stack("dm-1", "sda3")
    fake.stack("dm-2", "sde1")
    fake.mount("8:2", "/", "ext4", "/dev/sda2")
    fake.mount("8:49", "/data", "ext4", "/dev/sdd1")
    return fake


def _check(fake: FakeSys, name: str, *, destroy_data: bool = True, writes: bool = True) -> None:
    target = describe_block(name, sysfs=fake.sys, which=has())
    check_block_target(
        target, destroy_data=destroy_data, writes=writes, sysfs=fake.sys, proc=fake.proc
    )


@pytest.mark.parametrize("name", ["sda", "sda1", "sda2", "dm-1"])
def test_refuses_root_disk_its_partitions_and_devices_on_it(system: FakeSys, name: str) -> None:
    with pytest.raises(TargetError) as caught:
        _check(system, name, writes=False)
    assert caught.value.message == f"refusing /dev/{name}: it holds the running system (/)"
    assert caught.value.exit_code == ExitCode.TARGET


def test_refuses_mounted_partition(system: FakeSys) -> None:
    for name in ("sdd", "sdd1"):
        with pytest.raises(TargetError) as caught:
            _check(system, name)
        expected = f"refusing /dev/{name}: /dev/sdd1 is mounted on /data; unmount it first"
        assert caught.value.message == expected


def test_refuses_swap(system: FakeSys) -> None:
    system.disk("sdg", "8:96")
    system.partition("sdg", "sdg1", "8:97", 1)
    system.set_swaps([("/dev/sdg1", "partition")])
    target = describe_block("sdg", sysfs=system.sys, which=has())
    ctx = SafetyContext(target, True, True, system.sys, system.proc)
    assert check_mounted(ctx) == "refusing /dev/sdg: /dev/sdg1 is used as swap; swapoff it first"
    with pytest.raises(TargetError, match="holds the running system"):  # swap counts as system
        _check(system, "sdg")


@pytest.mark.parametrize("name", ["sde", "sde1"])
def test_refuses_device_with_holders(system: FakeSys, name: str) -> None:
    with pytest.raises(TargetError) as caught:
        _check(system, name)
    assert caught.value.message.startswith(
        f"refusing /dev/{name}: /dev/sde1 is in use by /dev/dm-2 (vg-data); stop that device"
    )


def test_refuses_a_namespace_whose_controller_has_another_in_use(fake: FakeSys) -> None:
    """nvme0n2 is blank, but nvme0n1 of the same controller is mounted (then held by md):
    writing to nvme0n2 is refused, reading is not."""
    _two_namespaces(fake)
    fake.mount("259:0", "/srv", "ext4", "/dev/nvme0n1")
    target = describe_block("nvme0n2", sysfs=fake.sys, which=has())
    with pytest.raises(TargetError) as caught:
        check_block_target(target, destroy_data=True, writes=True, sysfs=fake.sys,
                           proc=fake.proc)
    assert caught.value.message == (
        "refusing /dev/nvme0n2: it shares controller nvme0 with /dev/nvme0n1, which is "
        "mounted on /srv; a test writes to the same controller and flash; nothing was written")
    check_block_target(target, destroy_data=False, writes=False, sysfs=fake.sys,
                       proc=fake.proc)
    (fake.proc / "self" / "mountinfo").write_text("")
    fake.disk("md0", "9:0", parent=VIRTUAL)
    fake.stack("md0", "nvme0n1")
    with pytest.raises(TargetError, match="with /dev/nvme0n1, which is in use by /dev/md0;"):
        check_block_target(target, destroy_data=True, writes=True, sysfs=fake.sys,
                           proc=fake.proc)


def test_a_serial_shared_by_namespaces_confirms_none(fake: FakeSys) -> None:
    _two_namespaces(fake)
    target = describe_block("nvme0n2", sysfs=fake.sys, which=has())
    assert target.serial == "SYSSN"
    with pytest.raises(TargetError) as caught:
        check_block_target(target, destroy_data="SYSSN", writes=True, sysfs=fake.sys,
                           proc=fake.proc)
    assert caught.value.message == (
        "refusing /dev/nvme0n2: the confirmation names serial SYSSN, but that is its "
        "controller's, shared by /dev/nvme0n1, /dev/nvme0n2; nothing was written (confirm "
        "with --destroy-data=/dev/nvme0n2)")


def test_destroy_data_is_required_to_write(system: FakeSys) -> None:
    with pytest.raises(TargetError) as caught:
        _check(system, "sdf", destroy_data=False, writes=True)
    assert caught.value.message == (
        "refusing to write to /dev/sdf without --destroy-data: every byte on it will be overwritten"
    )
    _check(system, "sdf", destroy_data=True, writes=True)
    _check(system, "sdf", destroy_data=False, writes=False)


def test_checks_run_in_order(system: FakeSys) -> None:
    with pytest.raises(TargetError, match="is mounted on /data"):
        _check(system, "sdd", destroy_data=False)
    assert safety.BLOCK_CHECKS[0] is safety.check_root_disk
    assert safety.BLOCK_CHECKS[-1] is safety.check_destroy_data


def test_check_block_target_needs_a_block_target(system: FakeSys) -> None:
    with pytest.raises(ValueError):
        check_block_target(info(kind="file"), destroy_data=True, writes=True, sysfs=system.sys)


# --------------------------------------------------------------------------- purge


def test_purge_auto_runs_blkdiscard_on_the_range() -> None:
    runner = FakeRunner((0, "", "blkdiscard: Operation forced, data will be lost!"))
    outcome = purge_block(info(), "auto", 4096, 1 << 20, runner=runner, which=has("blkdiscard"))
    expected = ("blkdiscard", "--force", "--offset", "4096", "--length", "1048576", "/dev/sdx")
    assert runner.calls == [list(expected)]
    assert (outcome.method, outcome.ok, outcome.command) == ("blkdiscard", True, expected)
    assert outcome.detail == "discarded 1048576 bytes from offset 4096"
    assert outcome.seconds >= 0


def test_purge_blkdiscard_failure_is_an_outcome_not_an_exception() -> None:
    error = "blkdiscard: BLKDISCARD ioctl failed: Operation not supported"
    runner = FakeRunner((1, "", error + "\n"))
    outcome = purge_block(info(), "blkdiscard", 0, 512, runner=runner, which=has("blkdiscard"))
    assert (outcome.ok, outcome.detail) == (False, error)
    crashed = FakeRunner(OSError(8, "Exec format error"))
    outcome = purge_block(info(), "blkdiscard", 0, 512, runner=crashed, which=has("blkdiscard"))
    assert not outcome.ok and "Exec format error" in outcome.detail


def test_purge_skips_devices_without_discard() -> None:
    runner = FakeRunner()
    target = info(discard_max_bytes=0)
    outcome = purge_block(target, "auto", 0, 512, runner=runner, which=has("blkdiscard"))
    assert runner.calls == []
    assert not outcome.ok and outcome.command is None
    assert "does not support discard" in outcome.detail


def test_purge_none_and_bad_arguments() -> None:
    runner = FakeRunner()
    outcome = purge_block(info(), "none", 0, 0, runner=runner, which=has())
    assert (outcome.method, outcome.ok, outcome.command) == ("none", True, None)
    with pytest.raises(UserError) as caught:
        purge_block(info(), "shred", 0, 0, runner=runner, which=has())
    assert caught.value.exit_code == ExitCode.USAGE
    with pytest.raises(ValueError):
        purge_block(info(kind="file"), "auto", 0, 0, runner=runner, which=has("blkdiscard"))
    with pytest.raises(ValueError):
        purge_block(info(), "auto", -1, 0, runner=runner, which=has("blkdiscard"))
    assert runner.calls == []


@pytest.mark.parametrize("method", ["auto", "blkdiscard", "nvme-format", "nvme-sanitize"])
def test_purge_missing_tool_is_an_environment_problem_before_anything_runs(method: str) -> None:
    runner = FakeRunner()
    with pytest.raises(EnvironmentProblem) as caught:
        purge_block(NVME_INFO, method, 0, 512, runner=runner, which=has())
    assert caught.value.exit_code == ExitCode.ENVIRONMENT
    assert runner.calls == []


def test_purge_nvme_format_command() -> None:
    runner = FakeRunner()
    outcome = purge_block(NVME_INFO, "nvme-format", 0, 512, runner=runner, which=has("nvme"))
    assert runner.calls == [["nvme", "format", "/dev/nvme0n1", "--ses=1", "--force"]]
    assert (outcome.method, outcome.ok) == ("nvme-format", True)
    assert "whole namespace" in outcome.detail


def test_purge_nvme_refuses_non_nvme_and_partitions() -> None:
    runner = FakeRunner()
    with pytest.raises(TargetError, match="needs an NVMe drive; /dev/sdx is sata_ssd"):
        purge_block(info(), "nvme-format", 0, 512, runner=runner, which=has("nvme"))
    part = replace(NVME_INFO, name="nvme0n1p1", path="/dev/nvme0n1p1")
    part = replace(part, details={"partition_of": "nvme0n1"})
    with pytest.raises(TargetError, match="erases all of /dev/nvme0n1"):
        purge_block(part, "nvme-sanitize", 0, 512, runner=runner, which=has("nvme"))
    assert runner.calls == []


def _sanitize_log(status: int) -> str:
    names = {1: "completed successfully", 2: "in progress", 3: "failed"}
    sstat = {"global_erased": 1, "status": f"({status}) {names[status]}"}
    return json.dumps({"nvme0": {"sprog": 65535 if status != 2 else 1200, "sstat": sstat}})


def test_purge_nvme_sanitize_waits_for_completion(fake: FakeSys) -> None:
    _nvme(fake)
    sleeps: list[float] = []
    runner = FakeRunner((0, "", ""), (0, _sanitize_log(2), ""), (0, _sanitize_log(1), ""))
    outcome = purge_block(
        NVME_INFO, "nvme-sanitize", 0, 0,
        runner=runner, which=has("nvme"), sysfs=fake.sys, sleep=sleeps.append,
    )  # fmt: skip
    log = ["nvme", "sanitize-log", "/dev/nvme0", "-o", "json"]
    assert runner.calls == [["nvme", "sanitize", "/dev/nvme0", "-a", "2"], log, log]
    assert sleeps == [purge.SANITIZE_POLL_SECONDS]
    assert (outcome.method, outcome.ok) == ("nvme-sanitize", True)
    assert outcome.command == ("nvme", "sanitize", "/dev/nvme0", "-a", "2")


def test_purge_nvme_sanitize_failure_and_timeout(
    fake: FakeSys, monkeypatch: pytest.MonkeyPatch
) -> None:
    _nvme(fake)
    failed = FakeRunner((0, "", ""), (0, _sanitize_log(3), ""))
    kwargs: dict[str, Any] = {"which": has("nvme"), "sysfs": fake.sys, "sleep": lambda s: None}
    outcome = purge_block(NVME_INFO, "nvme-sanitize", 0, 0, runner=failed, **kwargs)
    assert not outcome.ok and "sanitize failed" in outcome.detail
    monkeypatch.setattr(purge, "SANITIZE_TIMEOUT_SECONDS", 3 * purge.SANITIZE_POLL_SECONDS)
    slow = FakeRunner((0, "", ""), *[(0, _sanitize_log(2), "")] * 5)
    outcome = purge_block(NVME_INFO, "nvme-sanitize", 0, 0, runner=slow, **kwargs)
    assert not outcome.ok and "not complete" in outcome.detail
    assert len(slow.calls) == 4
    refused = FakeRunner((1, "", "NVMe status: Invalid Field in Command"))
    outcome = purge_block(NVME_INFO, "nvme-sanitize", 0, 0, runner=refused, **kwargs)
    assert not outcome.ok and outcome.detail == (
        "NVMe status: Invalid Field in Command; purge with --purge nvme-format (Format NVM) "
        "or --purge blkdiscard")


def test_purge_nvme_sanitize_refuses_multi_namespace_controllers(fake: FakeSys) -> None:
    _two_namespaces(fake)
    runner = FakeRunner()
    with pytest.raises(TargetError, match=r"every namespace of nvme0 \(nvme0n1, nvme0n2\)"):
        purge_block(
            NVME_INFO, "nvme-sanitize", 0, 0, runner=runner, which=has("nvme"), sysfs=fake.sys
        )
    assert runner.calls == []


def test_purge_nvme_sanitize_refused_where_the_controller_has_no_sanitize() -> None:
    """QEMU 7.2's controller: SANICAP 0, and "Invalid Command Opcode" to a sanitize."""
    qemu = replace(NVME_INFO, details={"nvme_id_ctrl": {"sanicap": 0, "fna": 0}})
    runner = FakeRunner()
    with pytest.raises(TargetError) as caught:
        purge_block(qemu, "nvme-sanitize", 0, 0, runner=runner, which=has("nvme"))
    assert str(caught.value) == (
        "refusing --purge nvme-sanitize on /dev/nvme0n1: its controller does not support "
        "sanitize (Identify Controller SANICAP is 0); nothing was sent. Purge with --purge "
        "nvme-format (Format NVM) or --purge blkdiscard")
    assert runner.calls == []
    purge.check_nvme_purge(qemu, "nvme-format")  # a format it does
    purge.check_nvme_purge(qemu, "blkdiscard")


def _two_namespaces(fake: FakeSys) -> None:
    _nvme(fake)
    ctrl = fake.sys / NVME_CTRL
    second = ctrl / "nvme0n2"
    fake._node(second, "nvme0n2", "259:5", 100)
    (second / "device").symlink_to(ctrl)


@pytest.mark.parametrize(("fna", "refused"), [(0, False), (1, True), (2, True), (4, False)])
def test_purge_nvme_format_refused_where_it_erases_every_namespace(
        fake: FakeSys, fna: int, refused: bool) -> None:
    _two_namespaces(fake)
    drive = replace(NVME_INFO, details={"nvme_id_ctrl": {"sanicap": 2, "fna": fna}})
    if not refused:
        purge.check_nvme_purge(drive, "nvme-format", sysfs=fake.sys)
        return
    with pytest.raises(TargetError, match=rf"a Format NVM on this controller \(FNA {fna:#x}\) "
                       r"erases every namespace of nvme0 \(nvme0n1, nvme0n2\); use blkdiscard"):
        purge.check_nvme_purge(drive, "nvme-format", sysfs=fake.sys)


def test_nvme_controller_of_native_multipath(fake: FakeSys) -> None:
    subsys = fake.sys / "devices/virtual/nvme-subsystem/nvme-subsys3"
    (subsys / "nvme5").mkdir(parents=True)
    fake._node(subsys / "nvme3n1", "nvme3n1", "259:9", 100)
    (subsys / "nvme3n1" / "device").symlink_to(subsys)
    assert nvme_controller_of("nvme3n1", sysfs=fake.sys) == "nvme5"
    assert nvme_controller_of("nvme7n2", sysfs=fake.sys) == "nvme7"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"nvme0": {"sprog": 65535, "sstat": {"status": "(1) completed"}}}', 1),
        ('{"nvme0": {"sprog": 1, "sstat": {"Sanitize in Progress": "(2) in progress"}}}', 2),
        ('{"sprog": 65535, "sstat": 257}', 1),
        ('{"sprog": 65535, "sstat": 4}', 4),
        ("not json", None),
        ("{}", None),
    ],
)
def test_parse_sanitize_status(text: str, expected: int | None) -> None:
    assert parse_sanitize_status(text) == expected


def test_a_purge_outcome_is_stored_as_its_step() -> None:
    outcome = PurgeOutcome("blkdiscard", True, 1.5, ("blkdiscard", "/dev/x"), "done")
    assert json.dumps(PurgeStep.of(outcome).to_json()) == json.dumps({
        "method": "blkdiscard",
        "ok": True,
        "seconds": 1.5,
        "command": ["blkdiscard", "/dev/x"],
        "detail": "done",
    })
    assert PurgeStep.of(PurgeOutcome("none", True, 0.0, None, "")).to_json()["command"] is None


# --------------------------------------------------------------------------- fio and host


@pytest.mark.parametrize(
    ("output", "expected"),
    [("fio-3.33\n", "3.33"), ("fio-3.35-12-g1234abcd\n", "3.35"), ("fio-2.21", "2.21")],
)
def test_fio_version_parsing(output: str, expected: str) -> None:
    runner = FakeRunner((0, output, ""))
    assert fio_version(runner=runner, which=has("fio")) == expected
    assert runner.calls == [["/usr/sbin/fio", "--version"]]


def test_fio_version_problems() -> None:
    with pytest.raises(EnvironmentProblem) as caught:
        fio_version(runner=FakeRunner(), which=has())
    assert caught.value.message == (
        "fio is not installed; install it (apt-get install fio) or pass --fio PATH"
    )
    with pytest.raises(EnvironmentProblem, match="/opt/fio"):
        fio_version("/opt/fio", runner=FakeRunner(), which=has())
    with pytest.raises(EnvironmentProblem, match="cannot tell the fio version"):
        fio_version(runner=FakeRunner((0, "hello\n", "")), which=has("fio"))
    with pytest.raises(EnvironmentProblem, match="cannot tell the fio version"):
        fio_version(runner=FakeRunner((1, "", "boom")), which=has("fio"))
    with pytest.raises(EnvironmentProblem, match="cannot run"):
        fio_version(runner=FakeRunner(PermissionError(13, "denied")), which=has("fio"))


def test_check_fio_version() -> None:
    for good in ("3.1", "3.33", "3.10", "4.0", "10.2"):
        check_fio_version(good)
    with pytest.raises(EnvironmentProblem) as caught:
        check_fio_version("2.21")
    assert caught.value.message == "fio 2.21 is too old; ssdlab needs fio >= 3.1 (clat_ns output)"
    with pytest.raises(EnvironmentProblem, match=r"fio >= 3\.30"):
        check_fio_version("3.29", minimum=(3, 30))
    with pytest.raises(EnvironmentProblem, match="cannot parse"):
        check_fio_version("unknown")


def test_host_info_from_fake_tree(tmp_path: Path) -> None:
    proc, sysfs, etc = tmp_path / "proc", tmp_path / "sys", tmp_path / "etc"
    for directory in (proc, etc):
        directory.mkdir()
    cpu = "processor\t: {n}\nmodel name\t: Test CPU 9000\nphysical id\t: {socket}\n\n"
    (proc / "cpuinfo").write_text("".join(cpu.format(n=n, socket=n // 2) for n in range(4)))
    (proc / "meminfo").write_text("MemTotal:       16384 kB\nMemFree:  1 kB\n")
    (etc / "os-release").write_text('NAME="Test"\nPRETTY_NAME="Test OS 1 (fake)"\n')
    for node, cpus in ((0, "0-1"), (1, "2-3"), (10, "")):
        node_dir = sysfs / "devices" / "system" / "node" / f"node{node}"
        node_dir.mkdir(parents=True)
        (node_dir / "cpulist").write_text(cpus + "\n")
    host = host_info(sysfs=sysfs, proc=proc, etc=etc)
    assert host["cpu_model"] == "Test CPU 9000"
    assert host["cpu_count"] == os.cpu_count()
    assert host["cpu_sockets"] == 2
    assert host["numa_nodes"] == [
        {"node": 0, "cpulist": "0-1"},
        {"node": 1, "cpulist": "2-3"},
        {"node": 10, "cpulist": ""},
    ]
    assert host["memory_bytes"] == 16384 * 1024
    assert host["os"] == "Test OS 1 (fake)"
    assert host["kernel"] == os.uname().release
    assert set(host) >= {"hostname", "python"}


def test_an_nvme_purge_is_refused_before_the_run() -> None:
    """The suites' preparation (check_file_purge, check_device_purge) refuses what the
    purge would refuse, before the run is opened: QEMU's sanitize, a SATA drive."""
    qemu = replace(NVME_INFO, details={"nvme_id_ctrl": {"sanicap": 0, "fna": 0}})
    with pytest.raises(TargetError, match="does not support sanitize"):
        check_file_purge(qemu, "nvme-sanitize")
    with pytest.raises(TargetError, match="does not support sanitize"):
        check_device_purge(qemu, "nvme-sanitize")
    check_file_purge(qemu, "nvme-format")
    with pytest.raises(UserError, match="needs an NVMe device; /dev/sdx is sata_ssd"):
        check_device_purge(info(), "nvme-format")
    with pytest.raises(UserError, match="a file target is purged by recreating it"):
        check_file_purge(info(kind="file", device_class="file"), "nvme-format")
