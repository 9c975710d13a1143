"""The contract checks of one registered suite, without fio: what tests/unit/test_suites.py
checks for every suite of the registry, and tests/unit/test_example_suite.py for the
example suite of docs/adding-a-suite.md registered by the document's line."""

from __future__ import annotations

import argparse
import dataclasses
import inspect
from typing import Any

from ssdlab.cli.main import build_parser
from ssdlab.jsonrecord import Record
from ssdlab.plan.suite import TargetKind
from ssdlab.report.suite import SuitePages
from ssdlab.run.suite import Runner
from ssdlab.suites import Suite


def check_spec(suite: Suite) -> None:
    """The spec is complete, and every result record has defaults."""
    spec = suite.spec
    assert spec.help and spec.description and spec.results
    assert all(isinstance(t, type) and issubclass(t, Record) for t in spec.results.values())
    for record in spec.results.values():
        record()  # a running test's empty result reads as its record: every field defaults
    keys = [o.key for o in spec.options]
    assert len(keys) == len(set(keys)), "an option is listed twice"
    assert spec.report_title.endswith(" report"), "its report says what it is"


def check_options_fill_the_arguments(suite: Suite) -> None:
    """Every field of the suite's arguments without a default is filled by an option, and
    the defaults of the parsed command line make its arguments: the same arguments as the
    dataclass's own defaults (each default is written twice, in the option and in the
    field, which is what a run built in code or resumed from an older plan gets)."""
    spec = suite.spec
    filled = {o.args_field for o in spec.options} - {None}
    params = inspect.signature(spec.args_type).parameters
    assert filled <= set(params), f"options fill fields {filled - set(params)} it lacks"
    required = {n for n, p in params.items() if p.default is inspect.Parameter.empty}
    assert required <= filled, f"fields {required - filled} are filled by no option"
    made = spec.args(_parsed(suite))
    assert dataclasses.is_dataclass(made)
    own = spec.args_type(**{n: getattr(made, n) for n in required})
    differ = {f.name: (getattr(made, f.name), getattr(own, f.name))
              for f in dataclasses.fields(made) if getattr(made, f.name) != getattr(own, f.name)}
    assert not differ, f"option default != field default (option, field): {differ}"


def check_a_command_line_makes_the_arguments(suite: Suite) -> None:
    """``parse_argv`` (a suite run by another, the matrix's --suite-options) parses as
    ``ssdlab run NAME`` does."""
    spec, parsed = suite.spec, _parsed(suite)
    assert spec.parse_argv(target_argv(suite), "--suite-options") == spec.args(parsed)
    values = spec.option_values(target_argv(suite), "--suite-options")
    assert {k: v for k, v in parsed.items() if k in values} == values


def target_argv(suite: Suite) -> list[str]:
    """The target options of a command line of ``suite`` (a target of its kind)."""
    return {TargetKind.DIR: ["--dir", "/tmp"],
            TargetKind.MEMBERS: ["--members", "/dev/a,/dev/b"]}.get(
        suite.spec.target, ["--target", "/tmp/x"])


def _parsed(suite: Suite) -> dict[str, Any]:
    """``ssdlab run NAME`` with only its target options, parsed: the option values with
    their defaults, as the config merge sets them."""
    args = build_parser().parse_args(["run", suite.name, *target_argv(suite)])
    for setting in args.func.settings:
        if not hasattr(args, setting.dest):
            setattr(args, setting.dest, setting.default)
    return vars(args)


def check_runner(suite: Suite) -> None:
    runner = suite.runner()
    assert isinstance(runner, Runner)
    for op in (runner.prepare, runner.describe, runner.progress, runner.start,
               runner.read_only):
        assert callable(op)
    assert (runner.prepare_resume is not None) == suite.spec.resumable
    assert runner.planned is not None, "its dry run must say how long the plan takes"


def check_pages(suite: Suite) -> None:
    """Report pages and show lines for every test."""
    pages = suite.pages()
    assert isinstance(pages, SuitePages)
    assert callable(pages.outcome)
    for test in suite.spec.results:
        assert pages.pages_of(test) is not None, f"no report pages for {test}"
        assert pages.show_of(test) is not None, f"no show lines for {test}"


def run_commands() -> set[str]:
    """The suites ``ssdlab run`` has a command for."""
    run = sub_commands(build_parser(), "command")["run"]
    return set(sub_commands(run, "suite"))


def sub_commands(parser: argparse.ArgumentParser, dest: str) -> dict[str, argparse.ArgumentParser]:
    """The parsers of the sub-commands that ``parser`` stores in ``dest``."""
    return next(
        a.choices
        for a in parser._actions
        if isinstance(a, argparse._SubParsersAction) and a.dest == dest
    )
