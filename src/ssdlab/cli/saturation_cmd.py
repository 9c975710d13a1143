"""``ssdlab run saturation``: Write Saturation, then Host Idle Recovery."""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING, Any

from ssdlab.cli.common import add_target_options, open_store, run_suite
from ssdlab.cli.config_opts import add_config_option
from ssdlab.errors import ExitCode, UserError
from ssdlab.plan.options import IOENGINES, PURGE_METHODS
from ssdlab.plan.saturation import PROFILES, SaturationArgs
from ssdlab.store.records import RunData

if TYPE_CHECKING:
    from ssdlab.run.progress import Progress


SUITE = "saturation"

def register(suites: Any) -> None:
    p = suites.add_parser(
        "saturation",
        help="Write Saturation and Host Idle Recovery (methodology 1.7-1.8)",
        description="From purge, 4 KiB random writes run continuously until a round "
        "limit, an amount written or a time limit (Write Saturation: FOB IOPS, saturated "
        "IOPS, where the transition happened; per-round latency percentiles from fio's "
        "histogram log). Then Host Idle Recovery: for each wait state, bursts of writes "
        "separated by idle time, and continuous writes back to the baseline; does idle "
        "time recover performance? A killed run continues with `ssdlab resume RUN`. "
        "docs/saturation.md.",
    )
    add_target_options(p)
    g = p.add_argument_group("saturation")
    g.add_argument("--profile", default="default", choices=list(PROFILES),
                   help="default: 60 s rounds, <= 360 rounds or 4x written, HIR per SNIA; "
                   "quick: 1 s rounds and a short HIR (marked QUICK everywhere)")
    g.add_argument("--round-seconds", type=float, metavar="S",
                   help="round length in seconds (default: profile; 60)")
    g.add_argument("--max-rounds", type=int, metavar="N",
                   help="stop after N rounds (default: profile; 360)")
    g.add_argument("--max-written", type=float, metavar="X",
                   help="stop after writing X times the active range (default 4)")
    g.add_argument("--max-hours", type=float, metavar="H",
                   help="stop after H hours of writing (default: profile; 6)")
    g.add_argument("--threads", type=int, metavar="N",
                   help="fio jobs (default per device class, capped at the CPU count)")
    g.add_argument("--qd", type=int, metavar="N", help="queue depth per job (default per "
                   "device class)")
    g.add_argument("--active-range", type=float, default=100.0, metavar="PCT",
                   help="percent of the capacity written, from its start (default 100)")
    g.add_argument("--purge", default="auto", choices=PURGE_METHODS,
                   help="auto: blkdiscard for devices, recreate for files (default)")
    g.add_argument("--ioengine", default="libaio", choices=IOENGINES, help="fio ioengine")
    h = p.add_argument_group("host idle recovery")
    h.add_argument("--no-hir", dest="hir", action="store_false",
                   help="skip Host Idle Recovery after the saturation")
    h.add_argument("--waits", metavar="LIST",
                   help="idle seconds per wait state (default 5,10,15,25,50; quick: a fifth)")
    h.add_argument("--burst-seconds", type=float, metavar="S",
                   help="length of each write burst (default: profile; 5)")
    h.add_argument("--bursts", type=int, metavar="N",
                   help="bursts per wait state (default: profile; 360)")
    h.add_argument("--baseline-rounds", type=int, metavar="N",
                   help="continuous rounds back to the baseline after each wait state "
                   "(default: profile; 360)")
    h.add_argument("--recovery-ratio", type=float, default=1.2, metavar="X",
                   help="bursts at least X times the baseline IOPS (and significantly so) "
                   "count as recovered (default 1.2)")
    p.set_defaults(func=saturation_command)
    add_config_option(p)


def args_of(args: argparse.Namespace) -> SaturationArgs:
    return SaturationArgs(
        profile=args.profile, round_seconds=args.round_seconds, max_rounds=args.max_rounds,
        max_written=args.max_written, max_hours=args.max_hours, threads=args.threads,
        iodepth=args.qd, active_range_pct=args.active_range, purge=args.purge, hir=args.hir,
        waits=args.waits, burst_seconds=args.burst_seconds, bursts=args.bursts,
        baseline_rounds=args.baseline_rounds, recovery_ratio=args.recovery_ratio,
        ioengine=args.ioengine,
    )


def _progress(quick: bool) -> Progress:
    from ssdlab.run.progress import Progress
    return Progress(quick=quick)


def saturation_command(args: argparse.Namespace, argv: list[str]) -> int:
    from ssdlab.run.saturation_run import SaturationRun, describe, prepare_saturation
    prepared = prepare_saturation(args.target, args.size, args.destroy_data, args.fio,
                                  args_of(args))
    if args.dry_run:
        sys.stdout.write(describe(prepared))
        return int(ExitCode.OK)
    progress = _progress(prepared.options.quick)
    run, stored_in = run_suite(args, argv, progress,
                               lambda store, fio, pr: SaturationRun(prepared, store, fio, pr))
    return report_end(run, stored_in)


def report_end(run: RunData, store_path: object) -> int:
    quick = " (QUICK profile: not a valid PTS result)" if run.quick else ""
    print(f"run {run.run_id} {run.status_text}{quick}; results in {store_path}")
    print(f"  see them: ssdlab show {run.run_id}    report: ssdlab report {run.run_id} -o DIR")
    failed = [t.name for t in run.tests if t.status == "failed"]
    if failed:
        raise UserError(f"test(s) failed: {', '.join(failed)} (see `ssdlab show {run.run_id}`)",
                        ExitCode.FAILURE)
    return int(ExitCode.OK)


def resume(run: RunData, args: argparse.Namespace, argv: list[str]) -> str:
    """Continue a stopped saturation run from its last completed round."""
    from ssdlab.engine.runner import FioExecutor
    from ssdlab.run.saturation_run import SaturationRun, prepare_saturation
    path = str(run.target.get("path"))
    capacity = run.target.get("capacity_bytes")
    missing_file = run.target.get("kind") == "file" and not os.path.lexists(path)
    prepared = prepare_saturation(
        path, capacity if missing_file and isinstance(capacity, int) else None,
        args.destroy_data, args.fio, SaturationArgs(**run.plan["args"]),
    )
    progress = _progress(prepared.options.quick)
    with open_store(args) as store:
        try:
            return SaturationRun(prepared, store, FioExecutor(args.fio), progress).resume(
                store.load(run.run_id), argv)
        finally:
            progress.close()
