"""The SNIA PTS device-level tests (methodology 1.1-1.5) as data.

``build_pts_tests`` turns validated :class:`PtsOptions` and the target's size into
the cells of one round of each test, the workload-independent preconditioning and
the steady-state tracking variables. Pure: nothing here touches a device.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from ssdlab.analysis.steady import rule_by_name
from ssdlab.jsonrecord import Record
from ssdlab.plan.specs import KIB, MIB, CellSpec, JobText, Mix, Pattern, block_label, cell_dict
from ssdlab.plan.suite import Profiled
from ssdlab.units import format_duration

IOPS_BLOCKS = (1024 * KIB, 128 * KIB, 64 * KIB, 32 * KIB, 16 * KIB, 8 * KIB, 4 * KIB, 512)
IOPS_MIXES = (100, 95, 65, 50, 35, 5, 0)
THROUGHPUT_BLOCKS = (1024 * KIB, 128 * KIB)
LATENCY_BLOCKS = (8 * KIB, 4 * KIB, 512)
LATENCY_MIXES = {"snia": (100, 65, 0), "reviews": (100, 70, 0)}
TEST_NAMES = ("iops", "throughput", "latency")
TRACKING_SETS = ("v1.1", "v2.0")
WIPC_BLOCK = 128 * KIB
WIPC_FACTOR = 2
#: the active range is aligned to the largest block size
RANGE_ALIGN = MIB


@dataclass(frozen=True)
class PtsOptions(Profiled):
    """Everything a PTS run was asked for, validated (see ``plan.options``)."""

    tests: tuple[str, ...]
    profile: str
    variant: str  # "snia" | "reviews"
    rule: str  # steady-state rule name: "snia" | "review"
    tracking: str  # IOPS test stopping set: "v1.1" | "v2.0"
    cell_seconds: float
    max_rounds: int
    threads: int
    iodepth: int
    active_range_pct: float
    iops_block_bytes: tuple[int, ...]
    iops_mixes: tuple[int, ...]
    latency_block_bytes: tuple[int, ...]
    latency_mixes: tuple[int, ...]
    purge: str
    precondition: bool
    ioengine: str
    #: --read-only: 100/0 cells only, no purge or preconditioning, fio --readonly
    read_only_target: bool = False
    #: --predict: stop once the steady state is predicted (analysis/predict.py)
    predict: bool = False
    #: --threads/--qd auto: the throughput tests' own load (None: ``threads``/``iodepth``)
    throughput_threads: int | None = None
    throughput_iodepth: int | None = None
    #: --threads/--qd auto: which peak run the load came from ("": given or the default)
    load_source: str = ""


@dataclass(frozen=True)
class TrackingVar:
    """A steady-state tracking variable: one metric of one cell of the round."""

    name: str
    cell: str
    metric: str  # a key of the cell dict: "iops", "bw_bytes_per_s", "lat_mean_us"


@dataclass(frozen=True)
class PtsTest:
    """One PTS test: its round, its preconditioning and its tracking variables."""

    name: str
    title: str
    round_cells: tuple[CellSpec, ...]
    tracking_sets: tuple[tuple[str, tuple[TrackingVar, ...]], ...]
    primary_set: str
    wipc: CellSpec | None
    purge: bool
    skipped: tuple[tuple[str, str], ...]  # (cell label, reason)

    @property
    def round_seconds(self) -> float:
        return sum(cell.planned_seconds or 0.0 for cell in self.round_cells)

    def tracking(self, set_name: str | None = None) -> tuple[TrackingVar, ...]:
        wanted = set_name or self.primary_set
        return dict(self.tracking_sets)[wanted]


@dataclass(frozen=True)
class ActiveRange:
    offset_bytes: int
    size_bytes: int


def active_range(capacity_bytes: int, pct: float) -> ActiveRange:
    size = int(capacity_bytes * pct / 100)
    size -= size % RANGE_ALIGN
    return ActiveRange(0, size)


def cell_name(test: str, block_bytes: int, read_pct: int) -> str:
    return f"{test}_bs{block_bytes}_r{read_pct}"


def cell_label(block_bytes: int, read_pct: int) -> str:
    return f"{block_label(block_bytes)} {Mix(read_pct).label}"


def _cell(
    test: str,
    pattern: Pattern,
    block: int,
    read_pct: int,
    threads: int,
    iodepth: int,
    rng: ActiveRange,
    seconds: float,
) -> CellSpec:
    return CellSpec(
        name=cell_name(test, block, read_pct),
        pattern=pattern,
        block_bytes=block,
        mix=Mix(read_pct),
        threads=threads,
        iodepth=iodepth,
        offset_bytes=rng.offset_bytes,
        size_bytes=rng.size_bytes,
        runtime_s=seconds,
    )


def wipc_cell(rng: ActiveRange) -> CellSpec:
    """Workload-independent preconditioning: 2x the active range in 128 KiB writes."""
    return CellSpec(
        name="wipc_seq128k_write",
        pattern=Pattern.SEQUENTIAL,
        block_bytes=WIPC_BLOCK,
        mix=Mix(0),
        threads=1,
        iodepth=32,
        offset_bytes=rng.offset_bytes,
        size_bytes=rng.size_bytes,
        io_bytes=WIPC_FACTOR * rng.size_bytes,
    )


def _split_blocks(
    blocks: tuple[int, ...], logical_sector: int, test: str, mixes: tuple[int, ...]
) -> tuple[tuple[int, ...], tuple[tuple[str, str], ...]]:
    kept = tuple(b for b in blocks if b % logical_sector == 0)
    skipped = tuple(
        (
            cell_label(b, m),
            f"{block_label(b)} is smaller than or not a multiple of the "
            f"device's {logical_sector}-byte logical sector",
        )
        for b in blocks
        if b % logical_sector
        for m in mixes
    )
    return kept, skipped


def _iops_tracking(cells: tuple[CellSpec, ...]) -> tuple[tuple[str, tuple[TrackingVar, ...]], ...]:
    names = {c.name for c in cells}
    wanted = {
        "v1.1": ((4 * KIB, 0),),
        "v2.0": ((4 * KIB, 0), (64 * KIB, 65), (1024 * KIB, 100)),
    }
    sets = []
    for set_name, keys in wanted.items():
        chosen = tuple(
            TrackingVar(f"IOPS {cell_label(b, m)}", cell_name("iops", b, m), "iops")
            for b, m in keys
            if cell_name("iops", b, m) in names
        )
        if not chosen:  # the standard cells were not selected: every cell must settle
            chosen = tuple(
                TrackingVar(f"IOPS {cell_label(c.block_bytes, c.mix.read_pct)}", c.name, "iops")
                for c in cells
            )
        sets.append((set_name, chosen))
    return tuple(sets)


def iops_test(opts: PtsOptions, rng: ActiveRange, logical_sector: int) -> PtsTest:
    blocks, skipped = _split_blocks(opts.iops_block_bytes, logical_sector, "iops", opts.iops_mixes)
    cells = tuple(
        _cell("iops", Pattern.RANDOM, b, m, opts.threads, opts.iodepth, rng, opts.cell_seconds)
        for m in opts.iops_mixes
        for b in blocks
    )
    return PtsTest(
        "iops",
        "IOPS",
        cells,
        _iops_tracking(cells),
        opts.tracking,
        wipc_cell(rng) if opts.precondition else None,
        True,
        skipped,
    )


def throughput_test(opts: PtsOptions, rng: ActiveRange, block: int) -> PtsTest:
    name = f"throughput-{block // KIB}k"
    cells = tuple(
        _cell(
            name, Pattern.SEQUENTIAL, block, m, opts.throughput_threads or opts.threads,
            opts.throughput_iodepth or opts.iodepth, rng, opts.cell_seconds
        )
        for m in ((100,) if opts.read_only_target else (100, 0))
    )
    read = TrackingVar(f"read bandwidth {block_label(block)}", cells[0].name, "bw_bytes_per_s")
    sets: tuple[tuple[str, tuple[TrackingVar, ...]], ...] = (("v1.1", (read,)), ("v2.0", (read,)))
    if not opts.read_only_target:
        write = TrackingVar(
            f"write bandwidth {block_label(block)}", cells[1].name, "bw_bytes_per_s"
        )
        sets = (("v1.1", (write,)), ("v2.0", (write, read)))
    return PtsTest(
        name,
        f"Throughput {block_label(block)}",
        cells,
        sets,
        opts.tracking,
        wipc_cell(rng) if opts.precondition else None,
        True,
        (),
    )


def latency_test(opts: PtsOptions, rng: ActiveRange, logical_sector: int) -> PtsTest:
    blocks, skipped = _split_blocks(
        opts.latency_block_bytes, logical_sector, "latency", opts.latency_mixes
    )
    cells = tuple(
        _cell("latency", Pattern.RANDOM, b, m, 1, 1, rng, opts.cell_seconds)
        for m in opts.latency_mixes
        for b in blocks
    )
    names = {c.name for c in cells}
    standard = cell_name("latency", 4 * KIB, 0)
    track_cells = [c for c in cells if c.name == standard] or list(cells)
    tracking = tuple(
        TrackingVar(
            f"mean latency {cell_label(c.block_bytes, c.mix.read_pct)}", c.name, "lat_mean_us"
        )
        for c in track_cells
    )
    assert all(t.cell in names for t in tracking)
    sets = (("v1.1", tracking), ("v2.0", tracking))
    return PtsTest(
        "latency",
        "Latency",
        cells,
        sets,
        opts.tracking,
        wipc_cell(rng) if opts.precondition else None,
        True,
        skipped,
    )


def build_pts_tests(
    opts: PtsOptions, capacity_bytes: int, logical_sector: int
) -> tuple[PtsTest, ...]:
    """The tests of a PTS run in order: IOPS, throughput (1024 then 128 KiB), latency."""
    rng = active_range(capacity_bytes, opts.active_range_pct)
    tests: list[PtsTest] = []
    if "iops" in opts.tests:
        tests.append(iops_test(opts, rng, logical_sector))
    if "throughput" in opts.tests:
        tests += [throughput_test(opts, rng, block) for block in THROUGHPUT_BLOCKS]
    if "latency" in opts.tests:
        tests.append(latency_test(opts, rng, logical_sector))
    return tuple(tests)


# -- results --------------------------------------------------------------------------------

#: one cell of a stored result: its identity (cell, block_bytes, read_pct, pattern, load)
#: and every metric fio gave for it (iops, bw_bytes_per_s, lat_*_us, ...): the CSV export
#: and the comparisons read the metrics by name, so a cell stays a mapping
CellData = dict[str, Any]


@dataclass(frozen=True)
class SkippedCell(Record):
    cell: str
    reason: str


@dataclass(frozen=True)
class PredictedVariable(Record):
    """One tracking variable's prediction (``--predict``; analysis/predict.py)."""

    variable: str = ""
    model: str = ""  # "exponential" | "constant" | "none"
    value: float | None = None  # the predicted SNIA window's average, the variable's unit
    half_width: float | None = None  # of its 95 % interval, the variable's unit
    half_width_pct: float | None = None
    plateau: float | None = None  # the fitted asymptote, for information
    rate: float | None = None  # per round
    known: bool = False
    why: str = ""


@dataclass(frozen=True)
class PtsPrediction(Record):
    """What ``--predict`` stopped on: NOT a SNIA steady state (``label`` says so)."""

    label: str = ""
    rule: str = ""
    rounds_seen: int = 0
    window_rounds: list[int] = field(default_factory=list)  # the window predicted to pass
    message: str = ""
    variables: list[PredictedVariable] = field(default_factory=list)


@dataclass(frozen=True)
class PtsResult(Record):
    """A PTS test's result: the measurement window's cells and how steady state went."""

    OMIT_NONE = frozenset({"error", "prediction"})

    steady: bool = False
    window_rounds: list[int] = field(default_factory=list)
    rounds_run: int = 0
    tracking_set: str = ""
    cells: list[CellData] = field(default_factory=list)
    skipped: list[SkippedCell] = field(default_factory=list)
    error: str | None = None
    #: --predict stopped the test (status "predicted"); ``steady`` stays the SNIA verdict
    prediction: PtsPrediction | None = None


def skipped_records(test: PtsTest) -> list[SkippedCell]:
    return [SkippedCell(c, r) for c, r in test.skipped]


# -- what the plan says: dry run, the stored plan, a test's parameters ---------------------


def describe_settings(opts: PtsOptions) -> str:
    return (f"profile {opts.profile}{' (QUICK)' if opts.quick else ''}, variant {opts.variant}, "
            f"rule {opts.rule}, tracking {opts.tracking}, at most {opts.max_rounds} rounds, "
            f"{opts.threads} threads x QD {opts.iodepth}" + (
                f" (throughput tests {opts.throughput_threads or opts.threads} threads x QD "
                f"{opts.throughput_iodepth or opts.iodepth})"
                if opts.throughput_threads or opts.throughput_iodepth else "")
            + (f"; {opts.load_source}" if opts.load_source else "")
            + (", --predict: stops at a predicted steady state (not a SNIA steady state)"
               if opts.predict else ""))


def describe_tests(opts: PtsOptions, tests: tuple[PtsTest, ...], file_target: bool,
                   job_text: JobText) -> list[str]:
    """``--dry-run``: every test, its purge, and its job files."""
    out: list[str] = []
    for test in tests:
        out += ["", f"== {test.name}: {len(test.round_cells)} cells, "
                f"{format_duration(test.round_seconds)} per round"]
        purge = opts.purge if test.purge else "none"
        if file_target and purge != "none":
            purge = "recreate the file"
        out.append(f"purge: {purge}")
        out += [f"skipped {label}: {reason}" for label, reason in test.skipped]
        if test.wipc is not None:
            out += ["-- preconditioning job file:",
                    job_text((test.wipc,), f"{test.name} workload-independent "
                             "preconditioning").rstrip()]
        out += ["-- job file of every round:",
                job_text(test.round_cells, f"{test.name} round N").rstrip()]
    return out


def test_params(test: PtsTest, opts: PtsOptions) -> dict[str, Any]:
    return {
        "title": test.title,
        "rule": opts.rule,
        "window": rule_by_name(opts.rule).window,
        "max_rounds": opts.max_rounds,
        "tracking_set": test.primary_set,
        "tracking": {name: [dataclasses.asdict(v) for v in vs] for name, vs in test.tracking_sets},
        "cell_seconds": opts.cell_seconds,
        "round_seconds": test.round_seconds,
        "cells": [cell_dict(c) for c in test.round_cells],
        "precondition": None if test.wipc is None else cell_dict(test.wipc),
        "purge": opts.purge if test.purge else "none",
        "skipped": [{"cell": c, "reason": r} for c, r in test.skipped],
        "quick": opts.quick,
    }


def plan_dict(opts: PtsOptions, tests: tuple[PtsTest, ...]) -> dict[str, Any]:
    options = dataclasses.asdict(opts)
    options["quick"] = opts.quick
    return {
        "suite": "pts",
        "options": options,
        "tests": [t.name for t in tests],
        "ioengine": opts.ioengine,
        "direct": True,
        "data_pattern": "fio default (random, scrambled per I/O)",
        "latency": "fio completion latency (clat); mixed-cell percentiles from merged "
        "json+ histograms",
    }
