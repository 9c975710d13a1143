"""``ssdlab run iometer``: the IOmeter-like access specifications (docs/presets-block.md)."""

from __future__ import annotations

import argparse
from dataclasses import replace
from typing import Any

from ssdlab.cli.block_preset_opts import (
    add_common_preset_options,
    add_preset_target_options,
    run_preset,
)
from ssdlab.cli.config_opts import add_config_option
from ssdlab.plan.block_presets import IometerArgs, PresetPlan, build_iometer

SUITE = "iometer"


def register(suites: Any) -> None:
    p = suites.add_parser(
        "iometer",
        help="IOmeter-like access specs: 1 worker, 32 outstanding I/O, IOPS per second",
        description="IOmeter's access specifications through fio: the test region is written "
        "with data first, then each spec runs --seconds with one worker at --qd outstanding "
        "I/O, its IOPS logged every --log-interval ms (the per-second timeline). Sets: "
        "default (4, 8, 64 KiB x random, sequential x read, write) and controller (256 KiB "
        "sequential, 4 KiB random x read, write, 50/50; meant for a raw volume). Direct I/O. "
        "docs/presets-block.md.",
    )
    add_preset_target_options(p, "test file (or device region) size, at least 16 MiB "
                              "(default 1GiB; quick 16MiB)")
    g = p.add_argument_group("iometer")
    add_common_preset_options(g)
    g.add_argument("--set", help="access specs: default or controller (default: default)")
    g.add_argument("--block-sizes", metavar="LIST",
                   help="run only the specs of these transfer sizes, KiB unless a unit is "
                   "given, e.g. 4,64 (default: every spec of the set)")
    g.add_argument("--seconds", type=float, metavar="S",
                   help="seconds per access spec (default 30; quick 1)")
    g.add_argument("--qd", type=int, metavar="N",
                   help="outstanding I/O of the worker (default 32)")
    g.add_argument("--log-interval", type=int, metavar="MS",
                   help="timeline resolution in ms (default 1000: IOmeter's per-second "
                   "results; quick 250)")
    p.set_defaults(func=iometer_command)
    add_config_option(p)


def iometer_command(args: argparse.Namespace, argv: list[str]) -> int:
    iargs = IometerArgs(profile=args.profile, set=args.set, block_sizes=args.block_sizes,
                        seconds=args.seconds, qd=args.qd, log_interval_ms=args.log_interval,
                        size_bytes=args.size, ioengine=args.ioengine)

    def build(sector: int, existing_size: int | None) -> PresetPlan:
        args_now = replace(iargs, size_bytes=iargs.size_bytes or existing_size)
        return build_iometer(args_now)

    return run_preset(args, argv, build)
