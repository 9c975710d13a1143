"""The suite registry: every registered suite has every part the contract asks for."""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import sys
import types

import pytest

from ssdlab.cli.main import build_parser
from ssdlab.errors import UserError
from ssdlab.jsonrecord import Record
from ssdlab.plan.suite import TargetKind
from ssdlab.report.suite import SuitePages
from ssdlab.run.suite import Runner, SuiteLookup
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
    assert spec.report_title.endswith(" report"), "its report says what it is"


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
    args = build_parser().parse_args(["run", name, *_target(name)])
    for setting in args.func.settings:  # defaults, as the config merge sets them
        if not hasattr(args, setting.dest):
            setattr(args, setting.dest, setting.default)
    made = spec.args(vars(args))
    assert dataclasses.is_dataclass(made)


def _target(name: str) -> list[str]:
    return {TargetKind.DIR: ["--dir", "/tmp"],
            TargetKind.MEMBERS: ["--members", "/dev/a,/dev/b"]}.get(
        _suite(name).spec.target, ["--target", "/tmp/x"])


@pytest.mark.parametrize("name", RUNNABLE)
def test_a_command_line_of_its_options_makes_the_arguments(name: str) -> None:
    """``parse_argv`` (a suite run by another, the matrix's --suite-options) parses as
    ``ssdlab run NAME`` does."""
    spec = _suite(name).spec
    args = build_parser().parse_args(["run", name, *_target(name)])
    for setting in args.func.settings:
        if not hasattr(args, setting.dest):
            setattr(args, setting.dest, setting.default)
    assert spec.parse_argv(_target(name), "--suite-options") == spec.args(vars(args))
    values = spec.option_values(_target(name), "--suite-options")
    assert {k: v for k, v in vars(args).items() if k in values} == values


def test_the_option_values_are_typed_as_on_the_command_line() -> None:
    values = _suite("pts").spec.option_values(["--target", "/tmp/x", "--size", "1GiB"], "")
    assert values["target"] == ["/tmp/x"] and values["size"] == 2 ** 30


def test_a_command_line_argparse_refuses_is_one_user_error(
        capsys: pytest.CaptureFixture[str]) -> None:
    spec = _suite("slc-probe").spec
    for argv, message in (
            (["--target", "/tmp/x", "--bogus"], "unrecognized arguments: --bogus"),
            (["--target", "/tmp/x", "--qd", "x"], "argument --qd: invalid int value: 'x'"),
            (["--target", "/tmp/x", "--s", "1"], "ambiguous option: --s could match "),
            (["--target"], "argument --target: expected one argument")):
        with pytest.raises(UserError) as refused:
            spec.parse_argv(argv, "--suite-options")
        assert str(refused.value).startswith(f"--suite-options: {message}"), refused.value
    with pytest.raises(UserError, match=r"^--suite-options: the following arguments are "
                                        r"required: --members$"):
        _suite("matrix").spec.parse_argv([], "--suite-options")
    assert capsys.readouterr() == ("", ""), "argparse printed its usage"


def test_a_suite_of_suites_is_given_the_registrys_lookup(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A run module may export ``make_runner(lookup)`` instead of ``RUNNER``: the registry
    gives it its own lookup, so that no run module imports the registry."""
    given: list[SuiteLookup] = []
    made = _suite("pts").runner()

    def make_runner(lookup: SuiteLookup) -> Runner[object, object]:
        given.append(lookup)
        return made

    module = types.ModuleType("suite_of_suites")
    vars(module)["make_runner"] = make_runner
    monkeypatch.setitem(sys.modules, "suite_of_suites.run", module)
    assert Suite(_suite("matrix").spec, "suite_of_suites.run", "matrix_pages").runner() is made
    registry: SuiteLookup = find  # the registry's Suite is a ChildSuite
    assert given == [registry]
    child = given[0]("verify")
    assert child is not None and child.spec.name == child.name == "verify"
    assert isinstance(child.runner(), Runner)


def test_one_suite_is_the_demos() -> None:
    demo = [s for s in SUITES if s.spec.demo_args is not None]
    assert len(demo) == 1 and demo[0].spec.runnable
    assert isinstance(demo[0].spec.demo_args, demo[0].spec.args_type)  # type: ignore[arg-type]


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
