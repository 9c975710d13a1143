"""``ssdlab run pts``: validate, (dry-run or) execute, print where the results are."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from ssdlab.analysis.steady import rule_by_name
from ssdlab.cli import suites as suite_modules
from ssdlab.cli.common import add_target_options, open_store
from ssdlab.cli.config_opts import add_config_option
from ssdlab.errors import ExitCode, UserError
from ssdlab.plan.options import IOENGINES, PROFILES, PURGE_METHODS, VARIANTS, PtsArgs
from ssdlab.plan.pts import TEST_NAMES, TRACKING_SETS

if TYPE_CHECKING:
    from ssdlab.run.prepare import Prepared, RunRequest
    from ssdlab.run.progress import Progress


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "run",
        help="run a test suite on a target",
        description="Run a suite on a block device or a test file. Block devices are "
        "overwritten: ssdlab refuses unless --destroy-data is given.",
    )
    suites = parser.add_subparsers(
        dest="suite", metavar="SUITE", required=True, parser_class=type(parser)
    )
    pts = suites.add_parser(
        "pts",
        help="SNIA PTS IOPS, throughput and latency tests (methodology 1.1-1.5)",
        description="The SNIA PTS IOPS (7 mixes x 8 block sizes), throughput (128 KiB and "
        "1024 KiB sequential) and latency (QD 1) tests, each from purge and 2x-capacity "
        "preconditioning, in rounds until steady state (docs/pts.md).",
    )
    add_run_options(pts)
    pts.set_defaults(func=run_command)
    add_config_option(pts)
    from ssdlab.cli import suite_cmd
    from ssdlab.suites import find
    for module in suite_modules.MODULES:
        if isinstance(module, str):
            registered = find(module)
            assert registered is not None, module
            suite_cmd.register(suites, registered)
        else:
            module.register(suites)


def add_run_options(parser: argparse.ArgumentParser) -> None:
    add_target_options(parser)
    add_test_options(parser)


def add_test_options(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("tests")
    g.add_argument(
        "--profile",
        default="default",
        choices=list(PROFILES),
        help="default: 60 s per cell, at most 25 rounds; quick: 0.5 s per cell, at "
        "most 8 rounds (marked QUICK everywhere)",
    )
    g.add_argument(
        "--variant",
        default="snia",
        choices=VARIANTS,
        help="snia (default) or reviews: the reviews' 4-round 90-110%% rule, no "
        "0.5 KiB cells, 70/30 instead of 65/35 in the latency test",
    )
    g.add_argument(
        "--tests", metavar="LIST", help=f"comma list of {', '.join(TEST_NAMES)} (default: all)"
    )
    g.add_argument(
        "--rule",
        choices=["snia", "review"],
        help="steady-state rule (default: snia; reviews variant: review)",
    )
    g.add_argument(
        "--tracking",
        choices=TRACKING_SETS,
        help="IOPS stopping variables: v1.1 = 4 KiB 0/100; v2.0 (default) = 4 KiB "
        "0/100, 64 KiB 65/35 and 1024 KiB 100/0; both verdicts are recorded",
    )
    g.add_argument(
        "--round-seconds",
        type=float,
        metavar="S",
        help="seconds each cell runs per round (default: profile)",
    )
    g.add_argument(
        "--max-rounds",
        type=int,
        metavar="N",
        help="rounds before giving up on steady state (default: profile)",
    )
    g.add_argument(
        "--threads",
        type=int,
        metavar="N",
        help="fio jobs per cell for IOPS and throughput (default per device class, "
        "capped at the CPU count)",
    )
    g.add_argument("--qd", type=int, metavar="N", help="queue depth per thread")
    g.add_argument(
        "--active-range",
        type=float,
        default=100.0,
        metavar="PCT",
        help="percent of the capacity tested, from its start (default 100)",
    )
    g.add_argument(
        "--block-sizes",
        metavar="LIST",
        help="IOPS block sizes in KiB, e.g. 1024,128,4,0.5 (default: the 8 SNIA sizes)",
    )
    g.add_argument(
        "--mixes",
        metavar="LIST",
        help="IOPS read/write mixes, e.g. 100/0,65/35,0/100 (default: the 7 SNIA mixes)",
    )
    g.add_argument("--latency-block-sizes", metavar="LIST", help="latency block sizes in KiB")
    g.add_argument("--latency-mixes", metavar="LIST", help="latency mixes")
    g.add_argument(
        "--purge",
        default="auto",
        choices=PURGE_METHODS,
        help="auto: blkdiscard for devices, recreate for files (default)",
    )
    g.add_argument(
        "--no-precondition",
        dest="precondition",
        action="store_false",
        help="skip the 2x-capacity 128 KiB sequential preconditioning",
    )
    g.add_argument("--ioengine", default="libaio", choices=IOENGINES, help="fio ioengine")
    g.add_argument(
        "--read-only",
        action="store_true",
        help="run only the read cells (IOPS and latency at 100/0, sequential read "
        "throughput) with fio --readonly: no purge, no preconditioning, no --destroy-data "
        "needed; the device may carry a filesystem but must not be mounted (docs/safety.md)",
    )


def pts_args(args: argparse.Namespace) -> PtsArgs:
    return PtsArgs(
        profile=args.profile,
        variant=args.variant,
        tests=args.tests,
        rule=args.rule,
        tracking=args.tracking,
        round_seconds=args.round_seconds,
        max_rounds=args.max_rounds,
        threads=args.threads,
        iodepth=args.qd,
        active_range_pct=args.active_range,
        block_sizes=args.block_sizes,
        mixes=args.mixes,
        latency_block_sizes=args.latency_block_sizes,
        latency_mixes=args.latency_mixes,
        purge=args.purge,
        precondition=args.precondition,
        ioengine=args.ioengine,
        read_only=args.read_only,
    )


def request_of(args: argparse.Namespace) -> RunRequest:
    from ssdlab.run.prepare import RunRequest
    return RunRequest(
        target=args.target,
        size_bytes=args.size,
        destroy_data=args.destroy_data,
        args=pts_args(args),
        fio=args.fio,
    )


def run_progress(prepared: Prepared) -> Progress:
    from ssdlab.run.progress import Progress
    return Progress(
        quick=prepared.options.quick,
        window=rule_by_name(prepared.options.rule).window,
        max_rounds=prepared.options.max_rounds,
    )


def execute(request: RunRequest, args: argparse.Namespace, argv: list[str]) -> str:
    """Prepare and execute; returns the run id. Shared by ``run`` and ``demo``."""
    from ssdlab.engine.runner import FioExecutor
    from ssdlab.run.dry_run import describe
    from ssdlab.run.prepare import prepare
    from ssdlab.run.pts_run import PtsRun
    prepared = prepare(request)
    if args.dry_run:
        sys.stdout.write(describe(prepared))
        return ""
    progress = run_progress(prepared)
    with open_store(args) as store:
        try:
            executor = FioExecutor(request.fio, read_only=prepared.options.read_only_target)
            return PtsRun(prepared, store, executor, progress).execute(argv)
        finally:
            progress.close()


def run_command(args: argparse.Namespace, argv: list[str]) -> int:
    run_id = execute(request_of(args), args, argv)
    if not run_id:
        return int(ExitCode.OK)
    with open_store(args) as store:
        run = store.load(run_id)
    failed = [t.name for t in run.tests if t.status == "failed"]
    quick = " (QUICK profile: not a valid PTS result)" if run.quick else ""
    print(f"run {run_id} {run.status_text}{quick}; results in {store.path}")
    print(f"  see them: ssdlab show {run_id}    export: ssdlab export {run_id} --format json")
    if failed:
        raise UserError(
            f"test(s) failed: {', '.join(failed)} (see `ssdlab show {run_id}`)", ExitCode.FAILURE
        )
    return int(ExitCode.OK)
