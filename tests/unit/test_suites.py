"""The suite registry: every registered suite has every part the contract asks for (the
checks of one suite are tests/support/suite_contract.py's; test_example_suite.py runs them
for the example suite of docs/adding-a-suite.md)."""

from __future__ import annotations

import dataclasses
import sys
import types
from typing import Any

import pytest

from ssdlab.errors import UserError
from ssdlab.plan.slc_probe import SlcProbeArgs
from ssdlab.run.suite import PreparedSuite, Runner, SuiteLookup
from ssdlab.suites import SUITES, Suite, find, runnable
from tests.support.suite_contract import (
    check_a_command_line_makes_the_arguments,
    check_options_fill_the_arguments,
    check_pages,
    check_runner,
    check_spec,
    run_commands,
)

NAMES = [s.name for s in SUITES]
RUNNABLE = [s.name for s in runnable()]


def test_names_are_unique() -> None:
    assert len(NAMES) == len(set(NAMES))


@pytest.mark.parametrize("name", NAMES)
def test_the_spec_is_complete(name: str) -> None:
    check_spec(_suite(name))


@pytest.mark.parametrize("name", RUNNABLE)
def test_the_options_fill_the_arguments(name: str) -> None:
    check_options_fill_the_arguments(_suite(name))


def test_a_field_default_the_option_does_not_have_is_caught() -> None:
    suite = _suite("slc-probe")

    @dataclasses.dataclass(frozen=True)
    class Drifted(SlcProbeArgs):
        purge: str = "none"  # the option's default is "auto"

    drifted = Suite(dataclasses.replace(suite.spec, args_type=Drifted), suite.run_module,
                    suite.pages_module)
    with pytest.raises(AssertionError, match=r"\{'purge': \('auto', 'none'\)\}"):
        check_options_fill_the_arguments(drifted)


@pytest.mark.parametrize("name", RUNNABLE)
def test_a_command_line_of_its_options_makes_the_arguments(name: str) -> None:
    check_a_command_line_makes_the_arguments(_suite(name))


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

    def make_runner(lookup: SuiteLookup) -> Runner[object, PreparedSuite[Any]]:
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
    check_runner(_suite(name))


@pytest.mark.parametrize("name", NAMES)
def test_the_pages_cover_every_test(name: str) -> None:
    check_pages(_suite(name))


def test_every_runnable_suite_is_on_the_command_line() -> None:
    assert set(RUNNABLE) <= run_commands()


def _suite(name: str) -> Suite:
    suite = find(name)
    assert suite is not None
    return suite
