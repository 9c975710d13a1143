"""What every suite's run shares: its record in the store, the exclusive hold on the
target, purge, workload-independent preconditioning, the emulator's ground truth, and
how it ends (complete, failed, or interrupted with every completed round kept).

A suite's runner (``PtsRun``, ``SaturationRun`` ...) is a :class:`SessionRun`: the one
skeleton every run has, whose hooks say what differs (the target's record and hold, what
the run records beside its results, what it says, what its tests run in, how it ends). It
owns a :class:`RunSession` and decides what to run; the session does the bookkeeping the
same way for all of them. What the session reads beside fio (health log, ground truth) is
in run/observe.py, what it does to the target between rounds (purge) in run/rounds.py.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import functools
import mmap
import os
import socket
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar

from ssdlab.engine.runner import (
    Executor,
    FioExecutor,
    FioInterrupted,
    FioRun,
    TickFn,
)
from ssdlab.errors import ExitCode, UserError, command
from ssdlab.jsonrecord import Record
from ssdlab.plan import results
from ssdlab.plan.results import HostsEvent, PreconditionStep, ProcessEvent, StoredPlan
from ssdlab.plan.specs import CellSpec
from ssdlab.run import observe, rounds
from ssdlab.run.consistency import lines as check_lines
from ssdlab.run.consistency import record_checks
from ssdlab.run.hosts import HOSTS_KIND, host_round_events
from ssdlab.run.member_rounds import (
    OFF_KIND,
    MemberSampler,
    RampWindow,
    Sample,
    find_sampler,
)
from ssdlab.run.prepare import check_same_target
from ssdlab.run.progress import Progress
from ssdlab.run.remote import HostLost, RemoteSet
from ssdlab.run.suite import FioSetup, PreparedSuite, made_file, setup_of, timeout_for
from ssdlab.store.db import Store, StoreWriteError
from ssdlab.store.records import FioRecord, RoundData, RoundRecord, RunData, RunHead
from ssdlab.targets.emulator import Emulator, emulator_of
from ssdlab.targets.identity import TargetInfo
from ssdlab.targets.nbd import NBD_KIND, unreachable
from ssdlab.targets.purge import PurgeOutcome
from ssdlab.targets.safety import ExclusiveHold


class RunInterrupted(UserError):
    """Ctrl-C: the run is marked interrupted; every completed round is kept."""

    exit_code = ExitCode.INTERRUPTED


class TestFailed(Exception):
    """fio failed inside a test; the test is marked failed and the run goes on."""


class TargetLost(UserError):
    """The target stopped answering after a failure: the run stops (completed work kept)."""

    exit_code = ExitCode.FAILURE


def boot_id() -> str:
    """This boot of this machine (a pid is only meaningful within one)."""
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as fh:
            return fh.read().strip()
    except OSError:
        return ""


def fio_record(run: FioRun, phase: str) -> FioRecord:
    return FioRecord(
        phase, run.job_text, run.command, run.stdout, run.stderr, run.returncode,
        run.started_at, run.ended_at,
    )


@contextlib.contextmanager
def recorded_ending(end: Callable[[str, str], None], interrupted: str) -> Iterator[None]:
    """Record how a run that stops early ended, with ``end(status, message)``: Ctrl-C is
    "interrupted" (then RunInterrupted(``interrupted``)), any other error "failed" with its
    first line (then the error goes on). When the store is what failed, nothing is
    recorded: ``resume`` will continue the run."""
    try:
        yield
    except (FioInterrupted, KeyboardInterrupt):
        _quietly(end, "interrupted", "stopped by Ctrl-C")
        raise RunInterrupted(interrupted) from None
    except StoreWriteError:
        raise  # the store cannot record the ending either; resume will continue the run
    except BaseException as exc:
        _quietly(end, "failed", (str(exc).splitlines() or [repr(exc)])[0][:300])
        raise


def _quietly(end: Callable[[str, str], None], status: str, message: str) -> None:
    """Record how the run ended, unless the store itself is what failed."""
    with contextlib.suppress(StoreWriteError):
        end(status, message)


def finish_complete(store: Store, run_id: str, failed: list[str],
                    progress: Progress | None = None, *, local: bool = True) -> None:
    """A run that ran to its end is complete; its message names the tests that failed.
    Every test's self-consistency checks are stored first (``progress``: their warnings
    printed; ``local``: the target's stack is on this host, docs/consistency.md)."""
    checks = record_checks(store, run_id, local=local)
    for line in check_lines(checks):
        if progress is not None:
            progress.line(line)
    message = f"{len(failed)} test(s) failed: {', '.join(failed)}" if failed else ""
    store.finish_run(run_id, "complete", message)


def unreadable(path: str) -> str | None:
    """None if ``path`` still reads, else why not (one line).

    Reads 4 KiB at offset 0, with O_DIRECT where the target allows it so that the page
    cache cannot answer for a device that is gone.
    """
    if not os.path.exists(path):
        return f"{path} no longer exists"
    buf = mmap.mmap(-1, 4096)
    try:
        for flags in (os.O_RDONLY | getattr(os, "O_DIRECT", 0), os.O_RDONLY):
            try:
                fd = os.open(path, flags)
            except OSError as exc:
                if exc.errno == errno.EINVAL and flags != os.O_RDONLY:
                    continue  # no O_DIRECT here (tmpfs): a plain read
                return f"{path} cannot be opened: {exc.strerror}"
            try:
                os.preadv(fd, [buf], 0)
                return None
            except OSError as exc:
                if exc.errno == errno.EINVAL and flags != os.O_RDONLY:
                    continue
                return f"{path} does not answer: {exc.strerror} (errno {exc.errno})"
            finally:
                os.close(fd)
        return None
    finally:
        buf.close()


@dataclass(frozen=True)
class Observed:
    """What a run's session records beside the suite's own results."""

    #: a "process" event when the run opens: ``resume`` refuses while that process runs
    process: bool = True
    #: the devices below the target, sampled around each measured fio run
    members: bool = True
    #: the emulated SSD's ground truth and the drive's health log, at start and end
    drive: bool = True


class RunSession:
    """One run of one suite on one target, journaled to ``store``."""

    def __init__(
        self,
        info: TargetInfo,
        store: Store,
        executor: Executor,
        progress: Progress,
        fio: FioSetup,
    ) -> None:
        self.info = info
        self.store = store
        self.executor = executor
        self.progress = progress
        self.fio = fio
        self.run_id = ""
        self.emulator: Emulator | None = emulator_of(info.path, info.details)
        #: the member devices under the target, read around every measured fio run
        #: (found when the run opens: None when there are none, or they cannot be read)
        self.members: MemberSampler | None = None
        self._sampled: tuple[FioRun, Sample] | None = None  # the last fio run's readings
        #: targets on other hosts (run/remote.py): requests go to their agents
        self.remote: RemoteSet | None = None
        #: what the session records beside the suite's own results
        self.observed = Observed()

    def open(
        self,
        *,
        suite: str,
        profile: str,
        quick: bool,
        host: Mapping[str, object],
        plan: StoredPlan,
        versions: Mapping[str, str],
        argv: list[str],
        target: Mapping[str, object] | None = None,
        announce: Callable[[bool], None] | None = None,
    ) -> str:
        """A new run in the store (``target``: its record, the target's identity by
        default; ``announce(resumed)``: its first line, :meth:`announce` by default)."""
        self.run_id = self.store.new_run(RunHead(
            suite, profile, quick, self.info.to_dict() if target is None else target, host,
            plan, versions, argv))
        self._opened("start", False, announce)
        return self.run_id

    def reopen(self, run_id: str, argv: list[str],
               announce: Callable[[bool], None] | None = None) -> None:
        """Continue a stored run (``ssdlab resume``): it is running again."""
        self.run_id = run_id
        self.store.reopen_run(run_id, argv)
        self._opened("resume", True, announce)

    def _opened(self, when: str, resumed: bool, announce: Callable[[bool], None] | None
                ) -> None:
        (announce or self.announce)(resumed)
        if self.observed.process:
            self._process_event()
        self._hosts_event()
        rounds.security_note(self)
        if self.observed.members:
            self._find_members()
        if self.observed.drive:
            self.ground_truth(None, when)
            self.health(when)

    def _process_event(self) -> None:
        """Which process runs this run now: ``resume`` refuses while it is alive."""
        self.store.add_event(self.run_id, None, "process", f"running in process {os.getpid()}",
                             ProcessEvent(os.getpid(), socket.gethostname(), boot_id()))

    def _hosts_event(self) -> None:
        """On several hosts: each host's identity, versions and clock, and a warning for
        each that differs from the coordinator."""
        remote = self.remote
        if remote is None:
            return
        remote.lost_hint = (f"; the completed rounds of every host are kept in "
                            f"{self.store.path}: `{command()} resume {self.run_id}` goes on when "
                            "it is back")
        self.store.add_event(self.run_id, None, HOSTS_KIND,
                             f"{len(remote.hosts)} hosts: {remote.spec()}",
                             HostsEvent(remote.host_records()))
        for warning in remote.warnings():
            self.progress.line(f"warning: {warning}")
            self.store.add_event(self.run_id, None, "warning", warning, None)

    def _find_members(self) -> None:
        """The target's member devices, found once: without any (tmpfs, FUSE), or when
        they cannot be read, the run is not sampled and one event says why."""
        info = self.info
        if self.remote is not None:
            self.store.add_event(self.run_id, None, OFF_KIND, "the targets are on other "
                                 "hosts: their member devices are not sampled", None)
            return
        self.members, why = find_sampler(info.path, info.kind, info.name, info.details)
        if why:  # none, or a plain drive's one device (read for the cache-bound check)
            self.store.add_event(self.run_id, None, OFF_KIND, why, None)

    def announce(self, resumed: bool = False) -> None:
        verb = "resuming run" if resumed else "run"
        self.progress.line(f"{verb} {self.run_id} on {self.info.path} "
                           f"(results in {self.store.path})")
        if self.emulator is not None:
            self.progress.line(
                f"target is emulated SSD {self.emulator.name} "
                f"({self.emulator.profile}); its ground truth is recorded"
            )

    def interrupted_text(self) -> str:
        """What Ctrl-C says by default: where the stopped run's rounds are, how to go on."""
        return (f"run {self.run_id} interrupted; completed rounds are kept in "
                f"{self.store.path} (continue it with `{command()} resume {self.run_id}`)")

    @contextlib.contextmanager
    def running(self, interrupted: str | None = None, *, hold: bool = True,
                end: Callable[[str, str], None] | None = None) -> Iterator[None]:
        """Hold the target for the run (unless not ``hold``); record how the run ended
        (``interrupted``: what Ctrl-C says, :meth:`interrupted_text` by default; ``end``:
        how a stopped run is recorded, the store's ``finish_run`` by default)."""
        with recorded_ending(end or functools.partial(self.store.finish_run, self.run_id),
                             interrupted or self.interrupted_text()), \
                (self._hold() if hold else contextlib.nullcontext()), self.connected():
            yield

    @contextlib.contextmanager
    def connected(self) -> Iterator[None]:
        """On several hosts: their fio servers reached for as long as the run runs, and
        the executor the run uses is theirs."""
        if self.remote is None:
            yield
            return
        with self.remote.connected():
            local = self.executor
            fio = local.fio if isinstance(local, FioExecutor) else "fio"
            self.executor = self.remote.executor(fio)
            try:
                yield
            finally:
                self.executor = local

    def finish(self, failed: list[str]) -> None:
        if self.observed.drive:
            self.ground_truth(None, "end")
            self.health("end")
        finish_complete(self.store, self.run_id, failed, self.progress,
                        local=self.remote is None)

    def health(self, when: str) -> None:
        """The drive's own count of bytes written, kept (run/observe.py)."""
        observe.health(self, when)

    def target_lost(self) -> str | None:
        """After a failed test: None if the target still reads, else why not (one line)."""
        if self.remote is not None:
            return self.remote.lost()
        if self.info.kind == NBD_KIND:  # an NBD export: a read over the network
            return unreachable(self.info.path)
        return unreadable(self.info.path)

    def after_failure(self, test: str, exc: TestFailed) -> None:
        """Policy: a failed test is recorded and the run goes on, unless the target is gone."""
        self.progress.line(f"{test}: FAILED: {exc}")
        lost = self.target_lost()
        if lost is None:
            return
        self.store.add_event(self.run_id, test, "error",
                             f"stopping the run: {lost} after {test} failed",
                             results.ErrorDetail(str(exc)))
        raise TargetLost(f"{test} failed ({exc}) and {lost}: the run stops here; every "
                         f"completed round is kept in {self.store.path}")

    @contextlib.contextmanager
    def _hold(self) -> Iterator[None]:
        if self.info.kind == "block" and self.remote is None:  # agents hold their own
            with ExclusiveHold(self.info.path):
                yield
        else:
            yield

    def purge(self, test: str, method: str, offset_bytes: int, size_bytes: int) -> PurgeOutcome:
        """The target (its active range) back to fresh-out-of-box (run/rounds.py)."""
        return rounds.purge(self, test, method, offset_bytes, size_bytes)

    def ground_truth(self, test: str | None, when: str) -> dict[str, Any] | None:
        """The emulated SSD's ground truth, kept (run/observe.py)."""
        return observe.ground_truth(self, test, when)

    def run_fio(self, text: str, cells: tuple[CellSpec, ...], *, json_plus: bool,
                on_tick: TickFn | None = None, timeout_s: float | None = None) -> FioRun:
        """One fio invocation of ``cells`` (``text``: its job file) under the watchdog
        :func:`timeout_for` allows it (or ``timeout_s``), ``on_tick`` (default: the live
        line's) called while it runs; the devices below the target are read right before
        and after it and where the fio gate releases each cell (:meth:`member_round`
        stores what they did), and, for members after a warm-up (``ramp_time``), once more
        where the measured period starts (:class:`ssdlab.run.member_rounds.RampWindow`)."""
        tick = on_tick or self.progress.tick
        ramp_s = max((c.ramp_s for c in cells), default=0.0)
        window = RampWindow(self.members, ramp_s) \
            if self.members is not None and self.members.figures and ramp_s > 0 else None

        def fio() -> FioRun:
            self.progress.running(cells)
            return self.executor.run(
                text, timeout_for(cells) if timeout_s is None else timeout_s,
                json_plus=json_plus, on_tick=tick if window is None else window.wrap(tick))

        if self.remote is not None:
            return self._remote_fio(fio)
        if self.members is None:
            return fio()
        run, sample = self.members.sample(fio)
        if sample is not None and window is not None:
            # several cells, each with its warm-up: no one measured period to start from
            sample = window.of(sample) if len(cells) == 1 else \
                dataclasses.replace(sample, ramp_s=ramp_s)
        self._sampled = (run, sample) if sample is not None else None
        return run

    def _remote_fio(self, fio: Callable[[], FioRun]) -> FioRun:
        """A fio run on several hosts; a host that dropped (or stopped answering) stops the
        run here with one line naming it: no test is marked failed, so ``resume`` goes on
        after the last round every host completed."""
        assert self.remote is not None
        run = fio()
        if run.ok:
            return run
        lost = self.remote.lost()
        if lost is None:
            return run
        self.store.add_event(self.run_id, None, "error", f"stopping the run: {lost}",
                             results.ErrorDetail(run.error))
        raise HostLost(f"{lost} ({run.error}){self.remote.lost_hint}")

    def fio_round(self, test: str, round_no: int, run: FioRun, phase: str, *, status: str,
                  tracking: dict[str, float], cells: Sequence[Record],
                  hosts: dict[str, results.HostPart] | None = None) -> None:
        """Store a round that is one fio invocation, with its record and its times, and
        what the target's members did over it; on several hosts, each host's own part
        (``hosts``: what the suite made of it, else a summary of each host's jobs)."""
        self.store.add_round(self.run_id, test, RoundRecord(
            round_no, status, tracking, cells, fio_record(run, phase), run.started_at,
            run.ended_at))
        self.member_round(test, round_no, run, phase)
        for kind, message, detail in host_round_events(round_no, run, phase, hosts):
            self.store.add_event(self.run_id, test, kind, message, detail)
            if kind == "warning":  # a host that started late
                self.progress.line(f"{test}: {message}")

    def member_round(self, test: str, round_no: int, run: FioRun, phase: str, *,
                     last_round: int | None = None) -> None:
        """Store what the devices below did over ``run`` (the last fio run :meth:`run_fio`
        ran): one ``devices`` event and, where they are members, one ``members`` event for
        its round ``round_no`` (to ``last_round`` for a fio run cut into several rounds).
        Nothing without devices or readings."""
        sampled = self._sampled
        if self.members is None or sampled is None or sampled[0] is not run:
            return
        self.members.store(self.store, self.run_id, test, sampled[1], round_no, phase,
                           run.output, last_round=last_round, job_text=run.job_text)

    def resumed_after(self, test: str, kind: str, last: RoundData, unit: str,
                      consequence: str) -> None:
        """A stopped test goes on after round ``last`` (run/rounds.py)."""
        rounds.resumed_after(self, test, kind, last, unit, consequence)

    def precondition(self, test: str, cell: CellSpec) -> None:
        """Workload-independent preconditioning (one size-based fio run), recorded."""
        text = self.fio.job_text((cell,), f"{test} workload-independent preconditioning")
        self.progress.phase("preconditioning")
        run = self.run_fio(text, (cell,), json_plus=False)
        detail = PreconditionStep(cell.io_bytes, cell.block_bytes, run.ok, run.error,
                                  run.ended_at - run.started_at)
        self.store.add_step(self.run_id, test, "precondition", detail,
                            fio_record(run, "precondition"))
        if not run.ok:
            raise TestFailed(f"preconditioning failed: {run.error}")
        self.progress.line(
            f"{test}: preconditioned with "
            f"{(cell.io_bytes or 0) / 2**30:.3g} GiB of {cell.block_bytes // 1024} KiB "
            f"sequential writes in {run.ended_at - run.started_at:.1f} s"
        )


PS = TypeVar("PS", bound=PreparedSuite[Any])


class SessionRun(ABC, Generic[PS]):
    """The shape every suite's run has: one :class:`RunSession` records the run on its
    target (by default one device or ssdlab test file, made first when it does not exist
    yet; hooks say what else a run works in: :meth:`workspace`); the suite says
    what it plans (:meth:`plan_record`) and runs its tests (:meth:`run_tests`), which
    return the names of the tests that failed. Resuming checks that the target is the same
    one and gives :meth:`run_tests` the stored run."""

    #: the stored runs' suite: a class attribute, or set by ``__init__`` where one run
    #: class serves several suites
    suite: str
    #: the run holds its target exclusively for as long as it runs (False: the run mounts
    #: it, which is the kernel's own claim on it; a directory; a set of members)
    holds_target: ClassVar[bool] = True
    #: what the session records beside the suite's own results
    observed: ClassVar[Observed] = Observed()

    def __init__(self, prepared: PS, store: Store, executor: Executor,
                 progress: Progress) -> None:
        self.p = prepared
        self.store = store
        self.executor = executor
        self.progress = progress
        self.session = RunSession(prepared.target.info, store, executor, progress,
                                  setup_of(prepared))
        self.session.remote = prepared.target.remote
        self.session.observed = self.observed

    @property
    def run_id(self) -> str:
        return self.session.run_id

    @abstractmethod
    def plan_record(self) -> StoredPlan:
        """The run's plan as stored (what ``resume`` and the report read back)."""

    @abstractmethod
    def run_tests(self, previous: RunData | None) -> list[str]:
        """Run (or, resuming ``previous``, continue) the tests; the names of failed ones."""

    def target_record(self) -> Mapping[str, object]:
        """The run's target as stored: the target's identity by default."""
        return self.session.info.to_dict()

    def announce(self, resumed: bool) -> None:
        """The run's first line, once it is in the store."""
        self.session.announce(resumed)

    def before_open(self) -> None:
        """What is checked or cleaned up before the run is opened (or reopened): nothing
        by default."""

    def started(self) -> None:
        """Said and recorded once the run is open (or reopened), before its tests: nothing
        by default."""

    def stopped(self, status: str, message: str) -> None:
        """Record a run that stopped early (Ctrl-C: "interrupted", an error: "failed")."""
        self.store.finish_run(self.run_id, status, message)

    def finish(self, failed: list[str]) -> None:
        """The run ran to its end; ``failed``: the tests that failed."""
        self.session.finish(failed)

    def interrupted_text(self) -> str:
        """What Ctrl-C says: where the stopped run's data is (and how to go on)."""
        return self.session.interrupted_text()

    @contextlib.contextmanager
    def workspace(self) -> Iterator[None]:
        """What the tests run in, made once the run is open and removed before it ends,
        also after Ctrl-C: nothing by default (the database suite: the file system made on
        the target, or a work directory, with its servers' places)."""
        yield

    def execute(self, argv: list[str]) -> str:
        t, o = self.p.target, self.p.options
        self.before_open()
        with self.target_in_place():
            self.session.open(suite=self.suite, profile=o.profile, quick=o.quick, host=t.host,
                              plan=self.plan_record(), versions=dict(t.versions), argv=argv,
                              target=self.target_record(), announce=self.announce)
            self.started()
            return self._run(None)

    @contextlib.contextmanager
    def target_in_place(self) -> Iterator[None]:
        """The target as the run uses it, for the whole run: a test file that does not
        exist yet is made first. (A suite whose target lasts only as long as the run, a
        test file in a work directory, makes and removes it here: run/workload_target.py.)
        """
        self._make_file()
        yield

    def resume(self, run: RunData, argv: list[str]) -> str:
        self.before_open()
        check_same_target(run, self.p.target)
        self._make_file()  # killed while a purge was recreating the test file
        self.session.reopen(run.run_id, argv, announce=self.announce)
        self.started()
        return self._run(run)

    def one_test(self, name: str, body: Callable[[], None], *, check_target: bool = True
                 ) -> list[str]:
        """Run a test; a failure is recorded and the run goes on (``after_failure``: unless
        the target is gone; without ``check_target``, the run's only test just ends)."""
        try:
            body()
        except TestFailed as exc:
            if check_target:
                self.session.after_failure(name, exc)
            else:
                self.progress.line(f"{name}: FAILED: {exc}")
            return [name]
        return []

    def _make_file(self) -> None:
        t = self.p.target
        if t.create_file:
            self.session.info = made_file(t.info)

    def _run(self, previous: RunData | None) -> str:
        with self.session.running(self.interrupted_text(), hold=self.holds_target,
                                  end=self.stopped), self.workspace():
            failed = self.run_tests(previous)
        self.finish(failed)
        return self.run_id
