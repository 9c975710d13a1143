"""ssdlab's own reader of the magic numbers of the common signatures (partition tables,
RAID and LVM members, LUKS, bcache, ZFS, filesystems, swap), at the offsets blkid reads
them: the fallback when util-linux is missing and a cross-check when it is there
(:mod:`ssdlab.targets.signature_probe`). It opens the target ``O_RDONLY`` and never
writes. It also counts partitions and btrfs devices, which the tools omit.
"""

from __future__ import annotations

import os
import stat
import struct
import uuid
import zlib
from collections.abc import Callable

from ssdlab.targets.signatures import Signature

__all__ = [
    "MAGIC_PROBES",
    "Reader",
    "lvm2_crc",
    "probe_magic",
]

KIB = 1024


class Reader:
    """Reads a device or image ``O_RDONLY`` by offset; short reads past the end."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        st = os.fstat(fd)
        self.size = (
            os.lseek(fd, 0, os.SEEK_END) if stat.S_ISBLK(st.st_mode) else st.st_size
        )
        self._cache: dict[tuple[int, int], bytes] = {}

    def read(self, offset: int, length: int) -> bytes:
        if offset < 0 or offset >= self.size:
            return b""
        key = (offset, length)
        if key not in self._cache:
            self._cache[key] = os.pread(self.fd, min(length, self.size - offset), offset)
        return self._cache[key]


def _u16(data: bytes, at: int, order: str = "<") -> int:
    return int(struct.unpack_from(order + "H", data, at)[0]) if len(data) >= at + 2 else -1


def _u32(data: bytes, at: int, order: str = "<") -> int:
    return int(struct.unpack_from(order + "I", data, at)[0]) if len(data) >= at + 4 else -1


def _u64(data: bytes, at: int, order: str = "<") -> int:
    return int(struct.unpack_from(order + "Q", data, at)[0]) if len(data) >= at + 8 else -1


def _text(raw: bytes) -> str | None:
    value = raw.split(b"\0", 1)[0].decode("utf-8", errors="replace").strip()
    return value or None


def _uuid(raw: bytes) -> str | None:
    return str(uuid.UUID(bytes=raw)) if len(raw) == 16 and any(raw) else None


def _guid(raw: bytes) -> str | None:
    """A GPT GUID (its first three fields are little-endian)."""
    return str(uuid.UUID(bytes_le=raw)) if len(raw) == 16 and any(raw) else None


MagicProbe = Callable[[Reader], list[Signature]]

# partition tables ----------------------------------------------------------------


def _gpt_at(r: Reader, header_at: int, sector: int) -> Signature | None:
    head = r.read(header_at, 92)
    if head[:8] != b"EFI PART":
        return None
    entries_lba, count, size = _u64(head, 72), _u32(head, 80), _u32(head, 84)
    used = None
    if 128 <= size <= 4096 and size % 8 == 0 and 0 < count <= 1024:
        table = r.read(entries_lba * sector, count * size)
        used = sum(1 for i in range(0, len(table), size) if any(table[i : i + 16]))
    return Signature("gpt", header_at, uuid=_guid(head[56:72]), partitions=used)


def probe_gpt(r: Reader) -> list[Signature]:
    """'EFI PART' at LBA 1 and the backup header at the last LBA (512 or 4096-byte LBAs)."""
    found: list[Signature] = []
    for sector in (512, 4096):
        for at in (sector, r.size - sector):
            sig = _gpt_at(r, at, sector)
            if sig is not None and all(s.offset_bytes != at for s in found):
                found.append(sig)
    return found


def _boot_sector_fs(r: Reader) -> bool:
    return bool(probe_vfat(r) or probe_ntfs(r) or probe_exfat(r))


def probe_mbr(r: Reader) -> list[Signature]:
    """0x55AA at 510 and four sane entries: an MBR, or GPT's protective MBR (type 0xEE)."""
    sector = r.read(0, 512)
    if len(sector) < 512 or sector[510:512] != b"\x55\xaa":
        return []
    entries = [sector[446 + 16 * i : 462 + 16 * i] for i in range(4)]
    if any(entry[0] not in (0x00, 0x80) for entry in entries):
        return []
    used = [entry for entry in entries if entry[4] != 0 and _u32(entry, 12) > 0]
    if not used or _boot_sector_fs(r):
        return []
    if any(entry[4] == 0xEE for entry in used):
        return [Signature("PMBR", 510)]
    disk_id = _u32(sector, 440)
    return [Signature("dos", 510, uuid=f"{disk_id:08x}" if disk_id else None,
                      partitions=len(used))]


# RAID, volume managers, encryption, caches -----------------------------------------

MD_MAGIC = 0xA92B4EFC


def probe_md(r: Reader) -> list[Signature]:
    """md superblocks: 1.1 at 0, 1.2 at 4 KiB, 1.0 near the end, 0.90 64 KiB before the
    end rounded down to 64 KiB (as mdadm places them)."""
    sectors = r.size // 512
    spots = [("1.1", 0), ("1.2", 4 * KIB)]
    if sectors >= 24:
        spots.append(("1.0", ((sectors - 16) & ~7) * 512))
    if sectors >= 256:
        spots.append(("0.90", ((sectors & ~127) - 128) * 512))
    found = []
    for version, at in spots:
        sb = r.read(at, 256)
        if version == "0.90":
            for order in ("<", ">"):
                if (_u32(sb, 0, order), _u32(sb, 4, order), _u32(sb, 8, order)) == (
                    MD_MAGIC, 0, 90
                ):
                    raw = sb[20:24] + sb[52:64]
                    found.append(Signature("linux_raid_member", at, uuid=_uuid(raw),
                                           version=version))
                    break
        elif _u32(sb, 0) == MD_MAGIC and _u32(sb, 4) == 1:
            name = _text(sb[32:64])
            found.append(Signature("linux_raid_member", at, uuid=_uuid(sb[16:32]),
                                   label=name, version=version))
    return found


def lvm2_crc(data: bytes, initial: int = 0xF597A6CF) -> int:
    """LVM2's label checksum: CRC-32 (zlib's polynomial) from ``initial``, no final xor."""
    return zlib.crc32(data, initial ^ 0xFFFFFFFF) ^ 0xFFFFFFFF


def probe_lvm2(r: Reader) -> list[Signature]:
    """'LABELONE' + 'LVM2 001' in one of the first four sectors, with a valid checksum."""
    for number in range(4):
        sector = r.read(number * 512, 512)
        if sector[:8] != b"LABELONE" or sector[24:32] != b"LVM2 001":
            continue
        if _u64(sector, 8) != number or lvm2_crc(sector[20:512]) != _u32(sector, 16):
            continue
        header = _u32(sector, 20)
        raw = sector[header : header + 32].decode("ascii", errors="replace")
        pv_uuid = "-".join((raw[:6], raw[6:10], raw[10:14], raw[14:18], raw[18:22],
                            raw[22:26], raw[26:32])) if len(raw) == 32 else None
        return [Signature("LVM2_member", number * 512 + 24, uuid=pv_uuid)]
    return []


LUKS_SECONDARY = (16, 32, 64, 128, 256, 512, 1024, 2048, 4096)


def probe_luks(r: Reader) -> list[Signature]:
    """'LUKS\\xba\\xbe' at 0, or a LUKS2 secondary header 'SKUL\\xba\\xbe' further on."""
    for at, magic in [(0, b"LUKS\xba\xbe")] + [(k * KIB, b"SKUL\xba\xbe") for k in LUKS_SECONDARY]:
        head = r.read(at, 512)
        if head[:6] == magic:
            version = _u16(head, 6, ">")
            label = _text(head[24:72]) if version == 2 else None
            return [Signature("crypto_LUKS", at, uuid=_text(head[168:208]), label=label,
                              version=f"LUKS{version}")]
    return []


BCACHE_MAGIC = bytes.fromhex("c68573f64e1a45ca8265f57f48ba6d81")


def probe_bcache(r: Reader) -> list[Signature]:
    """The bcache superblock magic 24 bytes into the 4 KiB superblock."""
    sb = r.read(4 * KIB, 104)
    if sb[24:40] == BCACHE_MAGIC:
        return [Signature("bcache", 4 * KIB + 24, uuid=_uuid(sb[40:56]), label=_text(sb[72:104]))]
    return []


ZFS_LABEL = 256 * KIB
ZFS_UBERBLOCK_MAGIC = 0x00BAB10C
ZFS_WANT = 4  # uberblocks blkid wants to see before it believes a ZFS label


def probe_zfs(r: Reader) -> list[Signature]:
    """Uberblock magic numbers in the uberblock rings of the four vdev labels."""
    end = r.size - r.size % ZFS_LABEL
    labels = [0, ZFS_LABEL, end - 2 * ZFS_LABEL, end - ZFS_LABEL]
    first, seen = None, 0
    for label in dict.fromkeys(at for at in labels if at >= 0):
        ring = r.read(label + 128 * KIB, 128 * KIB)
        for at in range(0, len(ring) - 7, KIB):
            if ZFS_UBERBLOCK_MAGIC in (_u64(ring, at), _u64(ring, at, ">")):
                seen += 1
                first = label + 128 * KIB + at if first is None else first
    return [Signature("zfs_member", first)] if seen >= ZFS_WANT else []


# filesystems -------------------------------------------------------------------------

EXT3_INCOMPAT = 0x0002 | 0x0004 | 0x0010  # filetype, recover, meta_bg
EXT3_RO_COMPAT = 0x0001 | 0x0002 | 0x0004  # sparse_super, large_file, btree_dir


def probe_ext(r: Reader) -> list[Signature]:
    """0xEF53 at 1080 with a sane superblock; ext2/3/4 told apart by features as blkid does."""
    sb = r.read(1024, 256)
    if _u16(sb, 56) != 0xEF53:
        return []
    if not (_u32(sb, 24) <= 6 and _u32(sb, 76) <= 1 and _u32(sb, 0) > 0 and _u32(sb, 4) > 0):
        return []
    compat, incompat, ro_compat = _u32(sb, 92), _u32(sb, 96), _u32(sb, 100)
    if incompat & 0x0008:  # journal_dev
        kind = "jbd"
    elif incompat & ~EXT3_INCOMPAT or ro_compat & ~EXT3_RO_COMPAT:
        kind = "ext4"
    else:
        kind = "ext3" if compat & 0x0004 else "ext2"
    return [Signature(kind, 1024 + 56, uuid=_uuid(sb[104:120]), label=_text(sb[120:136]))]


def probe_xfs(r: Reader) -> list[Signature]:
    sb = r.read(0, 120)
    block = _u32(sb, 4, ">")
    if sb[:4] != b"XFSB" or not (512 <= block <= 65536 and block & (block - 1) == 0):
        return []
    return [Signature("xfs", 0, uuid=_uuid(sb[32:48]), label=_text(sb[108:120]))]


def probe_btrfs(r: Reader) -> list[Signature]:
    """'_BHRfS_M' in the superblock at 64 KiB; num_devices says whether it is one of many."""
    sb = r.read(64 * KIB, 0x22B)
    if sb[0x40:0x48] != b"_BHRfS_M":
        return []
    return [Signature("btrfs", 64 * KIB + 0x40, uuid=_uuid(sb[0x20:0x30]),
                      label=_text(sb[0x12B:0x22B]), devices=max(_u64(sb, 0x88), 1))]


def probe_vfat(r: Reader) -> list[Signature]:
    boot = r.read(0, 512)
    if len(boot) < 512 or boot[510:512] != b"\x55\xaa":
        return []
    per_sector, per_cluster = _u16(boot, 11), boot[13]
    sane = per_sector in (512, 1024, 2048, 4096) and per_cluster and not (
        per_cluster & (per_cluster - 1)) and _u16(boot, 14) >= 1 and 1 <= boot[16] <= 4
    if not sane:
        return []
    if boot[82:90] == b"FAT32   ":
        serial, label = _u32(boot, 67), boot[71:82]
    elif boot[54:62] in (b"FAT12   ", b"FAT16   "):
        serial, label = _u32(boot, 39), boot[43:54]
    else:
        return []
    name = _text(label)
    return [Signature("vfat", 0, uuid=f"{serial >> 16:04X}-{serial & 0xFFFF:04X}",
                      label=None if name == "NO NAME" else name)]


def probe_ntfs(r: Reader) -> list[Signature]:
    boot = r.read(0, 512)
    if boot[3:11] != b"NTFS    ":
        return []
    return [Signature("ntfs", 3, uuid=f"{_u64(boot, 0x48):016X}")]


def probe_exfat(r: Reader) -> list[Signature]:
    boot = r.read(0, 512)
    if boot[3:11] != b"EXFAT   ":
        return []
    serial = _u32(boot, 100)
    return [Signature("exfat", 3, uuid=f"{serial >> 16:04X}-{serial & 0xFFFF:04X}")]


def probe_iso9660(r: Reader) -> list[Signature]:
    pvd = r.read(32 * KIB, 72)
    if pvd[:6] != b"\x01CD001":
        return []
    return [Signature("iso9660", 32 * KIB + 1, label=_text(pvd[40:72]))]


def probe_f2fs(r: Reader) -> list[Signature]:
    sb = r.read(1024, 0x90)
    if _u32(sb, 0) != 0xF2F52010:
        return []
    return [Signature("f2fs", 1024, uuid=_uuid(sb[0x6C:0x7C]))]


def probe_squashfs(r: Reader) -> list[Signature]:
    return [Signature("squashfs", 0)] if r.read(0, 4) == b"hsqs" else []


SWAP_PAGE_SIZES = (4 * KIB, 8 * KIB, 16 * KIB, 32 * KIB, 64 * KIB)
SUSPEND_MAGICS = (b"S1SUSPEND", b"S2SUSPEND", b"ULSUSPEND", b"LINHIB0001")


def probe_swap(r: Reader) -> list[Signature]:
    """'SWAPSPACE2' (or the old 'SWAP-SPACE') in the last 10 bytes of the first page."""
    for page in SWAP_PAGE_SIZES:
        magic = r.read(page - 10, 10)
        if magic in (b"SWAPSPACE2", b"SWAP-SPACE"):
            header = r.read(1024, 44)
            new = magic == b"SWAPSPACE2"
            return [Signature("swap", page - 10, uuid=_uuid(header[12:28]) if new else None,
                              label=_text(header[28:44]) if new else None,
                              version="1" if new else "0")]
        if any(magic.startswith(m) for m in SUSPEND_MAGICS):
            return [Signature("swsuspend", page - 10)]
    return []


#: every magic-number probe, in the order they run
MAGIC_PROBES: tuple[MagicProbe, ...] = (
    probe_gpt, probe_mbr, probe_md, probe_lvm2, probe_luks, probe_bcache, probe_zfs,
    probe_ext, probe_xfs, probe_btrfs, probe_vfat, probe_ntfs, probe_exfat, probe_iso9660,
    probe_f2fs, probe_squashfs, probe_swap,
)


def probe_magic(path: str) -> list[Signature]:
    """Every signature :data:`MAGIC_PROBES` find in ``path`` (opened ``O_RDONLY``)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        reader = Reader(fd)
        return [sig for probe in MAGIC_PROBES for sig in probe(reader)]
    finally:
        os.close(fd)
