"""ZFS arrays on a real kernel (issue 32): what ssdlab needs of a built pool (what it has
available, which sizes the zvol; the zvol's link, which udev makes after ``zfs create``
returns; what a run records of it), and what it wrote over a whole level of the
matrix.

What it wrote is three counts side by side:
the zvol's own ``/sys/block/zdN/stat`` (the host's I/Os), each member's
``/sys/block/NAME/stat``, and the pool's own count (``zpool iostat -Hpv -y POOL 1``, run
alongside: without an interval zpool prints averages since import, not counts).

ZFS batches writes into transaction groups and writes them seconds later, so a round's
members do not hold that round's host writes exactly; over the whole level, closed by a
``zpool sync``, they do. The figure ZFS is judged by is this one: member bytes (and I/Os)
per host byte (and write) over the level, beside what the docs say
(:func:`ssdlab.analysis.member_rounds.zfs_small_write`).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeAlias

from ssdlab.analysis.member_rounds import judge_round, zfs_small_write
from ssdlab.analysis.members import SLOW_CLEAR_RATIO, member_period, parse_stat
from ssdlab.errors import TargetError
from ssdlab.plan.array import ZFS_ASHIFT, ArrayPlan
from ssdlab.targets.array_status import parse_zpool_iostat
from ssdlab.targets.identity import SYSFS, read_attr
from ssdlab.targets.members import StatReading, read_stats

Runner = Callable[[list[str]], subprocess.CompletedProcess[str]]
#: how long a build waits for udev to make the zvol's /dev/zvol/POOL/NAME link
ZVOL_LINK_WAIT_S = 30.0


def _run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)


def pool_available(pool: str, run: Runner) -> int | None:
    """What the ZFS pool has available (``zfs get available``; None when unread)."""
    done = run(["zfs", "get", "-Hp", "-o", "value", "available", pool])
    text = (done.stdout or "").strip()
    return int(text) if done.returncode == 0 and text.isdigit() else None


def await_device(path: str, run: Runner, timeout: float | None = None) -> None:
    """Wait for udev to make ``path`` (a zvol's /dev/zvol/POOL/NAME link appears after
    ``zfs create`` returns: `udevadm settle`, then a short poll)."""
    run(["udevadm", "settle", "--timeout=30"])
    wait = ZVOL_LINK_WAIT_S if timeout is None else timeout
    deadline = time.monotonic() + wait
    while not os.path.exists(path):
        if time.monotonic() >= deadline:
            raise TargetError(f"{path} did not appear within {wait:g} s of its creation "
                              "(udev)")
        time.sleep(0.2)


#: what a run records of a ZFS array's zvol (``zfs get``): its size and block size as
#: built, and what decides what ZFS writes per host write
ZVOL_PROPERTIES = ("volsize", "volblocksize", "compression", "sync", "refreservation")


def zfs_attributes(plan: ArrayPlan, run: Runner | None = None, *,
                   sysfs: Path = SYSFS) -> dict[str, object]:
    """The ZFS array's layout, its zvol's properties, the pool's ashift, the ARC's size
    limit (``zfs_arc_max``, 0: ZFS's default) and what ZFS writes per small host write by
    the docs (:func:`ssdlab.analysis.member_rounds.zfs_small_write`)."""
    run = run or _run
    out: dict[str, object] = {"layout": plan.level_name, "dataset": plan.dataset,
                              "mount_dir": plan.mount_dir}
    done = run(["zfs", "get", "-Hp", "-o", "property,value", ",".join(ZVOL_PROPERTIES),
                f"{plan.name}/ssdlab"])
    for line in (done.stdout or "").splitlines() if done.returncode == 0 else []:
        prop, _, value = line.partition("\t")
        out[prop] = int(value) if value.isdigit() else value
    got = run(["zpool", "get", "-Hp", "-o", "value", "ashift", plan.name])
    text = (got.stdout or "").strip()
    ashift = int(text) if got.returncode == 0 and text.isdigit() else None
    arc = read_attr(sysfs / "module" / "zfs" / "parameters" / "zfs_arc_max")
    block = out.get("volblocksize")
    out |= {"ashift": ashift, "zfs_arc_max": int(arc) if arc and arc.isdigit() else None,
            "small_write": zfs_small_write(
                plan.level, len(plan.members),
                block if isinstance(block, int) else plan.chunk_bytes,
                ashift or ZFS_ASHIFT).to_dict()}
    return out


#: what a level's counts are recorded as (JSON: run/matrix_run.py stores it in the level's
#: result)
Counts: TypeAlias = dict[str, Any]
#: zpool iostat's interval: its reports are rates per second over it
INTERVAL_S = 1
#: how long the first (or a closing) report of zpool iostat may take to come
REPORT_WAIT_S = 30.0
#: a report's lines come together; this long after its first line it is whole
REPORT_GAP_S = 0.3


def _counts(line: str) -> dict[str, int]:
    s = parse_stat(line)
    return {"reads": s.reads, "writes": s.writes, "read_bytes": s.read_sectors * 512,
            "write_bytes": s.write_sectors * 512, "wait_ms": s.read_ms + s.write_ms}


def _delta(before: str, after: str) -> dict[str, int]:
    b, a = _counts(before), _counts(after)
    return {k: a[k] - b[k] for k in a}


class _Reports:
    """zpool iostat's output lines as they come, each with the time it came."""

    def __init__(self, pool: str) -> None:
        self.lines: list[tuple[float, str]] = []
        self.proc = subprocess.Popen(
            ["zpool", "iostat", "-Hpv", "-y", pool, str(INTERVAL_S)],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append((time.monotonic(), line))

    def report_after(self, moment: float) -> bool:
        """Wait for a report that began after ``moment`` (False: none came)."""
        deadline = time.monotonic() + REPORT_WAIT_S
        while time.monotonic() < deadline:
            if any(at > moment for at, _ in self.lines):
                time.sleep(REPORT_GAP_S)
                return True
            time.sleep(0.05)
        return False

    def between(self, start: float, end: float) -> str:
        return "".join(line for at, line in self.lines if start < at <= end)

    def stop(self) -> None:
        self.proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)
        self.thread.join(timeout=10)


@contextlib.contextmanager
def level_counts(plan: ArrayPlan, members: list[dict[str, Any]], on_zvol: bool,
                 say: Callable[[str], None] = print) -> Iterator[Counts]:
    """Count what a ZFS level (``plan``, its ``members`` as recorded) wrote while the
    block runs, when its suite runs ``on_zvol`` (a block suite; nothing is counted
    otherwise); the dict is filled on the way out (empty where the counts cannot be read:
    the zvol or a member gone). The
    members' and the zvol's counters are read right after a report of zpool iostat;
    the reports counted are those that come after that reading, up to the first after
    the closing one (the pool idle by then: ``zpool sync`` ran before it)."""
    out: Counts = {}
    if plan.backend != "zfs" or not on_zvol:
        yield out
        return
    zvol = os.path.basename(os.path.realpath(plan.target))
    names = [zvol, *(str(m.get("name")) for m in members)]
    reports = _Reports(plan.name)
    try:
        reports.report_after(time.monotonic())
        before = read_stats(names)
    except TargetError as err:
        reports.stop()
        say(f"{plan.level_name}: ZFS counts not read ({err})")
        yield out
        return
    try:
        yield out
    finally:
        subprocess.run(["zpool", "sync", plan.name], capture_output=True, timeout=120,
                       check=False)
        after: StatReading | None = None
        try:
            after = read_stats(names)
        except TargetError as err:
            say(f"{plan.level_name}: ZFS counts not read ({err})")
        if after is not None:
            closed = reports.report_after(after.at)
            reports.stop()
            text = reports.between(before.at, time.monotonic()) if closed else ""
            out.update(counts_record(plan, zvol, before.lines, after.lines,
                                     after.at - before.at, text))
        else:
            reports.stop()


def counts_record(plan: ArrayPlan, zvol: str, before: dict[str, str], after: dict[str, str],
                  seconds: float, iostat: str) -> Counts:
    """The level's three counts and the figures from them (pure)."""
    host = _delta(before[zvol], after[zvol])
    members = {n: _delta(before[n], after[n]) for n in before if n != zvol}
    pool = {io.name: io.to_dict() for io in parse_zpool_iostat(iostat, INTERVAL_S)}
    written = sum(m["write_bytes"] for m in members.values())
    ios = sum(m["writes"] for m in members.values())
    pool_total = pool.get(plan.name)
    periods = [member_period(n, parse_stat(before[n]), parse_stat(after[n]), seconds)
               for n in members]
    judged = judge_round(periods, host["reads"], host["writes"], plan.level, None,
                         clear_ratio=SLOW_CLEAR_RATIO)
    return {
        "seconds": round(seconds, 3), "host": host, "members": members, "pool": pool,
        # the slow member over the whole level: its rounds' member counts do not hold
        # their own host writes (transaction groups), and ZFS merges writes into fewer,
        # larger ones, so a round may have too few to judge; named only where it stands
        # clear of the next slow member (host noise)
        "slow_member": judged.slow_member, "verdict": judged.verdict,
        "member_bytes_per_host_byte": written / host["write_bytes"]
        if host["write_bytes"] else None,
        "member_writes_per_host_write": ios / host["writes"] if host["writes"] else None,
        "member_read_bytes_per_host_byte": sum(m["read_bytes"] for m in members.values())
        / host["write_bytes"] if host["write_bytes"] else None,
        # the pool's own count of what it wrote, against the members' sysfs
        "pool_write_bytes": pool_total["write_bytes"] if pool_total else None,
        "pool_writes": pool_total["writes"] if pool_total else None,
        "member_write_bytes": written, "member_writes": ios,
    }


def level_figures(plan: ArrayPlan, provenance: Mapping[str, Any],
                 counts: Mapping[str, Any]) -> Counts | None:
    """A ZFS level's counts over the level and the docs' figure beside them, for the host
    writes' mean size (None for other backends)."""
    if plan.backend != "zfs":
        return None
    zfs = provenance.get("zfs")
    zfs = zfs if isinstance(zfs, Mapping) else {}
    block, ashift = zfs.get("volblocksize"), zfs.get("ashift")
    host = counts.get("host") if isinstance(counts.get("host"), Mapping) else None
    size = (host["write_bytes"] // host["writes"] if host and host.get("writes") else 4096)
    theory = zfs_small_write(plan.level, len(plan.members),
                             block if isinstance(block, int) else plan.chunk_bytes,
                             ashift if isinstance(ashift, int) else ZFS_ASHIFT,
                             host_bytes=max(512, size))
    return {"layout": plan.level_name, **dict(counts), "theory": theory.to_dict()}
