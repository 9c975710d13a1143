"""Options shared by several commands."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ssdlab.errors import RunNotFound, command
from ssdlab.plan.optionsets import destroy_data_opt, store_opt
from ssdlab.plan.suite import Opt
from ssdlab.store.location import StoreLocation
from ssdlab.store.records import RunData

if TYPE_CHECKING:
    from ssdlab.engine.runner import FioExecutor
    from ssdlab.run.progress import Progress
    from ssdlab.run.suite import SuiteRun
    from ssdlab.store.db import Store


#: what a command does with its parsed arguments and the command line: the exit code
Command = Callable[[argparse.Namespace, list[str]], int]


def add_command(sub: Any, name: str, func: Command, help: str,
                description: str | None = None) -> argparse.ArgumentParser:
    """The command ``NAME`` among the subcommands ``sub``: ``help`` is its line in their
    list, ``description`` starts its own --help (a paragraph: argparse reflows it), and it
    runs ``func``. The caller adds its options."""
    parser: argparse.ArgumentParser = sub.add_parser(name, help=help, description=description)
    parser.set_defaults(func=func)
    return parser


def add_store_option(parser: argparse.ArgumentParser) -> None:
    add_opt(parser, store_opt())


def add_opt(parser: argparse.ArgumentParser | argparse._ArgumentGroup, o: Opt) -> None:
    parser.add_argument(*o.flags, **o.kwargs)


def store_path(args: argparse.Namespace) -> StoreLocation:
    """The store ``--store`` names (an SQLite path or a PostgreSQL URL), else the default
    (``$SSDLAB_STORE``, else the XDG data file); UserError when it names none we can use."""
    from ssdlab.store.location import StoreLocation, default_store_location
    store = getattr(args, "store", None)
    return StoreLocation.parse(store) if store else default_store_location()


def open_store(args: argparse.Namespace) -> Store:
    """Open (creating if needed) the store a run writes to."""
    from ssdlab.store.db import Store
    return Store.open(store_path(args))


def run_suite(args: argparse.Namespace, argv: list[str], progress: Progress,
              make: Callable[[Store, FioExecutor, Progress], SuiteRun],
              fio: str | None = None, *, read_only: bool = False) -> tuple[RunData, StoreLocation]:
    """Run a suite into the store of ``args`` (progress closed however it ends); the stored
    run and the store's path."""
    from ssdlab.engine.runner import FioExecutor
    with open_store(args) as store:
        store.run_labels = run_labels(args)
        try:
            executor = FioExecutor(fio or getattr(args, "fio", None) or "fio",
                                   read_only=read_only)
            run_id = make(store, executor, progress).execute(argv)
        finally:
            progress.close()
        return store.load(run_id), store.path


def run_labels(args: argparse.Namespace) -> dict[str, str]:
    """``--label`` as given (it may be given several times; a key given twice is an
    error)."""
    labels: dict[str, str] = {}
    for pairs in getattr(args, "label", None) or []:
        for key, value in pairs:
            if key in labels:
                from ssdlab.errors import UserError
                raise UserError(f"--label names {key} twice")
            labels[key] = value
    return labels


def open_existing_store(args: argparse.Namespace) -> Store:
    """Open the store for reading; a missing store is an error, never created."""
    from ssdlab.store.db import Store
    path = store_path(args)
    if not path.exists():
        raise RunNotFound(
            f"no results store at {path} yet; run `{command()} run` or "
            f"`{command()} demo` first, or pass --store"
        )
    return Store.open(path)



def add_destroy_data_option(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup, extra_help: str = ""
) -> None:
    """--destroy-data, --destroy-data=SERIAL or --destroy-data=/dev/PATH."""
    add_opt(parser, destroy_data_opt(None, extra_help))
