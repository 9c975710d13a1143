"""Execute a trace replay (``ssdlab run replay``): one fio run replays the trace against
the target (``read_iolog`` + ``replay_redirect``), with its IOPS logged per interval
(``write_iops_log``); the result is reported like any workload: IOPS, MB/s, mean and p99
latency, and the per-interval IOPS timeline."""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ssdlab.engine.fiolog import FioLogError, LogEntry, fio_log_path, read_log
from ssdlab.engine.runner import Executor, FioRun, watchdog_seconds
from ssdlab.plan import replay as rp
from ssdlab.plan.options import IOENGINES
from ssdlab.plan.specs import CellSpec, Mix, Pattern
from ssdlab.plan.units import format_bytes
from ssdlab.run.cells import Cell, cell_from_job
from ssdlab.run.progress import Progress
from ssdlab.run.session import FioSetup, RunSession, TestFailed, fio_record
from ssdlab.run.workload_target import WorkloadTarget, materialised, prepare_workload_target
from ssdlab.store.db import Store
from ssdlab.targets.safety import DestroyData

TEST = rp.TEST
FILE_NAME = "ssdlab-replay.dat"
MIB = 1 << 20
#: a trace without timing (or replayed without stalls) is presumed stuck below this
MIN_REPLAY_IOPS = 50.0


@dataclass(frozen=True)
class ReplayRequest:
    target: str | None
    directory: str | None
    size_bytes: int | None
    destroy_data: DestroyData
    args: rp.ReplayArgs
    fio: str = "fio"


@dataclass(frozen=True)
class PreparedReplay:
    target: WorkloadTarget
    options: rp.ReplayOptions
    args: rp.ReplayArgs


def prepare_replay(request: ReplayRequest) -> PreparedReplay:
    """Options, the trace and the target, checked before any I/O (one-line UserError)."""
    options = rp.build_options(request.args, IOENGINES)
    # on --dir without --size: a file just big enough for the trace (whole MiB)
    fit = max(MIB, -(-options.trace.extent_bytes // MIB) * MIB)
    target = prepare_workload_target(request.target, request.directory, request.size_bytes,
                                     request.destroy_data, request.fio, FILE_NAME, fit)
    info = target.info
    rp.check_fits(options.trace, info.capacity_bytes, info.logical_sector_bytes, True,
                  info.path)
    return PreparedReplay(target, options, request.args)


def job_text(p: PreparedReplay, path: str, log_prefix: str) -> str:
    return rp.job_text(p.options, path, log_prefix,
                       f"ssdlab {p.target.base.versions['ssdlab']}: {TEST} of "
                       f"{p.options.trace.path}")


def describe(p: PreparedReplay) -> str:
    o = p.options
    timing = ("as fast as the target allows (replay_no_stall)" if o.no_stall else
              f"with the trace's timing at {o.time_scale_pct} % speed"
              if o.trace.duration_ms is not None else "as fast as the target allows "
              "(the trace has no timestamps)")
    out = [f"DRY RUN: nothing will be written. Replay onto {p.target.describe()}",
           o.trace.describe(),
           f"the trace fits: its extent {format_bytes(o.trace.extent_bytes)} <= "
           f"{format_bytes(p.target.info.capacity_bytes)}",
           f"replayed {timing}, queue depth {o.iodepth}, IOPS logged every "
           f"{o.log_interval_ms} ms" + (f", at most {o.max_seconds:g} s"
                                        if o.max_seconds is not None else ""),
           "-- job file:", job_text(p, p.target.info.path, "LOGDIR/replay").rstrip()]
    return "\n".join(out) + "\n"


def timeline(entries: list[LogEntry], interval_ms: int) -> list[dict[str, float]]:
    """Per-interval IOPS, reads and writes added up (one job: no merge over jobs)."""
    buckets: dict[int, dict[str, float]] = defaultdict(lambda: {"read": 0.0, "write": 0.0})
    for e in entries:
        if e.direction in ("read", "write"):
            slot = max(1, round(e.time_ms / interval_ms))
            buckets[slot][e.direction] += e.value
    return [{"t_s": slot * interval_ms / 1000, "iops": v["read"] + v["write"],
             "read_iops": v["read"], "write_iops": v["write"]}
            for slot, v in sorted(buckets.items())]


def _timeout(o: rp.ReplayOptions) -> float:
    planned = rp.planned_seconds(o)
    sized = o.trace.ios / MIN_REPLAY_IOPS
    return watchdog_seconds(max(planned or 0.0, 0.0) + sized + 5.0)


class ReplayRun:
    def __init__(self, prepared: PreparedReplay, store: Store, executor: Executor,
                 progress: Progress) -> None:
        self.p = prepared
        self.store = store
        self.executor = executor
        self.progress = progress

    def execute(self, argv: list[str]) -> str:
        t, o = self.p.target, self.p.options
        with materialised(t) as info:
            session = RunSession(info, self.store, self.executor, self.progress,
                                 FioSetup(info.path, o.ioengine, t.base.versions["ssdlab"],
                                          info.device_class, "default"))
            plan = {"suite": TEST, "args": dataclasses.asdict(self.p.args),
                    "trace": o.trace.to_dict(), "ioengine": o.ioengine, "direct": True,
                    "dir": None if t.dir is None else t.dir.to_dict()}
            session.open(suite=TEST, profile="default", quick=False, host=t.base.host,
                         plan=plan, versions=dict(t.base.versions), argv=argv)
            failed: list[str] = []
            with session.running():
                try:
                    self._replay(session)
                except TestFailed as exc:
                    failed.append(TEST)
                    session.after_failure(TEST, exc)
            session.finish(failed)
        return session.run_id

    def _params(self) -> dict[str, Any]:
        o = self.p.options
        return {"title": "Trace replay", "trace": o.trace.to_dict(), "no_stall": o.no_stall,
                "time_scale_pct": o.time_scale_pct, "iodepth": o.iodepth,
                "log_interval_ms": o.log_interval_ms, "max_seconds": o.max_seconds,
                "ioengine": o.ioengine}

    def _spec(self) -> CellSpec:
        tr = self.p.options.trace
        return CellSpec(TEST, Pattern.RANDOM, tr.main_block, Mix(tr.read_pct), 1,
                        self.p.options.iodepth, 0, max(tr.extent_bytes, 1),
                        io_bytes=tr.read_bytes + tr.write_bytes)

    def _replay(self, s: RunSession) -> None:
        o = self.p.options
        params = self._params()
        self.store.set_test(s.run_id, TEST, status="running", params=params, verdicts={},
                            result={})
        logdir = Path(tempfile.mkdtemp(prefix="ssdlab-replay-"))
        try:
            prefix = str(logdir / "replay")
            text = job_text(self.p, s.info.path, prefix)
            self.progress.phase("replay", 1, rp.planned_seconds(o))
            run = self.executor.run(text, _timeout(o), json_plus=True,
                                    on_tick=self.progress.tick)
            entries = self._log(prefix, run)
        finally:
            shutil.rmtree(logdir, ignore_errors=True)
        cell = self._cell(run)
        ok = run.ok and cell is not None
        series = timeline(entries, o.log_interval_ms)
        self.store.add_round(s.run_id, TEST, 1, status="ok" if ok else "failed",
                             tracking={"iops": float(str(cell["iops"]))} if ok and cell
                             else {}, cells=[cell] if cell else [],
                             fio=fio_record(run, "replay"), started_at=run.started_at,
                             ended_at=run.ended_at)
        s.ground_truth(TEST, "replay")
        if not ok or cell is None:
            error = run.error or "fio measured no I/O"
            self.store.set_test(s.run_id, TEST, status="failed", params=params, verdicts={},
                                result={"error": error})
            raise TestFailed(error)
        message = (f"replayed {int(str(cell['ios'])):,} I/Os in "
                   f"{(run.ended_at - run.started_at):.1f} s: "
                   f"{float(str(cell['iops'])):,.0f} IOPS, "
                   f"{float(str(cell['bw_bytes_per_s'])) / 1e6:,.1f} MB/s, mean latency "
                   f"{float(str(cell['lat_mean_us'])):.1f} us")
        result = {"cell": cell, "timeline": series, "trace": o.trace.to_dict(),
                  "message": message, "wall_s": run.ended_at - run.started_at}
        if not series:
            result["timeline_note"] = (f"no IOPS timeline: the replay ended within one "
                                       f"{o.log_interval_ms} ms log interval")
        self.store.set_test(s.run_id, TEST, status="complete", params=params,
                            verdicts={"primary": {"message": message}}, result=result)
        self.progress.line(f"{TEST}: {message}")

    def _log(self, prefix: str, run: FioRun) -> list[LogEntry]:
        path = fio_log_path(prefix, "iops", 1)
        if not run.ok or not path.exists():
            return []
        try:
            return read_log(path)
        except FioLogError:
            return []

    def _cell(self, run: FioRun) -> Cell | None:
        if run.output is None:
            return None
        job = next((j for j in run.output.jobs if j.name == TEST), None)
        if job is None:
            return None
        cell = cell_from_job(self._spec(), job)
        ios = job.read.total_ios + job.write.total_ios
        if ios == 0:
            return None
        cell["ios"] = ios
        cell["read_bytes"] = job.read.io_bytes
        cell["write_bytes"] = job.write.io_bytes
        return cell
