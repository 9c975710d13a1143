"""The curves' workloads (``presets/data/curves.toml``) and how one is driven.

A workload is an access pattern, a block-size split (fio ``bssplit``), a read share, a
hot-spot distribution (fio ``random_distribution``) and the outstanding I/O count vdbench
calls threads: :func:`catalogue` reads and validates every one of them. Its outstanding
I/O runs as fio jobs x iodepth (:func:`load_for`); a :class:`Point` of its curve is one
fio job section, its target rate split over the jobs and between reads and writes
(:func:`split_rate`). Pure: no I/O happens here besides reading the package data.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from ssdlab import presets
from ssdlab.errors import UserError
from ssdlab.jsonrecord import Record
from ssdlab.plan.preset_defs import PresetIdentity
from ssdlab.plan.specs import CellSpec, FioJob, JobSection, Mix, Pattern
from ssdlab.units import fio_time, parse_size

PRESET = "curves"
MAX_OUTSTANDING = 4096
#: vdbench's "120 %": the workload once more without a rate limit
UNTHROTTLED_PCT = 120


@dataclass(frozen=True)
class Workload:
    """One curve workload from the preset data."""

    name: str
    title: str
    pattern: Pattern
    bssplit: tuple[tuple[int, int], ...]  # (block bytes, percent)
    read_pct: int
    distribution: str  # fio random_distribution ("random" = uniform)
    threads: int  # outstanding I/Os (vdbench threads)
    source: str

    @property
    def main_block(self) -> int:
        """The block size with the largest share (what a cell's ``block_bytes`` names)."""
        return max(self.bssplit, key=lambda b: b[1])[0]

    @property
    def largest_block(self) -> int:
        return max(b for b, _ in self.bssplit)

    @property
    def mean_block_bytes(self) -> float:
        return sum(b * p for b, p in self.bssplit) / 100

    def bssplit_text(self) -> str:
        return ":".join(f"{b}/{p}" for b, p in self.bssplit)

    def describe(self) -> str:
        sizes = ", ".join(f"{_kib(b)} {p} %" for b, p in self.bssplit)
        skew = "" if self.distribution == "random" else f", hot spots {self.distribution}"
        return (f"{self.title}: {self.pattern}, {Mix(self.read_pct).label} read/write, "
                f"{sizes}{skew}, {self.threads} outstanding I/Os")

    def record(self) -> WorkloadDef:
        """The workload as stored (with the plan, the test's parameters and its curve)."""
        return WorkloadDef(self.name, self.title, str(self.pattern), self.bssplit_text(),
                           self.read_pct, self.distribution, self.threads, self.source)


@dataclass(frozen=True)
class WorkloadDef(Record):
    """A workload as stored: its definition in the preset data, as text."""

    name: str = ""
    title: str = ""
    pattern: str = ""
    bssplit: str = ""
    read_pct: int = 0
    distribution: str = ""
    threads: int = 0
    source: str = ""


def _kib(block: int) -> str:
    return f"{block // 1024} KiB" if block % 1024 == 0 else f"{block} B"


def parse_bssplit(text: str, where: str) -> tuple[tuple[int, int], ...]:
    """``"8k/80:64k/20"`` -> ((8192, 80), (65536, 20)); the shares must add up to 100."""
    parts: list[tuple[int, int]] = []
    for item in text.split(":"):
        size, _, pct = item.partition("/")
        try:
            block = parse_size(size.strip())
            share = int(pct.strip())
        except ValueError:
            raise UserError(f"{where}: bssplit {text!r}: each part is SIZE/PERCENT, "
                            "e.g. 8k/80:64k/20") from None
        if block <= 0 or block % 512 or not 0 < share <= 100:
            raise UserError(f"{where}: bssplit {text!r}: sizes are multiples of 512 bytes, "
                            "shares 1..100")
        parts.append((block, share))
    if sum(p for _, p in parts) != 100:
        raise UserError(f"{where}: bssplit {text!r}: the shares add up to "
                        f"{sum(p for _, p in parts)}, not 100")
    return tuple(parts)


def _distribution(text: str, where: str) -> str:
    """``random`` or fio's ``zoned:PCT/PCT:...`` (I/O share / region share)."""
    if text == "random":
        return text
    kind, _, spec = text.partition(":")
    if kind != "zoned" or not spec:
        raise UserError(f"{where}: distribution {text!r}: give random or zoned:IO/REGION:...")
    try:
        pairs = [tuple(int(v) for v in part.split("/")) for part in spec.split(":")]
    except ValueError:
        raise UserError(f"{where}: distribution {text!r} is not zoned:IO/REGION:...") from None
    if any(len(p) != 2 for p in pairs) or sum(p[0] for p in pairs) != 100 or sum(
            p[1] for p in pairs) != 100:
        raise UserError(f"{where}: distribution {text!r}: the I/O shares and the region "
                        "shares must each add up to 100")
    return text


def workload_from(name: str, data: Mapping[str, object]) -> Workload:
    where = f"preset {PRESET}, workload {name}"
    try:
        pattern = Pattern(str(data["pattern"]))
        read_pct = _whole(data["read_pct"])
        threads = _whole(data["threads"])
        title = str(data["title"])
        bssplit = parse_bssplit(str(data["bssplit"]), where)
    except (KeyError, ValueError) as exc:
        raise UserError(f"{where} is malformed ({exc})") from None
    if not 0 <= read_pct <= 100 or not 1 <= threads <= MAX_OUTSTANDING:
        raise UserError(f"{where}: read_pct 0..100 and threads 1..{MAX_OUTSTANDING}")
    distribution = _distribution(str(data.get("distribution", "random")), where)
    return Workload(name, title, pattern, bssplit, read_pct, distribution, threads,
                    str(data.get("source", "")))


def _whole(value: object) -> int:
    """A whole number of the preset data (a number or its text); ValueError otherwise."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError(f"{value!r} is not a whole number")
    return int(value)


@dataclass(frozen=True)
class Catalogue:
    """The preset data, validated: which preset, every workload, and the default
    workloads and fractions of each profile."""

    identity: PresetIdentity
    workloads: dict[str, Workload]
    default: tuple[str, ...]
    quick_default: tuple[str, ...]
    fractions_pct: tuple[int, ...]
    quick_fractions_pct: tuple[int, ...]


def _listed(data: Mapping[str, object], key: str) -> list[object]:
    value = data.get(key)
    if not isinstance(value, list):
        raise UserError(f"preset {PRESET} is malformed (no {key} list)")
    return value


def catalogue() -> Catalogue:
    """The preset data and every workload in it, validated."""
    data = presets.load(PRESET)
    table = data.get("workloads")
    if not isinstance(table, dict):
        raise UserError(f"preset {PRESET} is malformed (no workloads)")
    try:
        fractions = [tuple(_whole(v) for v in _listed(data, key))
                     for key in ("fractions_pct", "quick_fractions_pct")]
    except ValueError as exc:
        raise UserError(f"preset {PRESET} is malformed ({exc})") from None
    return Catalogue(PresetIdentity.of(data),
                     {name: workload_from(name, w) for name, w in table.items()},
                     tuple(str(n) for n in _listed(data, "default")),
                     tuple(str(n) for n in _listed(data, "quick_default")),
                     fractions[0], fractions[1])


# -- the load of a workload ------------------------------------------------------------


@dataclass(frozen=True)
class Load:
    """How a workload's outstanding I/O is spread: ``jobs`` fio jobs at ``iodepth`` each."""

    jobs: int
    iodepth: int

    @property
    def outstanding(self) -> int:
        return self.jobs * self.iodepth


def load_for(outstanding: int, jobs: int | None, cpus: int) -> Load:
    """vdbench's threads as fio jobs x iodepth: at most one job per CPU unless --jobs."""
    count = jobs if jobs is not None else max(1, min(cpus, outstanding))
    count = min(count, outstanding)
    return Load(count, max(1, math.ceil(outstanding / count)))


def split_rate(total_iops: float, jobs: int, read_pct: int) -> tuple[int, int]:
    """Per-job (read, write) ``rate_iops`` for a total rate: divided by the jobs, then by
    the read share. A direction with a share gets at least 1 I/O per second."""
    if total_iops <= 0 or jobs <= 0:
        raise ValueError("a rate needs a positive total and jobs")
    per_job = total_iops / jobs
    read = per_job * read_pct / 100
    write = per_job - read
    return (max(1, round(read)) if read_pct > 0 else 0,
            max(1, round(write)) if read_pct < 100 else 0)


def rate_option(read: int, write: int) -> str:
    """fio's ``rate_iops`` (or ``rate``) value: ``R``, ``,W`` or ``R,W``."""
    if write == 0:
        return str(read)
    if read == 0:
        return f",{write}"
    return f"{read},{write}"


# -- a point of a curve: one fio run -------------------------------------------------


@dataclass(frozen=True)
class Point:
    """One fio run of a curve: the max-rate run, a fraction, or the unthrottled 120 %."""

    workload: Workload
    kind: str  # "max" | "fraction" | "unthrottled"
    fraction_pct: int | None
    target_iops: float | None
    load: Load
    offset_bytes: int
    size_bytes: int
    measure_s: float
    ramp_s: float

    @property
    def name(self) -> str:
        if self.kind == "max":
            tag = "max"
        elif self.kind == "unthrottled":
            tag = f"p{UNTHROTTLED_PCT}"
        else:
            tag = f"p{self.fraction_pct or 0:03d}"
        return f"{self.workload.name}-{tag}"

    @property
    def label(self) -> str:
        if self.kind == "max":
            return "max-rate run (unthrottled)"
        if self.kind == "unthrottled":
            return f"{UNTHROTTLED_PCT} % (unthrottled)"
        return f"{self.fraction_pct} % of max"

    def rate_limit(self) -> tuple[str, str] | None:
        """The job's rate limit as a fio option (None: unthrottled). fio turns
        ``rate_iops`` into bytes/s with the SMALLEST block size of a ``bssplit`` (measured:
        a split whose mean block is 4x its smallest delivered 24.6 % of its rate_iops), so
        a split workload is limited in bytes: ``rate=`` the IOPS times the split's mean
        block size, per direction."""
        rates = self.rates()
        if rates is None:
            return None
        if len(self.workload.bssplit) == 1:
            return "rate_iops", rate_option(*rates)
        mean = self.workload.mean_block_bytes
        return "rate", rate_option(*(round(r * mean) for r in rates))

    def rate_line(self) -> str | None:
        """The rate limit as the job file has it: ``rate_iops=R,W`` or ``rate=R,W``."""
        limit = self.rate_limit()
        return None if limit is None else "=".join(limit)

    def rates(self) -> tuple[int, int] | None:
        if self.target_iops is None:
            return None
        return split_rate(self.target_iops, self.load.jobs, self.workload.read_pct)

    def cell_spec(self) -> CellSpec:
        """The cell identity for :func:`ssdlab.run.cells.cell_from_job`."""
        return CellSpec(self.name, self.workload.pattern, self.workload.main_block,
                        Mix(self.workload.read_pct), self.load.jobs, self.load.iodepth,
                        self.offset_bytes, self.size_bytes, runtime_s=self.measure_s,
                        ramp_s=self.ramp_s)


def point_section(p: Point) -> JobSection:
    """The point's job section as data (the engine renders it)."""
    w = p.workload
    options = [("rw", p.cell_spec().fio_rw)]
    if 0 < w.read_pct < 100:
        options.append(("rwmixread", str(w.read_pct)))
    if len(w.bssplit) == 1:
        options.append(("bs", str(w.bssplit[0][0])))
    else:
        options.append(("bssplit", w.bssplit_text()))
    if w.pattern is Pattern.RANDOM and w.distribution != "random":
        options.append(("random_distribution", w.distribution))
    options += [("iodepth", str(p.load.iodepth)), ("numjobs", str(p.load.jobs)),
                *_region_options(p), ("time_based", "1"), ("runtime", fio_time(p.measure_s))]
    if p.ramp_s > 0:
        options.append(("ramp_time", fio_time(p.ramp_s)))
    limit = p.rate_limit()
    if limit is not None:
        options.append(limit)
    return JobSection(p.name, tuple(options))


def _region_options(p: Point) -> list[tuple[str, str]]:
    """Random jobs share the region; sequential jobs each get a slice of it."""
    if p.workload.pattern is Pattern.SEQUENTIAL and p.load.jobs > 1:
        chunk = p.size_bytes // p.load.jobs
        chunk -= chunk % p.workload.largest_block
        return [("offset", str(p.offset_bytes)), ("size", str(chunk)),
                ("offset_increment", str(chunk))]
    return [("offset", str(p.offset_bytes)), ("size", str(p.size_bytes))]


def point_job(p: Point, target: str, ioengine: str) -> FioJob:
    """The point's fio job on ``target``: one section, no cells."""
    return FioJob(target, (), ioengine, json_plus=True, sections=(point_section(p),))
