"""``ssdlab store info|merge``: where the results store is, and gathering stores in one
(docs/store.md)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ssdlab.cli.common import add_command, add_store_option, store_path
from ssdlab.errors import ExitCode, UserError


def register(sub: Any) -> None:
    store = sub.add_parser(
        "store",
        help="the results store: where it is, and merging stores into one",
        description="""Results go to an SQLite file (the default) or a PostgreSQL database
        a lab shares (--store postgresql://USER@HOST/DATABASE, or $SSDLAB_STORE).
        `ssdlab store merge` gathers the stores of laptops and lab hosts in one.
        docs/store.md.""",
    )
    actions = store.add_subparsers(dest="action", metavar="ACTION", required=True)
    info = add_command(actions, "info", info_command,
                       help="the store's place, database, schema version and what it holds")
    add_store_option(info)
    merge = add_command(
        actions, "merge", merge_command,
        help="copy the runs of other stores into this one, without duplicates",
        description="""Copy every run of each SOURCE store (an SQLite file or a PostgreSQL
        URL) into the store of --store (default: $SSDLAB_STORE, else the default file), with
        everything recorded of it, one run per transaction. A run already there is not copied
        again; a copy that is newer in the source (it was still running, or was resumed)
        replaces the older one; a different run that drew the same id is reported as a
        conflict and not copied (exit 1). The sources are only read.""",
    )
    merge.add_argument("sources", nargs="+", metavar="SOURCE",
                       help="a store to copy from: SQLite file or postgresql:// URL")
    merge.add_argument("--dry-run", action="store_true",
                       help="say what would be copied; write nothing")
    add_store_option(merge)


def info_command(args: argparse.Namespace, argv: list[str]) -> int:
    from ssdlab.cli.common import open_existing_store
    with open_existing_store(args) as store:
        db = store._conn
        runs = store.list_runs()
        sets = len(store.run_sets())
        print(f"store:          {store.path}")
        print(f"database:       {db.name}")
        print(f"schema version: {db.user_version()}")
    running = sum(r.status == "running" for r in runs)
    print(f"runs:           {len(runs)} ({running} running)")
    print(f"runs in sets:   {sets}")
    return int(ExitCode.OK)


def merge_command(args: argparse.Namespace, argv: list[str]) -> int:
    from ssdlab.store.db import Store
    from ssdlab.store.location import StoreLocation
    from ssdlab.store.merge import merge
    dest_location = store_path(args)
    sources = [StoreLocation.parse(text) for text in args.sources]
    for source in sources:
        if not source.exists():
            raise UserError(f"no results store at {source}", ExitCode.NOT_FOUND)
        if _same(source, dest_location):
            raise UserError(f"{source} is the destination store itself; give another SOURCE")
    opened = [Store.open_readonly(source) for source in sources]  # every source, first
    try:
        if args.dry_run and not dest_location.exists():
            print(f"DRY RUN: {dest_location} does not exist yet; every run would be copied")
            for src in opened:
                print(f"{src.path}: {len(src.list_runs())} run(s) would be copied")
            return int(ExitCode.OK)
        conflicts: list[str] = []
        with Store.open(dest_location) as dest:
            print(f"{'DRY RUN: ' if args.dry_run else ''}merging into {dest.path}")
            for src in opened:
                outcome = merge(src, dest, dry_run=args.dry_run, progress=_progress())
                print(outcome.line(args.dry_run), flush=True)
                conflicts += [f"run {r} from {src.path}" for r in outcome.conflicts]
                conflicts += [f"set {s} from {src.path}" for s in outcome.set_conflicts]
    finally:
        for src in opened:
            src.close()
    if conflicts:
        raise UserError(f"{len(conflicts)} not copied: a different run or set with the same "
                        f"id is already in {dest_location} ({'; '.join(conflicts[:5])}"
                        f"{'; ...' if len(conflicts) > 5 else ''})", ExitCode.FAILURE)
    return int(ExitCode.OK)


def _same(a: Any, b: Any) -> bool:
    if a.path is not None and b.path is not None:
        try:
            return bool(a.path.resolve() == b.path.resolve())
        except OSError:
            return False
    return bool(a.url is not None and a.url == b.url)


def _progress() -> Any:
    """A counter on a terminal (every 50 runs), nothing otherwise."""
    if not sys.stderr.isatty():
        return None

    def show(done: int, total: int) -> None:
        if done % 50 == 0 or done == total:
            sys.stderr.write(f"\r{done}/{total} runs" + ("\n" if done == total else ""))
            sys.stderr.flush()
    return show
