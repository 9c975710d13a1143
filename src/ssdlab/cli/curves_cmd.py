"""``ssdlab run curves``: vdbench-style curves, latency against delivered IOPS."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ssdlab.cli.common import run_suite
from ssdlab.cli.config_opts import add_config_option
from ssdlab.cli.workload_opts import add_workload_target_options
from ssdlab.errors import ExitCode, UserError
from ssdlab.plan import curves as cv
from ssdlab.plan.options import IOENGINES, PURGE_METHODS

SUITE = cv.TEST


def register(suites: Any) -> None:
    from ssdlab.run.curves_run import FILE_NAME
    p = suites.add_parser(
        "curves",
        help="vdbench-style curves: latency against delivered IOPS at fractions of the "
        "maximum rate (methodology 2)",
        description="Per workload (preset 'curves': four corners, 70/30 mixes, database- "
        "and VDI-like profiles): an unthrottled run finds the maximum rate, then the "
        "workload runs at fixed fractions of it (fio rate_iops); mean and p99 latency are "
        "plotted against the delivered IOPS, points short of their target flagged "
        "(docs/curves.md).",
    )
    add_workload_target_options(p, FILE_NAME, "1GiB (256MiB with --profile quick)")
    g = p.add_argument_group("curves")
    g.add_argument("--profile", default="full", choices=cv.PROFILES,
                   help="full: 5 s ramp + 30 s measured per point; quick: 0.5 s + 1 s, "
                   "fewer fractions and workloads (marked QUICK everywhere)")
    g.add_argument("--workload", metavar="NAME[,NAME...]",
                   help="workloads of the preset, or 'all' (default: the preset's default "
                   "set; docs/curves.md lists them)")
    g.add_argument("--fractions", metavar="LIST",
                   help="percentages of the maximum rate, ascending (default 10,50,70,80,"
                   "90,100; quick 10,50,80,100)")
    g.add_argument("--with-120", action="store_true",
                   help="add vdbench's 120 %% point: the workload once more unthrottled")
    g.add_argument("--seconds", type=float, metavar="S",
                   help="measured seconds per point (default: profile, 30 or 1)")
    g.add_argument("--ramp", type=float, metavar="S",
                   help="ramp seconds per point, not measured (default: profile, 5 or 0.5)")
    g.add_argument("--threads", type=int, metavar="N",
                   help="outstanding I/Os for every workload (default: each workload's "
                   "vdbench threads, e.g. 128 for 4K random)")
    g.add_argument("--jobs", type=int, metavar="N",
                   help="fio jobs sharing the outstanding I/O (default: one per CPU, at most "
                   "the outstanding I/O)")
    g.add_argument("--fill-region", type=float, metavar="PCT",
                   help="partial-capacity variant: fill the whole target sequentially, then "
                   "run the curves on its first PCT percent (the reviews used 25)")
    g.add_argument("--min-delivered", type=float, default=cv.DEFAULT_MIN_DELIVERED_PCT,
                   metavar="PCT",
                   help="flag points delivering less than this percentage of their target "
                   f"rate (default {cv.DEFAULT_MIN_DELIVERED_PCT:g})")
    g.add_argument("--purge", default="none", choices=PURGE_METHODS,
                   help="purge before the run (default none; auto: blkdiscard for devices, "
                   "recreate for files)")
    g.add_argument("--ioengine", default="libaio", choices=IOENGINES,
                   help="fio ioengine (default: libaio)")
    p.set_defaults(func=curves_command)
    add_config_option(p)


def curves_args(args: argparse.Namespace) -> cv.CurvesArgs:
    return cv.CurvesArgs(
        profile=args.profile, workloads=args.workload, fractions=args.fractions,
        with_120=args.with_120, seconds=args.seconds, ramp=args.ramp, threads=args.threads,
        jobs=args.jobs, fill_region=args.fill_region, min_delivered_pct=args.min_delivered,
        purge=args.purge, ioengine=args.ioengine)


def curves_command(args: argparse.Namespace, argv: list[str]) -> int:
    from ssdlab.run.curves_run import CurvesRequest, CurvesRun, describe, prepare_curves
    from ssdlab.run.progress import Progress
    request = CurvesRequest(args.target, args.dir, args.size, args.destroy_data,
                            curves_args(args), args.fio)
    prepared = prepare_curves(request)
    if args.dry_run:
        sys.stdout.write(describe(prepared))
        return int(ExitCode.OK)
    progress = Progress(quick=prepared.options.quick)
    run, stored_in = run_suite(args, argv, progress,
                               lambda store, fio, pr: CurvesRun(prepared, store, fio, pr))
    run_id = run.run_id
    test = run.test(cv.TEST)
    quick = " (QUICK profile: not a valid result)" if run.quick else ""
    print(f"run {run_id} {run.status_text}{quick}; results in {stored_in}")
    for name, verdict in test.verdicts.items():
        if isinstance(verdict, dict):
            print(f"  {name}: {verdict.get('message')}")
    print(f"  see them: ssdlab report {run_id} -o DIR")
    if test.status == "failed":
        raise UserError(f"test curves failed: {test.result.get('error', '')}", ExitCode.FAILURE)
    return int(ExitCode.OK)
