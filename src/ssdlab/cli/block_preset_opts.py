"""What the block-level presets (``ssdlab run cdm|atto|iometer``) share on the command
line: the target (``--target`` a block device or ssdlab test file, or ``--dir`` a
directory), the test file size, and running a prepared preset."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from ssdlab.cli.common import (
    add_destroy_data_option,
    add_store_option,
    run_suite,
    size_arg,
)
from ssdlab.errors import ExitCode, UserError
from ssdlab.plan.block_presets import PROFILES
from ssdlab.plan.options import IOENGINES

if TYPE_CHECKING:
    from ssdlab.run.block_preset_run import PlanBuilder


def add_preset_target_options(parser: argparse.ArgumentParser, size_help: str) -> None:
    t = parser.add_argument_group("target (give --target or --dir)")
    t.add_argument("--target", metavar="PATH",
                   help="a block device (/dev/...; the test file is its first --size bytes) "
                   "or an ssdlab test file path (created and fully allocated at --size)")
    t.add_argument("--dir", metavar="DIR",
                   help="a directory (local volume or network share): the test file is "
                   "made in a new subdirectory of it, removed afterwards")
    t.add_argument("--size", type=size_arg, metavar="SIZE", help=size_help)
    add_destroy_data_option(t)
    t.add_argument("--dry-run", action="store_true",
                   help="print the plan and every fio job file; touch nothing")
    add_store_option(parser)
    t.add_argument("--fio", default="fio", metavar="PATH", help="fio binary (default: fio)")


def add_common_preset_options(group: argparse._ArgumentGroup) -> None:
    group.add_argument("--profile", default="default", choices=PROFILES,
                       help="quick: a 16 MiB file, sub-second measurements, one pass "
                       "(marked QUICK everywhere); default: the preset's definition")
    group.add_argument("--ioengine", default="libaio", choices=IOENGINES,
                       help="fio ioengine (default libaio)")


def run_preset(args: argparse.Namespace, argv: list[str], build: PlanBuilder) -> int:
    from ssdlab.run.block_preset_run import PresetProgress, PresetRun, describe, prepare_preset
    prepared = prepare_preset(args.target, args.dir, args.destroy_data, args.fio, build)
    if args.dry_run:
        sys.stdout.write(describe(prepared))
        return int(ExitCode.OK)
    plan = prepared.plan
    progress = PresetProgress(quick=plan.quick)
    run, stored_in = run_suite(args, argv, progress,
                               lambda store, fio, pr: PresetRun(prepared, store, fio, pr))
    run_id = run.run_id
    quick = " (QUICK profile)" if run.quick else ""
    print(f"run {run_id} {run.status_text}{quick}; {plan.title} preset {plan.preset} "
          f"v{plan.version}; results in {stored_in}")
    test = run.tests[0] if run.tests else None
    if test is not None and isinstance(test.result, dict) and test.result.get("message"):
        print(f"  {test.result['message']}")
    print(f"  see them: ssdlab show {run_id}    report: ssdlab report {run_id} -o DIR")
    if test is None or test.status == "failed":
        error = test.result.get("error") if test is not None else None
        raise UserError(f"the {plan.preset} preset failed: {error} "
                        f"(see `ssdlab show {run_id}`)", ExitCode.FAILURE)
    return int(ExitCode.OK)
