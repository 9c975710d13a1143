"""What a block device (or an image file) carries: partition tables, filesystems, RAID
and LVM members, swap, LUKS, bcache, ZFS, found by their magic numbers as blkid does.

This module holds what the probes report and how it is described: :class:`Signature`,
:class:`DeviceProbe` and :func:`describe_signatures`. The probes themselves, both
opening the target ``O_RDONLY`` and never writing:

* :mod:`ssdlab.targets.signature_probe`: util-linux (``wipefs --no-act --json``, else
  ``blkid -p -o export``), and :func:`~ssdlab.targets.signature_probe.probe_device`,
  which reports the union of both probes and the partitions' own signatures: anything
  either probe finds counts. A probe that fails is reported as such, never as "blank";
* :mod:`ssdlab.targets.magic`: ssdlab's own reader of the magic numbers of the common
  signatures, at the offsets blkid reads them: the fallback when util-linux is missing
  and a cross-check when it is there. It also counts partitions and btrfs devices, which
  the tools omit.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

__all__ = [
    "DeviceProbe",
    "Signature",
    "describe_signatures",
    "enrich",
    "family",
]

# --------------------------------------------------------------------------- the result


@dataclass(frozen=True)
class Signature:
    """One signature: its blkid type name, where it is and what it says about itself."""

    type: str  # blkid's name: ext4, xfs, btrfs, swap, gpt, dos, PMBR, LVM2_member, ...
    offset_bytes: int | None = None  # where the magic is (None: the tool did not say)
    uuid: str | None = None
    label: str | None = None
    partitions: int | None = None  # partition tables: entries in use
    devices: int | None = None  # btrfs: devices of the filesystem
    version: str | None = None  # md metadata, LUKS, swap header version
    sources: tuple[str, ...] = ("ssdlab",)  # which probes found it: wipefs, blkid, ssdlab

    def describe(self) -> str:
        """'an ext4 filesystem (UUID ..., label 'data')', with its article."""
        return _phrase(self) + _suffix(self)


#: blkid type -> (phrase with article, rank in a description: tables first)
PHRASES: dict[str, tuple[str, int]] = {
    "gpt": ("a GPT partition table", 0),
    "dos": ("an MBR (dos) partition table", 0),
    "PMBR": ("a protective MBR", 0),
    "linux_raid_member": ("an md RAID member", 1),
    "LVM2_member": ("an LVM2 physical volume", 1),
    "crypto_LUKS": ("a LUKS encrypted volume", 1),
    "bcache": ("a bcache device", 1),
    "zfs_member": ("a ZFS pool member", 1),
    "ext2": ("an ext2 filesystem", 2),
    "ext3": ("an ext3 filesystem", 2),
    "ext4": ("an ext4 filesystem", 2),
    "jbd": ("an ext3/ext4 external journal", 2),
    "xfs": ("an xfs filesystem", 2),
    "btrfs": ("a btrfs filesystem", 2),
    "vfat": ("a vfat (FAT) filesystem", 2),
    "exfat": ("an exFAT filesystem", 2),
    "ntfs": ("an NTFS filesystem", 2),
    "iso9660": ("an iso9660 filesystem", 2),
    "f2fs": ("an f2fs filesystem", 2),
    "squashfs": ("a squashfs filesystem", 2),
    "swap": ("a Linux swap area", 3),
    "swsuspend": ("a Linux hibernation image (in a swap area)", 3),
    "ambivalent": ("several signatures blkid cannot choose between", 4),
    "unknown": ("an unrecognised signature", 4),
}


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _phrase(sig: Signature) -> str:
    if sig.type == "btrfs" and sig.devices and sig.devices > 1:
        return f"a btrfs member of a {sig.devices}-device filesystem"
    phrase = PHRASES.get(sig.type, (f"a {sig.type} signature", 4))[0]
    if sig.type in ("gpt", "dos") and sig.partitions is not None:
        phrase += f" with {_plural(sig.partitions, 'partition')}"
    if sig.type in ("linux_raid_member", "crypto_LUKS") and sig.version:
        phrase += f" ({'metadata ' if sig.type != 'crypto_LUKS' else ''}{sig.version})"
    return phrase


def _suffix(sig: Signature) -> str:
    facts = [f"UUID {sig.uuid}"] if sig.uuid else []
    facts += [f"label {sig.label!r}"] if sig.label else []
    return f" ({', '.join(facts)})" if facts else ""


def _rank(sig: Signature) -> int:
    return PHRASES.get(sig.type, ("", 4))[1]


def family(type_name: str) -> str:
    return "ext" if type_name in ("ext2", "ext3", "ext4") else type_name


def _distinct(signatures: Iterable[Signature]) -> list[Signature]:
    """One signature per type (GPT's primary and backup headers are one table), the
    protective MBR folded into its GPT, tables first."""
    by_type: dict[str, Signature] = {}
    for sig in signatures:
        key = family(sig.type)
        kept = by_type.get(key)
        by_type[key] = sig if kept is None else enrich(kept, sig)
    if "gpt" in by_type:
        by_type.pop("PMBR", None)
    return sorted(by_type.values(), key=_rank)


def _join(phrases: list[str]) -> str:
    if len(phrases) <= 1:
        return "".join(phrases)
    return ", ".join(phrases[:-1]) + " and " + phrases[-1]


def describe_signatures(signatures: Iterable[Signature]) -> str:
    """'a GPT partition table with 2 partitions and an ext4 filesystem (...)'; '' if none."""
    return _join([sig.describe() for sig in _distinct(signatures)])


@dataclass(frozen=True)
class DeviceProbe:
    """What :func:`~ssdlab.targets.signature_probe.probe_device` found on a device and on
    each of its partitions."""

    path: str
    signatures: tuple[Signature, ...]
    partitions: tuple[tuple[str, tuple[Signature, ...]], ...] = ()
    tool: str | None = None  # "wipefs" or "blkid"; None when neither could be run
    errors: tuple[str, ...] = ()  # probes that failed (their findings are missing)

    @property
    def blank(self) -> bool:
        """No signature anywhere, and every probe worked."""
        return not self.errors and not self.signatures and not any(
            sigs for _, sigs in self.partitions
        )

    def describe(self) -> str:
        """One line: what the device carries (for the refusal message)."""
        main = describe_signatures(self.signatures)
        inside = [f"{path}: {describe_signatures(sigs)}" for path, sigs in self.partitions if sigs]
        if inside:
            main = f"{main} ({'; '.join(inside)})" if main else f"partitions ({'; '.join(inside)})"
        if self.errors:
            failed = f"contents that could not be probed ({'; '.join(self.errors)})"
            main = f"{main} and {failed}" if main else failed
        return main


def enrich(first: Signature, other: Signature) -> Signature:
    """``first`` with what only ``other`` knows (partition count, devices, version)."""
    return replace(
        first,
        uuid=first.uuid or other.uuid,
        label=first.label or other.label,
        partitions=first.partitions if first.partitions is not None else other.partitions,
        devices=first.devices if first.devices is not None else other.devices,
        version=first.version or other.version,
        sources=tuple(dict.fromkeys(first.sources + other.sources)),
    )

