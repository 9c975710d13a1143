"""``ssdlab emulator start|stop|status``: the emulated SSD (emulator/README.md)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from typing import Any

from ssdlab.cli.common import add_command
from ssdlab.errors import ExitCode, UserError, command
from ssdlab.targets import emulator
from ssdlab.units import format_bytes, parse_size


def register(sub: Any) -> None:
    emu = sub.add_parser(
        "emulator",
        help="start, stop or inspect the emulated SSD",
        description="""The emulated SSD: a FUSE device with a known flash translation layer,
        for trying ssdlab without a spare drive.""",
    )
    actions = emu.add_subparsers(dest="action", metavar="ACTION", required=True)
    start = add_command(actions, "start", start_command, help="mount a fresh emulated SSD")
    start.add_argument("--name", default="default", help="emulator name (default: default)")
    start.add_argument(
        "--profile",
        default="enterprise-tlc",
        choices=emulator.PROFILES,
        help="drive model (default: enterprise-tlc)",
    )
    start.add_argument("--size", default="1GiB", help="user capacity (default 1GiB)")
    start.add_argument(
        "--op",
        metavar="PERCENT",
        help="over-provisioning in %% of user capacity, 0-100 "
        "(default: the profile's, 7 or 28)",
    )
    start.add_argument(
        "--idle-gc",
        choices=("on", "off"),
        help="background garbage collection when the host is idle (default: on)",
    )
    start.add_argument(
        "--time-scale",
        metavar="X",
        help="multiply every latency of the model by X, 1-100 (default 1): e.g. a slower "
        "member among the drives of an array",
    )
    start.add_argument(
        "--loop",
        action="store_true",
        help="also attach a loop device (direct I/O) over the disk file",
    )
    stop = add_command(actions, "stop", stop_command,
                       help="stop an emulator, or clean up a crashed one")
    stop.add_argument("--name", default="default", help="emulator name (default: default)")
    stop.add_argument("--all", action="store_true", help="stop every emulator")
    status = add_command(actions, "status", status_command,
                         help="list emulators and their ground truth")
    status.add_argument("--json", action="store_true", help="print the stats as JSON")


def start_command(args: argparse.Namespace, argv: list[str]) -> int:
    try:
        size = parse_size(args.size)
    except ValueError as exc:
        raise UserError(f"--size: {exc}") from None
    options = []
    if args.op is not None:
        options += ["--op", str(_op_fraction(args.op))]
    if args.idle_gc is not None:
        options += ["--idle-gc", args.idle_gc]
    if args.time_scale is not None:
        options += ["--time-scale", str(_time_scale(args.time_scale))]
    emu = emulator.start(args.name, args.profile, size, loop=args.loop, options=options)
    print(f"emulator {emu.name}: {emu.profile}, {format_bytes(emu.size_bytes)}, pid {emu.pid}")
    print(f"  target: {emu.target}")
    print(f"  ground truth: {emu.mountpoint}/stats   commands: {emu.mountpoint}/control")
    return int(ExitCode.OK)


def _op_fraction(text: str) -> float:
    try:
        percent = float(text.strip().removesuffix("%"))
    except ValueError:
        percent = -1.0
    if not 0 <= percent <= 100:
        raise UserError(f"--op {text!r}: give a percentage from 0 to 100, e.g. 28")
    return percent / 100


def _time_scale(text: str) -> float:
    try:
        scale = float(text)
    except ValueError:
        scale = 0.0
    if not 1 <= scale <= 100:
        raise UserError(f"--time-scale {text!r}: give a factor from 1 to 100, e.g. 4")
    return scale


def stop_command(args: argparse.Namespace, argv: list[str]) -> int:
    names = [s.name for s in emulator.status()] if args.all else [args.name]
    stopped = [name for name in names if emulator.stop(name)]
    if not args.all and not stopped:  # a name that names nothing: a bad argument (2)
        raise UserError(f"--name {args.name}: no emulator of that name (see `{command()} "
                        "emulator status`)")
    for name in stopped:
        print(f"emulator {name} stopped")
    return int(ExitCode.OK)


def status_command(args: argparse.Namespace, argv: list[str]) -> int:
    found = emulator.status()
    if not found:
        print("no emulators")
    for item in found:
        state = "running" if item.running else f"STALE (run `{command()} emulator stop`)"
        print(f"{item.name}: {state} at {item.mountpoint}")
        if item.running and item.emulator is not None:
            truth = emulator.stats(item.emulator)
            if args.json:
                print(json.dumps(truth, indent=2))
            else:
                counters = truth.get("counters")
                print(f"  target {item.emulator.target}, profile {item.emulator.profile}, "
                      + write_amplification_text(counters if isinstance(counters, dict) else {}))
    return int(ExitCode.OK)


def write_amplification_text(counters: Mapping[str, object]) -> str:
    """The drive's write amplification as status shows it: two decimals, or "no host
    writes yet" (the daemon says 0.0 then: nothing written, nothing amplified)."""
    host = counters.get("host_write_bytes")
    waf = counters.get("write_amplification")
    if host == 0:
        return "no host writes yet"
    if not isinstance(host, int) or not isinstance(waf, int | float):
        return "write amplification unknown"
    return f"write amplification {waf:.2f}"
