"""Target options of the workload suites (curves, replay): ``--target`` or ``--dir``."""

from __future__ import annotations

import argparse

from ssdlab.cli.common import add_destroy_data_option, add_store_option, size_arg


def add_workload_target_options(parser: argparse.ArgumentParser, file_name: str,
                                dir_size: str) -> None:
    """--target | --dir, --size, --destroy-data, --dry-run, --store, --fio."""
    t = parser.add_argument_group("target")
    t.add_argument(
        "--target", metavar="PATH",
        help="a block device (/dev/...) or a test file path; a new file is created and "
        "fully allocated at --size",
    )
    t.add_argument(
        "--dir", metavar="DIR",
        help=f"instead of --target: a directory (local volume or network share) to make a "
        f"--size test file in ({file_name} in a work directory of its own, removed with "
        "everything in it afterwards)",
    )
    t.add_argument("--size", type=size_arg, metavar="SIZE",
                   help="size of a new test file, e.g. 1GiB (binary K/M/G/T or KiB..; "
                   f"decimal KB/MB/GB/TB); with --dir the default is {dir_size}")
    add_destroy_data_option(t)
    t.add_argument("--dry-run", action="store_true",
                   help="print the plan and every fio job file; touch nothing")
    add_store_option(parser)
    t.add_argument("--fio", default="fio", metavar="PATH", help="fio binary (default: fio)")
