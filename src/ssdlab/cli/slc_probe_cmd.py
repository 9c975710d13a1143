"""``ssdlab run slc-probe``: the SLC-cache probe (methodology 1.4)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ssdlab.cli.common import add_target_options, run_suite, size_arg
from ssdlab.cli.config_opts import add_config_option
from ssdlab.errors import ExitCode, UserError
from ssdlab.plan.options import IOENGINES, PURGE_METHODS
from ssdlab.plan.slc_probe import (
    BW_LOG_MS,
    IODEPTH,
    LOG_KINDS,
    MIN_DROP_PCT,
    PER_IO_LOG_MAX_IOS,
    PROFILES,
    TARGET_SLICES,
    SlcProbeArgs,
)


def register(suites: Any) -> None:
    p = suites.add_parser(
        "slc-probe",
        help="SLC-cache probe: sequential write from purge, throughput against bytes "
        "written, the cache size (methodology 1.4)",
        description="Purge the whole target, then ONE sequential write from offset 0 (one "
        "thread, no preconditioning) with fio's bandwidth logged; throughput against bytes "
        "written shows where the SLC cache fills: the first cliff is the cache size "
        "estimate. docs/slc-probe.md.",
    )
    add_target_options(p)
    g = p.add_argument_group("slc probe")
    g.add_argument("--profile", default="default", choices=list(PROFILES),
                   help="default: write the whole capacity once, 10 s idle after the purge; "
                   "quick: half the capacity, 2 s idle (marked QUICK everywhere)")
    g.add_argument("--write-size", type=size_arg, metavar="SIZE",
                   help="bytes to write, e.g. 200GiB; at least 16 MiB, at most 4x the "
                   "capacity (default: the capacity; quick: half of it)")
    g.add_argument("--block-size", metavar="SIZE",
                   help="write block size, KiB unless a unit is given (default 128)")
    g.add_argument("--qd", type=int, metavar="N",
                   help=f"queue depth of the one writing thread (default {IODEPTH})")
    g.add_argument("--log", default="auto", choices=LOG_KINDS,
                   help="io: fio's bandwidth log per I/O (exact bytes); bw: averaged over "
                   "--log-interval; auto (default): io up to "
                   f"{PER_IO_LOG_MAX_IOS:,} I/Os, else bw")
    g.add_argument("--log-interval", type=int, metavar="MS",
                   help=f"averaging interval of the bw log in ms (default {BW_LOG_MS})")
    g.add_argument("--slice", type=size_arg, metavar="SIZE",
                   help="bytes per point of the curve (one stored round each; default: the "
                   f"write / {TARGET_SLICES}, at least 1 MiB)")
    g.add_argument("--min-drop", type=float, default=MIN_DROP_PCT, metavar="PCT",
                   help="a cliff is a drop of at least PCT %% of the rate before it "
                   f"(default {MIN_DROP_PCT:g})")
    g.add_argument("--settle", type=float, metavar="S",
                   help="seconds of idle between the purge and the write (default: "
                   "profile; 10, quick 2)")
    g.add_argument("--repeat-after", type=float, metavar="S",
                   help="after the write, idle S seconds and write again to see how much "
                   "cache came back (default: no repeat)")
    g.add_argument("--purge", default="auto", choices=PURGE_METHODS,
                   help="how the whole target is purged first; auto: blkdiscard for "
                   "devices, recreate for files (default)")
    g.add_argument("--ioengine", default="libaio", choices=IOENGINES,
                   help="fio ioengine (default libaio)")
    p.set_defaults(func=slc_probe_command)
    add_config_option(p)


def args_of(args: argparse.Namespace) -> SlcProbeArgs:
    return SlcProbeArgs(
        profile=args.profile, write_bytes=args.write_size, block_size=args.block_size,
        iodepth=args.qd, log=args.log, log_interval_ms=args.log_interval,
        slice_bytes=args.slice, min_drop_pct=args.min_drop, settle_s=args.settle,
        repeat_after_s=args.repeat_after, purge=args.purge, ioengine=args.ioengine,
    )


def slc_probe_command(args: argparse.Namespace, argv: list[str]) -> int:
    from ssdlab.run.slc_probe_run import SlcProbeRun, WriteProgress, describe, prepare_slc_probe
    prepared = prepare_slc_probe(args.target, args.size, args.destroy_data, args.fio,
                                 args_of(args))
    if args.dry_run:
        sys.stdout.write(describe(prepared))
        return int(ExitCode.OK)
    progress = WriteProgress(quick=prepared.options.quick)
    run, stored_in = run_suite(args, argv, progress,
                               lambda store, fio, pr: SlcProbeRun(prepared, store, fio, pr))
    run_id = run.run_id
    quick = " (QUICK profile)" if run.quick else ""
    print(f"run {run_id} {run.status_text}{quick}; results in {stored_in}")
    test = run.tests[0] if run.tests else None
    if test is not None and isinstance(test.result, dict) and test.result.get("message"):
        print(f"  {test.result['message']}")
    print(f"  see them: ssdlab show {run_id}    report: ssdlab report {run_id} -o DIR")
    if test is None or test.status == "failed":
        raise UserError(f"the SLC probe failed (see `ssdlab show {run_id}`)", ExitCode.FAILURE)
    return int(ExitCode.OK)
