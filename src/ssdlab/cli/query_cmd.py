"""``ssdlab runs``, ``show`` and ``export``: read the results store only."""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from pathlib import Path
from typing import Any

from ssdlab.cli.common import add_command, add_store_option, open_existing_store, store_path
from ssdlab.errors import ExitCode, UserError
from ssdlab.store.records import RunSummary


def register(sub: Any) -> None:
    runs = add_command(sub, "runs", runs_command, help="list the runs in the results store")
    add_store_option(runs)

    show = add_command(sub, "show", show_command, help="verdicts and result tables of a run",
                       description="""A run's verdicts and result tables; for a set (several
                       targets run at once, docs/sets.md), each run's target, status and
                       verdicts.""")
    show.add_argument("run", metavar="RUN", help="run id, unique prefix, or 'last'; or a set "
                      "id (set-...)")
    add_store_option(show)

    export = add_command(
        sub, "export", export_command,
        help="write everything about a run as JSON or CSV",
        description="""JSON: the whole run (docs/results-format.md). CSV: one row per test,
        round or result, cell and metric.""",
    )
    export.add_argument("run", metavar="RUN", help="run id, unique prefix, or 'last'")
    export.add_argument("--format", choices=["json", "csv"], default="json")
    export.add_argument(
        "-o", "--output", type=Path, metavar="FILE", help="write to FILE (default: standard output)"
    )
    add_store_option(export)


#: the TESTS column of ``ssdlab runs``; a longer list is cut with "..."
TESTS_WIDTH = 28


def _when(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%Y-%m-%d %H:%M")


def runs_command(args: argparse.Namespace, argv: list[str]) -> int:
    from ssdlab.report.registry import quick_summary
    from ssdlab.report.text import clip
    if not store_path(args).exists():
        print(f"no runs yet: there is no results store at {store_path(args)}")
        return int(ExitCode.OK)
    with open_existing_store(args) as store:
        runs = store.list_runs()
        sets = store.run_sets()
    if not runs:
        print(f"no runs yet in {store.path}")
        return int(ExitCode.OK)
    suite_w = max(6, *(len(r.suite) for r in runs))  # "published" is longer than "pts"
    profile_w = max(8, *(len(r.profile) + r.quick for r in runs))
    set_w = 26 if sets else 0  # the SET column only where runs ran in sets (docs/sets.md)
    print(
        f"{'RUN':22} {'STARTED (UTC)':16} {'SUITE':{suite_w}} {'PROFILE':{profile_w}} "
        f"{'STATUS':11} {'TESTS':{TESTS_WIDTH}} {'SET' if sets else '':{set_w}}"
        f"{' ' if sets else ''}"
        "TARGET"
    )
    for r in runs:
        in_set = f"{sets.get(r.run_id, '-'):{set_w}} " if sets else ""
        print(
            f"{r.run_id:22} {_when(r.created_at):16} {r.suite:{suite_w}} "
            f"{r.profile + ('*' if r.quick else ''):{profile_w}} {r.status:11} "
            f"{clip(','.join(r.tests), TESTS_WIDTH, ','):{TESTS_WIDTH}} {in_set}{_target(r)}"
        )
    quick = [r.suite for r in runs if r.quick]
    if quick:
        print(f"* quick profile: {quick_summary(quick)}")
    return int(ExitCode.OK)


def _target(run: RunSummary) -> str:
    """The target path; for a read-only reference run, the device and its source first."""
    if run.read_only:
        return f"{run.target_model} [{run.target_path}]"
    return run.target_path


def show_command(args: argparse.Namespace, argv: list[str]) -> int:
    from ssdlab.report.terminal import render_run
    with open_existing_store(args) as store:
        set_id = store.find_set(args.run)
        if set_id is not None:
            from ssdlab.cli.set_cmd import show_set
            sys.stdout.write(show_set(store, set_id))
            return int(ExitCode.OK)
        run = store.load(store.resolve(args.run))
    sys.stdout.write(render_run(run))
    return int(ExitCode.OK)


def export_command(args: argparse.Namespace, argv: list[str]) -> int:
    from ssdlab.store.export import write_export
    from ssdlab.suites import result_json
    with open_existing_store(args) as store:
        run = store.load(store.resolve(args.run))
    if args.output is None:
        write_export(run, args.format, sys.stdout, result_json)
        return int(ExitCode.OK)
    if not args.output.parent.is_dir():
        raise UserError(
            f"cannot write {args.output}: directory {args.output.parent} does not exist"
        )
    tmp = args.output.with_name(args.output.name + ".part")
    with open(tmp, "w", encoding="utf-8", newline="") as out:
        write_export(run, args.format, out, result_json)
    tmp.replace(args.output)
    print(f"wrote {args.output}", file=sys.stdout)
    return int(ExitCode.OK)
