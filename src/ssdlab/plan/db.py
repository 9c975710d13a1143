"""Database benchmarks (``ssdlab run db``) as data: the options, the dataset and buffer
sizing, the tests a run records and their result records.

Two workloads, each on a private server of its own made on the target:

* ``sysbench-oltp``: sysbench's own OLTP Lua workloads (``oltp_read_write``,
  ``oltp_read_only``, ``oltp_write_only``) against MariaDB;
* ``pgbench``: PostgreSQL's pgbench (its TPC-B-like script, ``select-only`` and
  ``simple-update``) against PostgreSQL.

The defaults are the Micron 9400 review's (``../shared/reference/003``): 100 tables of
10,000,000 rows, 32 threads, a buffer pool a tenth of the dataset (24 GB for about
240 GB), 2 hours of warm-up and 1 hour measured. pgbench's default scale makes a dataset
of the same size. The quick profile is for tests and demos (a few MB, seconds).

Every size here is an estimate made before any I/O (to refuse a dataset that cannot fit);
the run measures the dataset it loaded and records both.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from ssdlab.errors import TargetError, UserError
from ssdlab.plan import optionsets as common
from ssdlab.plan.config_schema import Kind
from ssdlab.plan.db_records import (
    CacheDropStep,
    DbCell,
    DbParams,
    DbPlan,
    DbResult,
    LoadStep,
    ServerStep,
    WarmupStep,
    WorkspaceEvent,
)
from ssdlab.plan.results import Verdict
from ssdlab.plan.suite import ProfiledArgs, ProfiledOptions, SuiteSpec, TargetKind, opt
from ssdlab.units import format_bytes, format_duration, parse_size

SUITE = "db"
MIB = 2**20
SYSBENCH = "sysbench-oltp"
PGBENCH = "pgbench"
WORKLOADS = (SYSBENCH, PGBENCH)
SYSBENCH_MODES = ("oltp_read_write", "oltp_read_only", "oltp_write_only")
PGBENCH_MODES = ("tpcb-like", "select-only", "simple-update")
#: which server each workload runs on
SERVERS = {SYSBENCH: "mariadb", PGBENCH: "postgresql"}
SERVER_NAMES = {"mariadb": "MariaDB", "postgresql": "PostgreSQL"}
FILESYSTEMS = ("ext4", "xfs")
PROFILES = ("default", "quick")

#: bytes a sysbench OLTP row takes in InnoDB (its row, the primary and the k index, page
#: fill): 10,000,000 rows are about 2.4 GB, as measured for sysbench's schema
SYSBENCH_ROW_BYTES = 240
#: bytes one pgbench scale unit takes (100,000 accounts, their index, the other tables)
PGBENCH_SCALE_BYTES = 16_000_000
#: a loaded dataset grows while it runs (undo, page splits, dead tuples): the room kept
GROWTH = 1.25
#: what a file system keeps of a device for itself, and what the run keeps free
FS_USABLE = 0.85
#: the server's smallest buffers ssdlab sets (a tenth of a tiny dataset is less)
MIN_BUFFER_BYTES = {"mariadb": 8 * MIB, "postgresql": 2 * MIB}
#: what the server needs beyond its buffer, within the memory limit (connections, sorts,
#: its other caches); the rest of the limit is all the page cache it can keep
MEMORY_HEADROOM_BYTES = 256 * MIB
#: the warm-up keeps going at least this long when the measured phase is short
MIN_SECONDS = 1


@dataclass(frozen=True)
class Sizes:
    """A workload's dataset as planned: its rows (sysbench: tables x rows; pgbench: scale)
    and its estimated bytes."""

    tables: int
    table_rows: int
    pgbench_scale: int

    def dataset_bytes(self, workload: str) -> int:
        if workload == SYSBENCH:
            return self.tables * self.table_rows * SYSBENCH_ROW_BYTES
        return self.pgbench_scale * PGBENCH_SCALE_BYTES

    def describe(self, workload: str) -> str:
        size = format_bytes(self.dataset_bytes(workload))
        if workload == SYSBENCH:
            return f"{self.tables} tables x {self.table_rows:,} rows (about {size})"
        return f"scale {self.pgbench_scale:,} ({self.pgbench_scale * 100_000:,} accounts, " \
            f"about {size})"


PROFILE_DEFAULTS: dict[str, dict[str, Any]] = {
    "default": {"tables": 100, "table_rows": 10_000_000, "pgbench_scale": 15_000,
                "threads": 32, "warmup_seconds": 7200.0, "seconds": 3600.0},
    "quick": {"tables": 4, "table_rows": 25_000, "pgbench_scale": 2, "threads": 4,
              "warmup_seconds": 5.0, "seconds": 10.0},
}


@dataclass(frozen=True)
class DbArgs(ProfiledArgs):
    """The options as given (None: the profile's)."""

    workloads: str = ",".join(WORKLOADS)
    sysbench_tests: str = SYSBENCH_MODES[0]
    pgbench_modes: str = PGBENCH_MODES[0]
    tables: int | None = None
    table_rows: int | None = None
    pgbench_scale: int | None = None
    threads: int | None = None
    warmup_seconds: float | None = None
    seconds: float | None = None
    buffer_fraction: float = 0.1
    memory_limit: str = "auto"
    fs: str = "ext4"
    scale: bool = False
    server_options: tuple[str, ...] = ()
    pg_bindir: str | None = None
    mariadb_bindir: str | None = None
    sysbench: str = "sysbench"

    def __post_init__(self) -> None:
        """Lists as the command line and config files give them: ``--workloads a,b`` or a
        config array; ``--server-option`` repeated, or a config list."""
        for name in ("workloads", "sysbench_tests", "pgbench_modes"):
            value = getattr(self, name)
            if isinstance(value, list | tuple):
                object.__setattr__(self, name, ",".join(str(v) for v in value))
        given: Any = self.server_options
        items = given.split(",") if isinstance(given, str) else list(given or ())
        object.__setattr__(self, "server_options",
                           tuple(i for item in items for i in str(item).split(",") if i))


@dataclass(frozen=True)
class DbOptions(ProfiledOptions):
    """The validated options (sizes are the ones given, before ``--scale`` fits them)."""

    workloads: tuple[str, ...]
    sysbench_tests: tuple[str, ...]
    pgbench_modes: tuple[str, ...]
    sizes: Sizes
    threads: int
    warmup_seconds: float
    seconds: float
    buffer_fraction: float
    memory_limit: str  # "auto", "off", or a size in bytes as text
    fs: str
    scale: bool
    #: server -> its settings given with --server-option (they win over ssdlab's)
    server_options: dict[str, dict[str, str]]

    @property
    def ioengine(self) -> str:  # the session's fio setup names one; no fio job runs here
        return "none"

    def tests(self) -> list[tuple[str, str, str]]:
        """(test name, workload, mode) of every test, in the order they run."""
        out = []
        for workload in self.workloads:
            modes = self.sysbench_tests if workload == SYSBENCH else self.pgbench_modes
            out += [(test_name(workload, m), workload, m) for m in modes]
        return out


def test_name(workload: str, mode: str) -> str:
    """``sysbench-oltp_read_write``, ``pgbench-tpcb-like``."""
    return f"{'sysbench' if workload == SYSBENCH else 'pgbench'}-{mode}"


def _choices(flag: str, text: str, allowed: tuple[str, ...]) -> tuple[str, ...]:
    items = tuple(dict.fromkeys(t.strip() for t in text.split(",") if t.strip()))
    if not items:
        raise UserError(f"{flag} is empty; give one or more of: {', '.join(allowed)}")
    for item in items:
        if item not in allowed:
            raise UserError(f"{flag} {item!r} is not one of: {', '.join(allowed)}")
    return items


def _positive(flag: str, value: float | None) -> None:
    if value is not None and not (value > 0 and math.isfinite(value)):
        raise UserError(f"{flag} {value:g} must be a number > 0")


def server_options(given: tuple[str, ...]) -> dict[str, dict[str, str]]:
    """``--server-option mariadb:innodb_flush_log_at_trx_commit=2`` -> by server."""
    out: dict[str, dict[str, str]] = {s: {} for s in SERVER_NAMES}
    for text in given:
        server, sep, setting = text.partition(":")
        key, eq, value = setting.partition("=")
        if not sep or server not in SERVER_NAMES or not eq or not key.strip():
            raise UserError(f"--server-option {text!r}: give SERVER:KEY=VALUE with SERVER "
                            "mariadb or postgresql, e.g. mariadb:innodb_flush_log_at_trx_"
                            "commit=1 or postgresql:synchronous_commit=on")
        key = key.strip().replace("-", "_")
        if not key.replace("_", "").replace(".", "").isalnum():
            raise UserError(f"--server-option {text!r}: {key!r} is not a setting name")
        if "\n" in value or "'" in value:
            raise UserError(f"--server-option {text!r}: the value may not hold a quote or "
                            "a line break")
        out[server][key] = value.strip()
    return out


def memory_limit(text: str) -> str:
    """``--memory-limit``: auto, off, or a size (bytes, as text)."""
    if text in ("auto", "off"):
        return text
    try:
        size = parse_size(text)
    except ValueError as exc:
        raise UserError(f"--memory-limit {text!r}: {exc} (or auto, off)") from None
    if size < 64 * MIB:
        raise UserError(f"--memory-limit {text!r} is below 64MiB: the server cannot run")
    return str(size)


def build_options(args: DbArgs) -> DbOptions:
    """Validate into :class:`DbOptions`; a one-line UserError otherwise."""
    if args.profile not in PROFILES:
        raise UserError(f"--profile {args.profile!r} is not one of: {', '.join(PROFILES)}")
    base = PROFILE_DEFAULTS[args.profile]

    def pick(name: str) -> Any:
        value = getattr(args, name)
        return base[name] if value is None else value

    for flag, name in (("--tables", "tables"), ("--table-rows", "table_rows"),
                       ("--pgbench-scale", "pgbench_scale"), ("--threads", "threads")):
        value = getattr(args, name)
        if value is not None and value < 1:
            raise UserError(f"{flag} {value} must be a whole number >= 1")
    if args.warmup_seconds is not None and not 0 <= args.warmup_seconds < math.inf:
        raise UserError(f"--warmup-seconds {args.warmup_seconds:g} must be a number >= 0")
    _positive("--seconds", args.seconds)
    if not 0 < args.buffer_fraction <= 4:
        raise UserError(f"--buffer-fraction {args.buffer_fraction:g} must be > 0 and <= 4 "
                        "(the buffer pool as a fraction of the dataset)")
    if args.fs not in FILESYSTEMS:
        raise UserError(f"--fs {args.fs!r} is not one of: {', '.join(FILESYSTEMS)}")
    return DbOptions(
        profile=args.profile,
        workloads=_choices("--workloads", args.workloads, WORKLOADS),
        sysbench_tests=_choices("--sysbench-tests", args.sysbench_tests, SYSBENCH_MODES),
        pgbench_modes=_choices("--pgbench-modes", args.pgbench_modes, PGBENCH_MODES),
        sizes=Sizes(pick("tables"), pick("table_rows"), pick("pgbench_scale")),
        threads=pick("threads"), warmup_seconds=float(pick("warmup_seconds")),
        seconds=float(pick("seconds")), buffer_fraction=args.buffer_fraction,
        memory_limit=memory_limit(args.memory_limit), fs=args.fs, scale=args.scale,
        server_options=server_options(args.server_options))


# -- fitting the dataset to the target ---------------------------------------------------


def buffer_bytes(o: DbOptions, workload: str, sizes: Sizes) -> int:
    """The server's buffer (InnoDB's buffer pool, PostgreSQL's shared_buffers): the stated
    fraction of the dataset, whole MiB, at least the server's smallest ssdlab sets."""
    server = SERVERS[workload]
    wanted = int(sizes.dataset_bytes(workload) * o.buffer_fraction) // MIB * MIB
    return max(wanted, MIN_BUFFER_BYTES[server])


def log_bytes(workload: str, fs_bytes: int) -> int:
    """The server's log as ssdlab sizes it for a file system of ``fs_bytes``: InnoDB's redo
    log (its default 96 MiB, less on a small file system) or PostgreSQL's max_wal_size
    (its default 1 GiB, less on a small file system)."""
    if workload == SYSBENCH:
        return max(8 * MIB, min(96 * MIB, fs_bytes // 16 // MIB * MIB))
    return max(32 * MIB, min(1024 * MIB, fs_bytes // 8 // MIB * MIB))


#: what a server keeps besides its tables and its log (InnoDB's system and undo
#: tablespaces; PostgreSQL's catalogue and the template databases)
SERVER_BASE_BYTES = {SYSBENCH: 64 * MIB, PGBENCH: 48 * MIB}


def needed_bytes(workload: str, sizes: Sizes, fs_bytes: int) -> int:
    """What a workload's server needs on the file system: its dataset with room to grow,
    its log, its own files."""
    return int(sizes.dataset_bytes(workload) * GROWTH) + log_bytes(workload, fs_bytes) + \
        SERVER_BASE_BYTES[workload]


@dataclass(frozen=True)
class Fitted:
    """The sizes the run uses: as given, or (``--scale``) made smaller to fit."""

    sizes: Sizes
    fs_bytes: int  # what the file system will hold, as estimated
    scaled: str | None  # what --scale changed (None: nothing)


def fit(o: DbOptions, fs_bytes: int, where: str) -> Fitted:
    """The dataset on a file system of ``fs_bytes`` (the workloads run one after the
    other, each server removed before the next starts): refused in one line when it does
    not fit, unless ``--scale`` makes it smaller until it does (and says so)."""
    sizes = o.sizes
    changes = []
    for workload in o.workloads:
        need = needed_bytes(workload, sizes, fs_bytes)
        if need <= fs_bytes:
            continue
        if not o.scale:
            raise TargetError(
                f"the {workload} dataset, {sizes.describe(workload)}, needs about "
                f"{format_bytes(need)} with the server's log and room to grow, and {where} "
                f"holds about {format_bytes(fs_bytes)}: give --scale to fit it to the "
                "target, or a smaller dataset (--tables, --table-rows, --pgbench-scale)")
        before = sizes.describe(workload)
        sizes = _scaled(workload, sizes, fs_bytes)
        if needed_bytes(workload, sizes, fs_bytes) > fs_bytes:
            raise TargetError(f"{where} is too small for a {workload} server: about "
                            f"{format_bytes(fs_bytes)} holds not even its log and one row")
        changes.append(f"{workload} {before} -> {sizes.describe(workload)}")
    scaled = ("--scale: the dataset was fitted to the target's "
              f"{format_bytes(fs_bytes)}: " + "; ".join(changes)) if changes else None
    return Fitted(sizes, fs_bytes, scaled)


def _scaled(workload: str, sizes: Sizes, fs_bytes: int) -> Sizes:
    """The largest dataset of the same shape that fits (sysbench: fewer rows per table,
    then fewer tables; pgbench: a smaller scale)."""
    room = fs_bytes - log_bytes(workload, fs_bytes) - SERVER_BASE_BYTES[workload]
    room_rows = max(0, int(room / GROWTH))
    if workload == PGBENCH:
        return dataclasses.replace(sizes, pgbench_scale=max(1, room_rows // PGBENCH_SCALE_BYTES))
    rows = room_rows // SYSBENCH_ROW_BYTES
    per_table = rows // sizes.tables
    if per_table >= 1000:
        return dataclasses.replace(sizes, table_rows=min(sizes.table_rows, per_table))
    tables = max(1, min(sizes.tables, rows // 1000))
    return dataclasses.replace(sizes, tables=tables, table_rows=max(1, rows // tables))


OPTIONS = (
    opt("--target", group="target", field=None, action="append", metavar="DEVICE",
        help="the block device to make a file system on for the servers' data and logs "
        "(everything on it is destroyed: --destroy-data)"),
    opt("--dir", group="target", config=Kind.TEXT, field=None, metavar="DIR",
        help="instead of --target: a directory on a mounted file system; the servers' "
        "data go in a work directory made there and removed afterwards"),
    common.destroy_data_opt("target"), common.dry_run_opt("target"), common.store_opt(),
    common.profile("database", PROFILES, "default: the review's sizes and times; quick: a "
                   "few MB and seconds, for a try-out (marked QUICK everywhere)"),
    opt("--workloads", group="database", config=Kind.LIST, default=",".join(WORKLOADS),
        metavar="W,...", help=f"which to run: {', '.join(WORKLOADS)} (default both)"),
    opt("--sysbench-tests", group="database", config=Kind.LIST, default=SYSBENCH_MODES[0],
        metavar="T,...", help=f"sysbench's OLTP workloads: {', '.join(SYSBENCH_MODES)} "
        f"(default {SYSBENCH_MODES[0]})"),
    opt("--pgbench-modes", group="database", config=Kind.LIST, default=PGBENCH_MODES[0],
        metavar="M,...", help=f"pgbench's scripts: {', '.join(PGBENCH_MODES)} (default "
        f"{PGBENCH_MODES[0]})"),
    common.whole("--tables", "database", "sysbench tables (default 100; quick 4)",
                 default=None),
    common.whole("--table-rows", "database", "rows per sysbench table (default 10,000,000; "
                 "quick 25,000)", default=None),
    common.whole("--pgbench-scale", "database", "pgbench's scale factor, 100,000 accounts "
                 "each (default 15,000, about the sysbench dataset; quick 2)", default=None),
    common.whole("--threads", "database", "client threads (sysbench --threads, pgbench "
                 "-c; default 32; quick 4)", default=None),
    common.number("--warmup-seconds", "database", "warm-up before each measured phase, "
                  "not measured (default 7200; quick 5)", metavar="S", default=None),
    common.number("--seconds", "database", "measured phase (default 3600; quick 10)",
                  metavar="S", default=None),
    common.number("--buffer-fraction", "database", "buffer pool (InnoDB) or shared_buffers "
                  "as a fraction of the dataset (default 0.1: the review's 24 GB for about "
                  "240 GB)", metavar="F", default=0.1),
    opt("--memory-limit", group="database", config=Kind.TEXT, default="auto",
        metavar="auto|off|SIZE", help="a memory cgroup limit on the server, so that the page "
        "cache cannot hold the data either (auto: the buffer plus 256MiB; off: none)"),
    opt("--fs", group="database", config=Kind.TEXT, default="ext4", choices=FILESYSTEMS,
        help="the file system made on --target (default ext4)"),
    opt("--scale", group="database", config=Kind.BOOL, action="store_true",
        help="make the dataset smaller until it fits the target, and say so (without it, "
        "a dataset that does not fit is refused)"),
    opt("--server-option", group="database", config=Kind.LIST, dest="server_options",
        default="", metavar="SERVER:KEY=VALUE,...",
        help="server settings, e.g. mariadb:innodb_flush_log_at_trx_commit=2 or "
        "postgresql:synchronous_commit=off, comma-separated (durability settings are the "
        "servers' safe defaults unless changed here; every setting is recorded)"),
    opt("--pg-bindir", group="database", config=Kind.TEXT, default=None, metavar="DIR",
        help="PostgreSQL's programs (default: the newest /usr/lib/postgresql/*/bin)"),
    opt("--mariadb-bindir", group="database", config=Kind.TEXT, default=None, metavar="DIR",
        help="where mariadbd and mariadb-install-db are (default: the PATH, /usr/sbin)"),
    opt("--sysbench", group="database", config=Kind.TEXT, default="sysbench",
        metavar="PATH", help="the sysbench binary (default: sysbench)"),
)


SPEC: SuiteSpec[DbArgs] = SuiteSpec(
    name=SUITE,
    quick_text="a few MB and seconds, a try-out; not the review's sizes",
    help="sysbench OLTP on MariaDB and pgbench on PostgreSQL, private servers on the target",
    description="""Each workload runs on a private server made for the run: a file system
    on --target (or a work directory in --dir) holds its data and logs, it listens only on
    a socket in a directory ssdlab owns, and it is stopped and removed afterwards (also
    after Ctrl-C; `ssdlab db cleanup` removes what a killed run left). The dataset is
    loaded, caches dropped, the server restarted cold, then each test warms up and is
    measured: TPS, average, p95 and p99 latency from the tools' own histograms, and the
    tools' per-second reports (docs/db.md).""",
    target=TargetKind.DEVICE_OR_DIR,
    options=OPTIONS,
    args_type=DbArgs,
    results={t: DbResult for t in
             [test_name(SYSBENCH, m) for m in SYSBENCH_MODES]
             + [test_name(PGBENCH, m) for m in PGBENCH_MODES]},
    report_title="database benchmark report",
    config_first=("store",),
    many_targets=False,
    plan_type=DbPlan,
    params={"*": DbParams},
    cells=DbCell,
    verdicts={"primary": Verdict},
    details={"server": ServerStep, "load": LoadStep, "cache-drop": CacheDropStep,
             "warmup": WarmupStep, "workspace": WorkspaceEvent},
    local_only="it makes a file system (or a work directory) for database servers it "
    "starts on this host",
)


def describe_sizes(o: DbOptions, fitted: Fitted) -> list[str]:
    """The dry run's and the start's lines on what is loaded and how long each phase is."""
    lines = []
    for workload in o.workloads:
        s = fitted.sizes
        buf = buffer_bytes(o, workload, s)
        what = "buffer pool" if workload == SYSBENCH else "shared_buffers"
        lines.append(f"{workload}: {s.describe(workload)}; {what} {format_bytes(buf)} "
                     f"({o.buffer_fraction:g} of the dataset)")
    lines.append(f"{o.threads} threads; each test warms up for "
                 f"{format_duration(o.warmup_seconds)}, then is measured for "
                 f"{format_duration(o.seconds)}")
    if fitted.scaled:
        lines.append(fitted.scaled)
    return lines
