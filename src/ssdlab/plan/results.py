"""The records at the store's boundary that more than one suite shares: a test's
parameters as every reader sees them, the verdicts, the cell fio measured, the head of a
stored plan, and the details of the steps and events the shared run code records.

Each is a :class:`~ssdlab.jsonrecord.Record` whose fields are the stored document's keys
in their stored order (docs/results-format.md), so that a document written before the
record existed reads and writes back byte for byte. A suite's own records (its
parameters, plan and cells) live in its plan module and derive from these or embed
them with :func:`~ssdlab.jsonrecord.flat`; its :class:`~ssdlab.plan.suite.SuiteSpec`
declares them, and tests/unit/test_store_records_golden.py reads every stored document
of its runs in the golden stores as them.

A reader that needs only what every suite's document has reads it as the shared record
(``TestParams.from_json(params)``, ``Verdict.from_json(verdict)``): a suite's record
need not derive from it, since reading keeps the keys a type does not know.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

from ssdlab.analysis import steady
from ssdlab.jsonrecord import JsonObject, Record, flat
from ssdlab.plan import consistency, device_rounds, member_rounds
from ssdlab.plan.specs import ActiveRange

# -- a test's parameters ----------------------------------------------------------------


@dataclass(frozen=True)
class TestParams(Record):
    """What every reader of a test's parameters may use: its title ("" where a suite's
    parameters have none)."""

    __test__ = False  # not a pytest test class

    title: str = ""


@dataclass(frozen=True)
class ProgressParams(TestParams):
    """What the readers of a running test's progress use (serve, the ETA): for a test of
    rounds, its steady-state rule, tracking variables, most rounds and round time; None
    (empty) where a suite's parameters have none of them."""

    rule: str | None = None
    tracking_set: str | None = None
    tracking: dict[str, list[TrackedVariable]] = field(default_factory=dict)
    max_rounds: int | None = None
    round_seconds: float | None = None

    def tracked(self) -> list[TrackedVariable]:
        """The variables of the test's own tracking set (none: not a test of rounds)."""
        return self.tracking.get(self.tracking_set or "", [])


@dataclass(frozen=True)
class TrackedVariable(Record):
    """A tracking variable of a test judged for steady state: a metric of one cell."""

    name: str = ""
    cell: str = ""  # the cell's name ("prefix_*": every cell of that name)
    metric: str = ""  # the cell's key


@dataclass(frozen=True)
class RoundParams(TestParams):
    """The parameters of a test of rounds judged for steady state (PTS, the OP sweep):
    the keys they share, in their order; each suite's own follow."""

    rule: str = ""
    window: int = 0
    max_rounds: int = 0
    tracking_set: str = ""
    tracking: dict[str, list[TrackedVariable]] = field(default_factory=dict)
    cell_seconds: float = 0.0
    round_seconds: float = 0.0
    cells: list[JsonObject] = field(default_factory=list)  # each suite's cell specs
    precondition: JsonObject | None = None
    purge: str = ""


# -- verdicts ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Verdict(Record):
    """A verdict in one sentence: what every verdict has (most suites' only key)."""

    message: str = ""


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


@dataclass(frozen=True)
class WindowStats(Record):
    """One tracking variable over the verdict's window (non-finite figures as null)."""

    window_average: float | None
    data_excursion: float | None
    data_excursion_pct: float | None
    slope: float | None
    slope_excursion: float | None
    slope_excursion_pct: float | None
    line_min_pct: float | None
    line_max_pct: float | None
    passed: bool
    score: float | None
    values: tuple[float | None, ...]
    reasons: tuple[str, ...]

    @classmethod
    def of(cls, check: steady.WindowCheck) -> WindowStats:
        return cls(_finite(check.average), _finite(check.data_excursion),
                   _finite(check.data_excursion_pct), _finite(check.slope),
                   _finite(check.slope_excursion), _finite(check.slope_excursion_pct),
                   _finite(check.line_min_pct), _finite(check.line_max_pct), check.passed,
                   _finite(check.score), tuple(_finite(v) for v in check.values),
                   check.reasons)


@dataclass(frozen=True)
class SteadyVerdict(Record):
    """A steady-state verdict (analysis.steady) as stored: the rule, its window, whether
    steady state was attained, and the window's statistics per tracking variable.
    (It has a ``message`` as every verdict, in its stored place.)"""

    rule: str
    window_size: int
    attained: bool
    rounds_seen: int
    window_rounds: tuple[int, int] | None
    message: str
    tracked: tuple[str, ...]
    variables: dict[str, WindowStats]

    @classmethod
    def of(cls, verdict: steady.Verdict) -> SteadyVerdict:
        return cls(verdict.rule.name, verdict.rule.window, verdict.attained,
                   verdict.rounds_seen, verdict.window_rounds, verdict.message,
                   verdict.variables,
                   {check.variable: WindowStats.of(check) for check in verdict.checks})


# -- cells ------------------------------------------------------------------------------


@dataclass(frozen=True)
class LittleLaw(Record):
    """What a cell keeps of Little's law (docs/consistency.md); cells stored before the
    checks existed have none of these keys."""

    clat_mean_us: float | None = None
    lat_total_mean_us: float | None = None
    in_flight: float | None = None
    io_slots: int | None = None
    latency_basis: str = "completion"  # or "total"
    littles_law: str | None = None


#: one cell of a stored result: its identity (cell, block_bytes, read_pct, pattern, load)
#: and every metric fio gave for it (iops, bw_bytes_per_s, lat_*_us, ...): the CSV export
#: and the comparisons read the metrics by name, so a cell stays a mapping
CellData = dict[str, Any]


@dataclass(frozen=True)
class FioCell(Record):
    """One cell as fio measured it (run/cells.py ``cell_from_job``), in its order: its
    identity, throughput, latency (completion, or total where ``latency_basis`` says so),
    CPU, the job's runtime and error, the latency percentiles, and (runs that store the
    checks) Little's law. A suite's cells derive from it and add their own keys after."""

    cell: str
    block_bytes: int = 0
    read_pct: int = 0
    pattern: str = ""
    threads: int = 0
    iodepth: int = 0
    iops: float = 0.0
    read_iops: float = 0.0
    write_iops: float = 0.0
    bw_bytes_per_s: float = 0.0
    read_bw_bytes_per_s: float = 0.0
    write_bw_bytes_per_s: float = 0.0
    lat_mean_us: float | None = None
    lat_max_us: float | None = None
    read_lat_mean_us: float | None = None
    write_lat_mean_us: float | None = None
    usr_cpu_pct: float = 0.0
    sys_cpu_pct: float = 0.0
    runtime_ms: float = 0  # a whole number in a round's cell; a window's is its average
    error: float = 0  # fio's error code (the largest of a window's)
    lat_p50_us: float | None = None
    lat_p99_us: float | None = None
    lat_p99_9_us: float | None = None
    lat_p99_99_us: float | None = None
    little: LittleLaw | None = flat(default=None)


@dataclass(frozen=True)
class HostCpuUse(Record):
    """The host's CPU use over a measured period: all of it, then user and system time
    (None: not readable). A cell's :class:`HostCpuWindow` and the latency-iops suite's
    points keep it."""

    host_cpu_pct: float | None = None
    host_usr_pct: float | None = None
    host_sys_pct: float | None = None


@dataclass(frozen=True)
class HostCpuWindow(Record):
    """The host's CPU use over a fio run (run/cpu_window.py ``CpuWindow.finish``), as a
    cell stores it after fio's figures: all of it and per kind, the hypervisor's steal,
    the busiest CPU fio may run on, and over which period (None: not readable)."""

    use: HostCpuUse = flat(default_factory=HostCpuUse)
    host_steal_pct: float | None = None
    host_cpu_busiest_pct: float | None = None
    host_cpu_window_s: float = 0.0
    host_cpu_window: str = ""


@dataclass(frozen=True)
class SkippedCell(Record):
    """A cell that was not run, and why."""

    cell: str = ""
    reason: str = ""


# -- the stored plan --------------------------------------------------------------------


@dataclass(frozen=True)
class StoredPlan(Record):
    """The head of a run's stored plan: its suite, the one key every plan starts with;
    a suite's plan record derives from it and declares the rest in its stored order
    (``args`` and ``options`` as JSON objects: ``spec.args_type(**plan.args)``)."""

    suite: str


@dataclass(frozen=True)
class ByteRange(Record):
    """A part of the target as a plan or parameters store it: its first byte and size
    (an active range, the region a run measured)."""

    offset_bytes: int = 0
    size_bytes: int = 0

    @classmethod
    def of(cls, rng: ActiveRange) -> ByteRange:
        """The active range a test ran on (plan/specs.py ``ActiveRange``)."""
        return cls(rng.offset_bytes, rng.size_bytes)


@dataclass(frozen=True)
class ArgsPlan(StoredPlan):
    """The head of most suites' stored plans: the suite, its arguments as given (what
    ``ssdlab resume`` prepares again) and its validated options with ``quick``
    (:func:`plan_head`); a suite's plan record derives from it and adds its own keys."""

    args: JsonObject = field(default_factory=dict)
    options: JsonObject = field(default_factory=dict)


class Dataclass(Protocol):
    """A dataclass instance (a suite's arguments as given)."""

    __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[Any]]]


class Settings(Dataclass, Protocol):
    """A suite's validated options: a dataclass that knows whether the run is quick."""

    @property
    def quick(self) -> bool: ...


def options_json(options: Settings) -> JsonObject:
    """Validated options as a stored plan keeps them: every field in order, then quick."""
    return {**dataclasses.asdict(options), "quick": options.quick}


def plan_head(args: Dataclass, options: Settings) -> tuple[JsonObject, JsonObject]:
    """The ``args`` and ``options`` of an :class:`ArgsPlan`."""
    return dataclasses.asdict(args), options_json(options)


# -- steps and events the shared run code records ---------------------------------------


class Purged(Protocol):
    """What a purge did (targets/purge.py ``PurgeOutcome``)."""

    @property
    def method(self) -> str: ...
    @property
    def ok(self) -> bool: ...
    @property
    def seconds(self) -> float: ...
    @property
    def command(self) -> tuple[str, ...] | None: ...
    @property
    def detail(self) -> str: ...
    @property
    def path(self) -> str | None: ...
    @property
    def fallback_from(self) -> str | None: ...


@dataclass(frozen=True)
class PurgeStep(Record):
    """A purge (targets/purge.py ``PurgeOutcome``): a ``purge`` step, and the detail of
    the warning when it failed. ``path``: the command family that reached the drive (ata,
    scsi, nvme); ``fallback_from``: the erase ``auto`` tried before it fell back to this
    method (both left out where None, as an older ssdlab stored the step)."""

    OMIT_NONE = frozenset({"path", "fallback_from"})

    method: str
    ok: bool
    seconds: float
    command: tuple[str, ...] | None
    detail: str
    path: str | None = None
    fallback_from: str | None = None

    @classmethod
    def of(cls, outcome: Purged) -> PurgeStep:
        """The record of what a purge did."""
        return cls(outcome.method, outcome.ok, outcome.seconds, outcome.command,
                   outcome.detail, outcome.path, outcome.fallback_from)


@dataclass(frozen=True)
class PreconditionStep(Record):
    """Workload-independent preconditioning: one size-based fio run."""

    io_bytes: int | None
    block_bytes: int
    ok: bool
    error: str | None
    seconds: float


@dataclass(frozen=True)
class ProcessEvent(Record):
    """Which process runs the run (``resume`` refuses while it is alive)."""

    pid: int
    host: str
    boot_id: str


@dataclass(frozen=True)
class HealthCount(Record):
    """The drive's own count of bytes written, from its health log (targets/health.py
    ``HealthReading``): the host's writes and their unit, and the media's where the drive
    reports them."""

    source: str
    host_bytes_written: int
    resolution_bytes: int
    media_bytes_written: int | None = None
    media_resolution_bytes: int | None = None


@dataclass(frozen=True)
class HealthEvent(Record):
    """The health log's count at the run's ``start``, on ``resume`` and at its ``end``."""

    when: str
    count: HealthCount = flat()


@dataclass(frozen=True)
class ErrorDetail(Record):
    """Why a run stops (an ``error`` event): what failed, in one line (None: not said)."""

    error: str | None


@dataclass(frozen=True)
class ResumedAfter(Record):
    """A stopped test goes on (a ``warning`` or ``resumed`` event): after which round,
    and how long the drive was idle since, where the test says it."""

    OMIT_NONE = frozenset({"idle_s"})

    after_round: int
    idle_s: float | None = None


@dataclass(frozen=True)
class Reason(Record):
    """Why a run did otherwise than asked (a ``warning`` event's detail)."""

    why: str


@dataclass(frozen=True)
class HostsEvent(Record):
    """A run on several hosts: each host's identity, versions and clock (facts)."""

    hosts: list[HostRecord] = field(default_factory=list)


@dataclass(frozen=True)
class HostRecord(Record):
    """A host of a run on several hosts as the run records it (each of its ``hosts``
    event's, and of the combined target's details): the host, its target, what it runs
    and its clock against the coordinator's."""

    host: str
    path: str
    hostname: str | None = None
    ssdlab: str | None = None
    fio: str | None = None
    clock_offset_s: float = 0.0
    target: JsonObject = field(default_factory=dict)
    host_info: JsonObject | None = None


@dataclass(frozen=True)
class JobSummary(Record):
    """A host's job in a round, summarised: its IOPS, bandwidth, p99 completion latency
    and fio's error code."""

    iops: float
    bw_bytes_per_s: float
    lat_p99_us: float | None
    error: int


@dataclass(frozen=True)
class HostPart(Record):
    """A host's part of a round (a ``host-round`` event): what the suite made of it, its
    tracking variables and cells where the suite has them, else a summary of each of its
    jobs (by job name)."""

    OMIT_NONE = frozenset({"tracking", "cells", "jobs"})

    tracking: dict[str, float] | None = None
    cells: list[FioCell] | None = None
    jobs: dict[str, JobSummary] | None = None


@dataclass(frozen=True)
class HostRoundEvent(Record):
    """Each host's part of one round of a run on several hosts."""

    round: int
    phase: str = ""
    hosts: dict[str, HostPart] = field(default_factory=dict)


@dataclass(frozen=True)
class HostVerdictsEvent(Record):
    """Each host's own steady-state verdict of a test (on the run's rule)."""

    hosts: dict[str, SteadyVerdict] = field(default_factory=dict)


#: the detail of each kind of step the shared run code records
STEP_DETAILS: dict[str, type[Record]] = {"purge": PurgeStep, "precondition": PreconditionStep}
#: the detail of each kind of event the shared run code records; None: a document kept
#: verbatim (the emulated SSD's own statistics, as its ``stats`` command gives them), or
#: no detail. (A ``warning`` says why in the detail of what it warns about: a
#: :class:`PurgeStep`, :class:`ResumedAfter`, :class:`Reason`, a suite's own record.)
EVENT_DETAILS: dict[str, type[Record] | None] = {
    "process": ProcessEvent,
    "health": HealthEvent,
    "hosts": HostsEvent,
    "error": ErrorDetail,
    "host-round": HostRoundEvent,
    "host-verdicts": HostVerdictsEvent,
    member_rounds.EVENT_KIND: member_rounds.MemberRound,
    device_rounds.EVENT_KIND: device_rounds.DeviceRound,
    consistency.EVENT_KIND: consistency.ConsistencyChecks,
    "emulator-stats": None,
    "members-off": None,
    # each host's ground truth (run/agent_wire.py HostTruthEvent: the emulator's own
    # document and the health log, read on the host)
    "host-truth": None,
}
