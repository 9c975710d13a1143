"""``ssdlab run op-sweep``: steady-state random-write IOPS against over-provisioning."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ssdlab.analysis.steady import RULES, rule_by_name
from ssdlab.cli.common import add_target_options, run_suite
from ssdlab.cli.config_opts import add_config_option
from ssdlab.errors import ExitCode, UserError
from ssdlab.plan.op_sweep import MAX_OP, MIN_GAIN_PCT, PROFILES, PURGE_METHODS, OpSweepArgs
from ssdlab.plan.options import IOENGINES


def register(suites: Any) -> None:
    p = suites.add_parser(
        "op-sweep",
        help="over-provisioning sweep: steady 4 KiB random-write IOPS at 0-60 %% OP and a "
        "recommendation (methodology 4)",
        description="For each OP setting (the share of the capacity left unused): purge the "
        "whole target, precondition the active range (the rest stays trimmed), then 4 KiB "
        "random writes on it in rounds until steady state. Reports IOPS and IOPS x usable "
        "share per setting and recommends the OP with the best IOPS for the capacity given "
        "up. A single --op value runs one setting. docs/op-sweep.md.",
    )
    add_target_options(p)
    g = p.add_argument_group("op sweep")
    g.add_argument("--profile", default="default", choices=list(PROFILES),
                   help="default: 60 s rounds, at most 25 per setting, OP 0,7,14,20,28,40,"
                   "50,60 %%; quick: 1 s rounds, at most 10, OP 0,20,40 %% (marked QUICK "
                   "everywhere)")
    g.add_argument("--op", metavar="LIST",
                   help="OP settings in %% of the capacity left unused, comma list, 0 to "
                   f"{MAX_OP:g}, e.g. 0,20,40 or one value (default: profile)")
    g.add_argument("--round-seconds", type=float, metavar="S",
                   help="seconds per round (default: profile; 60, quick 1)")
    g.add_argument("--max-rounds", type=int, metavar="N",
                   help="rounds per setting before giving up on steady state (default: "
                   "profile; 25, quick 10)")
    g.add_argument("--rule", default="snia", choices=sorted(RULES),
                   help="steady-state rule: snia (default; 5 rounds, excursion <= 20 %%, "
                   "slope <= 10 %%) or review (4 rounds, line within 90-110 %%)")
    g.add_argument("--threads", type=int, metavar="N",
                   help="fio jobs (default per device class, capped at the CPU count)")
    g.add_argument("--qd", type=int, metavar="N",
                   help="queue depth per job (default per device class)")
    g.add_argument("--min-gain", type=float, default=MIN_GAIN_PCT, metavar="PCT",
                   help="recommend a higher OP only if its IOPS gain at least PCT %% per "
                   f"percentage point of capacity given up (default {MIN_GAIN_PCT:g})")
    g.add_argument("--purge", default="auto", choices=PURGE_METHODS,
                   help="how the WHOLE target is purged before each setting (it must trim "
                   "the unused part); auto: blkdiscard for devices, recreate for files "
                   "(default)")
    g.add_argument("--ioengine", default="libaio", choices=IOENGINES,
                   help="fio ioengine (default libaio)")
    p.set_defaults(func=op_sweep_command)
    add_config_option(p)


def args_of(args: argparse.Namespace) -> OpSweepArgs:
    return OpSweepArgs(
        profile=args.profile, ops=args.op, round_seconds=args.round_seconds,
        max_rounds=args.max_rounds, rule=args.rule, threads=args.threads, iodepth=args.qd,
        min_gain_pct=args.min_gain, purge=args.purge, ioengine=args.ioengine,
    )


def op_sweep_command(args: argparse.Namespace, argv: list[str]) -> int:
    from ssdlab.run.op_sweep_run import OpSweepRun, describe, prepare_op_sweep
    from ssdlab.run.progress import Progress
    prepared = prepare_op_sweep(args.target, args.size, args.destroy_data, args.fio,
                                args_of(args))
    if args.dry_run:
        sys.stdout.write(describe(prepared))
        return int(ExitCode.OK)
    o = prepared.plan.options
    progress = Progress(quick=o.quick, window=rule_by_name(o.rule).window,
                        max_rounds=o.max_rounds)
    run, stored_in = run_suite(args, argv, progress,
                               lambda store, fio, pr: OpSweepRun(prepared, store, fio, pr))
    run_id = run.run_id
    quick = " (QUICK profile: not a valid PTS result)" if run.quick else ""
    print(f"run {run_id} {run.status_text}{quick}; results in {stored_in}")
    test = run.tests[0] if run.tests else None
    result = test.result if test is not None and isinstance(test.result, dict) else {}
    rec = result.get("recommendation")
    if isinstance(rec, dict):
        print(f"  {rec.get('message')}")
    print(f"  see them: ssdlab show {run_id}    report: ssdlab report {run_id} -o DIR")
    failed = [s.get("label") for s in result.get("settings", []) if s.get("status") == "failed"]
    if test is None or test.status == "failed" or failed:
        what = ", ".join(str(f) for f in failed) or "every setting"
        raise UserError(f"OP sweep: {what} failed (see `ssdlab show {run_id}`)",
                        ExitCode.FAILURE)
    return int(ExitCode.OK)
