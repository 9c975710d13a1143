"""A suite as data: its name and help, its command-line options (which are also its
config-file keys), the arguments they make, the tests it records and their result types.

This is the plan's part of the suite contract (docs/architecture.md, "A suite is one
thing"): each suite's plan module defines one :class:`SuiteSpec`; its run module the
runner (:class:`ssdlab.run.suite.Runner`), its pages module the report's part
(:class:`ssdlab.report.suite.SuitePages`); one line of :mod:`ssdlab.suites` registers
the three. The command line, ``--config``, ``ssdlab resume``, ``show``, ``export`` and
the report all reach a suite through that registry, never by its name.

Options are data (:class:`Opt`): the flags and the keyword arguments ``argparse``'s
``add_argument`` takes, the argument group they are listed in, the config-file kind of
the key (None: command line only) and the field of the suite's arguments dataclass they
fill. The command line is built from them in the order given, so ``--help`` lists them
as written here.
"""

from __future__ import annotations

import argparse
import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, NoReturn, TypeVar

from ssdlab.errors import UserError
from ssdlab.jsonrecord import Record
from ssdlab.plan.config_schema import Kind

A = TypeVar("A")

#: ``Opt.field`` of an option that fills the field of its own name (its ``dest``)
SAME = "="
#: a quick run's banner text of a suite that does not say its own
QUICK_TEXT = "shortened, for demos and tests; not a valid result"


class TargetKind(enum.Enum):
    """What a suite runs on, and so which target options it takes."""

    DEVICE = "device"  # --target: a block device or an ssdlab test file
    DEVICE_OR_DIR = "device or directory"  # --target as DEVICE, or --dir: a test file there
    DIR = "directory"  # --dir: the suite's own files in a directory
    MEMBERS = "member devices"  # --members: the drives the suite builds arrays of


@dataclass(frozen=True)
class Opt:
    """One command-line option as data (see the module's documentation)."""

    flags: tuple[str, ...]
    kwargs: Mapping[str, Any]  # add_argument's keyword arguments
    group: str | None  # the argument group's title; None: the parser's own options
    config: Kind | None  # its kind as a config-file key; None: command line only
    field: str | None  # the arguments field it fills (SAME: its dest); None: none

    @property
    def key(self) -> str:
        """The long option name without dashes: the config-file key."""
        return next(f for f in self.flags if f.startswith("--"))[2:]

    @property
    def dest(self) -> str:
        return str(self.kwargs.get("dest") or self.key.replace("-", "_"))

    @property
    def args_field(self) -> str | None:
        return self.dest if self.field == SAME else self.field


def opt(*flags: str, group: str | None, config: Kind | None = None,
        field: str | None = SAME, **kwargs: Any) -> Opt:
    """An option of ``group``: ``opt("--qd", group="slc probe", config=Kind.INT,
    field="iodepth", type=int, metavar="N", help=...)``."""
    return Opt(flags, kwargs, group, config, field)


@dataclass(frozen=True)
class SuiteSpec(Generic[A]):
    """The plan's part of a suite's contract."""

    name: str  # ssdlab run NAME; the stored runs' suite
    help: str  # the line ``ssdlab run --help`` shows
    description: str  # the text ``ssdlab run NAME --help`` starts with (reflowed: a paragraph)
    target: TargetKind
    options: tuple[Opt, ...]  # target options first, in --help order
    args_type: Callable[..., A]  # builds the suite's arguments from the options' fields
    #: the tests a run records (names; "throughput" stands for every "throughput-*") and
    #: the record type of each one's stored result
    results: Mapping[str, type[Record]]
    #: what its report is, after "LABEL: " in the report's title ("SNIA PTS report");
    #: a report of runs of several suites is a "comparison report"
    report_title: str
    resumable: bool = False  # ``ssdlab resume`` continues its stopped runs
    runnable: bool = True  # False: runs are only imported (published reference runs)
    #: config keys listed first (the options every suite shares), then the others in order
    config_first: tuple[str, ...] = field(default=("size", "store", "fio"))
    #: several --target run at once as a set (docs/sets.md); False: one target only
    many_targets: bool = True
    #: what a run of its quick profile is, after "QUICK PROFILE: " wherever the run shows
    #: (its banner): what the profile shortens and what the result is not
    quick_text: str = QUICK_TEXT
    #: it runs on targets of several hosts at once (docs/hosts.md): ``--target
    #: HOST:PATH,...``; the other suites refuse targets of other hosts
    remote: bool = False
    #: a suite that does not run on other hosts: why not, in a few words (the line a target
    #: of another host is refused with says it after "this host only: ")
    local_only: str = ""
    #: the arguments ``ssdlab demo`` runs it with (one suite has them: the demo's)
    demo_args: A | None = None
    #: the records of what its runs store beside the results, which
    #: tests/unit/test_store_records_golden.py reads every stored document as: each
    #: test's parameters by test name ("*": any other test), the plan, a round's cells,
    #: the verdicts by name ("*": any other name), the details of its own kinds of steps
    #: and events (the shared kinds' are plan/results.py's STEP_DETAILS and
    #: EVENT_DETAILS); None for a verdict or a detail: a JSON value kept as it is
    params: Mapping[str, type[Record]] = field(default_factory=dict)
    plan_type: type[Record] | None = None
    cells: type[Record] | None = None
    verdicts: Mapping[str, type[Record] | None] = field(default_factory=dict)
    details: Mapping[str, type[Record] | None] = field(default_factory=dict)

    def args(self, values: Mapping[str, Any]) -> A:
        """The suite's arguments from parsed option values (by ``dest``)."""
        return self.args_type(**{f: values[o.dest] for o in self.options
                                 if (f := o.args_field) is not None})

    def option_values(self, argv: Sequence[str], where: str) -> Mapping[str, Any]:
        """``argv`` parsed as ``ssdlab run NAME`` parses it (without ``--help``, the
        label and config options): option values by ``dest``. A UserError, after
        ``where: ``, when argparse refuses it."""
        parser = argparse.ArgumentParser(prog=f"ssdlab run {self.name}", add_help=False)
        # not a subclass: argparse calls error() for unknown, ambiguous and missing
        # options even with exit_on_error=False; it would print usage and exit
        parser.error = _refusal(where)  # type: ignore[method-assign, assignment]
        for o in self.options:
            parser.add_argument(*o.flags, **o.kwargs)
        return vars(parser.parse_args(list(argv)))

    def parse_argv(self, argv: Sequence[str], where: str) -> A:
        """The suite's arguments from a command line of its options (see
        :meth:`option_values`)."""
        return self.args(self.option_values(argv, where))

    def config_schema(self) -> dict[str, Kind]:
        """Config-file key -> its kind (every option that is a setting)."""
        keyed = {o.key: o.config for o in self.options if o.config is not None}
        first = {k: keyed[k] for k in self.config_first if k in keyed}
        return {**first, **{k: v for k, v in keyed.items() if k not in first}}

    def result_type(self, test: str) -> type[Record] | None:
        """The record type of test ``test``'s stored result (None: not one of its tests)."""
        kind = "throughput" if test.startswith("throughput") else test
        return self.results.get(kind)


def _refusal(where: str) -> Callable[[str], NoReturn]:
    def refuse(message: str) -> NoReturn:
        raise UserError(f"{where}: {message}")
    return refuse


class Profiled:
    """Validated options with a ``profile`` field: a run of the quick profile is a quick
    run, marked QUICK wherever it shows (a base of the options dataclass; no field)."""

    profile: str

    @property
    def quick(self) -> bool:
        return self.profile == "quick"


@dataclass(frozen=True)
class ProfiledOptions(Profiled):
    """Validated options that start with their profile: the field :class:`Profiled` asks
    for, declared here once (options with another field first declare it themselves)."""

    profile: str


@dataclass(frozen=True)
class ProfiledArgs:
    """The arguments of a suite with profiles, as given: the profile first (``--profile``,
    :func:`ssdlab.plan.optionsets.profile`). A suite's arguments add their own options
    after it, None for "the profile's value"."""

    profile: str = "default"


class Unprofiled:
    """The validated options of a suite without profiles: always "default", never quick."""

    @property
    def profile(self) -> str:
        return "default"

    @property
    def quick(self) -> bool:
        return False


