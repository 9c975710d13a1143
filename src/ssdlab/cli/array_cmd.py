"""``ssdlab array create|status|destroy``: software arrays of member drives (docs/arrays.md).
``ssdlab run matrix`` builds, tests and tears down in one command."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ssdlab.cli.common import add_command, add_destroy_data_option
from ssdlab.errors import ExitCode, UserError, command
from ssdlab.plan.array import BACKENDS, LEVELS, create_commands, destroy_commands, plan_array
from ssdlab.units import parse_size


def register(sub: Any) -> None:
    arr = sub.add_parser(
        "array",
        help="build, inspect or tear down a software RAID array of member drives",
        description="""Software arrays (md, ZFS, btrfs) of member drives. Every member passes
        every guardrail a single target passes before anything is written to any. An array
        stays until `ssdlab array destroy`, which also wipes its members; arrays a killed
        `ssdlab run matrix` left are torn down by the next run or by `array destroy
        --leftovers`. docs/arrays.md.""",
    )
    actions = arr.add_subparsers(dest="action", metavar="ACTION", required=True)
    create = add_command(actions, "create", create_command,
                         help="build an array from member devices")
    create.add_argument("members", nargs="+", metavar="MEMBER", help="member block devices")
    create.add_argument("--level", required=True,
                        help=f"RAID level: {', '.join(lv[4:] for lv in LEVELS)}")
    create.add_argument("--backend", choices=BACKENDS, default="md",
                        help="md (mdadm), zfs (zpool, a zvol and a dataset for the file presets) "
                        "or btrfs (default md)")
    create.add_argument("--name", default="ssdlab0",
                        help="array name: /dev/md/NAME, pool NAME, or the btrfs label "
                        "(default ssdlab0)")
    create.add_argument("--chunk", metavar="SIZE",
                        help="chunk size (md; default 512KiB), zvol volblocksize (zfs; "
                        "default 16KiB); btrfs stripes are a fixed 64 KiB")
    add_destroy_data_option(create, "; for a set, --destroy-data=/dev/sdb,/dev/sdc names "
                            "each member that carries data")
    create.add_argument("--dry-run", action="store_true",
                        help="print every command; touch nothing")
    status = add_command(actions, "status", status_command,
                         help="the arrays ssdlab built, and leftovers of killed runs")
    status.add_argument("name", nargs="?", help="one array (default: all)")
    destroy = add_command(actions, "destroy", destroy_command,
                          help="tear down an array ssdlab built and wipe its members")
    destroy.add_argument("name", nargs="?", help="the array's name")
    destroy.add_argument("--leftovers", action="store_true",
                         help="every array a killed run left behind")
    destroy.add_argument("--dry-run", action="store_true",
                         help="print every command; touch nothing")


def create_command(args: argparse.Namespace, argv: list[str]) -> int:
    from ssdlab.run import array as arrays
    chunk = None
    if args.chunk is not None:
        try:
            chunk = parse_size(args.chunk)
        except ValueError as err:
            raise UserError(f"--chunk: {err}") from None
    if not args.dry_run:
        arrays.clean_leftovers()
    infos = arrays.checked_members(args.members, args.destroy_data)
    plan = plan_array(args.backend, args.level, [i.path for i in infos], name=args.name,
                      member_bytes=min(i.capacity_bytes for i in infos),
                      mount_dir=arrays.default_mount_dir(args.name), chunk_bytes=chunk)
    if args.dry_run:
        print(f"DRY RUN: nothing will be written. Would build {plan.describe()}:")
        for step in create_commands(plan):
            print(f"  $ {' '.join(step)}")
        print(f"and `{command()} array destroy` would run:")
        for step in destroy_commands(plan):
            print(f"  $ {' '.join(step)}")
        return int(ExitCode.OK)
    state = arrays.build(plan, infos)
    print(f"target: {plan.target}")
    if plan.backend == "zfs":
        print(f"file presets: --dir {plan.mount_dir} (dataset {plan.dataset})")
    print(f"tear it down with: {command()} array destroy {state.plan.name}")
    return int(ExitCode.OK)


def status_command(args: argparse.Namespace, argv: list[str]) -> int:
    from ssdlab.run import array as arrays
    states = [arrays.find_state(args.name)] if args.name else arrays.load_states()
    if not states:
        print(f"no arrays built by ssdlab (state files in {arrays.state_dir()})")
    for state in states:
        print(arrays.describe_state(state))
        for line in arrays.live_status(state):
            print(f"  {line}")
    return int(ExitCode.OK)


def destroy_command(args: argparse.Namespace, argv: list[str]) -> int:
    from ssdlab.run import array as arrays
    if args.leftovers == bool(args.name):
        raise UserError(f"give the array's name or --leftovers (see `{command()} array "
                        "status`)")
    if args.leftovers:
        states = [s for s in arrays.load_states() if s.leftover()]
    else:
        states = [arrays.find_state(args.name)]
    if not states:
        print("no leftover arrays")
    for state in states:
        if args.dry_run:
            print(f"DRY RUN: would tear down {state.plan.describe()}:")
            for step in destroy_commands(state.plan):
                print(f"  $ {' '.join(step)}")
            continue
        if state.owner_alive() and state.owner is not None:
            raise UserError(f"array {state.plan.name} belongs to run {state.owner}, which is "
                            f"still running in process {state.pid}: stop it first")
        arrays.teardown(state)
    sys.stdout.flush()
    return int(ExitCode.OK)
