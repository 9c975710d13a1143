"""The signature probe (ssdlab.targets.signature_probe, magic and signatures) on byte
images, and the guardrail that uses it (check_block_target with a fake device).

Images of real filesystems, swap and partition tables are made by the real tools (mkfs,
mkswap, sfdisk) on plain (sparse) files in /dev/shm: no root, no device. Signatures whose tools
cannot run here (md needs the kernel's md driver, LVM2 a block device and lvm2; LUKS,
bcache, ZFS, NTFS ... their packages) are written byte by byte at the offsets their tools
use, with their checksums where blkid checks them, and then cross-checked against
util-linux's own probe (wipefs) wherever wipefs recognises them too.
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import uuid
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from ssdlab.errors import TargetError
from ssdlab.targets import signatures as sg
from ssdlab.targets.identity import TargetInfo
from ssdlab.targets.magic import (
    BCACHE_MAGIC,
    MD_MAGIC,
    ZFS_UBERBLOCK_MAGIC,
    lvm2_crc,
    probe_magic,
)
from ssdlab.targets.safety import SafetyContext, check_block_target, check_destroy_data
from ssdlab.targets.signature_probe import probe_device, probe_with_tools
from ssdlab.targets.signatures import DeviceProbe, Signature

MiB = 1 << 20
KiB = 1 << 10
UUID = "0f0e0d0c-0b0a-4908-8706-050403020100"


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.skip(f"{name} is not installed")
    return path


def _run(*command: str, stdin: str | None = None) -> None:
    done = subprocess.run(list(command), input=stdin, capture_output=True, text=True,
                          check=False)
    assert done.returncode == 0, done.stderr


def _image(shm_dir: Path, size: int = 64 * MiB, name: str = "disk.img") -> Path:
    path = shm_dir / name
    with open(path, "wb") as fh:
        fh.truncate(size)
    return path


def _poke(path: Path, offset: int, data: bytes) -> None:
    with open(path, "r+b") as fh:
        fh.seek(offset)
        fh.write(data)


def _wipefs(path: Path) -> list[Signature]:
    _tool("wipefs")
    tool, found, error = probe_with_tools(str(path))
    assert (tool, error) == ("wipefs", None)
    return found


def _types(found: list[Signature]) -> list[tuple[str, int | None]]:
    return sorted((sig.type, sig.offset_bytes) for sig in found)


def _cross_check(path: Path) -> list[Signature]:
    """ssdlab's magic probe and wipefs find the same signatures at the same offsets."""
    mine = probe_magic(str(path))
    assert _types(mine) == _types(_wipefs(path))
    return mine


# --------------------------------------------------------------------------- real tools


@pytest.mark.parametrize("kind", ["ext2", "ext3", "ext4"])
def test_ext_filesystems_made_by_mke2fs(shm_dir: Path, kind: str) -> None:
    image = _image(shm_dir)
    _run(_tool("mke2fs"), "-q", "-F", "-t", kind, "-L", "data", "-U", UUID, str(image))
    [sig] = _cross_check(image)
    assert (sig.type, sig.offset_bytes, sig.uuid, sig.label) == (kind, 0x438, UUID, "data")
    assert sig.describe() == f"an {kind} filesystem (UUID {UUID}, label 'data')"


def test_xfs_made_by_mkfs(shm_dir: Path) -> None:
    image = _image(shm_dir, 320 * MiB)
    _run(_tool("mkfs.xfs"), "-q", "-f", "-L", "scratch", "-m", f"uuid={UUID}", str(image))
    [sig] = _cross_check(image)
    assert (sig.type, sig.uuid, sig.label) == ("xfs", UUID, "scratch")


def test_btrfs_single_and_two_device_members(shm_dir: Path) -> None:
    mkfs = _tool("mkfs.btrfs")
    one = _image(shm_dir, 128 * MiB, "one.img")
    _run(mkfs, "-q", "-f", "-L", "solo", "-U", UUID, str(one))
    [sig] = _cross_check(one)
    assert (sig.type, sig.devices, sig.label, sig.uuid) == ("btrfs", 1, "solo", UUID)
    assert sig.describe().startswith("a btrfs filesystem (")
    first, second = _image(shm_dir, 128 * MiB, "a.img"), _image(shm_dir, 128 * MiB, "b.img")
    _run(mkfs, "-q", "-f", "-d", "raid1", "-m", "raid1", "-L", "pair", str(first), str(second))
    for member in (first, second):
        [sig] = _cross_check(member)
        assert sig.devices == 2
        assert sig.describe().startswith("a btrfs member of a 2-device filesystem (UUID ")


def test_swap_made_by_mkswap(shm_dir: Path) -> None:
    image = _image(shm_dir, 16 * MiB)
    _run(_tool("mkswap"), "-L", "sw", "-U", UUID, str(image))
    [sig] = _cross_check(image)
    assert (sig.type, sig.offset_bytes, sig.version, sig.label) == ("swap", 4096 - 10, "1", "sw")
    assert sig.describe() == f"a Linux swap area (UUID {UUID}, label 'sw')"


def test_swap_with_a_bigger_page_size(shm_dir: Path) -> None:
    image = _image(shm_dir, 16 * MiB)
    _run(_tool("mkswap"), "--pagesize", "65536", str(image))
    [sig] = _cross_check(image)
    assert (sig.type, sig.offset_bytes) == ("swap", 65536 - 10)


def test_gpt_primary_and_backup_made_by_sfdisk(shm_dir: Path) -> None:
    image = _image(shm_dir)
    _run(_tool("sfdisk"), "-q", str(image), stdin="label: gpt\n,16MiB\n,16MiB\n")
    found = _cross_check(image)
    size = image.stat().st_size
    assert _types(found) == [("PMBR", 510), ("gpt", 512), ("gpt", size - 512)]
    assert {sig.partitions for sig in found if sig.type == "gpt"} == {2}
    assert sg.describe_signatures(found).startswith("a GPT partition table with 2 partitions")


def test_gpt_with_4k_sectors(shm_dir: Path) -> None:
    """On a file, wipefs assumes 512-byte sectors and sees only the protective MBR; ssdlab
    also looks for the headers of a 4Kn disk (sfdisk 2.38 has no --sector-size: fdisk)."""
    image = _image(shm_dir)
    _run(_tool("fdisk"), "-b", "4096", str(image), stdin="g\nn\n1\n\n+16M\nw\n")
    assert _types(_wipefs(image)) == [("PMBR", 510)]
    found = probe_magic(str(image))
    size = image.stat().st_size
    assert ("gpt", 4096, 1) in {(s.type, s.offset_bytes, s.partitions) for s in found}
    assert ("gpt", size - 4096, 1) in {(s.type, s.offset_bytes, s.partitions) for s in found}


def test_mbr_made_by_sfdisk(shm_dir: Path) -> None:
    image = _image(shm_dir)
    table = "label: dos\nlabel-id: 0x1234abcd\n,8MiB\n,8MiB\n,8MiB\n"
    _run(_tool("sfdisk"), "-q", str(image), stdin=table)
    [sig] = _cross_check(image)
    assert (sig.type, sig.offset_bytes, sig.partitions, sig.uuid) == ("dos", 510, 3, "1234abcd")
    assert sig.describe() == "an MBR (dos) partition table with 3 partitions (UUID 1234abcd)"


def test_partition_table_written_over_a_filesystem(shm_dir: Path) -> None:
    """sfdisk in a script leaves an old ext4 superblock in place: both are reported."""
    image = _image(shm_dir)
    _run(_tool("mke2fs"), "-q", "-F", "-t", "ext4", "-L", "old", str(image))
    _run(_tool("sfdisk"), "-q", "--wipe", "never", str(image), stdin="label: dos\n,8MiB\n")
    found = _cross_check(image)
    assert _types(found) == [("dos", 510), ("ext4", 0x438)]
    assert sg.describe_signatures(found).startswith(
        "an MBR (dos) partition table with 1 partition (UUID "
    )
    assert sg.describe_signatures(found).endswith(" and an ext4 filesystem "
                                                  f"(UUID {found[1].uuid}, label 'old')")


# --------------------------------------------------------------------------- byte images


def _md1_superblock(offset: int, version_name: str) -> bytes:
    sb = bytearray(256 + 2 * 2)
    struct.pack_into("<IIII", sb, 0, MD_MAGIC, 1, 0, 0)
    sb[16:32] = uuid.UUID(UUID).bytes
    sb[32:32 + len(b"host:md0")] = b"host:md0"
    struct.pack_into("<i", sb, 72, 1)  # raid1
    struct.pack_into("<I", sb, 92, 2)  # raid_disks
    struct.pack_into("<Q", sb, 144, offset // 512)  # super_offset
    struct.pack_into("<I", sb, 220, 2)  # max_dev
    words = struct.unpack_from(f"<{len(sb) // 4}I", sb)
    total = sum(words)
    struct.pack_into("<I", sb, 216, (total & 0xFFFFFFFF) + (total >> 32))
    return bytes(sb)


@pytest.mark.parametrize("version", ["1.0", "1.1", "1.2", "0.90"])
def test_md_superblocks_at_their_offsets(shm_dir: Path, version: str) -> None:
    size = 64 * MiB + 3 * KiB  # not a multiple of 64 KiB: the offsets are rounded down
    image = _image(shm_dir, size)
    sectors = size // 512
    if version == "0.90":
        offset = ((sectors & ~127) - 128) * 512
        sb = bytearray(4096)
        struct.pack_into("<IIII", sb, 0, MD_MAGIC, 0, 90, 0)
        raw = uuid.UUID(UUID).bytes
        sb[20:24], sb[52:64] = raw[:4], raw[4:]
        data = bytes(sb)
    else:
        offset = {"1.1": 0, "1.2": 4096, "1.0": ((sectors - 16) & ~7) * 512}[version]
        data = _md1_superblock(offset, version)
    _poke(image, offset, data)
    [sig] = probe_magic(str(image))
    assert (sig.type, sig.offset_bytes, sig.version) == ("linux_raid_member", offset, version)
    assert sig.describe().startswith(f"an md RAID member (metadata {version})")
    assert _types(_wipefs(image)) == [("linux_raid_member", offset)]  # util-linux agrees


def _lvm2_label(pv_uuid: str) -> bytes:
    sector = bytearray(512)
    sector[0:8] = b"LABELONE"
    struct.pack_into("<QI", sector, 8, 1, 0)  # sector_xl, crc (below)
    struct.pack_into("<I", sector, 20, 32)  # offset_xl: the PV header
    sector[24:32] = b"LVM2 001"
    sector[32:64] = pv_uuid.encode()
    struct.pack_into("<Q", sector, 64, 64 * MiB)  # device size
    struct.pack_into("<QQ", sector, 72, 1 * MiB, 0)  # data area, then the list's end
    struct.pack_into("<QQ", sector, 104, 4 * KiB, 1 * MiB - 4 * KiB)  # metadata area
    struct.pack_into("<I", sector, 16, lvm2_crc(bytes(sector[20:512])))
    return bytes(sector)


def test_lvm2_physical_volume_label(shm_dir: Path) -> None:
    image = _image(shm_dir)
    _poke(image, 512, _lvm2_label("Ab3dEfGhIjKlMnOpQrStUvWxYz012345"))
    [sig] = _cross_check(image)
    assert (sig.type, sig.offset_bytes) == ("LVM2_member", 512 + 24)
    assert sig.uuid == "Ab3dEf-GhIj-KlMn-OpQr-StUv-WxYz-012345"
    assert sig.describe().startswith("an LVM2 physical volume (UUID Ab3dEf-")
    _poke(image, 600, b"x")  # a broken checksum: not a label (as blkid decides)
    assert probe_magic(str(image)) == []


def test_luks1_header(shm_dir: Path) -> None:
    image = _image(shm_dir, 16 * MiB)
    header = bytearray(592)
    header[0:6] = b"LUKS\xba\xbe"
    struct.pack_into(">H", header, 6, 1)
    header[8:11], header[40:47], header[72:78] = b"aes", b"xts-64", b"sha256"
    struct.pack_into(">II", header, 104, 4096, 64)
    header[168:168 + 36] = UUID.encode()
    _poke(image, 0, bytes(header))
    [sig] = _cross_check(image)
    assert (sig.type, sig.uuid, sig.version) == ("crypto_LUKS", UUID, "LUKS1")


def test_iso9660_volume(shm_dir: Path) -> None:
    image = _image(shm_dir, 4 * MiB)
    pvd = bytearray(2048)
    pvd[0:7] = b"\x01CD001\x01"
    pvd[40:72] = b"RELEASE".ljust(32)
    struct.pack_into("<I", pvd, 80, 2048)  # volume space size (both-endian in the spec)
    struct.pack_into(">I", pvd, 84, 2048)
    struct.pack_into("<H", pvd, 128, 2048)  # logical block size
    struct.pack_into(">H", pvd, 130, 2048)
    _poke(image, 32 * KiB, bytes(pvd))
    _poke(image, 34 * KiB, b"\xffCD001\x01")  # the set terminator
    [sig] = probe_magic(str(image))
    assert (sig.type, sig.offset_bytes, sig.label) == ("iso9660", 32 * KiB + 1, "RELEASE")


@pytest.mark.parametrize(
    ("kind", "offset", "data"),
    [
        ("bcache", 4096, b"\0" * 8 + struct.pack("<QQ", 8, 0) + BCACHE_MAGIC),
        ("ntfs", 0, b"\xebR\x90NTFS    " + b"\0" * 501 + b"\x55\xaa"),
        ("exfat", 0, b"\xebv\x90EXFAT   " + b"\0" * 501 + b"\x55\xaa"),
        ("f2fs", 1024, struct.pack("<I", 0xF2F52010)),
        ("squashfs", 0, b"hsqs"),
        ("swsuspend", 4086, b"S1SUSPEND\0"),
        ("swap", 4086, b"SWAP-SPACE"),
    ],
)
def test_other_magic_numbers(shm_dir: Path, kind: str, offset: int, data: bytes) -> None:
    image = _image(shm_dir, 4 * MiB)
    _poke(image, offset, data)
    assert [sig.type for sig in probe_magic(str(image))] == [kind]


def test_zfs_needs_several_uberblocks(shm_dir: Path) -> None:
    image = _image(shm_dir, 8 * MiB)
    magic = struct.pack("<Q", ZFS_UBERBLOCK_MAGIC)
    _poke(image, 128 * KiB, magic)
    assert probe_magic(str(image)) == []  # one stray number is not a pool
    for slot in range(1, 4):
        _poke(image, 128 * KiB + slot * KiB, magic)
    [sig] = probe_magic(str(image))
    assert (sig.type, sig.offset_bytes) == ("zfs_member", 128 * KiB)


def test_fat_boot_sector_is_a_filesystem_not_a_partition_table(shm_dir: Path) -> None:
    image = _image(shm_dir, 16 * MiB)
    boot = bytearray(512)
    boot[0:3], boot[3:11] = b"\xeb<\x90", b"mkfs.fat"
    struct.pack_into("<HBHB", boot, 11, 512, 4, 4, 2)
    boot[38], boot[39:43] = 0x29, struct.pack("<I", 0x1234ABCD)
    boot[43:54], boot[54:62] = b"BOOTDISK   ", b"FAT16   "
    boot[446 + 4] = 0x06  # garbage where an MBR keeps its entries
    struct.pack_into("<I", boot, 446 + 12, 100)
    boot[510:512] = b"\x55\xaa"
    _poke(image, 0, bytes(boot))
    [sig] = probe_magic(str(image))
    assert (sig.type, sig.uuid, sig.label) == ("vfat", "1234-ABCD", "BOOTDISK")


# --------------------------------------------------------------------------- blank devices


def test_zeros_and_random_data_carry_nothing(shm_dir: Path) -> None:
    zeros = _image(shm_dir, 8 * MiB, "zeros.img")
    assert probe_magic(str(zeros)) == []
    noise = shm_dir / "noise.img"
    noise.write_bytes(os.urandom(8 * MiB))  # what a device looks like after fio wrote it
    assert probe_magic(str(noise)) == []
    assert probe_device(str(noise)).blank


def test_tiny_and_empty_images(shm_dir: Path) -> None:
    for size in (0, 100, 4096, 70 * KiB):
        assert probe_magic(str(_image(shm_dir, size, f"t{size}.img"))) == []


# --------------------------------------------------------------------------- util-linux runs


class FakeRun:
    """A fake subprocess.run answering one tool."""

    def __init__(self, returncode: int, stdout: str = "", stderr: str = "") -> None:
        self.result = (returncode, stdout, stderr)
        self.commands: list[list[str]] = []

    def __call__(self, command: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
        self.commands.append(command)
        code, out, err = self.result
        return subprocess.CompletedProcess(command, code, out, err)


def only(*tools: str) -> Callable[[str], str | None]:
    return lambda name: f"/sbin/{name}" if name in tools else None


WIPEFS_JSON = """{"signatures": [
  {"device":"sdz","offset":"0x200","type":"gpt","uuid":"d2b1c2a4-0e6b-4bd6-9fa3-3d1a1f5c0c11","label":null},
  {"device":"sdz","offset":"0x3ffffe00","type":"gpt","uuid":"d2b1c2a4-0e6b-4bd6-9fa3-3d1a1f5c0c11","label":null},
  {"device":"sdz","offset":"0x1fe","type":"PMBR","uuid":null,"label":null}]}"""


def test_wipefs_output_is_parsed_and_read_only() -> None:
    run = FakeRun(0, WIPEFS_JSON)
    tool, found, error = probe_with_tools("/dev/sdz", runner=run, which=only("wipefs", "blkid"))
    assert run.commands == [["wipefs", "--no-act", "--json", "/dev/sdz"]]
    assert (tool, error) == ("wipefs", None)
    assert _types(found) == [("PMBR", 0x1FE), ("gpt", 0x200), ("gpt", 0x3FFFFE00)]
    assert sg.describe_signatures(found) == (
        "a GPT partition table (UUID d2b1c2a4-0e6b-4bd6-9fa3-3d1a1f5c0c11)"
    )
    assert probe_with_tools("/dev/sdz", runner=FakeRun(0, ""), which=only("wipefs"))[1] == []


def test_blkid_when_wipefs_is_missing() -> None:
    export = "DEVNAME=/dev/sdz\nLABEL=data\nUUID=abc\nVERSION=1.0\nTYPE=ext4\nUSAGE=filesystem\n"
    run = FakeRun(0, export)
    tool, found, error = probe_with_tools("/dev/sdz", runner=run, which=only("blkid"))
    assert run.commands == [["blkid", "-p", "-o", "export", "/dev/sdz"]]
    assert (tool, error) == ("blkid", None)
    assert [(s.type, s.label, s.uuid) for s in found] == [("ext4", "data", "abc")]
    assert probe_with_tools("/x", runner=FakeRun(2), which=only("blkid"))[1] == []
    assert [s.type for s in probe_with_tools("/x", runner=FakeRun(8),
                                             which=only("blkid"))[1]] == ["ambivalent"]
    assert probe_with_tools("/x", runner=FakeRun(4, "", "blkid: bad usage\n"),
                            which=only("blkid")) == ("blkid", [], "blkid: bad usage")


def test_no_util_linux_and_failing_tools() -> None:
    assert probe_with_tools("/x", runner=FakeRun(0), which=only()) == (None, [], None)
    failed = probe_with_tools("/x", runner=FakeRun(1, "", "wipefs: error: busy\n"),
                              which=only("wipefs"))
    assert failed == ("wipefs", [], "wipefs: error: busy")


def test_probe_device_merges_both_probes_and_never_calls_a_failure_blank(
    shm_dir: Path,
) -> None:
    image = _image(shm_dir, 16 * MiB)
    _poke(image, 512, _lvm2_label("A" * 32))
    run = FakeRun(0, '{"signatures": [{"offset": "0x218", "type": "LVM2_member", '
                     '"uuid": "from-wipefs"}, {"offset": "0x0", "type": "jfs"}]}')
    found = probe_device(str(image), runner=run, which=only("wipefs"))
    assert [(s.type, s.uuid, s.sources) for s in found.signatures] == [
        ("LVM2_member", "from-wipefs", ("wipefs", "ssdlab")), ("jfs", None, ("wipefs",))]
    assert not found.blank
    broken = probe_device(str(_image(shm_dir, MiB, "blank.img")),
                             runner=FakeRun(1, "", "boom"), which=only("wipefs"))
    assert not broken.blank and broken.errors == ("wipefs: boom",)
    assert broken.describe() == "contents that could not be probed (wipefs: boom)"
    missing = probe_device(str(shm_dir / "nope"), which=only())
    assert not missing.blank and "No such file" in missing.errors[0]


def test_describe_a_disk_with_partitions() -> None:
    gpt = Signature("gpt", 512, partitions=1)
    ext4 = Signature("ext4", 0x438, label="data")
    probe = DeviceProbe("/dev/loop3", (Signature("PMBR", 510), gpt),
                        (("/dev/loop3p1", (ext4,)),))
    assert probe.describe() == (
        "a GPT partition table with 1 partition (/dev/loop3p1: an ext4 filesystem "
        "(label 'data'))"
    )
    both = sg.describe_signatures([ext4, Signature("swap", 4086), gpt])
    assert both == ("a GPT partition table with 1 partition, an ext4 filesystem "
                    "(label 'data') and a Linux swap area")


# --------------------------------------------------------------------------- the guardrail


class FakeDevice:
    """DeviceAccess with a chosen probe result, exclusive-open error and device paths."""

    def __init__(self, found: DeviceProbe, busy: str | None = None,
                 aliases: tuple[str, ...] = ()) -> None:
        self.found, self.busy, self.aliases = found, busy, aliases
        self.probed = 0

    def exclusive_open_error(self, path: str) -> str | None:
        return self.busy

    def probe(self, path: str, partitions: tuple[str, ...]) -> DeviceProbe:
        self.probed += 1
        return self.found

    def same_device(self, path: str, other: str) -> bool | None:
        if other.startswith("/dev/nonexistent"):
            return None
        return other == path or other in self.aliases


def _loop(serial: str | None = None) -> TargetInfo:
    return TargetInfo(
        path="/dev/loop3", kind="block", name="loop3", device_class="virtual", model=None,
        serial=serial, firmware=None, capacity_bytes=64 * MiB, logical_sector_bytes=512,
        physical_sector_bytes=512, rotational=False, numa_node=None, scheduler="none",
        discard_max_bytes=None, details={},
    )


EXT4 = DeviceProbe("/dev/loop3", (Signature("ext4", 0x438, label="data"),), tool="wipefs")
BLANK = DeviceProbe("/dev/loop3", (), tool="wipefs")


def _refusal(info: TargetInfo, destroy_data: bool | str, device: FakeDevice,
             writes: bool = True, tmp: Path | None = None) -> str | None:
    fake_sys = (tmp or Path("/nonexistent")) / "sys"
    try:
        check_block_target(info, destroy_data=destroy_data, writes=writes, sysfs=fake_sys,
                           proc=fake_sys, device=device)
    except TargetError as err:
        return err.message
    return None


def test_signature_needs_the_confirmation_naming_the_device() -> None:
    device = FakeDevice(EXT4)
    for consent in (False, True):
        assert _refusal(_loop("S123"), consent, device) == (
            "/dev/loop3 carries an ext4 filesystem (label 'data'); nothing was written. "
            "To destroy it, confirm with --destroy-data=/dev/loop3 (or its serial S123)"
        )
    assert _refusal(_loop(), True, device) == (
        "/dev/loop3 carries an ext4 filesystem (label 'data'); nothing was written. "
        "To destroy it, confirm with --destroy-data=/dev/loop3"
    )
    assert _refusal(_loop("S123"), "S123", device) is None
    assert _refusal(_loop("S123"), "/dev/loop3", device) is None
    aliased = FakeDevice(EXT4, aliases=("/dev/disk/by-id/usb-x",))
    assert _refusal(_loop(), "/dev/disk/by-id/usb-x", aliased) is None


def test_wrong_confirmations_are_refused_even_on_blank_devices() -> None:
    for found in (EXT4, BLANK):
        device = FakeDevice(found)
        assert _refusal(_loop("S123"), "S124", device) == (
            "refusing /dev/loop3: the confirmation names S124, but /dev/loop3 has serial "
            "S123; nothing was written"
        )
        assert _refusal(_loop("S123"), "/dev/loop4", device) == (
            "refusing /dev/loop3: the confirmation names /dev/loop4, another device than "
            "/dev/loop3; nothing was written"
        )
        assert _refusal(_loop(), "/dev/nonexistent9", device) == (
            "refusing /dev/loop3: the confirmation names /dev/nonexistent9, which is not a "
            "block device; nothing was written"
        )
        assert _refusal(_loop(), "S123", device) == (
            "refusing /dev/loop3: the confirmation names serial S123, but /dev/loop3 has no "
            "serial number; nothing was written (confirm with --destroy-data=/dev/loop3)"
        )


def test_blank_device_needs_only_the_flag() -> None:
    device = FakeDevice(BLANK)
    assert _refusal(_loop(), True, device) is None
    assert _refusal(_loop(), False, device) == (
        "refusing to write to /dev/loop3 without --destroy-data: "
        "every byte on it will be overwritten"
    )


def test_unprobeable_device_needs_the_confirmation() -> None:
    device = FakeDevice(DeviceProbe("/dev/loop3", (), errors=("wipefs: boom",)))
    assert _refusal(_loop(), True, device) == (
        "cannot tell what /dev/loop3 carries (wipefs: boom); nothing was written. "
        "To destroy it, confirm with --destroy-data=/dev/loop3"
    )
    assert _refusal(_loop(), "/dev/loop3", device) is None


def test_reading_needs_no_consent_but_a_busy_device_is_refused() -> None:
    device = FakeDevice(EXT4)
    assert _refusal(_loop(), False, device, writes=False) is None
    assert device.probed == 0  # reading: the signature does not matter
    busy = FakeDevice(BLANK, busy="/dev/loop3 is in use by another program "
                                  "(exclusive open failed)")
    for consent in (False, True, "/dev/loop3"):
        assert _refusal(_loop(), consent, busy) == (
            "refusing /dev/loop3: /dev/loop3 is in use by another program (exclusive open "
            "failed); nothing was written"
        )


def test_check_destroy_data_skips_the_probe_once_confirmed() -> None:
    device = FakeDevice(EXT4)
    ctx = SafetyContext(_loop(), "/dev/loop3", True, Path("/nonexistent"), Path("/nonexistent"),
                        device)
    assert check_destroy_data(ctx) is None and device.probed == 0
    assert check_destroy_data(replace(ctx, destroy_data=True)) is not None
