"""``ssdlab run SUITE`` for every registered suite: the parser from the suite's options,
then one command: check everything, dry-run or run, print how it ended."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from ssdlab.cli.common import run_suite
from ssdlab.cli.config_opts import add_config_option
from ssdlab.errors import ExitCode, UserError
from ssdlab.plan.optionsets import LABEL_HELP, labels_arg
from ssdlab.plan.suite import Opt
from ssdlab.store.location import StoreLocation
from ssdlab.store.records import RunData
from ssdlab.suites import Suite, all_suites

if TYPE_CHECKING:
    from ssdlab.run.prepare import TargetRequest


def add_options(parser: argparse.ArgumentParser, options: tuple[Opt, ...]) -> None:
    """The options in their order, each in its group (made where it first appears)."""
    groups: dict[str, argparse._ArgumentGroup] = {}
    for o in options:
        if o.group is None:
            parser.add_argument(*o.flags, **o.kwargs)
            continue
        if o.group not in groups:
            groups[o.group] = parser.add_argument_group(o.group)
        groups[o.group].add_argument(*o.flags, **o.kwargs)


def register(suites: Any, suite: Suite) -> None:
    """``ssdlab run NAME`` of ``suite``, with ``--config`` and ``--print-config``."""
    spec = suite.spec
    parser = suites.add_parser(spec.name, help=spec.help, description=spec.description)
    add_options(parser, spec.options)
    parser.add_argument("--label", type=labels_arg, action="append", default=[],
                        metavar="KEY=VALUE,...", help=LABEL_HELP)
    parser.set_defaults(func=SuiteCommand(suite))
    add_config_option(parser)


class SuiteCommand:
    """What ``ssdlab run NAME`` does, the same for every suite."""

    def __init__(self, suite: Suite) -> None:
        self.suite = suite

    def __call__(self, args: argparse.Namespace, argv: list[str]) -> int:
        from ssdlab.cli.set_cmd import run_set, targets_of
        from ssdlab.run.prepare import TargetRequest
        from ssdlab.targets.remote_spec import is_remote
        values = vars(args)
        targets = targets_of(values)
        on_hosts = bool(targets) and all(is_remote(t) for t in targets)
        if len(targets) > 1 and not self.suite.spec.many_targets and not on_hosts:
            raise UserError(f"ssdlab run {self.suite.name} takes one --target; run it once "
                            "per target")
        if len(targets) > 1 and not any(is_remote(t) for t in targets):
            return run_set(self.suite, targets, args, argv)  # a set: docs/sets.md
        size = values.get("size")
        # targets of other hosts go to the one run that drives them all
        request = TargetRequest(",".join(targets) if targets else None, values.get("dir"),
                                size if isinstance(size, int) else None,
                                values.get("destroy_data", False), values.get("fio") or "fio",
                                bool(values.get("dry_run")), values.get("store"))
        ran = execute(self.suite, request, self.suite.spec.args(values), args, argv)
        if ran is None:
            return int(ExitCode.OK)
        run, stored_in = ran
        outcome = self.suite.pages().outcome(run, stored_in)
        for line in outcome.lines:
            print(line)
        if outcome.failure is not None:
            raise UserError(outcome.failure, ExitCode.FAILURE)
        return int(ExitCode.OK)


def execute(suite: Suite, request: TargetRequest, suite_args: object, args: argparse.Namespace,
            argv: list[str]) -> tuple[RunData, StoreLocation] | None:
    """Prepare (every check) and run ``suite`` into the store of ``args``: the stored run
    and the store's path; with ``--dry-run``, print the plan instead (None)."""
    from ssdlab.run.remote import check_suite
    check_suite(suite.spec, request.target, [s.name for s in all_suites() if s.spec.remote],
                request.dir)
    runner = suite.runner()
    prepared = runner.prepare(request, suite_args)
    if getattr(args, "dry_run", False):
        sys.stdout.write(runner.dry_run(prepared))
        return None
    progress = runner.progress(prepared)
    progress.planned = runner.planned(prepared) if runner.planned is not None else None
    return run_suite(args, argv, progress,
                     lambda store, fio, progress: runner.start(prepared, store, fio, progress),
                     read_only=runner.read_only(prepared))
