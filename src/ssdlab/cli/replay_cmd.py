"""``ssdlab run replay``: replay a fio iolog or a blktrace onto the target through fio."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ssdlab.cli.common import run_suite
from ssdlab.cli.config_opts import add_config_option
from ssdlab.cli.workload_opts import add_workload_target_options
from ssdlab.errors import ExitCode, UserError
from ssdlab.plan import replay as rp
from ssdlab.plan.options import IOENGINES

SUITE = rp.TEST


def register(suites: Any) -> None:
    from ssdlab.run.replay_run import FILE_NAME
    p = suites.add_parser(
        "replay",
        help="replay an I/O trace (fio iolog v2/v3 or binary blktrace) onto the target",
        description="fio replays the trace (read_iolog) with every I/O redirected to the "
        "target (replay_redirect); the result is reported like any workload: IOPS, MB/s, "
        "mean and p99 latency, and an IOPS timeline. The trace is checked first: a known "
        "format, and every I/O inside the target (docs/replay.md).",
    )
    add_workload_target_options(p, FILE_NAME, "the trace's extent, in whole MiB")
    g = p.add_argument_group("replay")
    g.add_argument("--trace", metavar="FILE",
                   help="the trace: a fio iolog (version 2 or 3) or a binary blktrace "
                   "(blkparse -d output)")
    g.add_argument("--no-stall", action="store_true",
                   help="ignore the trace's timing and replay as fast as possible "
                   "(fio replay_no_stall)")
    g.add_argument("--time-scale", type=int, default=100, metavar="PCT",
                   help="replay speed in percent of the trace's timing: 200 twice as fast "
                   "(fio replay_time_scale; default 100)")
    g.add_argument("--qd", type=int, default=rp.DEFAULT_QD, metavar="N",
                   help=f"queue depth of the replay (default {rp.DEFAULT_QD}: with the "
                   "trace's timing fio reaps completions only between I/Os, so a deeper "
                   "queue adds that wait to the latency; use more with --no-stall)")
    g.add_argument("--log-interval", type=int, default=rp.DEFAULT_LOG_INTERVAL_MS,
                   metavar="MS",
                   help="IOPS timeline interval in milliseconds (fio log_avg_msec; default "
                   f"{rp.DEFAULT_LOG_INTERVAL_MS})")
    g.add_argument("--max-seconds", type=float, metavar="S",
                   help="stop the replay after this many seconds (fio runtime)")
    g.add_argument("--ioengine", default="libaio", choices=IOENGINES,
                   help="fio ioengine (default: libaio)")
    p.set_defaults(func=replay_command)
    add_config_option(p)


def replay_command(args: argparse.Namespace, argv: list[str]) -> int:
    from ssdlab.run.progress import Progress
    from ssdlab.run.replay_run import ReplayRequest, ReplayRun, describe, prepare_replay
    rargs = rp.ReplayArgs(trace=args.trace or "", no_stall=args.no_stall,
                          time_scale_pct=args.time_scale, iodepth=args.qd,
                          log_interval_ms=args.log_interval, max_seconds=args.max_seconds,
                          ioengine=args.ioengine)
    prepared = prepare_replay(ReplayRequest(args.target, args.dir, args.size,
                                            args.destroy_data, rargs, args.fio))
    if args.dry_run:
        sys.stdout.write(describe(prepared))
        return int(ExitCode.OK)
    progress = Progress()
    run = run_suite(args, argv, progress,
                     lambda store, fio, pr: ReplayRun(prepared, store, fio, pr))[0]
    run_id = run.run_id
    test = run.test(rp.TEST)
    print(f"run {run_id} {run.status_text}; {test.result.get('message', test.status)}")
    print(f"  see them: ssdlab report {run_id} -o DIR")
    if test.status == "failed":
        raise UserError(f"replay failed: {test.result.get('error')}", ExitCode.FAILURE)
    return int(ExitCode.OK)
