"""Run a file-system preset (aja, diskfill, smallfiles, copy) in a directory.

Everything happens in a work directory of ssdlab's own inside the user's directory
(:class:`~ssdlab.targets.workdir.WorkDir`), removed afterwards whatever happens (an error,
Ctrl-C); the run records that it was. fio does the file I/O; the copy sets copy with
``cp`` as the review timed a file copy. Before every buffered read (and every copy) the
caches are synced and dropped for real, and each measurement records what happened.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ssdlab import __version__
from ssdlab.children import die_with_parent
from ssdlab.engine.runner import Executor, FioInterrupted, FioRun, watchdog_seconds
from ssdlab.errors import TargetError, UserError
from ssdlab.plan.file_presets import CopyPhase, FilePlan, FioPhase, RemovePhase, WaitPhase
from ssdlab.plan.filejobs import FileJob, render_file_job
from ssdlab.plan.units import format_bytes
from ssdlab.run.progress import Progress
from ssdlab.run.session import RunInterrupted, TestFailed, fio_record
from ssdlab.store.db import Store, StoreWriteError
from ssdlab.targets.identity import check_fio_version, fio_version, host_info
from ssdlab.targets.workdir import WORK_PREFIX, DirInfo, WorkDir, describe_dir, drop_caches

#: a phase that moves less than this is presumed stuck (the watchdog)
MIN_BYTES_PER_S = 2 * 1024 * 1024
PER_FILE_S = 0.05
#: file systems whose files are RAM: dropping caches cannot take them out of memory
RAM_FS = ("tmpfs", "ramfs")
PLACEHOLDER = f"{WORK_PREFIX}XXXXXXXX"
PAGE_CACHE_POLICY = (
    "O_DIRECT phases bypass the page cache; buffered reads and copies start after sync and "
    "dropping the kernel's caches (recorded per phase); write phases end with fsync inside "
    "the timed job (fio fsync_on_close and end_fsync; a copy with sync -f)")


@dataclass(frozen=True)
class PreparedFiles:
    """What runs where, checked before any I/O."""

    plan: FilePlan
    dir: DirInfo
    host: dict[str, object]
    versions: dict[str, str]
    args: dict[str, Any]


def prepare_files(directory: str, plan: FilePlan, fio: str, args: dict[str, Any]
                  ) -> PreparedFiles:
    """The directory and room for the plan, then fio; UserError (one line) otherwise."""
    info = describe_dir(directory)
    if any(c in info.path for c in ":\n\\"):
        raise TargetError(f"--dir {directory}: fio cannot use a path with ':' or '\\' in it")
    if plan.needed_bytes > info.free_bytes:
        raise TargetError(f"--dir {directory}: {format_bytes(plan.needed_bytes)} needed, "
                          f"{format_bytes(info.free_bytes)} free")
    version = fio_version(fio)
    check_fio_version(version)
    if plan.copy_command and shutil.which(plan.copy_command[0]) is None:
        raise UserError(f"{plan.copy_command[0]} is not installed (the copy sets use it)")
    return PreparedFiles(plan, info, host_info(), {"ssdlab": __version__, "fio": version},
                         args)


def job_text(p: PreparedFiles, job: FileJob, base: str, what: str) -> str:
    header = (f"ssdlab {p.versions['ssdlab']}: {p.plan.preset} preset, {what}\n"
              f"directory {p.dir.path} ({p.dir.fs_type}), profile {p.plan.profile}")
    return render_file_job(job, base, header)


def describe(p: PreparedFiles) -> str:
    """``--dry-run``: the plan and every fio job file."""
    plan, d = p.plan, p.dir
    ident = plan.identity
    share = "network share" if d.network else "local"
    out = [
        f"DRY RUN: nothing will be written. {ident['preset_title']} "
        f"(preset {ident['preset']} v{ident['preset_version']}), profile {plan.profile}"
        f"{' (QUICK)' if plan.quick else ''}",
        f"directory {d.path}: {d.fs_type} ({share}), {format_bytes(d.free_bytes)} free; "
        f"work directory {d.path}/{PLACEHOLDER}, removed afterwards; needs "
        f"{format_bytes(plan.needed_bytes)}",
        f"plan: {plan.summary}",
        f"page cache: {PAGE_CACHE_POLICY}",
    ]
    base = f"{d.path}/{PLACEHOLDER}"
    for phase in plan.phases:
        if isinstance(phase, FioPhase):
            drop = "sync and drop caches, then " if phase.drop_before else ""
            out += ["", f"== {phase.label}: {drop}fio, {format_bytes(phase.job.io_bytes)}",
                    job_text(p, phase.job, base, phase.label).rstrip()]
        elif isinstance(phase, CopyPhase):
            out.append(f"== {phase.label}: sync and drop caches, then "
                       f"{' '.join(plan.copy_command)} {base}/{phase.source} {base}/{phase.dest}"
                       f" && sync -f {base}/{phase.dest}")
        elif isinstance(phase, WaitPhase):
            out.append(f"== {phase.label}")
        else:
            out.append(f"== {phase.label} (untimed)")
    return "\n".join(out) + "\n"


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


def drop_cache_record(info: DirInfo) -> dict[str, object]:
    """sync + drop caches, for real; what happened, for the result."""
    outcome = drop_caches()
    if info.fs_type in RAM_FS:
        outcome["note"] = (f"the files are on {info.fs_type} (RAM): dropping caches cannot "
                           "move them out of memory")
    return outcome


def fio_seconds(stats: Any) -> tuple[float, str]:
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


class FilePresetRun:
    def __init__(self, prepared: PreparedFiles, store: Store, executor: Executor,
                 progress: Progress) -> None:
        self.p = prepared
        self.plan = prepared.plan
        self.store = store
        self.executor = executor
        self.progress = progress
        self.run_id = ""
        self.test = prepared.plan.preset
        self.cells: list[dict[str, Any]] = []
        self.round_no = 0
        self.work: WorkDir | None = None
        self.notes: list[str] = []

    # -- the run ----------------------------------------------------------------------
    def execute(self, argv: list[str]) -> str:
        plan = self.plan
        record = {"suite": plan.preset, **plan.identity, "profile": plan.profile,
                  "args": self.p.args, "options": plan.options, "summary": plan.summary,
                  "tests": [self.test], "page_cache": PAGE_CACHE_POLICY}
        self.run_id = self.store.new_run(
            suite=plan.preset, profile=plan.profile, quick=plan.quick,
            target=self._target(), host=self.p.host, plan=record,
            versions=dict(self.p.versions), argv=argv)
        self.progress.line(f"run {self.run_id}: {plan.identity['preset_title']} in "
                           f"{self.p.dir.path} (results in {self.store.path})")
        self._set_test("running", {})
        failed = ""
        try:
            try:
                with self._work_dir() as work:
                    self.work = work
                    self._run_phases(work)
            finally:
                cleanup = self._cleanup_record()
        except TestFailed as exc:
            failed = str(exc)
            self.progress.line(f"{self.test}: FAILED: {failed}")
            self._set_test("failed", {"error": failed, "cleanup": cleanup})
        except (FioInterrupted, KeyboardInterrupt):
            self._finish("interrupted", "stopped by Ctrl-C", cleanup)
            raise RunInterrupted(f"run {self.run_id} interrupted; the work directory was "
                                 f"removed; completed phases are kept in {self.store.path}"
                                 ) from None
        except StoreWriteError:
            raise
        except BaseException as exc:
            self._finish("failed", (str(exc).splitlines() or [repr(exc)])[0][:300], cleanup)
            raise
        if not failed:
            self._set_test("complete", self._result(cleanup))
        self.store.finish_run(self.run_id, "complete",
                              f"1 test(s) failed: {self.test}" if failed else "")
        return self.run_id

    def _work_dir(self) -> WorkDir:
        try:
            return WorkDir(self.p.dir, self.plan.needed_bytes)
        except OSError as exc:  # a read-only file system, a full one
            raise TargetError(f"--dir {self.p.dir.path}: cannot make a work directory there "
                              f"({exc.strerror or exc})") from None

    def _target(self) -> dict[str, Any]:
        """The directory's identity as the run's target, with the preset that ran there."""
        d = self.p.dir
        where = "network share" if d.network else "directory"
        return {**d.to_dict(), "device_class": f"{where} on {d.fs_type}", **self.plan.identity}

    def _finish(self, status: str, message: str, cleanup: dict[str, Any]) -> None:
        with contextlib.suppress(StoreWriteError):
            self._set_test(status, {"error": message, "cleanup": cleanup})
            self.store.finish_run(self.run_id, status, message)

    def _cleanup_record(self) -> dict[str, Any]:
        work = self.work
        if work is None:
            return {"work_dir": None, "removed": True}
        removed = not work.path.exists()
        if not removed:  # rmtree ignored an error: try once more, then say so
            work.remove()
            removed = not work.path.exists()
        if not removed:
            self.progress.line(f"WARNING: could not remove {work.path}")
        return {"work_dir": str(work.path), "removed": removed}

    def _params(self) -> dict[str, Any]:
        plan = self.plan
        return {"title": plan.identity["preset_title"], **plan.identity,
                "profile": plan.profile, "options": plan.options, "summary": plan.summary,
                "directory": self.p.dir.to_dict(), "page_cache": PAGE_CACHE_POLICY}

    def _set_test(self, status: str, result: dict[str, Any]) -> None:
        self.store.set_test(self.run_id, self.test, status=status, params=self._params(),
                            verdicts={}, result=result)

    def _result(self, cleanup: dict[str, Any]) -> dict[str, Any]:
        measured = list(self.cells)
        groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for c in measured:
            groups.setdefault((c["group"], c["direction"]), []).append(c)
        summary = []
        for (group, direction), cells in groups.items():
            seconds = sum(c["seconds"] for c in cells) / len(cells)
            rates = [c["bw_bytes_per_s"] for c in cells]
            summary.append({"group": group, "direction": direction, "count": len(cells),
                            "io_bytes": cells[0]["io_bytes"], "mean_seconds": seconds,
                            "mean_bw_bytes_per_s": sum(rates) / len(rates)})
        parts = [f"{_name(s)}: {s['mean_bw_bytes_per_s'] / 1e6:,.1f} MB/s"
                 for s in summary]
        return {"phases": measured, "summary": summary, "cleanup": cleanup,
                "notes": self.notes, "message": "; ".join(parts[:6])
                + (f" (+{len(parts) - 6} more)" if len(parts) > 6 else "")}

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
                self.store.add_event(self.run_id, self.test, "warning", note, {"why": why})
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

    def _cache(self, drop: bool, direct: bool) -> dict[str, object]:
        if direct:
            return {"direct": True}
        if not drop:
            return {"direct": False, "dropped": False, "why": "not a read"}
        outcome = {"direct": False, **drop_cache_record(self.p.dir)}
        if not outcome.get("dropped"):
            self.store.add_event(self.run_id, self.test, "warning",
                                 f"caches not dropped: {outcome.get('why')}", outcome)
        return outcome

    def _fio_phase(self, phase: FioPhase, base: Path) -> None:
        job = phase.job
        (base / job.subdir).mkdir(parents=True, exist_ok=True)
        cache = self._cache(phase.drop_before, job.direct)
        text = job_text(self.p, job, str(base), phase.label)
        self.progress.line(f"{self.test}: {phase.label} ({format_bytes(job.io_bytes)})")
        timeout = watchdog_seconds(job.io_bytes / MIN_BYTES_PER_S + job.files * PER_FILE_S + 5)
        run = self.executor.run(text, timeout, json_plus=False)
        stats = self._stats(run, job)
        if not phase.measured:
            self.store.add_step(self.run_id, self.test, "prepare",
                                {"phase": phase.key, "label": phase.label,
                                 "io_bytes": stats.io_bytes, "files": job.files},
                                fio_record(run, phase.key))
            return
        seconds, timing = fio_seconds(stats)
        if seconds <= 0:
            self._failed_round(run, phase.key, f"{phase.label}: fio measured no time")
        cell: dict[str, Any] = {
            "cell": phase.key, "label": phase.label, "group": phase.group,
            "direction": job.rw, "io_bytes": stats.io_bytes, "files": job.files,
            "file_bytes": job.file_bytes, "block_bytes": job.block_bytes,
            "seconds": seconds, "timing": timing, "bw_bytes_per_s": stats.io_bytes / seconds,
            "iops": stats.total_ios / seconds, "lat_mean_us": stats.lat_mean_ns / 1000.0,
            "direct": job.direct, "cache": cache,
            "fsync": "fsync_on_close + end_fsync, inside the timed job" if job.rw == "write"
            else None,
        }
        if phase.frames:
            cell["frames"] = phase.frames
            cell["frames_per_s"] = phase.frames / seconds
        self._round(cell, run)
        extra = f", {cell['frames_per_s']:,.1f} frames/s" if phase.frames else ""
        self.progress.line(f"{self.test}: {phase.label}: {cell['bw_bytes_per_s'] / 1e6:,.1f} "
                           f"MB/s in {seconds:.3f} s{extra}")

    def _stats(self, run: FioRun, job: FileJob) -> Any:
        if not run.ok or run.output is None or not run.output.jobs:
            self._failed_round(run, job.name, f"{job.name}: {run.error or 'no result'}")
        assert run.output is not None
        stats = getattr(run.output.jobs[0], job.rw)
        if stats.io_bytes != job.io_bytes:
            self._failed_round(run, job.name, f"{job.name}: fio moved {stats.io_bytes} bytes, "
                               f"{job.io_bytes} planned")
        if job.rw == "write":
            short = short_files(job, Path(self.work.path if self.work else "."))
            if short:
                self._failed_round(run, job.name, f"{job.name}: {len(short)} file(s) not "
                                   f"written in full: {', '.join(short[:3])}")
        return stats

    def _round(self, cell: dict[str, Any], run: FioRun | None, started: float = 0.0,
               ended: float = 0.0) -> None:
        self.round_no += 1
        self.cells.append(cell)
        self.store.add_round(
            self.run_id, self.test, self.round_no, status="ok", tracking={}, cells=[cell],
            fio=fio_record(run, str(cell["cell"])) if run is not None else None,
            started_at=run.started_at if run is not None else started,
            ended_at=run.ended_at if run is not None else ended)

    def _failed_round(self, run: FioRun | None, key: str, message: str) -> None:
        self.round_no += 1
        now = time.time()
        self.store.add_round(
            self.run_id, self.test, self.round_no, status="failed", tracking={}, cells=[],
            fio=fio_record(run, key) if run is not None else None,
            started_at=run.started_at if run is not None else now,
            ended_at=run.ended_at if run is not None else now)
        raise TestFailed(message)

    def _copy_phase(self, phase: CopyPhase, base: Path) -> None:
        cache = self._cache(True, False)
        src, dest = base / phase.source, base / phase.dest
        command = [*self.plan.copy_command, str(src), str(dest)]
        self.progress.line(f"{self.test}: {phase.label} ({phase.files:,} files, "
                           f"{format_bytes(phase.io_bytes)})")
        timeout = watchdog_seconds(phase.io_bytes / MIN_BYTES_PER_S + phase.files * PER_FILE_S)
        started = time.time()
        t0 = time.monotonic()
        for step in (command, ["sync", "-f", str(dest)]):
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
        seconds = time.monotonic() - t0
        copied = sum(f.stat().st_size for f in dest.iterdir()) if dest.is_dir() else 0
        if copied != phase.io_bytes:
            self._failed_round(None, phase.key, f"{phase.label}: {copied} bytes copied, "
                               f"{phase.io_bytes} expected")
        cell: dict[str, Any] = {
            "cell": phase.key, "label": phase.label, "group": phase.group,
            "direction": "copy", "repetition": phase.repetition, "io_bytes": phase.io_bytes,
            "files": phase.files, "file_bytes": phase.io_bytes // phase.files,
            "seconds": seconds, "timing": "wall time of the copy and sync -f",
            "bw_bytes_per_s": phase.io_bytes / seconds, "direct": False, "cache": cache,
            "command": " ".join(command[: len(self.plan.copy_command)]),
            "fsync": "sync -f of the copy's file system, inside the timed copy",
        }
        self._round(cell, None, started, time.time())
        self.progress.line(f"{self.test}: {phase.label}: {seconds:.3f} s, "
                           f"{cell['bw_bytes_per_s'] / 1e6:,.1f} MB/s")

    def _wait(self, phase: WaitPhase) -> None:
        self.progress.line(f"{self.test}: {phase.label}")
        started = time.time()
        deadline = time.monotonic() + phase.seconds
        while (left := deadline - time.monotonic()) > 0:
            time.sleep(min(left, 0.5))
        self.store.add_step(self.run_id, self.test, "wait",
                            {"seconds": phase.seconds, "waited_s": time.time() - started},
                            None)

    def _remove(self, phase: RemovePhase, base: Path) -> None:
        for rel in phase.paths:
            path = base / rel
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()


def _name(summary: dict[str, Any]) -> str:
    group, direction = summary["group"], summary["direction"]
    return str(group) if group == direction else f"{direction} {group}"
