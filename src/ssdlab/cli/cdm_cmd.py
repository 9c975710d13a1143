"""``ssdlab run cdm``: the CrystalDiskMark-like preset (docs/presets-block.md)."""

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
from ssdlab.plan.block_presets import CdmArgs, PresetPlan, build_cdm

SUITE = "cdm"


def register(suites: Any) -> None:
    p = suites.add_parser(
        "cdm",
        help="CrystalDiskMark-like: SEQ1M Q8T1/Q1T1, RND4K Q32T1/Q1T1 read, write, mix; "
        "best and mean of the passes",
        description="CrystalDiskMark's tests through fio: the test file is written with data "
        "first, then every test runs --passes times per mode (read, write, mix) with "
        "--interval-seconds idle between runs; MB/s (10^6 bytes), IOPS and mean latency; the "
        "best pass (as CrystalDiskMark shows it) and the mean. Direct I/O. "
        "docs/presets-block.md.",
    )
    add_preset_target_options(p, "test file size, 16 MiB to 64 GiB (default 1GiB; quick "
                              "16MiB); on a device, its first SIZE bytes")
    g = p.add_argument_group("cdm")
    add_common_preset_options(g)
    g.add_argument("--set", help="the tests: default (SEQ1M Q8T1, SEQ1M Q1T1, RND4K Q32T1, "
                   "RND4K Q1T1) or nvme (SEQ1M Q8T1, SEQ128K Q32T1, RND4K Q32T16, RND4K Q1T1)"
                   "; default: default")
    g.add_argument("--modes", metavar="LIST",
                   help="comma-separated: read, write, mix (default all three)")
    g.add_argument("--mix-read-pct", type=int, metavar="PCT",
                   help="read share of the mix mode in percent (default 70)")
    g.add_argument("--passes", type=int, metavar="N",
                   help="passes per test and mode, 1 to 9 (default 3; quick 1)")
    g.add_argument("--measure-seconds", type=float, metavar="S",
                   help="seconds each pass measures (default 5; quick 0.5)")
    g.add_argument("--interval-seconds", type=float, metavar="S",
                   help="idle seconds before each run, as CrystalDiskMark's interval "
                   "(default 5; quick 0)")
    p.set_defaults(func=cdm_command)
    add_config_option(p)


def cdm_command(args: argparse.Namespace, argv: list[str]) -> int:
    cargs = CdmArgs(profile=args.profile, set=args.set, modes=args.modes,
                    mix_read_pct=args.mix_read_pct, passes=args.passes,
                    measure_s=args.measure_seconds, interval_s=args.interval_seconds,
                    size_bytes=args.size, ioengine=args.ioengine)

    def build(sector: int, existing_size: int | None) -> PresetPlan:
        args_now = replace(cargs, size_bytes=cargs.size_bytes or existing_size)
        return build_cdm(args_now)

    return run_preset(args, argv, build)
