"""Options shared by several commands."""

from __future__ import annotations

import argparse
from pathlib import Path

from ssdlab.store.db import Store, default_store_path


def add_store_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--store",
        type=Path,
        default=None,
        metavar="PATH",
        help="results database (default: $SSDLAB_STORE, else ~/.local/share/ssdlab/results.sqlite)",
    )


def open_store(args: argparse.Namespace) -> Store:
    return Store.open(args.store or default_store_path())
