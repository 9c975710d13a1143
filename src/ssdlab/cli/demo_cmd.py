"""``ssdlab demo``: the quick PTS suite on an embedded default target.

The default target is the emulated SSD (1 GiB, enterprise-tlc unless ``--drive`` says
otherwise, a loop device over its FUSE disk file), started for the demo and stopped
after it. Where the emulator cannot run (not built, no FUSE), the demo says so and uses a
1 GiB test file in RAM (/dev/shm) instead. Either way it never writes to the machine's own disk.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from ssdlab.cli.common import add_command, add_store_option, open_store
from ssdlab.cli.suite_cmd import execute
from ssdlab.errors import EnvironmentProblem, ExitCode, UserError, command
from ssdlab.suites import Suite, all_suites
from ssdlab.targets import emulator
from ssdlab.targets.filetarget import remove_file_target
from ssdlab.units import parse_size

DEFAULT_DIR = "/dev/shm"
DEFAULT_NAME = "ssdlab-demo.img"
DEMO_EMULATOR = "demo"


def _demo_suite() -> Suite:
    """The one registered suite with ``demo_args`` (the quick PTS suite)."""
    found = [s for s in all_suites() if s.spec.demo_args is not None]
    assert len(found) == 1, f"suites with demo_args: {[s.name for s in found]}"
    return found[0]


#: what the demo runs: its suite and the arguments (tests shorten them further)
DEMO_SUITE = _demo_suite()
DEMO_ARGS: object = DEMO_SUITE.spec.demo_args


def register(sub: Any) -> None:
    demo = add_command(
        sub, "demo", demo_command,
        help="run the quick PTS suite on a built-in target and show the results",
        description="""Starts an emulated SSD (1 GiB, enterprise-tlc, through a loop
        device), runs the quick PTS suite on it, prints the result tables, exports JSON and
        stops the emulator. Where the emulator cannot run (not built, no FUSE) it uses a 1
        GiB test file in RAM (/dev/shm) instead and removes it afterwards.""",
    )
    demo.add_argument("--size", default="1GiB", help="size of the demo target (default 1GiB)")
    demo.add_argument(
        "--drive",
        choices=emulator.PROFILES,
        default="enterprise-tlc",
        help="the emulated drive's profile (default: enterprise-tlc; see "
        "`ssdlab emulator start --help`)",
    )
    demo.add_argument(
        "--output-dir",
        type=Path,
        default=Path("demo-results"),
        help="where the JSON export goes (default ./demo-results)",
    )
    demo.add_argument(
        "--keep-target", action="store_true", help="keep the demo test file (file fallback only)"
    )
    add_store_option(demo)
    demo.set_defaults(dry_run=False, fio="fio")


def _run(target: str, size: int | None, destroy_data: bool, args: argparse.Namespace,
         argv: list[str]) -> str:
    """The quick PTS suite on ``target``: the run id. ``argv``: the command line as typed
    (``demo ...``), which the run records."""
    from ssdlab.run.prepare import TargetRequest
    ran = execute(DEMO_SUITE, TargetRequest(target, None, size, destroy_data, args.fio),
                  DEMO_ARGS, args, argv)
    assert ran is not None  # the demo never dry-runs
    return ran[0].run_id


def _run_on_emulator(size: int, args: argparse.Namespace, argv: list[str]) -> str:
    emu = emulator.start(DEMO_EMULATOR, args.drive, size, loop=True)
    print(f"demo target: emulated SSD {emu.name} ({args.drive}) at {emu.target}")
    try:
        return _run(emu.target, None, True, args, argv)
    finally:
        emulator.stop(DEMO_EMULATOR)


def _run_on_file(size: int, args: argparse.Namespace, argv: list[str]) -> str:
    target = os.path.join(DEFAULT_DIR, DEFAULT_NAME)
    try:
        return _run(target, size, False, args, argv)
    finally:
        if not args.keep_target and os.path.exists(target):
            remove_file_target(target)


def demo_command(args: argparse.Namespace, argv: list[str]) -> int:
    from ssdlab.report.terminal import render_run
    from ssdlab.store.export import write_export
    from ssdlab.suites import result_json
    try:
        size = parse_size(args.size)
    except ValueError as exc:
        raise UserError(f"--size: {exc}") from None
    if not os.path.isdir(DEFAULT_DIR):
        raise UserError(f"{DEFAULT_DIR} is missing; the demo keeps its target in RAM there")
    try:
        run_id = _run_on_emulator(size, args, argv)
    except EnvironmentProblem as exc:
        print(
            f"note: the emulated SSD is not available ({exc.message}); "
            f"using a test file in {DEFAULT_DIR} instead"
        )
        run_id = _run_on_file(size, args, argv)
    with open_store(args) as store:
        run = store.load(run_id)
    print(render_run(run))
    args.output_dir.mkdir(parents=True, exist_ok=True)
    out = args.output_dir / f"{run_id}.json"
    with open(out, "w", encoding="utf-8") as fh:
        write_export(run, "json", fh, result_json)
    print(f"results: store {store.path}, run {run_id}; JSON export {out.resolve()}")
    print("\n".join(next_steps(run_id)))
    return int(ExitCode.OK)


def next_steps(run_id: str) -> list[str]:
    """What to type next, one command a line (``A | B`` would read as a shell pipe)."""
    return ["next:", f"  {command()} show {run_id}",
            f"  {command()} export {run_id} --format csv"]
