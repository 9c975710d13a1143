"""Options shared by several commands."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from ssdlab.errors import RunNotFound
from ssdlab.plan.units import parse_size
from ssdlab.store.records import RunData

if TYPE_CHECKING:
    from ssdlab.engine.runner import FioExecutor
    from ssdlab.run.progress import Progress
    from ssdlab.store.db import Store


def add_store_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--store",
        type=Path,
        default=None,
        metavar="PATH",
        help="results database (default: $SSDLAB_STORE, else ~/.local/share/ssdlab/results.sqlite)",
    )


def store_path(args: argparse.Namespace) -> Path:
    from ssdlab.store.db import default_store_path
    return Path(args.store or default_store_path())


def open_store(args: argparse.Namespace) -> Store:
    """Open (creating if needed) the store a run writes to."""
    from ssdlab.store.db import Store
    return Store.open(store_path(args))


class SuiteRun(Protocol):
    def execute(self, argv: list[str]) -> str: ...


def run_suite(args: argparse.Namespace, argv: list[str], progress: Progress,
              make: Callable[[Store, FioExecutor, Progress], SuiteRun],
              fio: str | None = None) -> tuple[RunData, Path]:
    """Run a suite into the store of ``args`` (progress closed however it ends); the stored
    run and the store's path."""
    from ssdlab.engine.runner import FioExecutor
    with open_store(args) as store:
        try:
            run_id = make(store, FioExecutor(fio or args.fio), progress).execute(argv)
        finally:
            progress.close()
        return store.load(run_id), store.path


def open_existing_store(args: argparse.Namespace) -> Store:
    """Open the store for reading; a missing store is an error, never created."""
    from ssdlab.store.db import Store
    path = store_path(args)
    if not path.exists():
        raise RunNotFound(
            f"no results store at {path} yet; run `ssdlab run` or "
            "`ssdlab demo` first, or pass --store"
        )
    return Store.open(path)


def size_arg(text: str) -> int:
    """argparse type of a positive size (binary K/M/G/T or KiB..; decimal KB/MB/GB/TB)."""
    try:
        size = parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if size <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be positive")
    return size


def _confirmation(text: str) -> str:
    """The value of --destroy-data=SERIAL|PATH: it must name something."""
    if not text.strip():
        raise argparse.ArgumentTypeError(
            "needs a serial number or a device path after '=', or no '=' at all"
        )
    return text


DESTROY_DATA_HELP = (
    "allow writing to a block device: everything on it is destroyed. A blank device needs "
    "only the flag; a device carrying a partition table, filesystem, RAID or LVM member, "
    "swap or other signature needs the confirmation naming it: --destroy-data=SERIAL (its "
    "serial number) or --destroy-data=/dev/PATH (a path to that very device). Mounted, "
    "system and busy devices are refused whatever it says (docs/safety.md)"
)


def add_destroy_data_option(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup, extra_help: str = ""
) -> None:
    """--destroy-data, --destroy-data=SERIAL or --destroy-data=/dev/PATH.

    The value is False (not given), True (the bare flag) or the confirmation text; the
    target checks (targets.safety) decide whether it is enough for the device.
    """
    parser.add_argument(
        "--destroy-data",
        nargs="?",
        const=True,
        default=False,
        type=_confirmation,
        metavar="SERIAL|PATH",
        help=DESTROY_DATA_HELP + extra_help,
    )


def add_target_options(parser: argparse.ArgumentParser) -> None:
    """--target, --size, --destroy-data, --dry-run, --store, --fio: every suite has them."""
    t = parser.add_argument_group("target")
    t.add_argument(
        "--target",
        required=True,
        metavar="PATH",
        help="a block device (/dev/...) or a test file path; a new file is created "
        "and fully allocated at --size",
    )
    t.add_argument(
        "--size",
        type=size_arg,
        metavar="SIZE",
        help="size of a new test file, e.g. 1GiB (binary K/M/G/T or KiB..; decimal KB/MB/GB/TB)",
    )
    add_destroy_data_option(t)
    t.add_argument(
        "--dry-run",
        action="store_true",
        help="print the plan and every fio job file; touch nothing",
    )
    add_store_option(parser)
    t.add_argument("--fio", default="fio", metavar="PATH", help="fio binary (default: fio)")
