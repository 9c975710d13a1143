"""``ssdlab db cleanup|status``: what killed database runs left (docs/db.md).
``ssdlab run db`` runs the benchmarks; every run cleans up what killed runs left first."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from ssdlab.cli.common import add_command
from ssdlab.errors import ExitCode

if TYPE_CHECKING:
    from ssdlab.run.dbworkspace import DbState


def register(sub: Any) -> None:
    db = sub.add_parser(
        "db",
        help="the private database servers of `ssdlab run db`: leftovers of killed runs",
        description="""`ssdlab run db` starts private MariaDB and PostgreSQL servers on the
        target and removes them when it ends, also after Ctrl-C. A run killed outright
        (SIGKILL, a crash) leaves them: the next `ssdlab run db` removes them first, or
        `ssdlab db cleanup` does now. docs/db.md.""",
    )
    actions = db.add_subparsers(dest="action", metavar="ACTION", required=True)
    cleanup = add_command(actions, "cleanup", cleanup_command,
                          help="stop the servers killed runs left, unmount and remove "
                          "their file systems' mounts and files")
    cleanup.add_argument("--dry-run", action="store_true",
                         help="say what would be cleaned up; touch nothing")
    add_command(actions, "status", status_command,
                help="the database runs running now and the leftovers of killed ones")


def _describe(state: DbState) -> str:
    servers = ", ".join(f"{s.kind} (process {s.pid})" for s in state.servers) or "no server"
    where = state.mount or state.workdir or state.base
    device = f" from {state.device}" if state.device else ""
    return f"{state.token}: {servers}; {where}{device}"


def cleanup_command(args: argparse.Namespace, argv: list[str]) -> int:
    from ssdlab.run import dbworkspace
    found = dbworkspace.leftovers()
    if not found:
        print("nothing to clean up: no database run left anything")
        return int(ExitCode.OK)
    if args.dry_run:
        for state in found:
            print(f"would clean up {_describe(state)}")
        return int(ExitCode.OK)
    count = dbworkspace.clean_leftovers(print)
    print(f"cleaned up after {count} killed database run(s)")
    return int(ExitCode.OK)


def status_command(args: argparse.Namespace, argv: list[str]) -> int:
    from ssdlab.run import dbworkspace
    states = dbworkspace.all_states()
    if not states:
        print("no database run is running or left anything")
    for state in states:
        what = "running" if state.owner_alive() else "LEFT BY A KILLED RUN"
        print(f"{what}: {_describe(state)}")
    return int(ExitCode.OK)
