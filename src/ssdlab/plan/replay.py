"""Trace replay (``ssdlab run replay``): the trace checked before any I/O, and the job.

fio replays two kinds of trace with ``read_iolog``: its own iolog (version 2: ``FILE
ACTION [OFFSET LENGTH]`` lines; version 3: the same with a leading timestamp, in
microseconds as fio 3.33 writes it) and a binary blktrace (``blkparse -d`` output; fio
recognises it by the magic of its first event). ``replay_redirect`` sends every I/O of
the trace to the target. Before any I/O the trace is read here: a known format, at least
one I/O, every I/O's byte range inside the target, and (with direct I/O) offsets and
lengths in whole sectors. Pure: the trace's bytes in, a summary out.

The suite's spec (its options), its result records and what the plan says (the job as
data, dry run, stored plan, test parameters) are here too.
"""

from __future__ import annotations

import dataclasses
import os
import struct
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import cast

from ssdlab.errors import UserError
from ssdlab.jsonrecord import JsonObject, Record
from ssdlab.plan import optionsets as common
from ssdlab.plan.config_schema import Kind
from ssdlab.plan.results import FioCell, StoredPlan, TestParams, Verdict
from ssdlab.plan.specs import FioJob, JobSection
from ssdlab.plan.suite import SuiteSpec, TargetKind, Unprofiled, opt
from ssdlab.units import check_fio_seconds, fio_time, format_bytes

TEST = "replay"
IOLOG_V2 = "fio version 2 iolog"
IOLOG_V3 = "fio version 3 iolog"
FORMATS = ("iolog-v2", "iolog-v3", "blktrace")
MAX_TRACE_BYTES = 4 << 30
DEFAULT_QD = 1
DEFAULT_LOG_INTERVAL_MS = 1000
#: the test file the run makes on --dir
FILE_NAME = "ssdlab-replay.dat"
#: where the dry run's job file writes its IOPS log (a temporary directory at run time)
LOG_PLACEHOLDER = "LOGDIR/replay"
IO_ACTIONS = ("read", "write", "trim")
OTHER_ACTIONS = ("add", "open", "close", "sync", "datasync", "wait")

# blktrace (include/uapi/linux/blktrace_api.h)
BLK_MAGIC = 0x65617400
BLK_EVENT = struct.Struct("<IIQQIIIIIHH")  # 48 bytes, little-endian (x86, arm64)
BLK_TA_QUEUE = 1
BLK_TC_SHIFT = 16
BLK_TC_WRITE = 1 << 1
BLK_TC_NOTIFY = 1 << 10
BLK_TC_DISCARD = 1 << 13


@dataclass(frozen=True)
class TraceSummary:
    """What a trace holds, read before any I/O."""

    path: str
    format: str
    size_bytes: int
    ios: int
    reads: int
    writes: int
    trims: int
    read_bytes: int
    write_bytes: int
    extent_bytes: int  # the highest byte any I/O touches
    unaligned: int  # I/Os whose offset or length is not a multiple of 512 bytes
    block_sizes: dict[int, int] = field(default_factory=dict)  # bytes -> I/O count
    duration_ms: int | None = None  # v3 iologs and blktrace: first to last timestamp

    @property
    def read_pct(self) -> int:
        rw = self.reads + self.writes
        return round(100 * self.reads / rw) if rw else 100

    @property
    def main_block(self) -> int:
        if not self.block_sizes:
            return 4096
        return max(self.block_sizes.items(), key=lambda kv: (kv[1], kv[0]))[0]

    def describe(self) -> str:
        span = "" if self.duration_ms is None else f" over {self.duration_ms / 1000:g} s"
        return (f"{self.format} trace {self.path}: {self.ios:,} I/Os ({self.reads:,} reads, "
                f"{self.writes:,} writes, {self.trims:,} trims){span}, "
                f"{format_bytes(self.read_bytes)} read, {format_bytes(self.write_bytes)} "
                f"written, touching bytes up to {format_bytes(self.extent_bytes)}")

    def record(self) -> TraceRecord:
        return TraceRecord(self.path, self.format, self.size_bytes, self.ios, self.reads,
                           self.writes, self.trims, self.read_bytes, self.write_bytes,
                           self.extent_bytes, self.unaligned, self.read_pct,
                           {str(k): v for k, v in sorted(self.block_sizes.items())},
                           self.duration_ms)


@dataclass(frozen=True)
class TraceRecord(Record):
    """What a trace holds, as the plan, the test's parameters and its result keep it."""

    path: str = ""
    format: str = ""
    size_bytes: int = 0
    ios: int = 0
    reads: int = 0
    writes: int = 0
    trims: int = 0
    read_bytes: int = 0
    write_bytes: int = 0
    extent_bytes: int = 0
    unaligned: int = 0
    read_pct: int = 0
    block_sizes: dict[str, int] = field(default_factory=dict)  # bytes -> I/O count
    duration_ms: int | None = None


class _Tally:
    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.bytes: Counter[str] = Counter()
        self.sizes: Counter[int] = Counter()
        self.extent = 0
        self.unaligned = 0
        self.first_ms: int | None = None
        self.last_ms: int | None = None

    def io(self, kind: str, offset: int, length: int) -> None:
        self.counts[kind] += 1
        self.bytes[kind] += length
        self.sizes[length] += 1
        self.extent = max(self.extent, offset + length)
        if offset % 512 or length % 512:
            self.unaligned += 1

    def when(self, ms: int) -> None:
        self.first_ms = ms if self.first_ms is None else min(self.first_ms, ms)
        self.last_ms = ms if self.last_ms is None else max(self.last_ms, ms)

    def summary(self, path: str, fmt: str, size: int) -> TraceSummary:
        ios = sum(self.counts[k] for k in IO_ACTIONS)
        span = (None if self.first_ms is None or self.last_ms is None
                else self.last_ms - self.first_ms)
        return TraceSummary(path, fmt, size, ios, self.counts["read"], self.counts["write"],
                            self.counts["trim"], self.bytes["read"], self.bytes["write"],
                            self.extent, self.unaligned, dict(self.sizes), span)


def _bad(path: str, number: int, line: str, why: str) -> UserError:
    shown = line if len(line) <= 60 else line[:57] + "..."
    return UserError(f"--trace {path}: line {number} ({shown!r}): {why}")


def _int(text: str) -> int:
    value = int(text, 0)
    if value < 0:
        raise ValueError(text)
    return value


def read_iolog(path: str, text: str, version: int) -> TraceSummary:
    """Tally a version 2 or 3 fio iolog; UserError naming the first bad line."""
    tally = _Tally()
    lines = text.splitlines()
    for number, raw in enumerate(lines[1:], 2):
        line = raw.strip()
        if line:
            _iolog_line(tally, path, number, line, version)
    return tally.summary(path, f"iolog-v{version}", len(text.encode()))


def _iolog_line(tally: _Tally, path: str, number: int, line: str, version: int) -> None:
    fields = line.split()
    if version == 3:
        if len(fields) < 3:
            raise _bad(path, number, line,
                       "a v3 line is TIME_US FILE ACTION [OFFSET LENGTH]")
        try:
            tally.when(_int(fields[0]) // 1000)  # fio writes microseconds
        except ValueError:
            raise _bad(path, number, line, "a v3 line starts with a whole-number timestamp "
                       "in microseconds: TIME_US FILE ACTION [OFFSET LENGTH]") from None
        fields = fields[1:]
    if len(fields) < 2:
        raise _bad(path, number, line, "expected FILE ACTION [OFFSET LENGTH]")
    action = fields[1]
    if action in IO_ACTIONS:
        _iolog_io(tally, path, number, line, fields)
    elif action not in OTHER_ACTIONS:
        raise _bad(path, number, line, f"unknown action {action!r} (known: "
                   f"{', '.join(IO_ACTIONS + OTHER_ACTIONS)})")


def _iolog_io(tally: _Tally, path: str, number: int, line: str, fields: list[str]) -> None:
    action = fields[1]
    if len(fields) != 4:
        raise _bad(path, number, line, f"{action} needs OFFSET LENGTH")
    try:
        offset, length = _int(fields[2]), _int(fields[3])
    except ValueError:
        raise _bad(path, number, line, "offset and length are whole numbers") from None
    if length == 0:
        raise _bad(path, number, line, "a zero-length I/O")
    tally.io(action, offset, length)


def read_blktrace(path: str, data: bytes) -> TraceSummary:
    """Tally the queue events of a binary blktrace (``blkparse -d`` or one CPU's file)."""
    tally = _Tally()
    pos = 0
    while pos + BLK_EVENT.size <= len(data):
        (magic, _seq, time_ns, sector, nbytes, action, _pid, _dev, _cpu, _err,
         pdu_len) = BLK_EVENT.unpack_from(data, pos)
        if magic & 0xFFFFFF00 != BLK_MAGIC:
            raise UserError(f"--trace {path}: not a blktrace at byte {pos} (bad event magic)")
        pos += BLK_EVENT.size + pdu_len
        category = action >> BLK_TC_SHIFT
        if category & BLK_TC_NOTIFY or action & 0xFFFF != BLK_TA_QUEUE or nbytes == 0:
            continue
        tally.when(time_ns // 1_000_000)
        kind = ("trim" if category & BLK_TC_DISCARD else
                "write" if category & BLK_TC_WRITE else "read")
        tally.io(kind, sector * 512, nbytes)
    if pos != len(data):
        raise UserError(f"--trace {path}: the blktrace ends inside an event (truncated?)")
    return tally.summary(path, "blktrace", len(data))


def read_trace(path: str) -> TraceSummary:
    """The trace at ``path`` checked and summarised; a one-line UserError otherwise."""
    full = os.path.abspath(path)
    if not os.path.isfile(full):
        raise UserError(f"--trace {path}: no such file")
    size = os.path.getsize(full)
    if size == 0:
        raise UserError(f"--trace {path}: the file is empty")
    if size > MAX_TRACE_BYTES:
        raise UserError(f"--trace {path}: {format_bytes(size)} is larger than the "
                        f"{format_bytes(MAX_TRACE_BYTES)} ssdlab reads")
    try:
        with open(full, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        raise UserError(f"--trace {path}: cannot read it ({exc.strerror})") from None
    if len(data) >= 4 and struct.unpack_from("<I", data)[0] & 0xFFFFFF00 == BLK_MAGIC:
        summary = read_blktrace(full, data)
    else:
        first = data.split(b"\n", 1)[0].strip()
        if first not in (IOLOG_V2.encode(), IOLOG_V3.encode()):
            raise UserError(f"--trace {path}: not a trace fio replays (an iolog starts with "
                            f"'{IOLOG_V2}' or '{IOLOG_V3}'; a blktrace with its magic)")
        try:
            text = data.decode("ascii")
        except UnicodeDecodeError:
            raise UserError(f"--trace {path}: the iolog is not plain ASCII text") from None
        summary = read_iolog(full, text, 3 if first == IOLOG_V3.encode() else 2)
    if summary.ios == 0:
        raise UserError(f"--trace {path}: the trace holds no read, write or trim")
    return summary


def check_fits(trace: TraceSummary, capacity_bytes: int, sector_bytes: int, direct: bool,
               target: str) -> None:
    """The trace's LBA extent must fit the target; with direct I/O, whole sectors."""
    if trace.extent_bytes > capacity_bytes:
        raise UserError(f"--trace {trace.path} touches bytes up to "
                        f"{trace.extent_bytes:,} ({format_bytes(trace.extent_bytes)}), beyond "
                        f"the end of {target} ({capacity_bytes:,} bytes)")
    if direct and (trace.unaligned or any(b % sector_bytes for b in trace.block_sizes)):
        raise UserError(f"--trace {trace.path}: I/Os that are not whole {sector_bytes}-byte "
                        f"sectors of {target} cannot be replayed with direct I/O")


# ------------------------------------------------------------------------ options


@dataclass(frozen=True)
class ReplayArgs:
    trace: str | None = None
    no_stall: bool = False
    time_scale_pct: int = 100
    iodepth: int = DEFAULT_QD
    log_interval_ms: int = DEFAULT_LOG_INTERVAL_MS
    max_seconds: float | None = None
    ioengine: str = "libaio"


@dataclass(frozen=True)
class ReplayOptions(Unprofiled):
    trace: TraceSummary
    no_stall: bool
    time_scale_pct: int
    iodepth: int
    log_interval_ms: int
    max_seconds: float | None
    ioengine: str


def build_options(args: ReplayArgs, ioengines: tuple[str, ...]) -> ReplayOptions:
    if not args.trace:
        raise UserError("give --trace FILE: a fio iolog (v2 or v3) or a binary blktrace")
    if not 1 <= args.time_scale_pct <= 100_000:
        raise UserError(f"--time-scale {args.time_scale_pct!r}: give a percentage from 1 to "
                        "100000 (200 replays twice as fast)")
    if not 1 <= args.iodepth <= 4096:
        raise UserError(f"--qd {args.iodepth!r}: give a whole number from 1 to 4096")
    if not 10 <= args.log_interval_ms <= 60_000:
        raise UserError(f"--log-interval {args.log_interval_ms!r}: give 10 to 60000 ms")
    m = args.max_seconds
    if m is not None:
        check_fio_seconds("--max-seconds", m, 0.1, 7 * 86400)
    if args.ioengine not in ioengines:
        raise UserError(f"--ioengine {args.ioengine!r}: choose from {', '.join(ioengines)}")
    trace = read_trace(args.trace)
    return ReplayOptions(trace, args.no_stall, args.time_scale_pct, args.iodepth,
                         args.log_interval_ms, m, args.ioengine)


def replay_job(o: ReplayOptions, target: str, log_prefix: str) -> FioJob:
    """The replay job as data: the trace through fio, every I/O redirected to the target,
    its IOPS logged to ``log_prefix``."""
    options = [("read_iolog", o.trace.path), ("replay_redirect", target),
               ("iodepth", str(o.iodepth)), ("write_iops_log", log_prefix),
               ("log_avg_msec", str(o.log_interval_ms))]
    if o.no_stall:
        options.append(("replay_no_stall", "1"))
    if o.time_scale_pct != 100:
        options.append(("replay_time_scale", str(o.time_scale_pct)))
    if o.max_seconds is not None:
        options.append(("runtime", fio_time(o.max_seconds)))
    return FioJob(None, (), o.ioengine, json_plus=True,
                  sections=(JobSection(TEST, tuple(options)),))


def planned_seconds(o: ReplayOptions) -> float | None:
    """How long the trace's own timing takes (None when it has none or is not honoured)."""
    if o.no_stall or o.trace.duration_ms is None:
        return o.max_seconds
    natural = o.trace.duration_ms / 1000 * 100 / o.time_scale_pct
    return natural if o.max_seconds is None else min(natural, o.max_seconds)


# ------------------------------------------------------------------------ results


@dataclass(frozen=True)
class ReplayCell(FioCell):
    """The replay's figures: fio's cell (:func:`ssdlab.run.cells.cell_from_job`) and the
    I/O it did."""

    cell: str = TEST  # a document without one is the replay's cell
    ios: int = 0
    read_bytes: int = 0
    write_bytes: int = 0


@dataclass(frozen=True)
class TimelinePoint(Record):
    """The IOPS of one log interval, ending at ``t_s``."""

    t_s: float = 0.0
    iops: float = 0.0
    read_iops: float = 0.0
    write_iops: float = 0.0


@dataclass(frozen=True)
class ReplayResult(Record):
    """The test's result: ``{}`` while it runs, ``{"error": ...}`` when it failed, and when
    it is complete the replay's figures, its IOPS timeline and the trace (a note instead of
    the timeline when the replay ended within one log interval)."""

    OMIT_NONE = frozenset({"cell", "timeline", "trace", "message", "wall_s",
                           "timeline_note", "error"})

    cell: ReplayCell | None = None
    timeline: list[TimelinePoint] | None = None
    trace: TraceRecord | None = None
    message: str | None = None
    wall_s: float | None = None
    timeline_note: str | None = None
    error: str | None = None


@dataclass(frozen=True)
class ReplayPlan(StoredPlan):
    """The stored plan: the arguments as given, the trace, the --dir (facts; None:
    --target)."""

    args: JsonObject = field(default_factory=dict)
    trace: TraceRecord = field(default_factory=TraceRecord)
    ioengine: str = ""
    direct: bool = True
    dir: JsonObject | None = None


@dataclass(frozen=True)
class ReplayParams(TestParams):
    """The test's parameters: the trace and how it is replayed."""

    trace: TraceRecord = field(default_factory=TraceRecord)
    no_stall: bool = False
    time_scale_pct: int = 100
    iodepth: int = DEFAULT_QD
    log_interval_ms: int = DEFAULT_LOG_INTERVAL_MS
    max_seconds: float | None = None
    ioengine: str = ""


# ------------------------------------------------------------------------ the suite

_G = "replay"
OPTIONS = (
    *common.workload_target(FILE_NAME, "the trace's extent, in whole MiB"),
    opt("--trace", group=_G, config=Kind.TEXT, metavar="FILE",
        help="the trace: a fio iolog (version 2 or 3) or a binary blktrace (blkparse -d "
        "output)"),
    opt("--no-stall", group=_G, config=Kind.BOOL, action="store_true",
        help="ignore the trace's timing and replay as fast as possible (fio "
        "replay_no_stall)"),
    common.whole("--time-scale", _G, "replay speed in percent of the trace's timing: 200 twice "
                 "as fast (fio replay_time_scale; default 100)", metavar="PCT",
                 field="time_scale_pct", default=100),
    common.qd(_G, f"queue depth of the replay (default {DEFAULT_QD}: with the trace's "
              "timing fio reaps completions only between I/Os, so a deeper queue adds that "
              "wait to the latency; use more with --no-stall)", default=DEFAULT_QD),
    common.whole("--log-interval", _G, "IOPS timeline interval in milliseconds (fio "
                 f"log_avg_msec; default {DEFAULT_LOG_INTERVAL_MS})", metavar="MS",
                 field="log_interval_ms", default=DEFAULT_LOG_INTERVAL_MS),
    common.number("--max-seconds", _G, "stop the replay after this many seconds (fio runtime)",
                  metavar="S"),
    common.ioengine(_G, "fio ioengine (default: libaio)"),
)

SPEC = SuiteSpec(
    name=TEST,
    help="replay an I/O trace (fio iolog v2/v3 or binary blktrace) onto the target",
    description="""fio replays the trace (read_iolog) with every I/O redirected to the
    target (replay_redirect); the result is reported like any workload: IOPS, MB/s, mean and
    p99 latency, and an IOPS timeline. The trace is checked first: a known format, and every
    I/O inside the target (docs/replay.md).""",
    target=TargetKind.DEVICE_OR_DIR,
    options=OPTIONS,
    args_type=ReplayArgs,
    results={TEST: ReplayResult},
    report_title="trace replay report",
    params={TEST: ReplayParams}, plan_type=ReplayPlan, cells=ReplayCell,
    verdicts={"primary": Verdict},
    local_only="fio reads the trace (read_iolog) where it runs, and the trace is on "
    "this host",
)


# ------------------------------------------------------------------------ what the plan says

#: a job -> its job file's text, headed as the run heads it
JobText = Callable[[FioJob], str]


def describe(o: ReplayOptions, capacity_bytes: int, target: str, job_text: JobText
             ) -> list[str]:
    """``--dry-run``: the trace, how it is replayed, and the job file."""
    timing = ("as fast as the target allows (replay_no_stall)" if o.no_stall else
              f"with the trace's timing at {o.time_scale_pct} % speed"
              if o.trace.duration_ms is not None else "as fast as the target allows "
              "(the trace has no timestamps)")
    return [o.trace.describe(),
            f"the trace fits: its extent {format_bytes(o.trace.extent_bytes)} <= "
            f"{format_bytes(capacity_bytes)}",
            f"replayed {timing}, queue depth {o.iodepth}, IOPS logged every "
            f"{o.log_interval_ms} ms" + (f", at most {o.max_seconds:g} s"
                                         if o.max_seconds is not None else ""),
            "-- job file:", job_text(replay_job(o, target, LOG_PLACEHOLDER)).rstrip()]


def plan_record(o: ReplayOptions, args: ReplayArgs, directory: Mapping[str, object] | None
                ) -> ReplayPlan:
    """The stored plan (``directory``: the --dir the test file was made in, facts)."""
    return ReplayPlan(TEST, dataclasses.asdict(args), o.trace.record(), o.ioengine, True,
                      None if directory is None else cast(JsonObject, dict(directory)))


def test_params(o: ReplayOptions) -> ReplayParams:
    return ReplayParams("Trace replay", o.trace.record(), o.no_stall, o.time_scale_pct,
                        o.iodepth, o.log_interval_ms, o.max_seconds, o.ioengine)
