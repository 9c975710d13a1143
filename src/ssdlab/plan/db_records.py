"""What a database run stores, as records: each test's result (the tool's numbers, the
dataset, the server's settings), and beside it the plan, each test's parameters, each
measured phase's cell, the steps (server, load, cache drop, warm-up) and the workspace
event. ``plan/db.py``'s SPEC declares them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ssdlab.jsonrecord import JsonObject, Record
from ssdlab.plan.results import StoredPlan


@dataclass(frozen=True)
class DatasetRecord(Record):
    """The dataset and the memory that could hold it, as the run measured them."""

    shape: str = ""  # "4 tables x 25,000 rows", "scale 2"
    tables: int = 0
    table_rows: int = 0
    pgbench_scale: int = 0
    estimated_bytes: int = 0
    bytes: int = 0  # the loaded database on disk: its tables and indexes (not the logs)
    buffer_bytes: int = 0  # buffer pool / shared_buffers
    buffer_ratio: float = 0.0  # buffer / dataset
    memory_limit_bytes: int | None = None  # the server's cgroup limit (None: none)
    memory_bytes: int = 0  # what could cache the data: the limit, else the machine's RAM
    fits_in_memory: bool = False
    direct_io: bool = False  # the server reads and writes its data files with O_DIRECT
    scaled: str | None = None  # what --scale changed


@dataclass(frozen=True)
class DbResult(Record):
    """A test's result: ``{}`` while it runs, ``{"error": ...}`` when it failed."""

    OMIT_NONE = frozenset({"error", "message", "warning", "qps", "latency_p95_ms",
                           "latency_p99_ms"})

    workload: str = ""
    mode: str = ""
    server: str = ""  # "MariaDB 10.11.19"
    tool: str = ""  # "sysbench 1.0.20"
    threads: int = 0
    warmup_seconds: float = 0.0
    seconds: float = 0.0  # measured, as the tool reports it
    transactions: int = 0
    tps: float = 0.0
    qps: float | None = None
    errors: int = 0  # sysbench's ignored errors; pgbench's failed transactions
    latency_avg_ms: float = 0.0
    latency_p95_ms: float | None = None
    latency_p99_ms: float | None = None
    latency_max_ms: float = 0.0
    latency_source: str = ""  # where the percentiles come from
    series: list[SecondPoint] = field(default_factory=list)
    series_latency: str = ""  # what ``SecondPoint.latency_ms`` is
    dataset: DatasetRecord | None = None
    settings: dict[str, str] = field(default_factory=dict)  # as the server reports them
    warning: str | None = None
    message: str | None = None
    error: str | None = None


@dataclass(frozen=True)
class DbServerPlan(Record):
    """A workload's server as planned: its settings, buffer, memory limit and dataset."""

    server: str
    settings: dict[str, str]
    buffer_bytes: int
    memory_limit_bytes: int | None
    dataset: str


@dataclass(frozen=True)
class DbPlan(StoredPlan):
    """A database run's stored plan."""

    args: JsonObject = field(default_factory=dict)
    options: JsonObject = field(default_factory=dict)
    sizes: JsonObject = field(default_factory=dict)
    fs_estimate_bytes: int = 0
    scaled: str | None = None
    fs: str | None = None  # the file system made on --target (None: --dir)
    dir: JsonObject | None = None
    tests: tuple[str, ...] = ()
    servers: dict[str, DbServerPlan] = field(default_factory=dict)
    tools: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class DbParams(Record):
    """A test's parameters (``mode`` None: every test of a workload that failed as one)."""

    workload: str
    mode: str | None
    server: str
    threads: int
    warmup_seconds: float
    seconds: float
    dataset: str


@dataclass(frozen=True)
class DbCell(Record):
    """A measured phase's one cell (a failed one: its name and workload only)."""

    cell: str
    workload: str
    tps: float | None = None
    qps: float | None = None
    latency_avg_ms: float | None = None
    latency_p95_ms: float | None = None
    latency_p99_ms: float | None = None
    errors: int | None = None


@dataclass(frozen=True)
class ServerStep(Record):
    """A workload's server made and started: how, and its settings as it reports them."""

    workload: str
    server: str
    version: str | None
    init: str
    start: str
    settings: dict[str, str]
    memory_limit_bytes: int | None
    seconds: float


@dataclass(frozen=True)
class LoadStep(Record):
    """A workload's dataset loaded."""

    workload: str
    ok: bool
    seconds: float
    dataset: DatasetRecord


@dataclass(frozen=True)
class CacheDropStep(Record):
    """The server stopped, the kernel's caches dropped (or why not), the server started."""

    OMIT_NONE = frozenset({"why"})

    workload: str
    synced: bool
    dropped: bool
    why: str | None = None
    server_restarted: bool = True


@dataclass(frozen=True)
class WarmupStep(Record):
    """A test's warm-up (not measured): how long it took and whether it ran through."""

    seconds: float
    ok: bool


@dataclass(frozen=True)
class WorkspaceEvent(Record):
    """Where the servers' data went: the file system made on the device, or a directory."""

    device: str | None
    fs: str | None
    mkfs: str | None
    mkfs_output: str
    data_root: str
    token: str


@dataclass(frozen=True)
class SecondPoint(Record):
    """One interval of the tool's own report (sysbench ``--report-interval``, pgbench
    ``-P``): transactions per second and the latency it printed for the interval
    (sysbench: its percentile; pgbench: the mean)."""

    t_s: float = 0.0
    tps: float = 0.0
    latency_ms: float = 0.0
    errors_per_s: float = 0.0
