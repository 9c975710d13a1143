"""Options shared by several commands."""

from __future__ import annotations

import argparse
from pathlib import Path

from ssdlab.errors import RunNotFound
from ssdlab.store.db import Store, default_store_path


def add_store_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--store",
        type=Path,
        default=None,
        metavar="PATH",
        help="results database (default: $SSDLAB_STORE, else ~/.local/share/ssdlab/results.sqlite)",
    )


def store_path(args: argparse.Namespace) -> Path:
    return Path(args.store or default_store_path())


def open_store(args: argparse.Namespace) -> Store:
    """Open (creating if needed) the store a run writes to."""
    return Store.open(store_path(args))


def open_existing_store(args: argparse.Namespace) -> Store:
    """Open the store for reading; a missing store is an error, never created."""
    path = store_path(args)
    if not path.exists():
        raise RunNotFound(
            f"no results store at {path} yet; run `ssdlab run` or "
            "`ssdlab demo` first, or pass --store"
        )
    return Store.open(path)
