"""The member check before an array is built (issue 15 item 4, methodology section 4): a
short read-only sequential read and 4 KiB random read of each member, in one fio run.

The job file has two stonewalled sections per member, one after another: 128 KiB
sequential reads and 4 KiB random reads, both at QD 32 with direct I/O, time based, no
ramp. Every section reads; none writes. Each member reads ``seconds`` each way, split
over ``passes`` (default 3) passes over all members, and its figure on each metric is its
best pass (as CrystalDiskMark reports the best of its runs): a dip the host causes (other
processes taking the CPU for a moment, which on a small host lowers one member's 4 KiB
IOPS in one pass to 0.5-0.65x its peers') lowers one pass of one member, while a slow
member is slow in every pass. The passes go over the members in the same order, so a
member's passes are a whole pass apart. Measured on the 2-core VM under a competing fio
load, the lowest of a normal member's figure against its peers' was 0.52x with one pass,
0.76x with the best of two and 0.84x with the best of three; fio's pause between
sections (about 0.3 s) is what each further pass costs.

A member below its peers is a suspect, not yet an outlier (a host stall can last the
three passes of one member: on the 2-core VM at a load of 10-12, a healthy member's best
4 KiB pass read 0.70x its peers'): :func:`judge_members` measures the metrics a suspect
was slow on once more, every member alike, in the same passes but in another order
(backwards, each pass starting one member further on), and
:func:`ssdlab.analysis.member_check.outlier_verdict` names only a suspect slow again.
A check with no suspect runs once; one with a suspect takes at most twice as long.

fio itself is the guard against writes: ``readonly`` is a command-line option of fio
(``--readonly``, not a job-file option: fio 3.33 drops a job file that sets it), so the
check runs only through an executor in read-only mode
(:class:`ssdlab.engine.runner.FioExecutor` with ``read_only=True``) and refuses one that
says it is not. The numbers go to :func:`ssdlab.analysis.member_check.outlier_verdict`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ssdlab.analysis.member_check import (
    METRICS,
    OUTLIER_RATIO,
    Again,
    MemberCheckVerdict,
    MemberResult,
    outlier_verdict,
    slow_metrics,
)
from ssdlab.engine.jobfile import RANDOM_OFFSETS, render
from ssdlab.engine.model import FioOutput
from ssdlab.engine.runner import Executor, TickFn, watchdog_seconds
from ssdlab.errors import ExitCode, UserError
from ssdlab.plan.specs import KIB, FioJob, JobSection
from ssdlab.run.suite import FIO_CELL_OVERHEAD_S
from ssdlab.targets.members import data_share
from ssdlab.units import check_fio_seconds, fio_time, format_duration

SEQ_BLOCK_BYTES = 128 * KIB
RAND_BLOCK_BYTES = 4 * KIB
IODEPTH = 32
#: fio's rw= modes the check uses: reads only
READ_MODES = ("read", "randread")
#: passes over all members; each member's figure is its best pass
PASSES = 3
MIN_SECTION_SECONDS = 0.1
MAX_SECONDS = 600.0
MAX_PASSES = 10

#: told what the check does and what each member measured, one line at a time
LineFn = Callable[[str], None]


class MemberCheckFailed(UserError):
    """fio failed while checking the members (nothing was written to any)."""

    exit_code = ExitCode.FAILURE


#: what the second measurement's sections are named with first
AGAIN = "again-"
#: the section of each metric (a field of MemberResult): its name's end, rw, block size
_KINDS = {"seq_read_mb_s": ("seq-read", "read", SEQ_BLOCK_BYTES),
          "rand_read_iops": ("rand-read", "randread", RAND_BLOCK_BYTES)}
assert tuple(_KINDS) == METRICS


def section_names(index: int, pass_no: int = 1, prefix: str = "") -> tuple[str, str]:
    """The sequential and the random section of member ``index`` (from 0) in pass
    ``pass_no`` (from 1); ``prefix`` :data:`AGAIN` in the second measurement."""
    return (f"{prefix}pass{pass_no}-member{index + 1}-seq-read",
            f"{prefix}pass{pass_no}-member{index + 1}-rand-read")


def again_order(count: int, pass_no: int) -> list[int]:
    """The members' order (indices from 0) in pass ``pass_no`` of the second measurement:
    backwards, each pass starting one member further on, so that a member's sections do
    not fall where they fell in the first (a host stall that repeats with the passes)."""
    backwards = list(range(count - 1, -1, -1))
    shift = (pass_no - 1) % count
    return backwards[shift:] + backwards[:shift]


def _fio_filename(path: str) -> str:
    """``path`` as fio's ``filename=`` reads it: a colon separates file names, so it is
    escaped (``/dev/disk/by-path/pci-0000:00:17.0-ata-1``)."""
    return path.replace(":", "\\:")


def section_seconds(seconds: float, passes: int) -> float:
    """One section's time: ``seconds`` split over the passes (whole milliseconds)."""
    return round(seconds * 1000 / passes) / 1000


def _check(paths: Sequence[str], seconds: float, passes: int) -> None:
    if not paths:
        raise UserError("member check: no members given")
    repeated = sorted({p for p in paths if list(paths).count(p) > 1})
    if repeated:
        raise UserError(f"member check: {', '.join(repeated)} given more than once")
    for path in paths:
        if not path or path != path.strip() or any(c in path for c in "\n\r\0"):
            raise UserError(f"member check: {path!r} is not a usable device path")
    if not 1 <= passes <= MAX_PASSES:
        raise UserError(f"member check: {passes!r} passes: give 1 to {MAX_PASSES}")
    check_fio_seconds("member check seconds", seconds, MIN_SECTION_SECONDS * passes,
                      MAX_SECONDS)


def _section(name: str, path: str, rw: str, block: int, seconds: float) -> JobSection:
    assert rw in READ_MODES
    return JobSection(name, (
        ("stonewall", "1"), ("filename", _fio_filename(path)), ("rw", rw), ("bs", str(block)),
        ("iodepth", str(IODEPTH)), ("numjobs", "1"), ("time_based", "1"),
        ("runtime", fio_time(seconds))))


def member_check_fio_job(paths: Sequence[str], seconds: float, passes: int = PASSES,
                         again: Sequence[str] = ()) -> FioJob:
    """The check as data: in each pass, per member a sequential and a random read
    section; with ``again`` (metrics, fields of MemberResult), the second measurement:
    only those metrics' sections, in :func:`again_order`."""
    _check(paths, seconds, passes)
    each = section_seconds(seconds, passes)
    sections: list[JobSection] = []
    metrics = [m for m in METRICS if m in again] if again else list(METRICS)
    for pass_no in range(1, passes + 1):
        order = again_order(len(paths), pass_no) if again else range(len(paths))
        for index in order:
            names = dict(zip(METRICS, section_names(index, pass_no, AGAIN if again else ""),
                             strict=True))
            sections += [_section(names[m], paths[index], _KINDS[m][1], _KINDS[m][2], each)
                         for m in metrics]
    offsets = tuple((k, v) for k, _, v in (o.partition("=") for o in RANDOM_OFFSETS))
    return FioJob(None, (), "libaio", direct=True, extra_global=offsets,
                  sections=tuple(sections))


def member_check_job(paths: Sequence[str], seconds: float, passes: int = PASSES,
                     again: Sequence[str] = ()) -> str:
    """The job file's text (what ``--dry-run`` shows); ``again``: the second
    measurement's, of those metrics."""
    job = member_check_fio_job(paths, seconds, passes, again)
    each = (f"{fio_time(section_seconds(seconds, passes))} each, in each of {passes} "
            f"pass{'' if passes == 1 else 'es'} (the best pass counts)")
    if again:
        reads = " and ".join(_READS[m] for m in METRICS if m in again)
        header = [f"ssdlab member check, measured again: {_members(len(paths))}, read only "
                  "(fio --readonly)", f"each member: {reads}, QD {IODEPTH}, {each}; the "
                  "members backwards, each pass starting one further on"]
    else:
        header = [f"ssdlab member check: {_members(len(paths))}, read only (fio --readonly)",
                  f"each member: {_READS['seq_read_mb_s']}, then {_READS['rand_read_iops']}, "
                  f"QD {IODEPTH}, {each}",
                  f"a member below {OUTLIER_RATIO:g}x its peers is measured again, every "
                  "member alike, before it is named"]
    header += [f"member{i + 1}: {path}" for i, path in enumerate(paths)]
    return render(job, "\n".join(header))


_READS = {"seq_read_mb_s": f"{SEQ_BLOCK_BYTES // KIB} KiB sequential read",
          "rand_read_iops": f"{RAND_BLOCK_BYTES // KIB} KiB random read"}


def _members(count: int) -> str:
    return f"{count} member" + ("" if count == 1 else "s")


def planned_seconds(count: int, seconds: float, passes: int = PASSES,
                    metrics: int = len(METRICS)) -> float:
    """The fio run's time: a section per metric, member and pass (two metrics: the
    first measurement; the second has those a member was slow on)."""
    return metrics * count * passes * section_seconds(seconds, passes)


def _best(output: FioOutput, index: int, path: str, passes: int, metric: str,
          prefix: str = "") -> float:
    """Member ``index``'s best pass on ``metric`` (MB/s, 10^6 bytes, or IOPS)."""
    figures: list[float] = []
    for pass_no in range(1, passes + 1):
        name = dict(zip(METRICS, section_names(index, pass_no, prefix), strict=True))[metric]
        try:
            read = output.job(name).read
        except KeyError:
            raise MemberCheckFailed(f"member check: fio reported no result for {path} "
                                    f"(section {name})") from None
        figures.append(read.bw_bytes_per_s / 1e6 if metric == "seq_read_mb_s" else read.iops)
    return max(figures)


def _result(output: FioOutput, index: int, path: str, passes: int,
            share: float | None) -> MemberResult:
    """Member ``index``'s best pass on each metric; ``share``: of its space holding data."""
    seq, rand = (_best(output, index, path, passes, m) for m in METRICS)
    return MemberResult(path, seq, rand, share)


def check_members(paths: list[str], executor: Executor, *, seconds: float = 5.0,
                  passes: int = PASSES, progress: LineFn | None = None,
                  on_tick: TickFn | None = None,
                  held: Callable[[str], float | None] | None = None) -> list[MemberResult]:
    """Read each member for ``seconds`` sequentially and ``seconds`` at random, split over
    ``passes``, in one fio run through ``executor`` (which must be read-only); each
    member's best pass, in the order given, with the share of its space that holds data
    where ``held`` (default :func:`ssdlab.targets.members.data_share`) can tell (an SSD
    reads space without data faster: the verdict compares like with like). ``progress``
    is told what runs and what each member measured."""
    if getattr(executor, "read_only", None) is False:
        raise ValueError("the member check runs fio read-only: FioExecutor(read_only=True)")
    text = member_check_job(paths, seconds, passes)
    planned = planned_seconds(len(paths), seconds, passes)
    say = progress or (lambda _line: None)
    say(f"member check: {_members(len(paths))}, sequential and 4 KiB random reads, "
        f"{fio_time(seconds)} each in {passes} pass{'' if passes == 1 else 'es'} "
        f"(about {format_duration(planned)})")
    timeout = watchdog_seconds(planned + FIO_CELL_OVERHEAD_S * 2 * len(paths) * passes)
    run = executor.run(text, timeout, json_plus=False, on_tick=on_tick)
    if not run.ok or run.output is None:
        raise MemberCheckFailed(f"member check failed: {run.error or 'fio printed no results'}")
    share = held or data_share
    results = [_result(run.output, i, path, passes, share(path))
               for i, path in enumerate(paths)]
    for r in results:
        data = "" if r.data_share is None else f" (data on {r.data_share * 100:.0f} % of it)"
        say(f"member check: {r.name}: sequential read {r.seq_read_mb_s:,.1f} MB/s, "
            f"4 KiB random read {r.rand_read_iops:,.0f} IOPS{data}")
    return results


def remeasure(paths: list[str], executor: Executor, metrics: Sequence[str], *,
              seconds: float = 5.0, passes: int = PASSES, progress: LineFn | None = None,
              on_tick: TickFn | None = None) -> dict[str, dict[str, float]]:
    """The second measurement: ``metrics`` (fields of MemberResult) of every member, as
    long as the first and in as many passes, the members in :func:`again_order`; each
    member's best pass, per metric and member."""
    if getattr(executor, "read_only", None) is False:
        raise ValueError("the member check runs fio read-only: FioExecutor(read_only=True)")
    chosen = [m for m in METRICS if m in metrics]
    if not chosen:
        raise ValueError(f"nothing to measure again: {list(metrics)!r}")
    text = member_check_job(paths, seconds, passes, chosen)
    planned = planned_seconds(len(paths), seconds, passes, len(chosen))
    say = progress or (lambda _line: None)
    say(f"member check: measuring the {' and '.join(_READS[m] for m in chosen)} of every "
        f"member again (about {format_duration(planned)})")
    timeout = watchdog_seconds(planned + FIO_CELL_OVERHEAD_S * len(chosen) * len(paths)
                               * passes)
    run = executor.run(text, timeout, json_plus=False, on_tick=on_tick)
    if not run.ok or run.output is None:
        raise MemberCheckFailed(f"member check failed: {run.error or 'fio printed no results'}")
    output = run.output
    return {m: {path: _best(output, i, path, passes, m, AGAIN) for i, path in enumerate(paths)}
            for m in chosen}


@dataclass(frozen=True)
class MemberCheck:
    """The check: its first measurement, the second of the suspects' metrics (None when
    no member was slow), and the verdict on both."""

    results: list[MemberResult]
    again: Again | None
    verdict: MemberCheckVerdict

    def again_of(self, name: str) -> tuple[float | None, float | None]:
        """Member ``name``'s second sequential MB/s and random IOPS (None: not measured
        again)."""
        again = self.again or {}
        seq, rand = (again.get(m, {}).get(name) for m in METRICS)
        return seq, rand


def judge_members(paths: list[str], executor: Executor, *, seconds: float = 5.0,
                  passes: int = PASSES, progress: LineFn | None = None,
                  on_tick: TickFn | None = None,
                  held: Callable[[str], float | None] | None = None,
                  ratio: float = OUTLIER_RATIO) -> MemberCheck:
    """:func:`check_members`, then, when a member is below ``ratio`` of its peers, the
    metrics it was slow on measured again (:func:`remeasure`), and the verdict: only a
    member slow both times is named (module docstring)."""
    results = check_members(paths, executor, seconds=seconds, passes=passes,
                            progress=progress, on_tick=on_tick, held=held)
    suspects = slow_metrics(results, ratio)
    again: Again | None = None
    if suspects:
        metrics = [m for m in METRICS if any(m in ms for ms in suspects.values())]
        again = remeasure(paths, executor, metrics, seconds=seconds, passes=passes,
                          progress=progress, on_tick=on_tick)
        say = progress or (lambda _line: None)
        for path in paths:
            say(f"member check: {path} again: " + ", ".join(
                f"{_READS[m]} {_figure(m, again[m][path])}" for m in metrics))
    return MemberCheck(results, again, outlier_verdict(results, ratio, again))


def _figure(metric: str, value: float) -> str:
    return f"{value:,.1f} MB/s" if metric == "seq_read_mb_s" else f"{value:,.0f} IOPS"
