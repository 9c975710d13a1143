"""The RAID matrix (issue 15, item 5) as data: the same suite on several RAID levels of
the same member drives, one level after another (build, run, tear down, next), after a
short read-only check of every member. Pure: the runner is :mod:`ssdlab.run.matrix_run`.

A matrix of one level is the "one command builds, tests and tears down" form.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import Any

from ssdlab.errors import UserError
from ssdlab.jsonrecord import JsonObject, Record
from ssdlab.plan import optionsets as common
from ssdlab.plan.array import BACKENDS, LEVELS, parse_level
from ssdlab.plan.config_schema import Kind
from ssdlab.plan.results import StoredPlan
from ssdlab.plan.suite import SuiteSpec, TargetKind, opt
from ssdlab.units import parse_size

SUITE = "matrix"
MEMBER_CHECK = "member-check"
DEFAULT_LEVELS = "0,5,10"  # the NAS review's
DEFAULT_CHILD = "pts"
#: options of the child suite the matrix sets itself
RESERVED = ("--target", "--targets-file", "--dir", "--destroy-data", "--store", "--fio",
            "--dry-run", "--config", "--print-config")
MAX_MEMBER_CHECK_S = 600.0

_G = "matrix"


@dataclass(frozen=True)
class MatrixArgs:
    """``ssdlab run matrix``'s options as given."""

    members: str
    backend: str = "md"
    levels: str = DEFAULT_LEVELS
    chunk: str | None = None
    suite: str = DEFAULT_CHILD
    suite_options: str = ""
    name: str = "ssdlab-m"
    member_check_seconds: float = 5.0


@dataclass(frozen=True)
class MatrixOptions:
    """The validated options."""

    members: tuple[str, ...]
    backend: str
    levels: tuple[str, ...]
    chunk_bytes: int | None
    suite: str
    suite_argv: tuple[str, ...]
    name: str
    member_check_seconds: float
    profile: str = "default"

    @property
    def quick(self) -> bool:
        return self.profile == "quick"

    @property
    def ioengine(self) -> str:
        return "libaio"

    def array_name(self, level: str) -> str:
        return f"{self.name}-{level}"


def validate(args: MatrixArgs) -> MatrixOptions:
    members = tuple(m.strip() for m in args.members.split(",") if m.strip())
    if len(members) < 2:
        raise UserError("--members needs at least two member devices, comma-separated")
    if args.backend not in BACKENDS:
        raise UserError(f"--backend {args.backend!r} is not one of {', '.join(BACKENDS)}")
    levels = tuple(parse_level(x) for x in args.levels.split(",") if x.strip())
    if not levels:
        raise UserError("--levels needs at least one RAID level, e.g. 0,5,10")
    if len(set(levels)) != len(levels):
        raise UserError(f"--levels {args.levels!r} names a level twice")
    chunk = _chunk(args.chunk)
    try:
        argv = tuple(shlex.split(args.suite_options))
    except ValueError as err:
        raise UserError(f"--suite-options: {err}") from None
    for word in argv:
        if word.split("=")[0] in RESERVED:
            raise UserError(f"--suite-options may not set {word.split('=')[0]}: the matrix "
                            "sets the target, the store and fio itself")
    if not 0 <= args.member_check_seconds <= MAX_MEMBER_CHECK_S:
        raise UserError(f"--member-check-seconds must be 0 (skip) to {MAX_MEMBER_CHECK_S:g}")
    profile = "quick" if _profile(argv) == "quick" else "default"
    return MatrixOptions(members, args.backend, levels, chunk, args.suite, argv, args.name,
                         args.member_check_seconds, profile)


def _chunk(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        return parse_size(text)
    except ValueError as err:
        raise UserError(f"--chunk: {err}") from None


def _profile(argv: tuple[str, ...]) -> str | None:
    for i, word in enumerate(argv):
        if word == "--profile" and i + 1 < len(argv):
            return argv[i + 1]
        if word.startswith("--profile="):
            return word.split("=", 1)[1]
    return None


# -- results ---------------------------------------------------------------------------


@dataclass(frozen=True)
class MemberCheckRow(Record):
    """One member's read-only check before the arrays are built; ``*_again``: its second
    measurement of a metric a member was slow on (rows stored before have none)."""

    OMIT_NONE = frozenset({"seq_read_mb_s_again", "rand_read_iops_again", "unconfirmed"})

    path: str
    seq_read_mb_s: float
    rand_read_iops: float
    outlier: bool
    seq_read_mb_s_again: float | None = None
    rand_read_iops_again: float | None = None
    #: slow in the first measurement, not in the second: not an outlier
    unconfirmed: bool | None = None


@dataclass(frozen=True)
class MemberCheckResult(Record):
    """The outliers: members slow when measured and again; ``unconfirmed``: slow only
    once (not in results stored before)."""

    OMIT_NONE = frozenset({"unconfirmed"})

    rows: list[MemberCheckRow] = field(default_factory=list)
    outliers: list[str] = field(default_factory=list)
    message: str = ""
    unconfirmed: list[str] | None = None


#: a level row compared by its rates (IOPS, MB/s: higher is better)
BY_RATE = "rate"
#: ... or by its latency (mean and p99: lower is better), as a test tracking latency is
BY_LATENCY = "latency"


@dataclass(frozen=True)
class LevelRow(Record):
    """One measurement of a level's run: a test's cell (its id), its IOPS and MB/s, its
    mean and p99 latency (rows stored before they were kept have none), and how the levels
    are compared on it (:attr:`by`)."""

    OMIT_NONE = frozenset({"lat_mean_us", "lat_p99_us", "compared_by"})

    test: str
    cell: str
    iops: float
    mb_s: float
    read_pct: float | None = None
    block_bytes: int | None = None
    lat_mean_us: float | None = None
    lat_p99_us: float | None = None
    compared_by: str | None = None  # BY_LATENCY; None: BY_RATE

    @property
    def by(self) -> str:
        """``BY_LATENCY`` or ``BY_RATE``: the figures the levels are compared by."""
        return self.compared_by or BY_RATE


@dataclass(frozen=True)
class MemberRoundRow(Record):
    """One member over one measured round of a level's run (its ``seq``-th in order)."""

    seq: int
    test: str
    round_no: int
    member: str
    iops: float
    mb_s: float
    wait_ms: float | None
    util_pct: float


@dataclass(frozen=True)
class MemberWritten(Record):
    """What a member counted as written over the level (its health log, before and
    after): host bytes to within ``resolution_bytes``, NAND bytes where it says."""

    member: str
    host_bytes: int
    resolution_bytes: int
    media_bytes: int | None = None


@dataclass(frozen=True)
class LevelResult(Record):
    """One level: the array it was, the run on it, what it measured."""

    OMIT_NONE = frozenset({"error", "write_penalty", "textbook_penalty", "slow_member",
                           "slow_basis", "imbalance", "write_method", "write_method_note",
                           "reads_per_write", "level_name", "zfs", "slow_outliers"})

    level: str = ""
    backend: str = ""
    child_run: str | None = None
    child_status: str = ""
    array: dict[str, Any] = field(default_factory=dict)
    rows: list[LevelRow] = field(default_factory=list)
    write_penalty: float | None = None
    textbook_penalty: float | None = None
    imbalance: float | None = None
    slow_member: str | None = None  # named slow in most of the rounds (ZFS: over the level)
    #: how many rounds named it (ZFS: named it; where none was named over the level, how
    #: many named the member the rounds named most)
    slow_rounds: int = 0
    member_rounds: int = 0
    #: "level" where slow_member is the verdict over the whole level (ZFS), not the rounds'
    slow_basis: str | None = None
    #: the other members some rounds named slow, by how many rounds: outliers (host noise
    #: now and then), said but not named for the level
    #: (:func:`ssdlab.analysis.member_rounds.level_slow`)
    slow_outliers: dict[str, int] | None = None
    members: list[MemberRoundRow] = field(default_factory=list)
    written: list[MemberWritten] = field(default_factory=list)
    #: what ``ssdlab run`` printed at the end of the level's run (its verdicts: steady
    #: state, the recommended OP of an OP sweep ...)
    outcome: list[str] = field(default_factory=list)
    seconds: float = 0.0
    error: str | None = None
    #: md RAID 5/6: the write method its member reads per host write show ("rmw", "rcw"),
    #: how that was told, and those reads (median over the rounds of small writes only)
    write_method: str | None = None
    write_method_note: str | None = None
    reads_per_write: float | None = None
    #: the level as its backend names it (ZFS: stripe, mirror, striped mirrors, raidz1,
    #: raidz2)
    level_name: str | None = None
    #: ZFS: what the level wrote by the zvol's, the members' and the pool's own counts
    #: (run/zfs.py), and what the docs say beside it (``theory``)
    zfs: dict[str, Any] | None = None

    @property
    def name(self) -> str:
        """The level's name: ZFS's own, else raid0 ..."""
        return self.level_name or self.level


OPTIONS = (
    opt("--members", group="target", required=True, metavar="LIST",
        help="the member devices, comma-separated (/dev/sdb,/dev/sdc,...): each passes "
        "every guardrail a single target passes, before anything is written to any"),
    common.destroy_data_opt("target", "; for a set, --destroy-data=/dev/sdb,/dev/sdc "
                            "names each member that carries data (serial or path)"),
    common.dry_run_opt("target"), common.store_opt(), common.fio_opt("target"),
    opt("--backend", group=_G, config=Kind.TEXT, choices=BACKENDS, default="md",
        help="md (mdadm), zfs (zpool + a zvol) or btrfs (multi-device; the block suites run "
        "on a test file with copy-on-write off) (default md)"),
    opt("--levels", group=_G, config=Kind.TEXT, default=DEFAULT_LEVELS, metavar="LIST",
        help=f"RAID levels in the order run, of {', '.join(lv[4:] for lv in LEVELS)} "
        f"(default {DEFAULT_LEVELS}, the NAS review's)"),
    opt("--chunk", group=_G, config=Kind.TEXT, metavar="SIZE",
        help="chunk size (md), volblocksize (zfs); btrfs stripes are a fixed 64 KiB "
        "(default: md 512KiB, zfs 16KiB)"),
    # dest: "suite" is the name of the suite `ssdlab run` runs (this one)
    opt("--suite", group=_G, config=Kind.TEXT, field="suite", dest="child_suite",
        default=DEFAULT_CHILD, metavar="SUITE",
        help=f"the suite run on every level (default {DEFAULT_CHILD})"),
    opt("--suite-options", group=_G, config=Kind.TEXT, default="", metavar="TEXT",
        help="that suite's options, as one quoted string, e.g. \"--profile quick --tests "
        "iops\"; a single option needs the = form: --suite-options=--no-precondition (not "
        "--target, --dir, --destroy-data, --store, --fio)"),
    opt("--name", group=_G, config=Kind.TEXT, default="ssdlab-m", metavar="NAME",
        help="array name prefix; level L is NAME-raidL (default ssdlab-m)"),
    opt("--member-check-seconds", group=_G, config=Kind.FLOAT, type=float, default=5.0,
        metavar="S", help="seconds of each member's read-only sequential and 4 KiB random "
        "read check before the first array (default 5; 0 skips it)"),
)

# -- what a matrix stores beside its results -----------------------------------------------


@dataclass(frozen=True)
class MatrixPlan(StoredPlan):
    """A matrix's stored plan: its arguments, its options (with ``quick``), each level's
    array in words."""

    args: JsonObject = field(default_factory=dict)
    options: JsonObject = field(default_factory=dict)
    levels: tuple[str, ...] = ()


@dataclass(frozen=True)
class MemberCheckParams(Record):
    """The member check's parameters: how long each member is read."""

    seconds: float


@dataclass(frozen=True)
class LevelParams(Record):
    """A level's parameters: when it started (its own run is found from then on) and its
    array in words."""

    started_at: float
    array: str


SPEC = SuiteSpec(
    name=SUITE,
    quick_text=("each level's run in its suite's quick profile, "
                "for demos and tests; not a valid result"),
    help="the same suite on several RAID levels of the same drives (build, run, destroy)",
    description="""Checks every member (guardrails, then a short read-only sequential and
    random read with an outlier verdict), then for each level builds the array (md, ZFS or
    btrfs), runs the suite on it, tears it down and wipes the members. A failed level is
    recorded and the rest go on; a killed matrix resumes (`ssdlab resume`) at the level and
    round it stopped; arrays a killed run left are torn down by the next run or `ssdlab
    array destroy`. The report compares the levels side by side. docs/arrays.md.""",
    target=TargetKind.MEMBERS,
    options=OPTIONS,
    args_type=MatrixArgs,
    results={MEMBER_CHECK: MemberCheckResult, **{lv: LevelResult for lv in LEVELS}},
    report_title="RAID matrix report",
    plan_type=MatrixPlan,
    params={MEMBER_CHECK: MemberCheckParams, "*": LevelParams},
    verdicts={"outliers": None},  # the member check's outliers: a list of members
    resumable=True,
    config_first=("store", "fio"),
    local_only="it builds arrays of this host's member drives (--members)",
)
