"""Run a file-system preset (aja, diskfill, smallfiles, copy) in a directory: the runner
of the four suites.

Everything happens in a work directory of ssdlab's own inside the user's directory
(:class:`~ssdlab.targets.workdir.WorkDir`), removed afterwards whatever happens (an error,
Ctrl-C); the run records that it was. fio does the file I/O; the copy sets copy with
``cp`` as the review timed a file copy. Before every buffered read (and every copy) the
caches are synced and dropped for real, and each measurement records what happened.

The run is the shared skeleton (:class:`~ssdlab.run.session.SessionRun`) on a target that
is a directory: its record is the directory's identity with the preset's, nothing holds it,
no process event, ground truth or health log is recorded, and a run that stops early also
marks its test, with what became of the work directory.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn, TypeVar, cast

from ssdlab.children import die_with_parent
from ssdlab.engine.model import DirectionStats
from ssdlab.engine.runner import Executor, FioRun, watchdog_seconds
from ssdlab.errors import TargetError, UserError
from ssdlab.jsonrecord import JsonObject
from ssdlab.plan import file_presets as fp
from ssdlab.plan.file_presets import (
    CopyPhase,
    FilePlan,
    FilePresetArgs,
    FioPhase,
    RemovePhase,
    WaitPhase,
)
from ssdlab.plan.file_results import (
    COPY_FSYNC,
    WRITE_FSYNC,
    CacheRecord,
    Cleanup,
    CopyPhaseRecord,
    FilePresetResult,
    FioPhaseRecord,
    PhaseRecord,
    PrepareStep,
    SummaryRow,
    WaitStep,
    group_name,
)
from ssdlab.plan.filejobs import FileJob, render_file_job
from ssdlab.plan.planned import FIO_RUN_OVERHEAD_S, PlannedTime
from ssdlab.plan.results import Reason, StoredPlan
from ssdlab.run.member_rounds import Sample
from ssdlab.run.prepare import PreparedTarget, TargetRequest, checked_versions, with_array
from ssdlab.run.progress import Progress
from ssdlab.run.session import Observed, SessionRun, TestFailed, fio_record
from ssdlab.run.suite import PreparedSuite, Runner
from ssdlab.store.db import Store
from ssdlab.store.records import RoundRecord, RunData, TestState
from ssdlab.targets.identity import TargetInfo, host_info
from ssdlab.targets.workdir import WORK_PREFIX, DirInfo, WorkDir, describe_dir, drop_caches
from ssdlab.units import format_bytes

#: a phase that moves less than this is presumed stuck (the watchdog)
MIN_BYTES_PER_S = 2 * 1024 * 1024
PER_FILE_S = 0.05
#: file systems whose files are RAM: dropping caches cannot take them out of memory
RAM_FS = ("tmpfs", "ramfs")
PLACEHOLDER = f"{WORK_PREFIX}XXXXXXXX"
#: the one-line message of a complete test names this many phases at most
MESSAGE_PHASES = 6

T = TypeVar("T")


@dataclass(frozen=True)
class PreparedFiles(PreparedSuite[FilePlan]):
    """What runs where, checked before any I/O: the plan (the run's options) and the
    directory (its target)."""

    dir: DirInfo
    args: FilePresetArgs

    @property
    def plan(self) -> FilePlan:
        return self.options


def target_record(plan: FilePlan, d: DirInfo) -> dict[str, object]:
    """The directory's identity as the run's target, with the preset that ran there."""
    where = "network share" if d.network else "directory"
    return {**d.to_dict(), "device_class": f"{where} on {d.fs_type}", **plan.identity}


def _directory_target(plan: FilePlan, d: DirInfo) -> TargetInfo:
    """The directory as the session's target: what its member devices are found from (on
    an array ssdlab built, its provenance: a ZFS dataset has no block device below it)."""
    record = target_record(plan, d)
    return with_array(TargetInfo(path=d.path, kind="directory", name="",
                      device_class=str(record["device_class"]), model=None, serial=None,
                      firmware=None, capacity_bytes=d.free_bytes, logical_sector_bytes=512,
                      physical_sector_bytes=512, rotational=None, numa_node=None,
                      scheduler=None, discard_max_bytes=None, details=record))


def prepare_files(request: TargetRequest, args: FilePresetArgs) -> PreparedFiles:
    """The plan, the directory and room for it there, then fio (and cp for the copy
    sets); a one-line UserError otherwise."""
    if not request.dir:
        raise UserError("--dir DIR is required: the directory to test in")
    plan = fp.plan_of(args)
    info = describe_dir(request.dir)
    if any(c in info.path for c in ":\n\\"):
        raise TargetError(f"--dir {request.dir}: fio cannot use a path with ':' or '\\' in it")
    if plan.needed_bytes > info.free_bytes:
        raise TargetError(f"--dir {request.dir}: {format_bytes(plan.needed_bytes)} needed, "
                          f"{format_bytes(info.free_bytes)} free")
    versions = checked_versions(request.fio)
    if plan.copy_command and shutil.which(plan.copy_command[0]) is None:
        raise UserError(f"{plan.copy_command[0]} is not installed (the copy sets use it)")
    target = PreparedTarget(_directory_target(plan, info), False, host_info(), versions)
    return PreparedFiles(target, plan, info, args)


def job_text(p: PreparedFiles, job: FileJob, base: str, what: str) -> str:
    header = (f"ssdlab {p.target.versions['ssdlab']}: {p.plan.preset} preset, {what}\n"
              f"directory {p.dir.path} ({p.dir.fs_type}), profile {p.plan.profile}")
    return render_file_job(job, base, header)


def describe(p: PreparedFiles) -> str:
    """``--dry-run``: the plan and every fio job file."""
    plan, d = p.plan, p.dir
    base = f"{d.path}/{PLACEHOLDER}"
    share = "network share" if d.network else "local"
    out = [
        f"DRY RUN: nothing will be written. {plan.heading}",
        f"directory {d.path}: {d.fs_type} ({share}), {format_bytes(d.free_bytes)} free; "
        f"work directory {base}, removed afterwards; needs {format_bytes(plan.needed_bytes)}",
        *fp.describe(plan, base, lambda job, what: job_text(p, job, base, what)),
    ]
    return "\n".join(out) + "\n"


def planned(p: PreparedFiles) -> PlannedTime:
    """Every wait, a fio start per fio phase, and the bytes the phases move (files
    written, read and copied), as fast as the drive goes."""
    out = PlannedTime.fixed(0.0)
    for phase in p.plan.phases:
        if isinstance(phase, fp.WaitPhase):
            out += PlannedTime.fixed(phase.seconds)
        elif isinstance(phase, fp.FioPhase):
            out += PlannedTime.fixed(FIO_RUN_OVERHEAD_S)
            out += PlannedTime.io(phase.job.io_bytes, "the files written and read")
        elif isinstance(phase, fp.CopyPhase):
            out += PlannedTime.io(phase.io_bytes, "the copies")
    return out


def direct_refused(folder: Path) -> str | None:
    """Why O_DIRECT cannot be used in ``folder`` (None: it can)."""
    probe = folder / ".ssdlab-direct-probe"
    try:
        fd = os.open(probe, os.O_CREAT | os.O_WRONLY | getattr(os, "O_DIRECT", 0), 0o600)
        os.close(fd)
    except OSError as exc:
        return f"opening a file with O_DIRECT failed: {exc.strerror or exc}"
    finally:
        with contextlib.suppress(OSError):
            probe.unlink()
    return None


def drop_cache_record(info: DirInfo) -> CacheRecord:
    """sync + drop caches, for real; what happened, for the result."""
    done = drop_caches()
    note = (f"the files are on {info.fs_type} (RAM): dropping caches cannot move them out "
            "of memory") if info.fs_type in RAM_FS else None
    return CacheRecord(False, done.synced, done.dropped, done.why, note)


def fio_seconds(stats: DirectionStats) -> tuple[float, str]:
    """The phase's time from fio: its runtime; below fio's 1 ms resolution, the sum of
    the I/O latencies (one I/O in flight)."""
    if stats.runtime_ms > 0:
        return stats.runtime_ms / 1000.0, "fio runtime"
    return stats.total_ios * stats.lat_mean_ns / 1e9, "sum of I/O latencies (runtime < 1 ms)"


def short_files(job: FileJob, base: Path) -> list[str]:
    """Files the job should have written that are missing or short."""
    bad = []
    for path in job.paths(str(base)):
        try:
            size = os.stat(path).st_size
        except OSError:
            size = -1
        if size != job.file_bytes:
            bad.append(f"{os.path.basename(path)} ({'missing' if size < 0 else size})")
    return bad


def summarise(phases: list[PhaseRecord]) -> list[SummaryRow]:
    """The means of the phases of each group and direction, in the order measured."""
    groups: dict[tuple[str, str], list[PhaseRecord]] = {}
    for phase in phases:
        groups.setdefault((phase.group, phase.direction), []).append(phase)
    return [SummaryRow(group, direction, len(same), same[0].io_bytes,
                       sum(p.seconds for p in same) / len(same),
                       sum(p.bw_bytes_per_s for p in same) / len(same))
            for (group, direction), same in groups.items()]


def summary_message(summary: list[SummaryRow]) -> str:
    """``write pass 1: 1,864.1 MB/s; ...`` (the first few; how many more)."""
    parts = [f"{group_name(s.group, s.direction)}: {s.mean_bw_bytes_per_s / 1e6:,.1f} MB/s"
             for s in summary]
    more = len(parts) - MESSAGE_PHASES
    return "; ".join(parts[:MESSAGE_PHASES]) + (f" (+{more} more)" if more > 0 else "")


class FilePresetRun(SessionRun[PreparedFiles]):
    """One preset's run in a work directory: one test (named as the preset), one stored
    round per measured phase, the work directory removed and that recorded."""

    holds_target = False
    observed = Observed(process=False, drive=False)

    def __init__(self, prepared: PreparedFiles, store: Store, executor: Executor,
                 progress: Progress) -> None:
        super().__init__(prepared, store, executor, progress)
        self.plan = prepared.plan
        self.suite = self.test = prepared.plan.preset
        self.phases: list[PhaseRecord] = []
        self.round_no = 0
        self.work: WorkDir | None = None
        self.cleanup: Cleanup | None = None
        self.notes: list[str] = []

    # -- the skeleton's hooks ---------------------------------------------------------
    def plan_record(self) -> StoredPlan:
        return fp.plan_record(self.plan, self.p.args)

    def target_record(self) -> Mapping[str, object]:
        return target_record(self.plan, self.p.dir)

    def announce(self, resumed: bool) -> None:
        self.progress.line(f"run {self.run_id}: {self.plan.identity['preset_title']} in "
                           f"{self.p.dir.path} (results in {self.store.path})")

    def started(self) -> None:
        self._set_test("running", FilePresetResult())

    def interrupted_text(self) -> str:
        return (f"run {self.run_id} interrupted; the work directory was removed; completed "
                f"phases are kept in {self.store.path}")

    def stopped(self, status: str, message: str) -> None:
        """The run stopped early (Ctrl-C, an error): the test says so too."""
        self._set_test(status, FilePresetResult(error=message, cleanup=self.cleanup))
        self.store.finish_run(self.run_id, status, message)

    def run_tests(self, previous: RunData | None) -> list[str]:
        """The phases, in a work directory removed afterwards; the test, if it failed."""
        try:
            try:
                with self._work_dir() as work:
                    self.work = work
                    self._run_phases(work)
            finally:
                self.cleanup = self._cleanup_record()
        except TestFailed as exc:
            self.progress.line(f"{self.test}: FAILED: {exc}")
            self._set_test("failed", FilePresetResult(error=str(exc), cleanup=self.cleanup))
            return [self.test]
        summary = summarise(self.phases)
        self._set_test("complete", FilePresetResult(
            phases=list(self.phases), summary=summary, cleanup=self.cleanup,
            notes=list(self.notes), message=summary_message(summary)))
        return []

    def _sampled(self, measured: Callable[[], T]) -> tuple[T, Sample | None]:
        """``measured()`` with the members read right before and after it."""
        members = self.session.members
        if members is None:
            return measured(), None
        return members.sample(measured)

    def _work_dir(self) -> WorkDir:
        try:
            return WorkDir(self.p.dir, self.plan.needed_bytes)
        except OSError as exc:  # a read-only file system, a full one
            raise TargetError(f"--dir {self.p.dir.path}: cannot make a work directory there "
                              f"({exc.strerror or exc})") from None

    def _cleanup_record(self) -> Cleanup:
        work = self.work
        if work is None:
            return Cleanup(None, True)
        removed = not work.path.exists()
        if not removed:  # rmtree ignored an error: try once more, then say so
            work.remove()
            removed = not work.path.exists()
        if not removed:
            self.progress.line(f"WARNING: could not remove {work.path}")
        return Cleanup(str(work.path), removed)

    def _set_test(self, status: str, result: FilePresetResult) -> None:
        directory = cast(JsonObject, self.p.dir.to_dict())
        self.store.set_test(self.run_id, self.test, TestState(
            status, fp.test_params(self.plan, directory), {}, result))

    # -- phases -----------------------------------------------------------------------
    def _run_phases(self, work: WorkDir) -> None:
        plan = self.plan
        if plan.direct:
            why = direct_refused(work.path)
            if why is not None:
                plan = plan.buffered()
                note = (f"O_DIRECT refused on {self.p.dir.fs_type} ({why}): buffered I/O "
                        "instead, caches dropped before each read")
                self.notes.append(note)
                self.store.add_event(self.run_id, self.test, "warning", note, Reason(why))
                self.progress.line(f"{self.test}: {note}")
        for phase in plan.phases:
            try:
                if isinstance(phase, FioPhase):
                    self._fio_phase(phase, work.path)
                elif isinstance(phase, CopyPhase):
                    self._copy_phase(phase, work.path)
                elif isinstance(phase, WaitPhase):
                    self._wait(phase)
                else:
                    self._remove(phase, work.path)
            except OSError as exc:  # no space for a folder, a file that cannot be removed
                raise TestFailed(f"{phase.label}: {exc.strerror or exc}") from None

    def _cache(self, drop: bool, direct: bool) -> CacheRecord:
        if direct:
            return CacheRecord(direct=True)
        if not drop:
            return CacheRecord(direct=False, dropped=False, why="not a read")
        cache = drop_cache_record(self.p.dir)
        if not cache.dropped:
            self.store.add_event(self.run_id, self.test, "warning",
                                 f"caches not dropped: {cache.why}", cache)
        return cache

    def _fio_phase(self, phase: FioPhase, base: Path) -> None:
        job = phase.job
        (base / job.subdir).mkdir(parents=True, exist_ok=True)
        cache = self._cache(phase.drop_before, job.direct)
        text = job_text(self.p, job, str(base), phase.label)
        self.progress.line(f"{self.test}: {phase.label} ({format_bytes(job.io_bytes)})")
        timeout = watchdog_seconds(job.io_bytes / MIN_BYTES_PER_S + job.files * PER_FILE_S + 5)
        run, sample = self._sampled(lambda: self.executor.run(text, timeout, json_plus=False))
        stats = self._stats(run, job)
        if not phase.measured:
            self.store.add_step(self.run_id, self.test, "prepare",
                                PrepareStep(phase.key, phase.label, stats.io_bytes, job.files),
                                fio_record(run, phase.key))
            return
        seconds, timing = fio_seconds(stats)
        if seconds <= 0:
            self._failed_round(run, phase.key, f"{phase.label}: fio measured no time")
        frames = phase.frames or None
        record = FioPhaseRecord(
            phase.key, phase.label, phase.group, job.rw, stats.io_bytes, job.files,
            job.file_bytes, job.block_bytes, seconds, timing, stats.io_bytes / seconds,
            stats.total_ios / seconds, stats.lat_mean_ns / 1000.0, job.direct, cache,
            WRITE_FSYNC if job.rw == "write" else None, frames,
            phase.frames / seconds if frames else None)
        self._round(record, run, sample=sample)
        extra = (f", {record.frames_per_s:,.1f} frames/s" if record.frames_per_s is not None
                 else "")
        self.progress.line(f"{self.test}: {phase.label}: {record.bw_bytes_per_s / 1e6:,.1f} "
                           f"MB/s in {seconds:.3f} s{extra}")

    def _stats(self, run: FioRun, job: FileJob) -> DirectionStats:
        if not run.ok or run.output is None or not run.output.jobs:
            self._failed_round(run, job.name, f"{job.name}: {run.error or 'no result'}")
        assert run.output is not None
        stats: DirectionStats = getattr(run.output.jobs[0], job.rw)
        if stats.io_bytes != job.io_bytes:
            self._failed_round(run, job.name, f"{job.name}: fio moved {stats.io_bytes} bytes, "
                               f"{job.io_bytes} planned")
        if job.rw == "write":
            short = short_files(job, Path(self.work.path if self.work else "."))
            if short:
                self._failed_round(run, job.name, f"{job.name}: {len(short)} file(s) not "
                                   f"written in full: {', '.join(short[:3])}")
        return stats

    def _round(self, record: PhaseRecord, run: FioRun | None, started: float = 0.0,
               ended: float = 0.0, *, sample: Sample | None = None) -> None:
        """A measured phase: one stored round, one phase of the result, and what the
        members did over it."""
        self.phases.append(record)
        self._add_round("ok", record.cell, [record], run, started, ended)
        members = self.session.members
        if members is not None and sample is not None:
            members.store(self.store, self.run_id, self.test, sample, self.round_no,
                               record.cell, run.output if run is not None else None,
                               job_text=run.job_text if run is not None else "")

    def _failed_round(self, run: FioRun | None, key: str, message: str) -> NoReturn:
        now = time.time()
        self._add_round("failed", key, [], run, now, now)
        raise TestFailed(message)

    def _add_round(self, status: str, key: str, cells: Sequence[PhaseRecord],
                   run: FioRun | None, started: float, ended: float) -> None:
        """One stored round: with its fio run's record and times, or the times given."""
        self.round_no += 1
        self.store.add_round(self.run_id, self.test, RoundRecord(
            self.round_no, status, {}, cells,
            fio_record(run, key) if run is not None else None,
            run.started_at if run is not None else started,
            run.ended_at if run is not None else ended))

    def _copy_phase(self, phase: CopyPhase, base: Path) -> None:
        cache = self._cache(True, False)
        src, dest = base / phase.source, base / phase.dest
        command = [*self.plan.copy_command, str(src), str(dest)]
        self.progress.line(f"{self.test}: {phase.label} ({phase.files:,} files, "
                           f"{format_bytes(phase.io_bytes)})")
        timeout = watchdog_seconds(phase.io_bytes / MIN_BYTES_PER_S + phase.files * PER_FILE_S)
        started = time.time()
        t0 = time.monotonic()

        def copy() -> None:
            for step in (command, ["sync", "-f", str(dest)]):
                self._step(phase, step, timeout)

        _, sample = self._sampled(copy)
        seconds = time.monotonic() - t0
        copied = sum(f.stat().st_size for f in dest.iterdir()) if dest.is_dir() else 0
        if copied != phase.io_bytes:
            self._failed_round(None, phase.key, f"{phase.label}: {copied} bytes copied, "
                               f"{phase.io_bytes} expected")
        record = CopyPhaseRecord(
            phase.key, phase.label, phase.group, "copy", phase.repetition, phase.io_bytes,
            phase.files, phase.io_bytes // phase.files, seconds,
            "wall time of the copy and sync -f", phase.io_bytes / seconds, False, cache,
            " ".join(command[: len(self.plan.copy_command)]), COPY_FSYNC)
        self._round(record, None, started, time.time(), sample=sample)
        self.progress.line(f"{self.test}: {phase.label}: {seconds:.3f} s, "
                           f"{record.bw_bytes_per_s / 1e6:,.1f} MB/s")

    def _step(self, phase: CopyPhase, step: list[str], timeout: float) -> None:
        """One command of a copy (cp, sync); a failed round unless it exits 0 in time."""
        try:
            done = subprocess.run(step, capture_output=True, text=True, errors="replace",
                                  timeout=timeout, check=False, preexec_fn=die_with_parent)
        except subprocess.TimeoutExpired:
            self._failed_round(None, phase.key, f"{phase.label}: {step[0]} did not finish "
                               f"in {timeout:.0f} s")
        if done.returncode != 0:
            first = (done.stderr.strip().splitlines() or [""])[0]
            self._failed_round(None, phase.key, f"{phase.label}: {' '.join(step[:3])} "
                               f"exited with status {done.returncode}: {first}"[:300])

    def _wait(self, phase: WaitPhase) -> None:
        self.progress.line(f"{self.test}: {phase.label}")
        started = time.time()
        deadline = time.monotonic() + phase.seconds
        while (left := deadline - time.monotonic()) > 0:
            time.sleep(min(left, 0.5))
        self.store.add_step(self.run_id, self.test, "wait",
                            WaitStep(phase.seconds, time.time() - started), None)

    def _remove(self, phase: RemovePhase, base: Path) -> None:
        for rel in phase.paths:
            path = base / rel
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()


RUNNER: Runner[FilePresetArgs, PreparedFiles] = Runner(
    prepare=prepare_files,
    describe=describe,
    start=FilePresetRun,
    planned=planned,
)
