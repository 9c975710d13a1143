"""The plan module of ``example-read``, the smallest useful suite: read the first part of
the target sequentially once and report the throughput (docs/adding-a-suite.md).

A suite's plan module says what the suite is (its spec: name, help, options, tests, and
the records it stores: its plan, a test's parameters, result and verdicts, a round's
cells) and what a plan of it says (its dry-run lines, its stored plan); it touches
nothing.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from ssdlab.errors import UserError
from ssdlab.jsonrecord import JsonObject, Record
from ssdlab.plan import optionsets as common
from ssdlab.plan.config_schema import Kind
from ssdlab.plan.results import FioCell, StoredPlan, TestParams, Verdict
from ssdlab.plan.specs import MIB, CellSpec, Mix, Pattern
from ssdlab.plan.suite import SuiteSpec, TargetKind, opt
from ssdlab.units import format_bytes

SUITE = TEST = "example-read"
BLOCK_BYTES = MIB


@dataclass(frozen=True)
class ReadArgs:
    """The options as given; None: the default."""

    read_bytes: int | None = None
    iodepth: int = 8
    ioengine: str = "libaio"


@dataclass(frozen=True)
class ReadOptions:
    """The options checked against the target."""

    read_bytes: int
    iodepth: int
    ioengine: str
    profile: str = "default"
    quick: bool = False

    def cell(self) -> CellSpec:
        return CellSpec(name="read", pattern=Pattern.SEQUENTIAL, block_bytes=BLOCK_BYTES,
                        mix=Mix(100), threads=1, iodepth=self.iodepth, offset_bytes=0,
                        size_bytes=self.read_bytes, io_bytes=self.read_bytes)


def build_options(args: ReadArgs, capacity_bytes: int) -> ReadOptions:
    """One-line UserError for a bad value, before any I/O."""
    size = args.read_bytes or min(capacity_bytes, 64 * MIB)
    if size % BLOCK_BYTES or size > capacity_bytes:
        raise UserError(f"--read-size {format_bytes(size)}: give whole MiB, at most the "
                        f"target's {format_bytes(capacity_bytes)}")
    if not 1 <= args.iodepth <= 256:
        raise UserError(f"--qd {args.iodepth}: give 1 to 256")
    return ReadOptions(size, args.iodepth, args.ioengine)


@dataclass(frozen=True)
class ReadPlan(StoredPlan):
    """What the run stores as its plan (``suite`` first): the checked options, the tests."""

    options: JsonObject = field(default_factory=dict)
    tests: tuple[str, ...] = ()


@dataclass(frozen=True)
class ReadParams(TestParams):
    """What the run stores as the test's parameters (``title`` first)."""

    read_bytes: int = 0


@dataclass(frozen=True)
class ReadResult(Record):
    """What the run stores as the test's result (and the report and show read back)."""

    OMIT_NONE = frozenset({"error"})

    read_bytes: int = 0
    bw_bytes_per_s: float = 0.0
    lat_mean_us: float | None = None
    message: str = ""
    error: str | None = None


_G = "example read"
SPEC = SuiteSpec(
    name=SUITE,
    help="example: read the first part of the target sequentially once, MB/s",
    description="The example suite of docs/adding-a-suite.md: one sequential read of "
    "1 MiB blocks from offset 0.",
    target=TargetKind.DEVICE,
    options=(
        *common.device_target(),
        opt("--read-size", group=_G, config=Kind.SIZE, field="read_bytes",
            type=common.size_arg, metavar="SIZE", help="bytes to read (default 64MiB)"),
        common.qd(_G, "queue depth (default 8)", default=8),
        common.ioengine(_G),
    ),
    args_type=ReadArgs,
    results={TEST: ReadResult},
    report_title="example read report",
    params={TEST: ReadParams},
    plan_type=ReadPlan,
    cells=FioCell,
    verdicts={"primary": Verdict},
)


def describe(o: ReadOptions) -> list[str]:
    return [f"== {TEST}: read {format_bytes(o.read_bytes)} sequentially from offset 0, "
            f"1 MiB blocks, QD {o.iodepth}"]


def stored_plan(o: ReadOptions) -> ReadPlan:
    return ReadPlan(SUITE, dataclasses.asdict(o), (TEST,))
