"""Self-consistency checks of a measured cell and of a run's target (docs/consistency.md).
Pure functions: the figures come from fio's output and the target's identity.

**Little's law.** fio keeps at most ``jobs x iodepth`` I/Os in flight (``jobs`` for a
synchronous engine, which has one I/O at a time whatever its iodepth), so over a cell
``IOPS x mean latency`` (the mean number in flight) is at most that. fio's accounting:
``lat = slat + clat`` (submission plus completion; a synchronous engine reports its whole
call as ``clat`` and ``lat = clat``); the time fio spends between reaping a completion and
preparing the next I/O is in neither, so a cell may legitimately keep fewer in flight
than it has slots (a fast device, a CPU-bound host). Measured here (fio 3.33 on zram, loop
devices with and without direct I/O, the emulated SSD and btrfs RAID 0/5/10 on loop
devices): total latency explained 0.91 to 1.00 of the slots in every closed-loop cell of
libaio, psync and of io_uring at QD 1 or 8 and more.

The directions of a job add up when they ran at once (a mixed cell); when their runtimes
differ (fio's verify: the writes, then the reads), each is a phase and the mean in flight
is over their time together.

* ``exceeds``: more in flight by total latency than fio can account for: impossible, the
  figures contradict each other (flagged). fio starts an I/O's latency clock when it
  prepares the I/O, and an asynchronous engine may prepare one more per job than its queue
  depth while it waits for a free slot (measured: io_uring at QD 3 on tmpfs and zram kept
  3.98 of 3 in flight, 7.95 of 2 x QD 3, with completions inline); so the ceiling is
  ``jobs x (iodepth + 1)`` for an asynchronous engine, ``jobs`` for a synchronous one.
* ``total``: the completion latency explains less than half of what the total latency
  explains (submission takes most of each I/O: buffered or blocking I/O, a file system
  that falls back to buffered writes, a synchronous block device such as zram under an
  asynchronous engine): the latency shown is the total one, with the reason (marked).
* ``agrees``: otherwise; below the slots it says so (fio's own time between I/Os).
* ``open``: a rate-limited or replayed cell (an open loop) is only held to the ceiling.

**Cache-bound.** Non-direct I/O anywhere in the stack (fio ``direct=0``, a loop device
without direct I/O, a file system that turns direct I/O into buffered I/O) or throughput
above what the target's link allows means the figures measured memory, not the drive; a
preset whose definition is cached I/O (the file-system presets) is "cached by design", not
a fault. The evidence: the devices below the target moving far less than fio did
(:func:`far_below`), and direct I/O not aligned to a btrfs sector (:func:`misaligned`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

#: total latency may explain this much more than the slots before it is a contradiction
#: (fio's IOPS divide by the runtime in whole ms; measured: never above 1.00)
EXCEED_TOLERANCE = 1.10
#: the latency shown is the total one when completion latency is below this share of it
SUBMISSION_SHARE = 0.5
#: in flight below this share of the slots is said in words (host-bound or fio's own time)
LOW_SHARE = 0.5

#: fio engines with one I/O at a time per job, whatever the iodepth
SYNC_ENGINES = frozenset({"sync", "psync", "vsync", "pvsync", "pvsync2", "mmap", "splice",
                          "filecreate", "filestat", "filedelete", "ftruncate", "falloc"})
#: fio options that make a job an open loop (its rate is set, not reached)
OPEN_LOOP_OPTIONS = ("rate", "rate_iops", "rate_min", "rate_iops_min", "thinktime",
                     "read_iolog", "replay_redirect")

AGREES, TOTAL, EXCEEDS, OPEN = "agrees", "total", "exceeds", "open"
#: the statuses a table marks (its footnote gives the reason)
MARKED = frozenset({TOTAL, EXCEEDS})
MEMORY = "measured memory, not the drive"


def _us(value: float) -> str:
    if value >= 100:
        return f"{value:,.0f} us"
    return f"{value:,.1f} us" if value >= 1 else f"{value:,.2f} us"


def _count(value: float) -> str:
    return f"{value:,.2f}" if value < 100 else f"{value:,.0f}"


@dataclass(frozen=True)
class Direction:
    """One direction of a cell: its IOPS, mean latencies (us) and runtime (ms; 0: not
    known, taken as the same as the other direction's)."""

    iops: float
    clat_us: float
    lat_us: float
    runtime_ms: float = 0.0


#: directions whose runtimes differ by more than this share ran one after the other
PHASE_SHARE = 0.1


@dataclass(frozen=True)
class LittleVerdict:
    """Little's law on one cell: the mean in flight by total and by completion latency
    against the slots (``jobs x iodepth``), the status and its sentence."""

    status: str
    iops: float
    lat_us: float  # mean total latency (submission + completion), over every I/O
    clat_us: float  # mean completion latency
    in_flight: float  # IOPS x mean total latency
    in_flight_completion: float
    jobs: int
    depth: int  # the queue depth fio keeps per job (1 for a synchronous engine)
    sync: bool = False  # a synchronous engine: nothing prepared ahead

    @property
    def slots(self) -> int:
        return self.jobs * self.depth

    @property
    def ceiling(self) -> int:
        """What fio's accounting can keep in flight: the slots, plus one I/O per job
        prepared ahead by an asynchronous engine."""
        return self.jobs * (self.depth + (0 if self.sync else 1))

    @property
    def marked(self) -> bool:
        return self.status in MARKED

    @property
    def shown_latency(self) -> str:
        """Which mean latency the cell's figures are: "total" or "completion"."""
        return "total" if self.status == TOTAL else "completion"

    @property
    def message(self) -> str:
        of = f"of {self.slots:,} ({self.jobs} x QD {self.depth})"
        law = (f"Little's law: {self.iops:,.0f} IOPS x {_us(self.lat_us)} = "
               f"{_count(self.in_flight)} in flight {of}")
        if self.status == EXCEEDS:
            return (f"{law}: more than the {self.ceiling:,} fio can keep in flight; the "
                    "figures contradict each other")
        if self.status == TOTAL:
            return (f"completion latency {_us(self.clat_us)} explains "
                    f"{_count(self.in_flight_completion)} of {self.slots:,} in flight; total "
                    f"latency {_us(self.lat_us)} explains {_count(self.in_flight)}: "
                    "submission blocks (buffered or blocking I/O); latency shown is total")
        if self.status == OPEN:
            return f"{law}: rate-limited (an open loop), held to the ceiling only"
        if self.in_flight < LOW_SHARE * self.slots:
            return f"{law}: agrees (below the slots: fio's own time between I/Os)"
        if self.in_flight > EXCEED_TOLERANCE * self.slots:
            return f"{law}: agrees (with the I/O each job prepares ahead, up to {self.ceiling:,})"
        return f"{law}: agrees"


def _phases(busy: list[Direction]) -> bool:
    runtimes = [d.runtime_ms for d in busy]
    return len(busy) > 1 and min(runtimes) > 0 and (
        max(runtimes) - min(runtimes) > PHASE_SHARE * max(runtimes))


def little(directions: Iterable[Direction], jobs: int, depth: int, *, closed: bool = True,
           sync: bool = False) -> LittleVerdict | None:
    """Little's law over a cell's directions (None: no I/O, or no slots to judge by)."""
    busy = [d for d in directions if d.iops > 0 and math.isfinite(d.iops)]
    if not busy or jobs < 1 or depth < 1:
        return None
    if _phases(busy):  # one after the other: the rate and in flight over their time
        seconds = sum(d.runtime_ms for d in busy) / 1000
        weights = [d.runtime_ms / 1000 / seconds for d in busy]
    else:
        weights = [1.0] * len(busy)
    iops = sum(d.iops * w for d, w in zip(busy, weights, strict=True))
    in_flight = sum(d.iops * w * d.lat_us for d, w in zip(busy, weights, strict=True)) / 1e6
    completion = sum(d.iops * w * d.clat_us for d, w in zip(busy, weights, strict=True)) / 1e6
    ceiling = jobs * (depth + (0 if sync else 1))
    if in_flight > EXCEED_TOLERANCE * ceiling:
        status = EXCEEDS
    elif completion < SUBMISSION_SHARE * in_flight:
        status = TOTAL
    elif not closed:
        status = OPEN
    else:
        status = AGREES
    return LittleVerdict(status, iops, in_flight / iops * 1e6, completion / iops * 1e6,
                         in_flight, completion, jobs, depth, sync)


def is_sync(options: dict[str, str]) -> bool:
    """Whether the job's engine does one I/O at a time (its call is the I/O)."""
    return options.get("ioengine", "") in SYNC_ENGINES


def queue_depth(options: dict[str, str], iodepth: int) -> int:
    """The I/Os fio keeps in flight per job: 1 for a synchronous engine."""
    return 1 if is_sync(options) else max(1, iodepth)


def closed_loop(options: dict[str, str]) -> bool:
    """Whether a job issues its next I/O as soon as one completes (no rate, no trace)."""
    return not any(options.get(key) not in (None, "", "0") for key in OPEN_LOOP_OPTIONS)


# -- cache-bound ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Layer:
    """A layer of the target's stack that is not direct, and why (one phrase)."""

    name: str  # /dev/loop3, "fio", "btrfs"
    why: str  # "has no direct I/O (loop dio off)"
    by_design: bool = False  # the suite means cached I/O (not a fault)

    @property
    def text(self) -> str:
        return f"{self.name} {self.why}" if self.why else self.name


@dataclass(frozen=True)
class CacheVerdict:
    """Whether a test's figures measured memory rather than the drive, and why."""

    memory: bool  # a layer (not by design) or the link says memory
    layers: tuple[Layer, ...]
    over_link: str | None = None  # throughput above the link, said in words

    @property
    def by_design(self) -> bool:
        return bool(self.layers) and all(layer.by_design for layer in self.layers)

    @property
    def message(self) -> str:
        faults = [layer.text for layer in self.layers if not layer.by_design]
        if self.over_link:
            faults.append(self.over_link)
        if faults:
            return f"{MEMORY}: " + "; ".join(faults)
        designed = [layer.text for layer in self.layers if layer.by_design]
        if designed:
            return "cached by design: " + "; ".join(designed)
        return "no cached layer found (loop devices' direct I/O, fio's direct=1)"


def cache_bound(layers: Sequence[Layer], over_link: str | None = None) -> CacheVerdict:
    memory = over_link is not None or any(not layer.by_design for layer in layers)
    return CacheVerdict(memory, tuple(layers), over_link)


def pcie_limit_bytes_per_s(speed: str | None, width: str | None) -> float | None:
    """What a PCIe link can carry in one direction, bytes/s, from sysfs's
    ``current_link_speed`` ("8.0 GT/s PCIe") and ``current_link_width`` ("4"); None when
    either is unknown. Encoding: 8b/10b up to 5 GT/s, 128b/130b above (PCIe 3 to 5), 1b/1b
    for PCIe 6's 64 GT/s (its FLIT overhead ignored: an upper bound)."""
    try:
        gts = float((speed or "").split()[0])
        lanes = int(width or "")
    except (ValueError, IndexError):
        return None
    if gts <= 0 or lanes <= 0:
        return None
    efficiency = 0.8 if gts <= 5.0 else (128 / 130 if gts < 64 else 1.0)
    return gts * 1e9 * efficiency / 8 * lanes


def over_limit(measured_bytes_per_s: float, limit_bytes_per_s: float | None, what: str,
               where: str) -> str | None:
    """The phrase for throughput above a link's limit (None: within it, or no limit)."""
    if limit_bytes_per_s is None or measured_bytes_per_s <= limit_bytes_per_s:
        return None
    return (f"{where} measured {measured_bytes_per_s / 1e6:,.0f} MB/s, above the "
            f"{limit_bytes_per_s / 1e6:,.0f} MB/s its {what} can carry")


# -- what the devices below moved -----------------------------------------------------------

#: the devices below a target moved less than this share of what fio moved in one direction:
#: the rest never reached them. Direct I/O moves at least its own bytes on the devices (a
#: mirror reads one copy, parity reads the data; writes are multiplied by mirrors, parity,
#: journals and metadata, never divided; read-ahead and other processes only add), so no
#: accounting of the devices' own brings a direct cell below half
FAR_BELOW = 0.5
#: fewer bytes than this moved by fio in one direction (over a test's rounds) are not judged
MIN_JUDGED_BYTES = 1 << 20


def far_below(host_bytes: float, device_bytes: float) -> bool:
    """Whether the devices moved far less than fio did (:data:`FAR_BELOW`), on enough
    bytes to judge (:data:`MIN_JUDGED_BYTES`)."""
    return host_bytes >= MIN_JUDGED_BYTES and device_bytes < FAR_BELOW * host_bytes


def misaligned(block_sizes: Iterable[int], sector: int) -> bool:
    """Whether direct I/O of these block sizes is not aligned to a file system's
    ``sector`` (btrfs then falls back to buffered I/O: docs/consistency.md)."""
    return sector > 0 and any(size % sector for size in block_sizes if size > 0)
