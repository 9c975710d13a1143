"""Options several suites share, as data (:class:`~ssdlab.plan.suite.Opt`): the target
options of each kind of target, and the common settings (profile, purge, engine, load,
rounds). A suite lists them with its own in its :class:`~ssdlab.plan.suite.SuiteSpec`;
the help texts are the suite's where they differ."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ssdlab.errors import UserError
from ssdlab.plan.config_schema import Kind
from ssdlab.plan.specs import IOENGINES, PURGE_METHODS
from ssdlab.plan.suite import Opt, opt
from ssdlab.store.location import StoreLocation
from ssdlab.units import parse_size

DESTROY_DATA_HELP = (
    "allow writing to a block device: everything on it is destroyed. A blank device needs "
    "only the flag; a device carrying a partition table, filesystem, RAID or LVM member, "
    "swap or other signature needs the confirmation naming it: --destroy-data=SERIAL (its "
    "serial number) or --destroy-data=/dev/PATH (a path to that very device). Mounted, "
    "system and busy devices are refused whatever it says (docs/safety.md)"
    "; an NBD export's confirmation is its URI: --destroy-data=nbd://... (docs/network.md)"
)
DRY_RUN_HELP = "print the plan and every fio job file; touch nothing"
SIZE_HELP = ("size of a new test file, e.g. 1GiB (binary K/M/G/T or KiB..; decimal "
             "KB/MB/GB/TB)")
TARGET_HELP = ("a block device (/dev/...) or a test file path; a new file is created and "
               "fully allocated at --size"
               "; or an NBD export, nbd://HOST[:PORT][/EXPORT] (docs/network.md)")
SET_HELP = ("; may be repeated (or use --targets-file): several targets run at once, each "
            "in a run of its own, one fio run per round for all (a set, docs/sets.md)")
TARGETS_FILE_HELP = ("a file naming targets, one per line (# starts a comment): with "
                     "--target or alone, several targets run at once as a set (docs/sets.md)")


def size_arg(text: str) -> int:
    """argparse type of a positive size (binary K/M/G/T or KiB..; decimal KB/MB/GB/TB)."""
    try:
        size = parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if size <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be positive")
    return size


def confirmation(text: str) -> str:
    """The value of --destroy-data=SERIAL|PATH: it must name something."""
    if not text.strip():
        raise argparse.ArgumentTypeError(
            "needs a serial number or a device path after '=', or no '=' at all"
        )
    return text


def labels_arg(text: str) -> tuple[tuple[str, str], ...]:
    """argparse type of ``--label controller=H730,cache=wb``: (key, value) pairs."""
    pairs = []
    for item in text.split(","):
        k, sep, v = item.partition("=")
        if not sep or not k.strip() or not v.strip():
            raise argparse.ArgumentTypeError(
                f"{text!r}: give KEY=VALUE pairs separated by commas, e.g. "
                "controller=H730,cache=wb")
        pairs.append((k.strip(), v.strip()))
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        raise argparse.ArgumentTypeError(f"{text!r} names a key twice")
    return tuple(pairs)


LABEL_HELP = ("labels stored with the run and shown with it, e.g. controller=H730,cache=wb "
              "(a hardware RAID volume's controller and cache); reports of several runs "
              "name and group them by their labels")


# -- the options of the run itself (command line or config, never the suite's args) -----


def store_opt() -> Opt:
    return opt("--store", group=None, config=Kind.TEXT, field=None, type=store_text,
               default=None, metavar="PATH|URL",
               help="results store: an SQLite file or postgresql://USER@HOST/DATABASE "
               "(default: $SSDLAB_STORE, else ~/.local/share/ssdlab/results.sqlite); keep "
               "a password in ~/.pgpass, $PGPASSWORD or a service file, not here (ssdlab "
               "shows and stores it as ***)")


def store_text(text: str) -> str:
    """``--store`` as given, once it names a store ssdlab can use (checked here, so a bad
    one is refused before anything runs)."""
    try:
        StoreLocation.parse(text)
    except UserError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def fio_opt(group: str) -> Opt:
    return opt("--fio", group=group, config=Kind.TEXT, field=None, default="fio",
               metavar="PATH", help="fio binary (default: fio)")


def dry_run_opt(group: str) -> Opt:
    return opt("--dry-run", group=group, field=None, action="store_true", help=DRY_RUN_HELP)


def destroy_data_opt(group: str | None, extra_help: str = "") -> Opt:
    """--destroy-data, --destroy-data=SERIAL or --destroy-data=/dev/PATH.

    The value is False (not given), True (the bare flag) or the confirmation text; the
    target checks (targets.safety) decide whether it is enough for the device.
    """
    return opt("--destroy-data", group=group, field=None, nargs="?", const=True,
               default=False, type=confirmation, metavar="SERIAL|PATH",
               help=DESTROY_DATA_HELP + extra_help)


def target_opt(group: str, help: str) -> Opt:
    """--target PATH, which may be repeated (a set of targets run at once)."""
    return opt("--target", group=group, field=None, action="append", metavar="PATH",
               help=help + SET_HELP)


def targets_file_opt(group: str) -> Opt:
    return opt("--targets-file", group=group, field=None, type=Path, metavar="FILE",
               help=TARGETS_FILE_HELP)


def device_target() -> tuple[Opt, ...]:
    """--target (required: once or more, or --targets-file), --targets-file, --size,
    --destroy-data, --dry-run, --store, --fio."""
    g = "target"
    return (
        target_opt(g, TARGET_HELP + " (required)"), targets_file_opt(g),
        opt("--size", group=g, config=Kind.SIZE, field=None, type=size_arg, metavar="SIZE",
            help=SIZE_HELP),
        destroy_data_opt(g), dry_run_opt(g), store_opt(), fio_opt(g),
    )


def preset_target(size_help: str) -> tuple[Opt, ...]:
    """The block-level presets: --target a device or test file, or --dir; --size."""
    g = "target (give --target or --dir)"
    return (
        target_opt(g, "a block device (/dev/...; the test file is its first --size bytes) "
                   "or an ssdlab test file path (created and fully allocated at --size)"),
        targets_file_opt(g),
        opt("--dir", group=g, config=Kind.TEXT, field=None, metavar="DIR",
            help="a directory (local volume or network share): the test file is "
            "made in a new subdirectory of it, removed afterwards; HOST:DIR,HOST:DIR,...: "
            "one on each host at once (docs/hosts.md)"),
        opt("--size", group=g, config=Kind.SIZE, field="size_bytes", type=size_arg,
            metavar="SIZE", help=size_help),
        destroy_data_opt(g), dry_run_opt(g), store_opt(), fio_opt(g),
    )


def workload_target(file_name: str, dir_size: str) -> tuple[Opt, ...]:
    """The workload suites (curves, replay): --target or --dir, --size."""
    g = "target"
    return (
        target_opt(g, TARGET_HELP), targets_file_opt(g),
        opt("--dir", group=g, config=Kind.TEXT, field=None, metavar="DIR",
            help=f"instead of --target: a directory (local volume or network share) to "
            f"make a --size test file in ({file_name} in a work directory of its own, "
            "removed with everything in it afterwards)"),
        opt("--size", group=g, config=Kind.SIZE, field=None, type=size_arg, metavar="SIZE",
            help="size of a new test file, e.g. 1GiB (binary K/M/G/T or KiB..; "
            f"decimal KB/MB/GB/TB); with --dir the default is {dir_size}"),
        destroy_data_opt(g), dry_run_opt(g), store_opt(), fio_opt(g),
    )


def dir_target(size_help: str, profiles: tuple[str, ...], *, sized: bool = True
               ) -> tuple[Opt, ...]:
    """The file-system presets: --dir (or --target), --size, --profile."""
    g = "directory"
    return (
        opt("--dir", "--target", group=g, config=Kind.TEXT, field=None, dest="dir",
            default=None, metavar="DIR",
            help="the directory to test in: a local volume or a network share. ssdlab "
            "works in a subdirectory of its own there and removes it afterwards; nothing "
            "else in DIR is touched"),
        opt("--size", group=g, config=Kind.SIZE, type=size_arg if sized else str,
            default=None, metavar="SIZE", help=size_help),
        profile(g, profiles, "default: the review's sizes; quick: tiny sizes for a try-out "
                "(marked QUICK everywhere)"),
        dry_run_opt(g), store_opt(), fio_opt(g),
    )


# -- common settings ---------------------------------------------------------------------


def whole(flag: str, group: str, help: str, *, metavar: str = "N", **kwargs: Any) -> Opt:
    """A whole-number setting (``type=int``); ``kwargs`` as for :func:`opt`."""
    return opt(flag, group=group, config=Kind.INT, type=int, metavar=metavar, help=help,
               **kwargs)


def number(flag: str, group: str, help: str, *, metavar: str, **kwargs: Any) -> Opt:
    """A number setting (``type=float``); ``kwargs`` as for :func:`opt`."""
    return opt(flag, group=group, config=Kind.FLOAT, type=float, metavar=metavar, help=help,
               **kwargs)


def profile(group: str, choices: tuple[str, ...] | list[str], help: str,
            default: str = "default") -> Opt:
    return opt("--profile", group=group, config=Kind.TEXT, default=default,
               choices=list(choices), help=help)


def purge(group: str, help: str, default: str = "auto",
          choices: tuple[str, ...] = PURGE_METHODS) -> Opt:
    return opt("--purge", group=group, config=Kind.TEXT, default=default, choices=choices,
               help=help)


#: what ``--purge auto`` does, the one text every suite's --purge help says
PURGE_AUTO_TEXT = ("auto: where the whole disk is tested, the strongest erase a SATA/SCSI disk "
                   "supports (SCSI sanitize; ATA secure erase on a libata port), else "
                   "blkdiscard; recreate for files")
PURGE_AUTO_HELP = f"{PURGE_AUTO_TEXT} (default)"


def ioengine(group: str, help: str = "fio ioengine (default libaio)") -> Opt:
    return opt("--ioengine", group=group, config=Kind.TEXT, default="libaio",
               choices=IOENGINES, help=help)


def load_arg(text: str) -> int | str:
    """argparse type of ``--threads``/``--qd`` where ``auto`` is allowed: a whole number,
    or ``auto`` (the load the target's most recent peak run found, docs/peak.md)."""
    if text.strip().lower() == "auto":
        return "auto"
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: give a whole number or auto") from None


def auto_help(what: str = "what") -> str:
    """The help of ``auto`` (said once): ``what`` the peak run found."""
    return (f"; auto: {what} the target's most recent peak run found (`ssdlab run peak` "
            "first, docs/peak.md)")


#: (threads, outstanding I/O per thread) per device class; threads are capped at the CPUs
DEFAULT_LOADS = {
    "nvme": (16, 8),  # the CD5/CM5-R review's 16 threads x QD 8
    "sata_ssd": (16, 8),  # the reviews' SATA/SAS setting
    "sas_ssd": (16, 8),
    "hdd": (1, 16),
    "virtual": (4, 16),
    "file": (4, 16),
}


def default_load(device_class: str, cpu_count: int) -> tuple[int, int]:
    """(threads, iodepth) for a device class, keeping the outstanding I/O when capping threads."""
    threads, depth = DEFAULT_LOADS.get(device_class, (4, 16))
    capped = max(1, min(threads, cpu_count))
    return capped, max(1, threads * depth // capped) if capped < threads else depth


def threads(group: str, help: str = "fio jobs (default per device class, capped at the "
            "CPU count)", *, auto: bool = False) -> Opt:
    if auto:
        return opt("--threads", group=group, config=Kind.LOAD, type=load_arg, metavar="N|auto",
                   help=help + auto_help())
    return opt("--threads", group=group, config=Kind.INT, type=int, metavar="N", help=help)


def qd(group: str, help: str, field: str | None = "iodepth", *, auto: bool = False,
       auto_what: str = "what", **kwargs: object) -> Opt:
    """``--qd``; with ``auto``, ``auto_what`` says what of the peak run it takes."""
    if auto:
        return opt("--qd", group=group, config=Kind.LOAD, field=field, type=load_arg,
                   metavar="N|auto", help=help + auto_help(auto_what), **kwargs)
    return opt("--qd", group=group, config=Kind.INT, field=field, type=int, metavar="N",
               help=help, **kwargs)


def active_range(group: str, what: str = "tested") -> Opt:
    return opt("--active-range", group=group, config=Kind.FLOAT, field="active_range_pct",
               type=float, default=100.0, metavar="PCT",
               help=f"percent of the capacity {what}, from its start (default 100)")


def no_precondition(group: str) -> Opt:
    return opt("--no-precondition", group=group, config=Kind.BOOL, dest="precondition",
               action="store_false",
               help="skip the 2x-capacity 128 KiB sequential preconditioning")
