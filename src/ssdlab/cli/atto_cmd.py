"""``ssdlab run atto``: the ATTO-like transfer-size sweep (docs/presets-block.md)."""

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
from ssdlab.plan.block_presets import AttoArgs, PresetPlan, build_atto

SUITE = "atto"


def register(suites: Any) -> None:
    p = suites.add_parser(
        "atto",
        help="ATTO-like: sequential write and read MB/s and IOPS per transfer size, "
        "512 B to 64 MiB",
        description="ATTO Disk Benchmark's sweep through fio: the test file is written with "
        "data first, then at every transfer size from --min-size to --max-size (x --factor) "
        "a sequential write and a sequential read at queue depth --qd. Direct I/O unless "
        "--no-direct (then buffered writes end with fsync, and caches are synced and "
        "dropped before each read, recorded). docs/presets-block.md.",
    )
    add_preset_target_options(p, "test file size, at least 16 MiB and the largest transfer "
                              "(default 256MiB; quick 16MiB); on a device, its first SIZE "
                              "bytes")
    g = p.add_argument_group("atto")
    add_common_preset_options(g)
    g.add_argument("--min-size", metavar="SIZE",
                   help="smallest transfer size, bytes unless a unit is given (default 512; "
                   "quick 4KiB)")
    g.add_argument("--max-size", metavar="SIZE",
                   help="largest transfer size, bytes unless a unit is given (default 64MiB; "
                   "quick 1MiB)")
    g.add_argument("--factor", type=int, metavar="N",
                   help="each transfer size is N times the previous (default 2; quick 4)")
    g.add_argument("--qd", type=int, metavar="N",
                   help="queue depth (default 4, ATTO's; the NAS review used 256)")
    g.add_argument("--measure-seconds", type=float, metavar="S",
                   help="seconds per transfer size and direction (default 2; quick 0.5)")
    g.add_argument("--no-direct", action="store_true",
                   help="buffered I/O (through the page cache) instead of direct I/O")
    p.set_defaults(func=atto_command)
    add_config_option(p)


def atto_command(args: argparse.Namespace, argv: list[str]) -> int:
    aargs = AttoArgs(profile=args.profile, min_size=args.min_size, max_size=args.max_size,
                     factor=args.factor, qd=args.qd, measure_s=args.measure_seconds,
                     no_direct=args.no_direct, size_bytes=args.size, ioengine=args.ioengine)

    def build(sector: int, existing_size: int | None) -> PresetPlan:
        args_now = replace(aargs, size_bytes=aargs.size_bytes or existing_size)
        return build_atto(args_now, sector)

    return run_preset(args, argv, build)
