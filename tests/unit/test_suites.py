"""The suite registry: every registered suite has every part the contract asks for."""

from __future__ import annotations

import argparse
import dataclasses
import inspect

import pytest

from ssdlab.cli.main import build_parser
from ssdlab.jsonrecord import Record
from ssdlab.plan.suite import TargetKind
from ssdlab.report.suite import SuitePages
from ssdlab.run.suite import Runner
from ssdlab.suites import SUITES, Suite, find, runnable

NAMES = [s.name for s in SUITES]
RUNNABLE = [s.name for s in runnable()]


def test_names_are_unique() -> None:
    assert len(NAMES) == len(set(NAMES))


@pytest.mark.parametrize("name", NAMES)
def test_the_spec_is_complete(name: str) -> None:
    spec = _suite(name).spec
    assert spec.help and spec.description and spec.results
    assert all(isinstance(t, type) and issubclass(t, Record) for t in spec.results.values())
    for record in spec.results.values():
        record()  # a running test's empty result reads as its record: every field defaults
    keys = [o.key for o in spec.options]
    assert len(keys) == len(set(keys)), "an option is listed twice"


@pytest.mark.parametrize("name", RUNNABLE)
def test_the_options_fill_the_arguments(name: str) -> None:
    """Every field of the suite's arguments without a default is filled by an option, and
    the defaults of the parsed command line make its arguments."""
    spec = _suite(name).spec
    filled = {o.args_field for o in spec.options} - {None}
    params = inspect.signature(spec.args_type).parameters
    assert filled <= set(params), f"options fill fields {filled - set(params)} it lacks"
    required = {n for n, p in params.items() if p.default is inspect.Parameter.empty}
    assert required <= filled, f"fields {required - filled} are filled by no option"
    target = {TargetKind.DIR: ["--dir", "/tmp"],
              TargetKind.MEMBERS: ["--members", "/dev/a,/dev/b"]}.get(
        spec.target, ["--target", "/tmp/x"])
    args = build_parser().parse_args(["run", name, *target])
    for setting in args.func.settings:  # defaults, as the config merge sets them
        if not hasattr(args, setting.dest):
            setattr(args, setting.dest, setting.default)
    made = spec.args(vars(args))
    assert dataclasses.is_dataclass(made)


@pytest.mark.parametrize("name", RUNNABLE)
def test_the_runner_is_complete(name: str) -> None:
    suite = _suite(name)
    runner = suite.runner()
    assert isinstance(runner, Runner)
    for op in (runner.prepare, runner.describe, runner.progress, runner.start,
               runner.read_only):
        assert callable(op)
    assert (runner.prepare_resume is not None) == suite.spec.resumable
    assert runner.planned is not None, "its dry run must say how long the plan takes"


@pytest.mark.parametrize("name", NAMES)
def test_the_pages_cover_every_test(name: str) -> None:
    suite = _suite(name)
    pages = suite.pages()
    assert isinstance(pages, SuitePages)
    assert callable(pages.outcome)
    for test in suite.spec.results:
        assert pages.pages_of(test) is not None, f"no report pages for {test}"
        assert pages.show_of(test) is not None, f"no show lines for {test}"


def test_every_runnable_suite_is_on_the_command_line() -> None:
    run = _sub_commands(build_parser(), "command")["run"]
    assert set(RUNNABLE) <= set(_sub_commands(run, "suite"))


def _sub_commands(parser: argparse.ArgumentParser, dest: str) -> dict[str, argparse.ArgumentParser]:
    """The parsers of the sub-commands that ``parser`` stores in ``dest``."""
    return next(
        a.choices
        for a in parser._actions
        if isinstance(a, argparse._SubParsersAction) and a.dest == dest
    )


def _suite(name: str) -> Suite:
    suite = find(name)
    assert suite is not None
    return suite
