"""``ssdlab run aja|diskfill|smallfiles|copy``: the file-system presets, in a directory
(a local volume or a network share) the user names with ``--dir``.

Each works in a work directory of its own inside ``--dir``, removed afterwards (also on
errors and Ctrl-C). docs/presets-files.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Callable
from typing import Any

from ssdlab import presets
from ssdlab.cli.common import add_store_option, run_suite, size_arg
from ssdlab.cli.config_opts import add_config_option
from ssdlab.errors import ExitCode, UserError
from ssdlab.plan.file_presets import (
    PROFILES,
    AjaArgs,
    CopyArgs,
    DiskFillArgs,
    FilePlan,
    SmallFilesArgs,
    aja_plan,
    copy_plan,
    diskfill_plan,
    smallfiles_plan,
)

SUITES = ("aja", "diskfill", "smallfiles", "copy")
DOC = " docs/presets-files.md."


def _common(p: argparse.ArgumentParser, size_help: str, sized: bool = True) -> None:
    t = p.add_argument_group("directory")
    t.add_argument("--dir", "--target", dest="dir", default=None, metavar="DIR",
                   help="the directory to test in: a local volume or a network share. "
                   "ssdlab works in a subdirectory of its own there and removes it "
                   "afterwards; nothing else in DIR is touched")
    t.add_argument("--size", type=size_arg if sized else str, default=None, metavar="SIZE",
                   help=size_help)
    t.add_argument("--profile", default="default", choices=PROFILES,
                   help="default: the review's sizes; quick: tiny sizes for a try-out "
                   "(marked QUICK everywhere)")
    t.add_argument("--dry-run", action="store_true",
                   help="print the plan and every fio job file; touch nothing")
    add_store_option(p)
    t.add_argument("--fio", default="fio", metavar="PATH", help="fio binary (default: fio)")


def register(suites: Any) -> None:
    aja = presets.load("aja")
    p = suites.add_parser(
        "aja", help="AJA System Test-like video: frame-sized writes then reads per file size",
        description="Writes, then reads, one video file per file size, one frame per I/O "
        "with O_DIRECT (as AJA System Test by default); MB/s and frames per second." + DOC)
    _common(p, "file size(s), a comma list (default: the review's 256MiB,512MiB,1GiB,4GiB,"
            "16GiB,64GiB; quick: 16MiB,32MiB)", sized=False)
    g = p.add_argument_group("aja")
    g.add_argument("--resolution", default=None, metavar="WxH",
                   help="frame size, WIDTHxHEIGHT or one of "
                   f"{', '.join(aja['resolutions'])} (default 5120x2700, the review's 5K RED; "
                   "quick: 1920x1080)")
    g.add_argument("--pixel-format", default=None, choices=list(aja["pixel_formats"]),
                   help="pixel format (default yuv10: 10-bit YUV 4:2:2)")
    p.set_defaults(func=_command(aja_plan, lambda a: AjaArgs(
        a.profile, a.size, a.resolution, a.pixel_format)))
    add_config_option(p)

    p = suites.add_parser(
        "diskfill", help="DiskFill-like: write a 1 GiB file ten times, then read each back",
        description="Each pass writes a new file (buffered, fsync inside the timed job), "
        "then every file is read back after dropping the caches; MB/s per pass." + DOC)
    _common(p, "each pass's file size (default 1GiB; quick: 16MiB)")
    g = p.add_argument_group("diskfill")
    g.add_argument("--passes", type=int, default=None, metavar="N",
                   help="files written and read (default 10; quick: 3)")
    g.add_argument("--block-size", default=None, metavar="SIZE",
                   help="transfer size, bytes unless a unit is given (default 1MiB)")
    p.set_defaults(func=_command(diskfill_plan, lambda a: DiskFillArgs(
        a.profile, a.size, a.passes, a.block_size)))
    add_config_option(p)

    p = suites.add_parser(
        "smallfiles", help="dd-like small files: 1 GiB as 256 KiB files, wait, read back",
        description="Writes the files one I/O each (each fsynced on close), waits, drops "
        "the caches and reads them all back; MB/s per phase." + DOC)
    _common(p, "data in total (default 1GiB; quick: 16MiB)")
    g = p.add_argument_group("smallfiles")
    g.add_argument("--file-size", default=None, metavar="SIZE",
                   help="size of each file, bytes unless a unit is given (default 256KiB)")
    g.add_argument("--wait-seconds", type=float, default=None, metavar="S",
                   help="wait between writing and reading (default 300; quick: 1)")
    p.set_defaults(func=_command(smallfiles_plan, lambda a: SmallFilesArgs(
        a.profile, a.size, a.file_size, a.wait_seconds)))
    add_config_option(p)

    copy = presets.load("copy")
    p = suites.add_parser(
        "copy", help="copy-like file sets: 100x1GiB, 10x10GiB, 1x100GiB, 102400x1MiB",
        description="Each set is created by fio, then copied within the directory with cp "
        "(plus sync) several times, the caches dropped before each copy; time and MB/s of "
        "each copy and their averages." + DOC)
    _common(p, "each set's size in total (default 100GiB; quick: 16MiB): the large-file "
            "sets keep their file counts, the 1 MiB set its file size")
    g = p.add_argument_group("copy")
    g.add_argument("--sets", default=None, metavar="LIST",
                   help=f"sets to run (default all: {','.join(s['name'] for s in copy['sets'])})")
    g.add_argument("--repetitions", type=int, default=None, metavar="N",
                   help="copies of each set (default 3; quick: 2)")
    p.set_defaults(func=_command(copy_plan, lambda a: CopyArgs(
        a.profile, a.size, a.sets, a.repetitions)))
    add_config_option(p)


def _command(plan_of: Callable[[Any], FilePlan], args_of: Callable[[argparse.Namespace], Any]
             ) -> Callable[[argparse.Namespace, list[str]], int]:
    from ssdlab.run.file_presets_run import describe, prepare_files
    def command(args: argparse.Namespace, argv: list[str]) -> int:
        preset_args = args_of(args)
        if not args.dir:
            raise UserError("--dir DIR is required: the directory to test in")
        plan = plan_of(preset_args)
        prepared = prepare_files(args.dir, plan, args.fio, dataclasses.asdict(preset_args))
        if args.dry_run:
            sys.stdout.write(describe(prepared))
            return int(ExitCode.OK)
        return run_files(prepared, args, argv)
    return command


def run_files(prepared: Any, args: argparse.Namespace, argv: list[str]) -> int:
    from ssdlab.run.file_presets_run import FilePresetRun
    from ssdlab.run.progress import Progress
    plan = prepared.plan
    progress = Progress(quick=plan.quick)
    run = run_suite(args, argv, progress,
                     lambda store, fio, pr: FilePresetRun(prepared, store, fio, pr))[0]
    run_id = run.run_id
    test = run.test(plan.preset)
    result = test.result if isinstance(test.result, dict) else {}
    print(f"run {run_id} {run.status_text}; {result.get('message') or test.status}")
    if test.status == "failed":
        raise UserError(f"{plan.preset} failed: {result.get('error')} (see `ssdlab show "
                        f"{run_id}`)", ExitCode.FAILURE)
    return int(ExitCode.OK)
