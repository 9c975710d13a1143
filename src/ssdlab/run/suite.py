"""The run's part of a suite's contract (as plan/suite.py is the plan's and
report/suite.py the report's): the :class:`Runner` ops table every run module exports as
``RUNNER``, what a prepared run is (:class:`PreparedSuite`, :class:`PreparedRange`), how
it invokes fio (:class:`FioSetup`, :func:`timeout_for`) and what its ``--dry-run`` says.

:mod:`ssdlab.run.session` holds the run itself: the journal in the store and the
skeleton most suites' runs share (``SessionRun``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

from ssdlab.analysis.steady import rule_by_name
from ssdlab.engine.jobfile import render
from ssdlab.engine.jobtext import JobText
from ssdlab.engine.runner import Executor, watchdog_seconds
from ssdlab.errors import UserError
from ssdlab.plan.planned import PlannedTime
from ssdlab.plan.specs import ActiveRange, CellSpec, FioJob
from ssdlab.plan.suite import SuiteSpec
from ssdlab.plan.transport import transport_text
from ssdlab.run.prepare import PreparedTarget, TargetRequest, prepare_stored
from ssdlab.run.progress import Progress
from ssdlab.store.db import Store
from ssdlab.store.records import RunData
from ssdlab.targets.filetarget import create_file_target
from ssdlab.targets.identity import TargetInfo
from ssdlab.units import format_bytes

#: size-based fio runs (preconditioning) are presumed stuck below this rate
MIN_PRECONDITION_BYTES_PER_S = 2 * 1024 * 1024
#: fio spends about 0.3 s between stonewalled cells; the watchdog allows 1 s
FIO_CELL_OVERHEAD_S = 1.0


@dataclass(frozen=True)
class FioSetup:
    """How this run invokes fio: the target, the engine, and what heads each job file."""

    target_path: str
    ioengine: str
    ssdlab_version: str
    device_class: str
    profile: str

    def job(self, cells: tuple[CellSpec, ...], extra: tuple[tuple[str, str], ...] = ()) -> FioJob:
        return FioJob(self.target_path, cells, self.ioengine, json_plus=True, extra_global=extra)

    def job_text(
        self, cells: tuple[CellSpec, ...], what: str, extra: tuple[tuple[str, str], ...] = ()
    ) -> JobText:
        header = (
            f"ssdlab {self.ssdlab_version}: {what}\n"
            f"target {self.target_path} ({self.device_class}), profile {self.profile}"
        )
        return render(self.job(cells, extra), header)


#: what preparing a target records beyond its identity, kept when the run makes the test
#: file (the identity of the file made replaces the planned one): the array it is on
KEPT_DETAILS = ("array",)


def made_file(planned: TargetInfo) -> TargetInfo:
    """Make ssdlab's test file ``planned`` (or reuse it): its identity, with what preparing
    it recorded beyond that (:data:`KEPT_DETAILS`)."""
    info = create_file_target(planned.path, planned.capacity_bytes)
    kept = {k: planned.details[k] for k in KEPT_DETAILS if k in planned.details}
    return dataclasses.replace(info, details={**info.details, **kept}) if kept else info


def timeout_for(cells: tuple[CellSpec, ...], extra_s: float = 0.0) -> float:
    """Watchdog for one fio invocation of ``cells`` (time- or size-based)."""
    planned = sum(c.planned_seconds or 0.0 for c in cells) + extra_s
    sized = sum(c.io_bytes or 0 for c in cells)
    startup = FIO_CELL_OVERHEAD_S * len(cells)
    return watchdog_seconds(planned + startup + sized / MIN_PRECONDITION_BYTES_PER_S)


# -- the contract ---------------------------------------------------------------------------

A = TypeVar("A")
#: a suite's prepared run: a :class:`PreparedSuite` (its own class adds what else it needs)
P = TypeVar("P", bound="PreparedSuite[Any]")


class SuiteRun(Protocol):
    """A suite's run of one prepared plan, journaled to the store."""

    def execute(self, argv: list[str]) -> str:
        """Run everything; the run id."""
        ...


@runtime_checkable
class ResumableRun(SuiteRun, Protocol):
    def resume(self, run: RunData, argv: list[str]) -> str:
        """Continue the stored ``run`` (``ssdlab resume``); the run id."""
        ...


def _writes(prepared: object) -> bool:
    return False


def quick_progress(prepared: PreparedSuite[Any]) -> Progress:
    """A run's progress, quick when its options are (a :class:`Runner`'s default)."""
    return Progress(quick=prepared.options.quick)


@dataclass(frozen=True)
class Runner(Generic[A, P]):
    """The run's part of a suite's contract: an ops table, as fio's ``ioengine_ops``.

    ``prepare`` checks everything (the target, every option, fio) and raises a one-line
    UserError before any I/O; the other operations take what it returned.
    """

    prepare: Callable[[TargetRequest, A], P]
    describe: Callable[[P], str]  # --dry-run: the plan and every fio job file
    start: Callable[[P, Store, Executor, Progress], SuiteRun]
    #: what the run says as it goes (the default: :func:`quick_progress`)
    progress: Callable[[P], Progress] = quick_progress
    #: a stopped run's stored plan prepared again on its target (None: not resumable)
    prepare_resume: Callable[[RunData, TargetRequest], P] | None = None
    read_only: Callable[[P], bool] = _writes  # fio refuses every write (--readonly)
    #: how long the plan takes: the last line of its --dry-run (plan/planned.py)
    planned: Callable[[P], PlannedTime] | None = None

    def dry_run(self, prepared: P) -> str:
        """A ``--dry-run``'s whole text: the plan and its job files, then how long the
        plan takes (its last line)."""
        text = self.describe(prepared)
        if self.planned is not None:
            text += self.planned(prepared).text() + "\n"
        return text

    def resume(self, prepared: P, store: Store, executor: Executor, progress: Progress,
               run: RunData, argv: list[str]) -> str:
        started = self.start(prepared, store, executor, progress)
        if not isinstance(started, ResumableRun):
            raise UserError(f"runs of the {run.suite} suite cannot be resumed; run it again")
        return started.resume(run, argv)


class ChildOutcome(Protocol):
    """What ``ssdlab run`` prints at the end of a child suite's run."""

    @property
    def lines(self) -> tuple[str, ...]: ...


class ChildPages(Protocol):
    """A child suite's pages, as far as a suite of suites reads them."""

    @property
    def outcome(self) -> Callable[[RunData, object], ChildOutcome]: ...


class ChildSuite(Protocol):
    """A registered suite as a suite of suites (the RAID matrix) is given it: its spec,
    its runner and its pages (the registry's ``Suite``)."""

    @property
    def name(self) -> str: ...

    @property
    def spec(self) -> SuiteSpec[Any]: ...

    def runner(self) -> Runner[Any, Any]: ...

    def pages(self) -> ChildPages: ...


#: a suite of suites' way to the others: a suite's name -> the suite (None: no such
#: suite). Its run module exports ``make_runner(lookup) -> Runner`` instead of
#: ``RUNNER``, and the registry gives it its own lookup (``ssdlab.suites.find``): no run
#: module imports the registry.
SuiteLookup = Callable[[str], ChildSuite | None]


def resume_with(prepare: Callable[[PreparedTarget, A], P], args_type: Callable[..., A]
                ) -> Callable[[RunData, TargetRequest], P]:
    """A :class:`Runner`'s ``prepare_resume`` for a suite whose stored plan keeps the
    arguments it was started with: ``prepare`` them again on the stopped run's target,
    which must be the same one (a test file ssdlab made that is missing is made again)."""
    def prepare_resume(run: RunData, request: TargetRequest) -> P:
        return prepare(*prepare_stored(run, request, args_type))
    return prepare_resume


class RunSettings(Protocol):
    """What a suite's validated options say about every run of it."""

    @property
    def profile(self) -> str: ...

    @property
    def quick(self) -> bool: ...

    @property
    def ioengine(self) -> str: ...


OptionsT = TypeVar("OptionsT", bound=RunSettings)


@dataclass(frozen=True)
class PreparedSuite(Generic[OptionsT]):
    """A suite's run on one target, checked: the target and the validated options (a
    suite's own prepared plan adds what else it needs)."""

    target: PreparedTarget
    options: OptionsT

    def job_text(self, cells: tuple[CellSpec, ...], what: str,
                 extra: tuple[tuple[str, str], ...] = ()) -> str:
        """A job file's text as the run writes it (what ``--dry-run`` shows)."""
        return setup_of(self).job_text(cells, what, extra)


@dataclass(frozen=True)
class PreparedRange(PreparedSuite[OptionsT], Generic[OptionsT, A]):
    """A suite's run on one active range of the target, checked: also its arguments as
    given (the stored plan keeps them) and the range."""

    args: A
    range: ActiveRange


class RoundSettings(RunSettings, Protocol):
    """The validated options of a suite whose tests run rounds to steady state."""

    @property
    def rule(self) -> str: ...  # the steady-state rule's name (analysis/steady.py)

    @property
    def max_rounds(self) -> int: ...


class PreparedRounds(Protocol):
    """A prepared run of rounds to steady state, as its progress reads it."""

    @property
    def options(self) -> RoundSettings: ...


def rounds_progress(prepared: PreparedRounds) -> Progress:
    """The progress of a run of rounds to steady state (a :class:`Runner`'s ``progress``):
    its ETA runs from the rule's window of rounds to the most rounds."""
    o = prepared.options
    return Progress(quick=o.quick, window=rule_by_name(o.rule).window, max_rounds=o.max_rounds)


def setup_of(p: PreparedSuite[Any]) -> FioSetup:
    """How a prepared suite's run invokes fio on its target."""
    info, o = p.target.info, p.options
    return FioSetup(info.path, o.ioengine, p.target.versions["ssdlab"], info.device_class,
                    o.profile)


# -- the dry run --------------------------------------------------------------------------


def dry_run_head(t: PreparedTarget, *, sectors: bool = True) -> str:
    """The first line of every ``--dry-run`` (and, for a target reached over the network,
    a second saying how)."""
    info = t.info
    sector = f", {info.logical_sector_bytes}-byte sectors" if sectors else ""
    transport = transport_text(info.to_dict())
    return (f"DRY RUN: nothing will be written. Plan for {info.path} ({info.device_class}, "
            f"{capacity_text(info)}{sector})" + (f"\n{transport}" if transport else "")
            + "".join(f"\n{line}" for line in planned_device_note(info)))


def capacity_text(info: TargetInfo) -> str:
    """The target's size as a dry run shows it: an estimate for a device the run builds."""
    size = format_bytes(info.capacity_bytes)
    return f"about {size}" if planned_device_note(info) else size


def planned_device_note(info: TargetInfo) -> list[str]:
    """What a dry run says of a device the run builds before its suite (a matrix
    level's md array or zvol, :func:`ssdlab.run.prepare.planned_device`)."""
    if info.kind != "block" or not info.details.get("planned"):
        return []
    return ["(the device is built by the run before the suite: its size is the plan's "
            "estimate, its identity read once it exists)"]


def dry_run(p: PreparedSuite[Any], plan: Iterable[str], jobs: Iterable[str], *,
            sectors: bool = True) -> str:
    """A ``--dry-run``'s text: its first line, what the plan is, the test file it would
    make (when it would), the job files."""
    t = p.target
    return "\n".join([dry_run_head(t, sectors=sectors), *plan, *dry_run_create(t), *jobs]) + "\n"


def dry_run_create(t: PreparedTarget) -> list[str]:
    """The line saying the test file will be made, when it will."""
    if not t.create_file:
        return []
    return [f"would create and fully allocate {t.info.path} "
            f"({format_bytes(t.info.capacity_bytes)})"]
