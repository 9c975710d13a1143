"""Software arrays as plans (issue 15): a level, a backend and member devices become the
exact commands that build the array, the target the suites run on, and the commands that
tear it down again and wipe the members. Pure: nothing here runs a command or looks at a
device; the guardrails check every member before any of these commands runs.

Backends:

* ``md``: Linux md (``mdadm``), levels 0, 1, 5, 6 and 10, chunk size as given (``--chunk``);
  the block target is ``/dev/md/NAME``, after the initial resync (``mdadm --wait``, which
  exits 1 when there was nothing to wait for: whoever runs it takes that as done).
* ``zfs``: a pool of one stripe, a mirror of every member (1), striped mirrored pairs
  (10) or raidz1/raidz2 (5, 6), ``ashift=12``; a zvol as the block target
  (``/dev/zvol/POOL/ssdlab``) at 80 % of what the pool has available once built (ZFS
  keeps back its slop space: 128 MiB on small pools), less the parity padding raidz
  charges a zvol's small blocks; and a dataset for the file presets, mounted where a
  btrfs array would be. The chunk size becomes the zvol's ``volblocksize``. Levels are
  named by ZFS's names (:func:`level_name`): stripe, mirror, striped mirrors, raidz1,
  raidz2.
* ``btrfs``: a multi-device file system with the level as its data profile (metadata
  raid1, or raid1c3 under raid6, as btrfs advises for its parity levels); the block
  suites run on an ssdlab test file with copy-on-write off, the file presets on the
  mount. btrfs stripes are 64 KiB per device and cannot be set.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ssdlab.analysis.member_rounds import raidz_alloc_bytes
from ssdlab.errors import UserError
from ssdlab.units import format_bytes

BACKENDS = ("md", "zfs", "btrfs")
LEVELS = ("raid0", "raid1", "raid5", "raid6", "raid10")
#: fewest members of each level (RAID 10 as mirrored pairs: md accepts fewer, the
#: reviews and the other backends do not)
MIN_MEMBERS = {"raid0": 2, "raid1": 2, "raid5": 3, "raid6": 4, "raid10": 4}
#: members' worth of space a level keeps usable, less than all members: mirrors keep one
#: of each set, parity levels give up one or two members' worth
REDUNDANCY = {"raid0": 0, "raid5": 1, "raid6": 2}
DEFAULT_CHUNK_BYTES = {"md": 512 * 1024, "zfs": 16 * 1024, "btrfs": 64 * 1024}
BTRFS_STRIPE_BYTES = 64 * 1024
BTRFS_METADATA = {"raid0": "raid1", "raid1": "raid1", "raid10": "raid1",
                  "raid5": "raid1", "raid6": "raid1c3"}
ZFS_VDEV = {"raid1": "mirror", "raid5": "raidz1", "raid6": "raidz2"}
#: the levels by ZFS's own names
ZFS_LEVEL_NAMES = {"raid0": "stripe", "raid1": "mirror", "raid10": "striped mirrors",
                   "raid5": "raidz1", "raid6": "raidz2"}
ZFS_ASHIFT = 12
#: raidz's parity columns per level
RAIDZ_PARITY = {"raid5": 1, "raid6": 2}
#: the block size ZFS reckons a raidz vdev's usable space by (SPA_OLD_MAXBLOCKSIZE)
ZFS_SPACE_BLOCK = 128 * 1024
#: ZFS's slop space, kept back from every pool: 1/32 of it, at least 128 MiB (never more
#: than half the pool): most of a small pool's missing space
ZFS_SLOP_SHIFT, ZFS_MIN_SLOP = 5, 128 * 1024 * 1024
ZVOL_SHARE = 0.8
NAME_RE = re.compile(r"[a-z][a-z0-9_-]{0,31}")


def level_name(backend: str | None, level: str) -> str:
    """The level as its backend names it: ZFS's stripe, mirror, striped mirrors, raidz1,
    raidz2; md's and btrfs's raid0 ... raid10."""
    return ZFS_LEVEL_NAMES.get(level, level) if backend == "zfs" else level


def zfs_member_partition(member: str) -> str:
    """Where ZFS puts its label on a whole-disk member: the partition 1 it makes
    (``/dev/nvme0n1p1``, ``/dev/sdb1``, ``/dev/disk/by-id/X-part1``); ``zpool labelclear``
    on the disk itself fails ("failed to clear label")."""
    if "/disk/by-" in member:
        return f"{member}-part1"
    return f"{member}p1" if member[-1:].isdigit() else f"{member}1"


def parse_level(text: str) -> str:
    """``0``, ``raid0``, ``RAID 10``, ``raid-5`` ... -> ``raid0`` ... (UserError otherwise)."""
    key = re.sub(r"[\s_-]", "", text.strip().lower()).removeprefix("raid")
    level = f"raid{key}"
    if level not in LEVELS:
        raise UserError(f"RAID level {text!r} is not one of 0, 1, 5, 6, 10")
    return level


@dataclass(frozen=True)
class ArrayPlan:
    """One array: what to build from which members, and where the suites run on it."""

    backend: str
    level: str
    members: tuple[str, ...]
    name: str
    chunk_bytes: int
    member_bytes: int
    mount_dir: str

    @property
    def usable_bytes(self) -> int:
        n = len(self.members)
        if self.level == "raid1":
            return self.member_bytes
        usable = n // 2 if self.level == "raid10" else n - REDUNDANCY[self.level]
        return usable * self.member_bytes

    @property
    def level_name(self) -> str:
        return level_name(self.backend, self.level)

    @property
    def zfs_parity(self) -> int:
        return RAIDZ_PARITY.get(self.level, 0) if self.backend == "zfs" else 0

    def zvol_charge(self) -> float:
        """Pool space a zvol block costs per byte of it, as ZFS reckons its available
        space: 1, but on raidz a small block's parity and padding cost more than the
        128 KiB blocks the available space is reckoned by (16 KiB on a raidz1 of four:
        24 KiB allocated against 16 x 44/32)."""
        p = self.zfs_parity
        if not p:
            return 1.0
        n = len(self.members)
        per_byte = raidz_alloc_bytes(ZFS_SPACE_BLOCK, n, p) / ZFS_SPACE_BLOCK
        return raidz_alloc_bytes(self.chunk_bytes, n, p) / self.chunk_bytes / per_byte

    def zvol_bytes(self, available: int | None = None) -> int:
        """The zvol: 80 % of what the built pool has ``available`` (``zfs get available``;
        None: an estimate, the usable size less ZFS's slop space) over the space each of
        its bytes costs there (:meth:`zvol_charge`), in whole MiB: ZFS needs free space
        to perform, and a raidz pool charges small blocks more than it shows."""
        if available is None:
            slop = max(self.usable_bytes >> ZFS_SLOP_SHIFT,
                       min(self.usable_bytes // 2, ZFS_MIN_SLOP))
            available = self.usable_bytes - slop
        size = int(available * ZVOL_SHARE / self.zvol_charge())
        return max(1024 * 1024, size // (1024 * 1024) * (1024 * 1024))

    @property
    def dataset(self) -> str:
        """The ZFS dataset of the file presets, mounted on :attr:`mount_dir`."""
        return f"{self.name}/files"

    @property
    def target(self) -> str:
        """What the block suites run on."""
        if self.backend == "md":
            return f"/dev/md/{self.name}"
        if self.backend == "zfs":
            return f"/dev/zvol/{self.name}/ssdlab"
        return f"{self.mount_dir}/ssdlab.test"

    def describe(self) -> str:
        geometry = ("64 KiB stripe per device (fixed)" if self.backend == "btrfs" else
                    f"{format_bytes(self.chunk_bytes)} "
                    f"{'volblocksize' if self.backend == 'zfs' else 'chunk'}")
        files = (f"; the file presets on {self.mount_dir} (dataset {self.dataset})"
                 if self.backend == "zfs" else "")
        return (f"{self.backend} {self.level_name} of {len(self.members)} members "
                f"({', '.join(self.members)}), {geometry}, "
                f"{format_bytes(self.usable_bytes)} usable; target {self.target}{files}")


def plan_array(backend: str, level: str, members: list[str], *, name: str,
               member_bytes: int, mount_dir: str, chunk_bytes: int | None = None) -> ArrayPlan:
    """Check what can be checked without a device and return the plan (UserError, one
    line, otherwise)."""
    if backend not in BACKENDS:
        raise UserError(f"array backend {backend!r} is not one of: {', '.join(BACKENDS)}")
    level = parse_level(level)
    if not NAME_RE.fullmatch(name):
        raise UserError(f"array name {name!r}: use 1-32 lower-case letters, digits, - and _, "
                        "starting with a letter")
    if len(set(members)) != len(members):
        raise UserError(f"a member is named twice: {' '.join(members)}")
    need = MIN_MEMBERS[level]
    if len(members) < need:
        raise UserError(f"{level} needs at least {need} members, got {len(members)}")
    if level == "raid10" and len(members) % 2:
        raise UserError(f"raid10 is built of mirrored pairs: an even number of members, "
                        f"not {len(members)}")
    chunk = _chunk(backend, level, chunk_bytes)
    return ArrayPlan(backend, level, tuple(members), name, chunk, member_bytes, mount_dir)


def _chunk(backend: str, level: str, chunk_bytes: int | None) -> int:
    if chunk_bytes is None:
        return DEFAULT_CHUNK_BYTES[backend]
    if backend == "btrfs" and chunk_bytes != BTRFS_STRIPE_BYTES:
        raise UserError("btrfs stripes are 64 KiB per device and cannot be set: leave out "
                        "--chunk or give 64KiB")
    if chunk_bytes < 4096 or chunk_bytes & (chunk_bytes - 1):
        raise UserError(f"chunk size {chunk_bytes} bytes: give a power of two of at least 4KiB")
    if backend == "zfs" and chunk_bytes > 128 * 1024:
        raise UserError("a zvol's volblocksize is at most 128KiB")
    if backend == "md" and level == "raid1":
        raise UserError("raid1 has no chunk size (every member holds every block): "
                        "leave out --chunk")
    return chunk_bytes


def create_commands(plan: ArrayPlan, available: int | None = None) -> list[list[str]]:
    """The commands that build the array, in order. ZFS: ``available`` is what the pool
    has available once created, which sizes the zvol (None: an estimate, for a dry run;
    :meth:`ArrayPlan.zvol_bytes`)."""
    members = list(plan.members)
    if plan.backend == "md":
        chunk = [] if plan.level == "raid1" else [f"--chunk={plan.chunk_bytes // 1024}"]
        return [
            ["mdadm", "--create", plan.target, "--run", "--metadata=1.2",
             f"--level={plan.level.removeprefix('raid')}",
             f"--raid-devices={len(members)}", *chunk, *members],
            ["mdadm", "--wait", plan.target],
        ]
    if plan.backend == "zfs":
        return [
            ["zpool", "create", "-f", "-o", "ashift=12", "-m", "none", plan.name,
             *_zfs_vdevs(plan.level, members)],
            ["zfs", "create", "-s", "-V", str(plan.zvol_bytes(available)), "-o",
             f"volblocksize={plan.chunk_bytes}", f"{plan.name}/ssdlab"],
            ["zfs", "create", "-o", f"mountpoint={plan.mount_dir}", "-o", "atime=off",
             plan.dataset],
        ]
    return [
        ["mkfs.btrfs", "-f", "-L", plan.name, "-d", plan.level, "-m",
         BTRFS_METADATA[plan.level], *members],
        ["btrfs", "device", "scan", *members],
        ["mount", "-t", "btrfs", "-o", "nodatacow,noatime", members[0], plan.mount_dir],
    ]


def _zfs_vdevs(level: str, members: list[str]) -> list[str]:
    if level == "raid0":
        return members
    if level == "raid10":
        pairs = [["mirror", *members[i:i + 2]] for i in range(0, len(members), 2)]
        return [word for pair in pairs for word in pair]
    return [ZFS_VDEV[level], *members]


def destroy_commands(plan: ArrayPlan) -> list[list[str]]:
    """The commands that tear the array down and wipe every member's signatures."""
    members = list(plan.members)
    if plan.backend == "md":
        first = [["mdadm", "--stop", plan.target],
                 ["mdadm", "--zero-superblock", *members]]
    elif plan.backend == "zfs":
        first = [["zpool", "destroy", "-f", plan.name],
                 *(["zpool", "labelclear", "-f", zfs_member_partition(m)] for m in members)]
    else:
        first = [["umount", plan.mount_dir]]
    return [*first, ["wipefs", "--all", "--quiet", *members]]
