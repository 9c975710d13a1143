"""``ssdlab run verify``: write, read back and check every interval of the target."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ssdlab.cli.common import add_target_options, run_suite
from ssdlab.cli.config_opts import add_config_option
from ssdlab.errors import ExitCode, UserError
from ssdlab.plan.options import IOENGINES
from ssdlab.plan.verify import CHECKSUMS, PATTERNS, VerifyArgs

SUITE = "verify"


def register(suites: Any) -> None:
    p = suites.add_parser(
        "verify",
        help="data integrity: write, read back and check every interval (fio verify)",
        description="fio writes the active range with a checksum in every interval, reads "
        "it all back and checks it; every interval that comes back wrong is reported with "
        "its byte offset (silent corruption, misplaced or stale data). Exit status 1 when "
        "any corruption was found. docs/verify.md.",
    )
    add_target_options(p)
    g = p.add_argument_group("verify")
    g.add_argument("--block-size", default="128", metavar="SIZE",
                   help="write and read block size, KiB unless a unit is given (default 128)")
    g.add_argument("--pattern", default="sequential", choices=PATTERNS,
                   help="order of the writes (default sequential)")
    g.add_argument("--checksum", default="crc32c", choices=CHECKSUMS,
                   help="checksum fio stores and checks (default crc32c)")
    g.add_argument("--interval", default="4", metavar="SIZE",
                   help="bytes covered by each checksum, KiB unless a unit is given; the "
                   "resolution of a reported location (default 4)")
    g.add_argument("--qd", type=int, default=16, metavar="N", help="queue depth (default 16)")
    g.add_argument("--active-range", type=float, default=100.0, metavar="PCT",
                   help="percent of the capacity checked, from its start (default 100)")
    g.add_argument("--verify-only", action="store_true",
                   help="only read and check what an earlier verify run with the same "
                   "options wrote (no writes)")
    g.add_argument("--ioengine", default="libaio", choices=IOENGINES, help="fio ioengine")
    p.set_defaults(func=verify_command)
    add_config_option(p)


def verify_command(args: argparse.Namespace, argv: list[str]) -> int:
    from ssdlab.run.progress import Progress
    from ssdlab.run.verify_run import VerifyRun, describe, prepare_verify
    vargs = VerifyArgs(block_size=args.block_size, pattern=args.pattern,
                       checksum=args.checksum, interval=args.interval, iodepth=args.qd,
                       active_range_pct=args.active_range, verify_only=args.verify_only,
                       ioengine=args.ioengine)
    prepared = prepare_verify(args.target, args.size, args.destroy_data, args.fio, vargs)
    if args.dry_run:
        sys.stdout.write(describe(prepared))
        return int(ExitCode.OK)
    progress = Progress()
    run, _stored_in = run_suite(args, argv, progress,
                               lambda store, fio, pr: VerifyRun(prepared, store, fio, pr))
    run_id = run.run_id
    test = run.test("verify")
    print(f"run {run_id} {run.status_text}; {test.result.get('message', test.status)}")
    if test.status == "corrupt":
        raise UserError(f"data corruption found on {prepared.target.info.path} "
                        f"(see `ssdlab show {run_id}`)", ExitCode.FAILURE)
    if test.status == "failed":
        raise UserError(f"verify failed: {test.result.get('error')}", ExitCode.FAILURE)
    return int(ExitCode.OK)
