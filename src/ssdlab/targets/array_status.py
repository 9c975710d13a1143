"""The state of md and ZFS arrays from ``/proc/mdstat`` and ``zpool status``.

Pure functions over the text the kernel and the tool give; no I/O. Malformed input raises
``ValueError`` with a one-line message. Tested on recorded outputs (tests/fixtures/arrays,
SOURCES.md there): ``/proc/mdstat`` of kernels from the metadata-0.90 era to 6.x; ``zpool
status`` of Solaris-era ZFS (``scrub:`` lines), illumos, ZFS on Linux 0.6 and OpenZFS 2.x
(``scan:`` lines).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# ---------------------------------------------------------------- shared


@dataclass(frozen=True)
class SyncProgress:
    """A resync, recovery, reshape, check or repair of an md array."""

    action: str  # "resync", "recovery", "reshape", "check", "repair"
    percent: float | None  # None while it waits (mdstat "resync=DELAYED")
    waiting: str | None = None  # "DELAYED", "PENDING" (mdstat only)
    done_blocks: int | None = None  # mdstat "(done/total)" in 1 KiB blocks
    total_blocks: int | None = None
    finish_min: float | None = None  # mdstat "finish=17.0min"
    speed_kib_s: int | None = None  # mdstat "speed=259783K/sec"

    def text(self) -> str:
        """``recovery 8.5% (finish 17.0 min, 259783 KiB/s)``, ``resync DELAYED``."""
        if self.percent is None:
            return f"{self.action} {self.waiting or 'waiting'}"
        extra = [f"finish {self.finish_min:g} min"] if self.finish_min is not None else []
        extra += [f"{self.speed_kib_s} KiB/s"] if self.speed_kib_s is not None else []
        return f"{self.action} {self.percent:g}%" + (f" ({', '.join(extra)})" if extra else "")


_UNITS = {"": 1024, "K": 1024, "M": 1024**2, "G": 1024**3}


def _chunk_bytes(value: str) -> int:
    """``512K``, ``64k``, ``4096K`` (mdstat prints KiB) -> bytes."""
    m = re.fullmatch(r"(\d+)\s*([KMG]?)B?", value.strip(), re.IGNORECASE)
    if m is None:
        raise ValueError(f"chunk size {value!r} is not a size")
    return int(m.group(1)) * _UNITS[m.group(2).upper()]


# ---------------------------------------------------------------- /proc/mdstat


@dataclass(frozen=True)
class MdstatMember:
    """``sdb1[1](F)`` of an array line of /proc/mdstat."""

    device: str  # kernel name: "sdb1"
    index: int  # the number in brackets: the kernel's descriptor number, not always the slot
    flags: tuple[str, ...]  # "F" faulty, "S" spare, "W" write-mostly, "R" replacement, "J" journal

    @property
    def faulty(self) -> bool:
        return "F" in self.flags

    @property
    def spare(self) -> bool:
        return "S" in self.flags


@dataclass(frozen=True)
class MdstatArray:
    """One array of /proc/mdstat."""

    name: str  # "md0"
    active: bool  # "active" / "inactive"
    mode: str | None  # "read-only", "auto-read-only"
    level: str | None  # "raid1" ...; None for an inactive array that shows none
    members: tuple[MdstatMember, ...]
    blocks: int | None  # 1 KiB blocks
    metadata: str | None  # "super 1.2" -> "1.2"; None for 0.90 (not shown)
    chunk_size: int | None  # bytes
    raid_disks: int | None  # [n/m]: n
    in_sync_disks: int | None  # [n/m]: m
    status: str | None  # "UU_"
    progress: SyncProgress | None

    @property
    def size(self) -> int | None:
        """Bytes."""
        return self.blocks * 1024 if self.blocks is not None else None

    @property
    def degraded(self) -> bool:
        short = (self.raid_disks is not None and self.in_sync_disks is not None
                 and self.in_sync_disks < self.raid_disks)
        return short or "_" in (self.status or "")


_ARRAY_HEAD = re.compile(r"^(\S+)\s*:\s*(active|inactive)\b(.*)$")
_MEMBER = re.compile(r"(\S+?)\[(\d+)\]((?:\([A-Z]\))*)")
_BLOCKS = re.compile(r"\b(\d+) blocks\b")
_SUPER = re.compile(r"\bsuper (\S+)")
_CHUNKS = re.compile(r"\b(\d+[kKmM]) chunks?\b")
_DISKS = re.compile(r"\[(\d+)/(\d+)\]\s*\[([U_]+)\]")
_ACTION = re.compile(r"\b(resync|recovery|reshape|check|repair)\s*=\s*(?:([\d.]+)%|([A-Z]+))")
_DONE = re.compile(r"\((\d+)/(\d+)\)")
_FINISH = re.compile(r"\bfinish=([\d.]+)min")
_SPEED = re.compile(r"\bspeed=(\d+)K/sec")


def parse_mdstat_personalities(text: str) -> list[str]:
    """The ``Personalities :`` line of /proc/mdstat: ``["raid1", "raid6", ...]``."""
    for line in text.splitlines():
        if line.startswith("Personalities"):
            return re.findall(r"\[([^\]]+)\]", line)
    raise ValueError("not /proc/mdstat: no 'Personalities :' line")


def parse_mdstat(text: str) -> list[MdstatArray]:
    """The arrays of /proc/mdstat, in the file's order."""
    parse_mdstat_personalities(text)  # refuses what is not /proc/mdstat
    groups: list[tuple[re.Match[str], list[str]]] = []
    for line in text.splitlines():
        head = _ARRAY_HEAD.match(line)
        if head:
            groups.append((head, []))
        elif groups and line.strip() and not line.startswith("unused devices"):
            groups[-1][1].append(line.strip())
    return [_mdstat_array(head, details) for head, details in groups]


def _mdstat_array(head: re.Match[str], details: list[str]) -> MdstatArray:
    name, state, rest = head.groups()
    words = rest.split()
    mode = None
    while words and words[0].startswith("("):  # (auto-read-only), (read-only)
        mode = words.pop(0).strip("()")
    level = words.pop(0) if words and "[" not in words[0] else None
    info = next((d for d in details if _BLOCKS.search(d)), "")
    disks = _DISKS.search(info)
    return MdstatArray(
        name=name, active=state == "active", mode=mode, level=level,
        members=tuple(_mdstat_member(name, w) for w in words),
        blocks=_int_group(_BLOCKS.search(info)), metadata=_str_group(_SUPER.search(info)),
        chunk_size=_chunk_or_none(_CHUNKS.search(info)),
        raid_disks=int(disks.group(1)) if disks else None,
        in_sync_disks=int(disks.group(2)) if disks else None,
        status=disks.group(3) if disks else None, progress=_mdstat_progress(details))


def _mdstat_member(array: str, word: str) -> MdstatMember:
    m = _MEMBER.fullmatch(word)
    if m is None:
        raise ValueError(f"/proc/mdstat: {array}: member {word[:40]!r} is not NAME[N](FLAG)")
    return MdstatMember(device=m.group(1), index=int(m.group(2)),
                        flags=tuple(re.findall(r"\(([A-Z])\)", m.group(3))))


def _mdstat_progress(details: list[str]) -> SyncProgress | None:
    for line in details:
        m = _ACTION.search(line)
        if m is None:
            continue
        if m.group(3):  # resync=DELAYED, resync=PENDING
            return SyncProgress(action=m.group(1), percent=None, waiting=m.group(3))
        done = _DONE.search(line)
        finish = _FINISH.search(line)
        return SyncProgress(
            action=m.group(1), percent=float(m.group(2)),
            done_blocks=int(done.group(1)) if done else None,
            total_blocks=int(done.group(2)) if done else None,
            finish_min=float(finish.group(1)) if finish else None,
            speed_kib_s=_int_group(_SPEED.search(line)))
    return None


def _int_group(m: re.Match[str] | None) -> int | None:
    return int(m.group(1)) if m else None


def _str_group(m: re.Match[str] | None) -> str | None:
    return m.group(1) if m else None


def _chunk_or_none(m: re.Match[str] | None) -> int | None:
    return _chunk_bytes(m.group(1)) if m else None


# ---------------------------------------------------------------- zpool status


@dataclass(frozen=True)
class ZpoolDevice:
    """A row of the config tree of ``zpool status``: the pool, a vdev or a device."""

    name: str  # "tank", "mirror-0", "raidz2-0", "sdb", "/dev/disk/by-id/..." (-P)
    state: str  # ONLINE, DEGRADED, FAULTED, UNAVAIL, OFFLINE, REMOVED; AVAIL/INUSE (spares)
    read: int | None  # error counts; None for spares, which show none
    write: int | None
    cksum: int | None
    note: str  # "too many errors", "was /dev/sdc1", "(resilvering)", "cannot open"
    children: tuple[ZpoolDevice, ...] = ()

    @property
    def kind(self) -> str:
        """``mirror``, ``raidz1``/``raidz2``/``raidz3``, ``draid1``..., ``replacing``,
        ``spare`` for a vdev; ``disk`` for a device."""
        m = _VDEV_KIND.match(self.name)
        if m is None or not self.children:
            return "disk"
        kind = m.group(1)
        return "raidz1" if kind == "raidz" else kind

    @property
    def errors(self) -> int:
        """READ + WRITE + CKSUM (a count shown as ``1.88K`` is taken as 1.88 × 1024)."""
        return (self.read or 0) + (self.write or 0) + (self.cksum or 0)

    @property
    def leaves(self) -> tuple[ZpoolDevice, ...]:
        """The devices at the bottom of this subtree (itself when it has no children)."""
        if not self.children:
            return (self,)
        return tuple(leaf for child in self.children for leaf in child.leaves)


@dataclass(frozen=True)
class ZpoolStatus:
    """One pool of ``zpool status``."""

    name: str
    state: str  # ONLINE, DEGRADED, FAULTED, UNAVAIL, SUSPENDED
    status: str | None  # the "status:" text, its lines joined with spaces
    action: str | None
    see: str | None
    scan: str | None  # "scan:" (or the old "scrub:") text, lines joined with spaces
    root: ZpoolDevice  # the pool's own row; its children are the top-level vdevs
    logs: tuple[ZpoolDevice, ...] = ()
    cache: tuple[ZpoolDevice, ...] = ()
    spares: tuple[ZpoolDevice, ...] = ()
    special: tuple[ZpoolDevice, ...] = ()
    dedup: tuple[ZpoolDevice, ...] = ()
    errors: str | None = None  # "No known data errors", "1 data errors, use '-v' for a list"
    error_files: tuple[str, ...] = ()  # listed under "Permanent errors have been detected ..."

    @property
    def vdevs(self) -> tuple[ZpoolDevice, ...]:
        """Top-level data vdevs: mirrors, raidz, draid, or plain disks."""
        return self.root.children

    @property
    def devices(self) -> tuple[ZpoolDevice, ...]:
        """Every device that holds pool data (spares are not counted)."""
        groups = (self.vdevs, self.logs, self.cache, self.special, self.dedup)
        return tuple(leaf for group in groups for vdev in group for leaf in vdev.leaves)

    @property
    def problems(self) -> tuple[ZpoolDevice, ...]:
        """Devices (spares too) not ONLINE (or AVAIL/INUSE for a spare), or with errors."""
        spares = tuple(leaf for vdev in self.spares for leaf in vdev.leaves)
        return tuple(d for d in self.devices + spares
                     if d.state not in _FINE_STATES or d.errors)

    @property
    def degraded(self) -> bool:
        return self.state != "ONLINE" or bool(self.problems)

    @property
    def scan_in_progress(self) -> bool:
        return self.scan is not None and "in progress" in self.scan

    @property
    def scan_percent(self) -> float | None:
        """``57.17`` from ``... 57.17% done ...``."""
        m = re.search(r"([\d.]+)% done", self.scan or "")
        return float(m.group(1)) if m else None


_FINE_STATES = frozenset({"ONLINE", "AVAIL", "INUSE"})
_VDEV_KIND = re.compile(r"^(mirror|raidz[123]?|draid[123]?|replacing|spare)(?:[-:]|$)")
_SECTIONS = ("logs", "cache", "spares", "special", "dedup")
_POOL_LINE = re.compile(r"^\s*pool:\s*(\S+)\s*$")
_HEAD_KEY = re.compile(r"^ {0,7}([a-z]+):(?:\s+(.*))?$")
_COUNT = re.compile(r"(\d+(?:\.\d+)?)([KMGTPE]?)")


def parse_zpool_status(text: str) -> list[ZpoolStatus]:
    """Every pool of ``zpool status [-v] [-P] [-p] [pool ...]`` output."""
    if text.strip() == "no pools available":
        return []
    pools: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        head = _POOL_LINE.match(line)
        if head:
            pools.append((head.group(1), []))
        elif pools:
            pools[-1][1].append(line)
        elif line.strip():
            raise ValueError(f"not zpool status output: {line.strip()[:60]!r} before 'pool:'")
    if not pools:
        raise ValueError("not zpool status output: no 'pool:' line")
    return [_parse_pool(name, lines) for name, lines in pools]


def _parse_pool(name: str, lines: list[str]) -> ZpoolStatus:
    """One pool's lines after its ``pool:`` line."""
    config = next((i for i, line in enumerate(lines) if line.strip() == "config:"), None)
    if config is None:
        raise ValueError(f"zpool status: pool {name} has no 'config:' section")
    fields = _head_fields(lines[:config])
    if "state" not in fields:
        raise ValueError(f"zpool status: pool {name} has no 'state:' line")
    end = next((i for i in range(config, len(lines)) if lines[i].startswith("errors:")),
               len(lines))
    tops = _config_tree(name, lines[config + 1:end])
    sections = {n: d.children for n, d in tops.items() if n in _SECTIONS}
    errors = [line.removeprefix("errors:").strip() for line in lines[end:] if line.strip()]
    return ZpoolStatus(
        name=name, state=fields["state"], status=fields.get("status"),
        action=fields.get("action"), see=fields.get("see"),
        scan=fields.get("scan", fields.get("scrub")), root=tops[name],
        logs=sections.get("logs", ()), cache=sections.get("cache", ()),
        spares=sections.get("spares", ()), special=sections.get("special", ()),
        dedup=sections.get("dedup", ()), errors=errors[0] if errors else None,
        error_files=tuple(e for e in errors[1:] if e.startswith("/")))


def _head_fields(lines: list[str]) -> dict[str, str]:
    """``state: DEGRADED``, ``status: ...`` and its indented continuation lines."""
    parts: dict[str, list[str]] = {}
    key = None
    for line in lines:
        m = _HEAD_KEY.match(line)
        if m:
            key = m.group(1)
            parts[key] = [(m.group(2) or "").strip()]
        elif key is not None and line.strip():
            parts[key].append(line.strip())
    return {k: " ".join(p for p in v if p) for k, v in parts.items()}


@dataclass(frozen=True)
class _Row:
    depth: int
    words: tuple[str, ...]


def _config_tree(pool: str, lines: list[str]) -> dict[str, ZpoolDevice]:
    """The top-level rows of the config section (the pool, ``logs``, ``spares`` ...)."""
    rows = [line for line in lines if line.strip()]
    if not rows or rows[0].split()[:2] != ["NAME", "STATE"]:
        raise ValueError(f"zpool status: pool {pool}: config section has no NAME STATE header")
    base = len(rows[0]) - len(rows[0].lstrip())
    parsed = [_config_row(pool, row, base) for row in rows[1:]]
    tops, end = _subtree(pool, parsed, 0, 0)
    if end != len(parsed):
        raise ValueError(f"zpool status: pool {pool}: bad indentation at {parsed[end].words[0]!r}")
    by_name = {d.name: d for d in tops}
    unknown = [n for n in by_name if n != pool and n not in _SECTIONS]
    if pool not in by_name or unknown:
        raise ValueError(f"zpool status: pool {pool}: config tree does not start with the pool "
                         f"(top level: {', '.join(by_name)})")
    return by_name


def _config_row(pool: str, row: str, base: int) -> _Row:
    indent = len(row) - len(row.lstrip())
    if indent < base or (indent - base) % 2:
        raise ValueError(f"zpool status: pool {pool}: bad indentation: {row.strip()[:60]!r}")
    return _Row(depth=(indent - base) // 2, words=tuple(row.split()))


def _subtree(pool: str, rows: list[_Row], start: int, depth: int) -> tuple[list[ZpoolDevice], int]:
    """The rows at ``depth`` from ``start`` on, each with its children; and where they end."""
    out: list[ZpoolDevice] = []
    i = start
    while i < len(rows) and rows[i].depth == depth:
        children, end = _subtree(pool, rows, i + 1, depth + 1)
        out.append(_device(pool, rows[i].words, tuple(children)))
        i = end
    return out, i


def _device(pool: str, words: tuple[str, ...], children: tuple[ZpoolDevice, ...]) -> ZpoolDevice:
    name = words[0]
    if len(words) == 1:
        if name not in _SECTIONS:
            raise ValueError(f"zpool status: pool {pool}: {name!r} has no state")
        return ZpoolDevice(name=name, state="", read=None, write=None, cksum=None, note="",
                           children=children)
    counts = [_error_count(w) for w in words[2:5]]
    if len(counts) == 3 and None not in counts:
        read, write, cksum = counts
        note = " ".join(words[5:])
    else:  # a spare: "sdf  AVAIL", "draid1-0-0  INUSE  currently in use"
        read = write = cksum = None
        note = " ".join(words[2:])
    return ZpoolDevice(name=name, state=words[1], read=read, write=write, cksum=cksum,
                       note=note, children=children)


def _error_count(word: str) -> int | None:
    """``0``, ``100980``, ``1.88K`` (zpool's 1024-based short form) -> int; None if not one."""
    m = _COUNT.fullmatch(word)
    if m is None:
        return None
    return int(float(m.group(1)) * 1024 ** "_KMGTPE".index(m.group(2) or "_"))


# ---------------------------------------------------------------- verdicts


def health(status: MdstatArray | ZpoolStatus) -> str:
    """A one-line verdict for ``ssdlab array status``.

    ``md127 raid5: degraded, 5 of 6 members in sync, recovery 12.6% (finish 127.5 min,
    33440 KiB/s)``;
    ``pool local-zfs DEGRADED, 1 of 2 devices online: wwn-0x5000cca245c1984b FAULTED
    (1 read, 29 write, 4 cksum, too many errors)``.
    """
    if isinstance(status, MdstatArray):
        return _mdstat_health(status)
    return _zpool_health(status)


def _mdstat_health(a: MdstatArray) -> str:
    verdict = "inactive" if not a.active else "degraded" if a.degraded else "ok"
    parts = [verdict]
    if a.raid_disks is not None:
        parts.append(f"{a.in_sync_disks} of {a.raid_disks} members in sync")
    else:  # raid0, linear: no [n/m]
        parts.append(f"{len(a.members)} members")
    parts += [f"{m.device} faulty" for m in a.members if m.faulty]
    spares = sum(m.spare for m in a.members)
    parts += [f"{spares} spare{'s' if spares > 1 else ''}"] if spares else []
    parts += [a.progress.text()] if a.progress else []
    return f"{a.name} {a.level or 'unknown level'}: {', '.join(parts)}"


def _zpool_health(p: ZpoolStatus) -> str:
    online = sum(d.state == "ONLINE" for d in p.devices)
    text = f"pool {p.name} {p.state}, {online} of {len(p.devices)} devices online"
    if p.problems:
        text += ": " + "; ".join(_device_problem(d) for d in p.problems)
    if p.scan_in_progress and p.scan:
        what = p.scan.split(" in progress")[0]
        pct = p.scan_percent
        text += f"; {what} in progress" + (f", {pct:g}% done" if pct is not None else "")
    if p.errors and p.errors != "No known data errors":
        text += f"; errors: {p.errors}"
    return text


def _device_problem(d: ZpoolDevice) -> str:
    counts = [(d.read, "read"), (d.write, "write"), (d.cksum, "cksum")]
    detail = [f"{n} {label}" for n, label in counts if n]
    detail += [d.note] if d.note else []
    return f"{d.name} {d.state}" + (f" ({', '.join(detail)})" if detail else "")


# -- zpool iostat ---------------------------------------------------------------------------


@dataclass(frozen=True)
class PoolIo:
    """What one device of a pool (the pool itself, a vdev, a member) moved by ZFS's own
    count, summed over the reports of ``zpool iostat -Hpv POOL 1``."""

    name: str
    reads: int = 0
    writes: int = 0
    read_bytes: int = 0
    write_bytes: int = 0

    def to_dict(self) -> dict[str, object]:
        return {"name": self.name, "reads": self.reads, "writes": self.writes,
                "read_bytes": self.read_bytes, "write_bytes": self.write_bytes}


def parse_zpool_iostat(text: str, interval_s: float = 1.0) -> list[PoolIo]:
    """The devices of ``zpool iostat -Hpv -y POOL INTERVAL`` output, in the order first
    listed, each its operations and bytes summed over the reports (each report's rates,
    per second, times ``interval_s``: counts to within a rounding per report). Without an
    interval zpool prints averages since the pool was imported, not counts. Lines:
    name, allocated, free, read ops, write ops, read bytes, write bytes (per second)."""
    totals: dict[str, list[float]] = {}
    for line in text.splitlines():
        words = line.split("\t") if "\t" in line else line.split()
        if len(words) < 7 or not all(w.isdigit() for w in words[3:7]):
            continue
        row = totals.setdefault(words[0], [0.0, 0.0, 0.0, 0.0])
        for i in range(4):
            row[i] += int(words[3 + i]) * interval_s
    return [PoolIo(name, *(round(v) for v in row)) for name, row in totals.items()]
