"""``ssdlab run latency-iops``: validate, (dry-run or) execute, print where the results are."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from ssdlab.cli.common import add_target_options, open_store, run_suite
from ssdlab.cli.config_opts import add_config_option
from ssdlab.errors import ExitCode, UserError
from ssdlab.plan import latency_iops as li
from ssdlab.plan.options import IOENGINES, PURGE_METHODS
from ssdlab.store.records import RunData

#: the suite name ``ssdlab resume`` matches stored runs against
if TYPE_CHECKING:
    from ssdlab.run.latency_iops_run import LadderProgress, LatencyIopsPrepared


SUITE = li.TEST


def _list(values: tuple[int, ...]) -> str:
    return ",".join(str(v) for v in values)


def register(suites: Any) -> None:
    parser = suites.add_parser(
        "latency-iops",
        help="latency against IOPS: threads x queue-depth ladders (methodology 1.6, 1.9)",
        description="For every block size and read/write mix, one curve per thread count: "
        "the queue depth climbs until mean latency reaches the target or IOPS stops rising; "
        "mean, p99 and p99.9 latency per point, host CPU per point with host-bound "
        "detection, and the NUMA placement of fio against the device "
        "(docs/latency-iops.md). Starts from purge and 2x-capacity preconditioning.",
    )
    add_target_options(parser)
    add_ladder_options(parser)
    parser.set_defaults(func=run_command)
    add_config_option(parser)


def add_ladder_options(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("latency vs IOPS")
    g.add_argument(
        "--profile", default="default", choices=list(li.PROFILES),
        help="default: 5 s warm-up + 30 s measured per point (the reviews'); quick: 0.5 s + "
        "2 s (marked QUICK everywhere, not a valid result)",
    )
    g.add_argument(
        "--block-sizes", metavar="LIST",
        help="block sizes in KiB, e.g. 8,4,0.5 (default: "
        f"{','.join(str(b // 1024) for b in li.DEFAULT_BLOCKS)}, the reviews'; SNIA adds 0.5)",
    )
    g.add_argument(
        "--mixes", metavar="LIST",
        help="read/write mixes (default: 100/0,70/30,0/100, the reviews'; SNIA's latency "
        "test uses 65/35)",
    )
    g.add_argument(
        "--threads", metavar="LIST",
        help=f"thread counts, one curve each, ascending (default: {_list(li.DEFAULT_THREADS)})",
    )
    g.add_argument(
        "--qd", metavar="LIST",
        help=f"queue depths per thread, ascending (default: {_list(li.DEFAULT_QDS)}); the "
        "ladder then doubles up to --max-qd",
    )
    g.add_argument(
        "--max-qd", type=int, metavar="N",
        help=f"largest queue depth per thread (default: {li.DEFAULT_MAX_QD})",
    )
    g.add_argument(
        "--max-threads", type=int, metavar="N",
        help="thread counts double up to this while the largest curve ends at --max-qd "
        f"below the target (default: the CPU count, at most {li.DEFAULT_THREADS_CAP}, at least "
        "the largest of --threads)",
    )
    g.add_argument(
        "--target-latency-us", type=float, default=li.DEFAULT_TARGET_US, metavar="US",
        help="a curve stops once its mean latency reaches this, in microseconds "
        f"(default: {li.DEFAULT_TARGET_US:g})",
    )
    g.add_argument(
        "--min-iops-rise", type=float, default=li.DEFAULT_MIN_RISE_PCT, metavar="PCT",
        help="a curve stops when IOPS rose less than this many percent over the previous "
        f"queue depth (default: {li.DEFAULT_MIN_RISE_PCT:g}; 0: only when IOPS falls)",
    )
    g.add_argument(
        "--full-ladder", action="store_true",
        help="always run every queue depth of --qd; the stopping rules apply only beyond it",
    )
    g.add_argument(
        "--warmup-seconds", type=float, metavar="S",
        help="warm-up per point, not measured (fio ramp_time; default: profile, 5 or 0.5)",
    )
    g.add_argument(
        "--measure-seconds", type=float, metavar="S",
        help="measured time per point (fio runtime; default: profile, 30 or 2)",
    )
    g.add_argument(
        "--host-bound-cpu", type=float, default=li.DEFAULT_HOST_CPU_PCT, metavar="PCT",
        help="host-bound rule: host CPU at least this many percent busy, with IOPS rising "
        f"less than --host-bound-rise over the previous QD (default: "
        f"{li.DEFAULT_HOST_CPU_PCT:g})",
    )
    g.add_argument(
        "--host-bound-rise", type=float, default=li.DEFAULT_HOST_RISE_PCT, metavar="PCT",
        help="host-bound rule: IOPS rise, in percent over the previous queue depth, below "
        f"which a point at --host-bound-cpu is host-bound (default: "
        f"{li.DEFAULT_HOST_RISE_PCT:g})",
    )
    g.add_argument(
        "--active-range", type=float, default=100.0, metavar="PCT",
        help="percent of the capacity tested, from its start (default 100)",
    )
    g.add_argument(
        "--purge", default="auto", choices=PURGE_METHODS,
        help="auto: blkdiscard for devices, recreate for files (default)",
    )
    g.add_argument(
        "--no-precondition", dest="precondition", action="store_false",
        help="skip the 2x-capacity 128 KiB sequential preconditioning",
    )
    g.add_argument("--ioengine", default="libaio", choices=IOENGINES,
                   help="fio ioengine (default: libaio)")


def ladder_args(args: argparse.Namespace) -> li.LatencyIopsArgs:
    return li.LatencyIopsArgs(
        profile=args.profile, block_sizes=args.block_sizes, mixes=args.mixes,
        threads=args.threads, qds=args.qd, max_qd=args.max_qd, max_threads=args.max_threads,
        target_latency_us=args.target_latency_us, min_iops_rise_pct=args.min_iops_rise,
        full_ladder=args.full_ladder, warmup_s=args.warmup_seconds,
        measure_s=args.measure_seconds, host_bound_cpu_pct=args.host_bound_cpu,
        host_bound_rise_pct=args.host_bound_rise, active_range_pct=args.active_range,
        purge=args.purge, precondition=args.precondition, ioengine=args.ioengine,
    )


def run_command(args: argparse.Namespace, argv: list[str]) -> int:
    from ssdlab.run.latency_iops_run import (
        LatencyIopsRequest,
        LatencyIopsRun,
        describe,
        prepare_latency_iops,
    )
    request = LatencyIopsRequest(args.target, args.size, args.destroy_data, ladder_args(args),
                                 args.fio)
    prepared = prepare_latency_iops(request)
    if args.dry_run:
        sys.stdout.write(describe(prepared))
        return int(ExitCode.OK)
    progress = _progress(prepared)
    run, stored_in = run_suite(args, argv, progress,
                               lambda store, fio, pr: LatencyIopsRun(prepared, store, fio, pr),
                               request.fio)
    return report_end(run, stored_in)


def _progress(prepared: LatencyIopsPrepared) -> LadderProgress:
    from ssdlab.run.latency_iops_run import LadderProgress
    opts = prepared.options
    return LadderProgress(quick=opts.quick, point_s=opts.point_seconds)


def resume(run: RunData, args: argparse.Namespace, argv: list[str]) -> str:
    """``ssdlab resume``: continue a stopped latency-iops run after its last stored point."""
    from ssdlab.engine.runner import FioExecutor
    from ssdlab.run.latency_iops_run import LatencyIopsRequest, LatencyIopsRun, prepare_latency_iops
    stored = run.plan.get("args")
    if not isinstance(stored, dict):
        raise UserError(f"run {run.run_id} has no stored options to resume from")
    try:
        ladder = li.LatencyIopsArgs(**stored)
    except TypeError as exc:
        raise UserError(f"run {run.run_id} was made by another ssdlab version and cannot be "
                        f"resumed by this one ({exc})") from None
    request = LatencyIopsRequest(str(run.target.get("path")), None, args.destroy_data, ladder,
                                 args.fio)
    prepared = prepare_latency_iops(request)
    progress = _progress(prepared)
    with open_store(args) as store:
        try:
            return LatencyIopsRun(prepared, store, FioExecutor(args.fio), progress).resume(
                store.load(run.run_id), argv)
        finally:
            progress.close()


def report_end(run: RunData, store_path: object) -> int:
    test = run.test(li.TEST)
    quick = " (QUICK profile: not a valid result)" if run.quick else ""
    print(f"run {run.run_id} {run.status_text}{quick}; results in {store_path}")
    host_bound = test.result.get("host_bound") if isinstance(test.result, dict) else None
    if isinstance(host_bound, dict) and host_bound.get("host_bound"):
        print(f"  {host_bound.get('message')}")
    print(f"  see them: ssdlab report {run.run_id} -o DIR    export: ssdlab export "
          f"{run.run_id} --format json")
    if test.status == "failed":
        raise UserError(f"test {li.TEST} failed: {test.result.get('error', '')}",
                        ExitCode.FAILURE)
    return int(ExitCode.OK)
