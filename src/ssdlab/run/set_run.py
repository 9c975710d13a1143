"""Several targets on one host in one command: a *set* (docs/sets.md).

Every target is prepared first, through every guardrail: one refused target refuses the
set before anything is written to any. Then each target gets a run of its own (its run
record, its steady-state verdicts, its report), all at once: one thread per target runs
its suite as it would run alone, with a store connection of its own on the same store,
and a progress that prefixes its lines with the target's short name. Their fio calls go
to one :class:`~ssdlab.engine.mux.SetExecutor`, which runs fio once per round for the
whole set in the main thread (where Ctrl-C arrives). A set record in the store ties the
runs together; when the set ends, the host-bound checks say whether the host, not the
drives, limited it (CPU saturated during its fio runs, a drive on a NUMA node fio did not
run on): one warning line, and an event on each run.
"""

from __future__ import annotations

import os
import stat
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TextIO, TypeVar

from ssdlab.analysis.hostbound import SetHostVerdict, SharedRun, set_host_bound
from ssdlab.analysis.numa import NumaCheck, numa_check
from ssdlab.engine.jobmerge import MergedJob, first_job_file, merge_jobs
from ssdlab.engine.mux import WAIT_S, SetExecutor
from ssdlab.engine.runner import Executor, FioInterrupted, FioRun
from ssdlab.engine.status import status_of
from ssdlab.errors import ExitCode, TargetError, UserError
from ssdlab.jsonrecord import Record
from ssdlab.run.array import member_consent
from ssdlab.run.prepare import PreparedTarget, TargetRequest
from ssdlab.run.progress import OUTPUT_LOCK, Progress, rates_text, write
from ssdlab.store.db import Store
from ssdlab.store.location import StoreLocation
from ssdlab.targets.identity import TargetInfo, identify_block
from ssdlab.targets.safety import DestroyData
from ssdlab.targets.topology import (
    StatSnapshot,
    allowed_cpus,
    host_cpu_usage,
    node_cpus,
    read_proc_stat,
)
from ssdlab.units import format_duration

#: the event each run of a set gets with the set's host check, numbers and all
SET_HOST_KIND = "set-host"

#: what runs one target's suite: (its store, its executor, its progress) -> its run id
Go = Callable[[Store, Executor, Progress], str]


# -- the targets, checked -------------------------------------------------------------------


def _identity(target: str) -> tuple[str, object]:
    """What makes two names one target: the device number of a block device, else the
    resolved path."""
    path = os.path.abspath(target)
    try:
        st = os.stat(path)
    except OSError:
        return ("path", os.path.realpath(path))
    if stat.S_ISBLK(st.st_mode):
        return ("device", st.st_rdev)
    return ("path", os.path.realpath(path))


def check_distinct(targets: Sequence[str]) -> None:
    """A target named twice (by the same or another path) refuses the set (one line)."""
    seen: dict[tuple[str, object], str] = {}
    for target in targets:
        key = _identity(target)
        if key in seen:
            same = "" if seen[key] == target else f" (as {seen[key]})"
            raise UserError(f"target {target} is given twice{same}; give each target once")
        seen[key] = target


def _is_block(target: str) -> bool:
    path = os.path.abspath(target)
    return os.path.exists(path) and stat.S_ISBLK(os.stat(path).st_mode)


def set_requests(targets: Sequence[str], request: TargetRequest) -> list[TargetRequest]:
    """One request per target: ``request``'s options, each block device with its own
    ``--destroy-data`` (``--destroy-data=A,B`` names devices by path or serial, as for an
    array's members; run/array.py ``member_consent``); ``--size`` is the file targets'."""
    check_distinct(targets)
    blocks: list[TargetInfo] = []
    for target in targets:
        if _is_block(target):
            try:
                blocks.append(identify_block(os.path.abspath(target)))
            except TargetError as err:
                raise TargetError(f"refusing the set: {target}: {err.message}") from None
    consent = dict(zip((b.path for b in blocks),
                       member_consent(blocks, request.destroy_data, "targets"), strict=True))
    out = []
    for target in targets:
        path = os.path.abspath(target)
        own: DestroyData = consent.get(path, bool(request.destroy_data))
        size = None if path in consent else request.size_bytes
        out.append(TargetRequest(target, None, size, own, request.fio))
    return out


P = TypeVar("P")


def prepare_all(prepares: Sequence[Callable[[], P]], targets: Sequence[str]) -> list[P]:
    """Every target prepared (``prepares``: every guardrail, in the order of ``targets``)
    before anything runs: the first refusal refuses the set, in one line naming it."""
    prepared = []
    for prepare, target in zip(prepares, targets, strict=True):
        try:
            prepared.append(prepare())
        except UserError as err:
            raise UserError(f"refusing the set: {target}: {err.message}",
                            err.exit_code) from None
    return prepared


def short_names(targets: Sequence[str]) -> list[str]:
    """Each target's short name (its file name; a number added where two share one)."""
    names = [os.path.basename(t.rstrip("/")) or t for t in targets]
    return [f"{n}#{i + 1}" if names.count(n) > 1 else n for i, n in enumerate(names)]


def info_of(prepared: object) -> TargetInfo | None:
    """The target a suite's prepared run is on (None: it does not say)."""
    target = getattr(prepared, "target", None)
    return target.info if isinstance(target, PreparedTarget) else None


# -- the dry run ----------------------------------------------------------------------------


def describe_set(names: Sequence[str], targets: Sequence[str], plans: Sequence[str]) -> str:
    """``--dry-run`` of a set: each target's plan, then the job file of the set's first
    fio run (each target's first job file, merged)."""
    out = [f"DRY RUN of a set of {len(targets)} targets, run at once: one run each, one fio "
           "run per round for all of them"]
    for name, target, plan in zip(names, targets, plans, strict=True):
        out += ["", f"=== {name}: {target}", plan.rstrip("\n")]
    firsts = [(f"t{i + 1}", job) for i, plan in enumerate(plans)
              if (job := first_job_file(plan)) is not None]
    out.append("")
    if firsts:
        tags = ", ".join(f"{tag} = {names[int(tag[1:]) - 1]}" for tag, _ in firsts)
        merged = merge_jobs(firsts, f"ssdlab set: the first fio run, shared by "
                                    f"{len(firsts)} targets ({tags})")
        out += ["=== the merged job file of the set's first fio run:", merged.text.rstrip()]
    else:
        out.append("=== no fio job file in the plans")
    return "\n".join(out) + "\n"


# -- running --------------------------------------------------------------------------------


@dataclass(frozen=True)
class SetMember:
    """One target of a set: its short name, where its lines go, how its run goes."""

    name: str
    target: str
    info: TargetInfo | None
    progress: Progress
    go: Go
    run_id: str | None = None  # resuming: the run it continues


@dataclass(frozen=True)
class MemberOutcome:
    member: SetMember
    run_id: str | None  # None: its run was never recorded
    error: BaseException | None  # what its run raised (None: it ran to its end)

    @property
    def exit_code(self) -> int:
        if self.error is None:
            return int(ExitCode.OK)
        if isinstance(self.error, UserError):
            return int(self.error.exit_code)
        return int(ExitCode.FAILURE)


@dataclass(frozen=True)
class SetOutcome:
    set_id: str
    store_path: StoreLocation
    members: tuple[MemberOutcome, ...]
    interrupted: bool
    host: SetHostVerdict
    warning: str | None  # the set's one host-bound warning line (None: none)
    fio_runs: int


class HostSampler:
    """Host CPU over each shared fio run (``/proc/stat`` before and after it) and the CPU
    time fio's jobs report (a :class:`~ssdlab.engine.mux.RunObserver`)."""

    def __init__(self, read: Callable[[], StatSnapshot] = read_proc_stat) -> None:
        self.read = read
        self.runs: list[SharedRun] = []
        self._before: StatSnapshot | None = None

    def before(self) -> None:
        self._before = self._read()

    def after(self, run: FioRun, merged: MergedJob | None) -> None:
        after = self._read()
        usage = (host_cpu_usage(self._before, after)
                 if self._before is not None and after is not None else None)
        jobs = run.output.jobs if run.output is not None else ()
        fio_s = sum((j.usr_cpu_pct + j.sys_cpu_pct) / 100 * j.job_runtime_ms / 1000
                    for j in jobs)
        self.runs.append(SharedRun(max(0.0, run.ended_at - run.started_at),
                                   None if usage is None else usage.busy_pct, fio_s))

    def _read(self) -> StatSnapshot | None:
        try:
            return self.read()
        except (OSError, ValueError):
            return None


class SetLine:
    """The one live line of a set (on a terminal): where each run is, and how long the
    shared fio run has run."""

    def __init__(self, stream: TextIO, members: Sequence[SetMember], live: bool) -> None:
        self.stream = stream
        self.members = members
        self.live = live
        self._last = 0.0

    def tick(self, elapsed_s: float) -> None:
        now = time.monotonic()
        if not self.live or now - self._last < 0.5:
            return
        self._last = now
        where = " · ".join(f"{m.name} {m.progress.status()}" for m in self.members)
        status = status_of(elapsed_s)
        rates = f" · all: {rates_text(status)}" if status is not None else ""
        text = (f"set of {len(self.members)}: fio {format_duration(elapsed_s)}{rates} · "
                f"{where}")
        with OUTPUT_LOCK:
            write(self.stream, "\r\x1b[K" + text[:160])

    def close(self) -> None:
        if self.live:
            with OUTPUT_LOCK:
                write(self.stream, "\r\x1b[K")


@dataclass
class SetRun:
    """A set's runs at once, recorded in the store at ``store_path`` (see the module's
    documentation). ``executor`` runs fio (the real one, or a fake in tests)."""

    members: Sequence[SetMember]
    store_path: StoreLocation
    executor: Executor
    labels: dict[str, str] = field(default_factory=dict)
    host: dict[str, object] = field(default_factory=dict)
    stream: TextIO = field(default_factory=lambda: sys.stdout)
    live: bool | None = None
    read_stat: Callable[[], StatSnapshot] = read_proc_stat
    fio_cpus: Callable[[], frozenset[int]] = allowed_cpus

    def execute(self, suite: str, argv: list[str]) -> SetOutcome:
        """A new set: its record, then every target's run."""
        with Store.open(self.store_path) as store:
            set_id = store.new_set(suite=suite, argv=argv,
                                   targets=[m.target for m in self.members])
        self._line(f"set {set_id}: {len(self.members)} targets at once "
                   f"({', '.join(m.name for m in self.members)}), one fio run per round")
        return self._run(set_id, joining=True)

    def resume(self, set_id: str) -> SetOutcome:
        """The stopped runs of a stored set, at once again (they are in it already)."""
        self._line(f"set {set_id}: resuming {len(self.members)} runs at once "
                   f"({', '.join(m.name for m in self.members)})")
        return self._run(set_id, joining=False)

    @property
    def _live(self) -> bool:
        """Whether the set draws a live line (on a terminal, unless told)."""
        return self.stream.isatty() if self.live is None else self.live

    def _line(self, text: str) -> None:
        with OUTPUT_LOCK:
            write(self.stream, ("\r\x1b[K" if self._live else "")
                  + f"{time.strftime('%H:%M:%S')} {text}\n")

    def _run(self, set_id: str, *, joining: bool) -> SetOutcome:
        tags = [f"t{i + 1}" for i in range(len(self.members))]
        line = SetLine(self.stream, self.members, self._live)
        sampler = HostSampler(self.read_stat)
        mux = SetExecutor(self.executor, tags, name=set_id, observer=sampler,
                          ticker=line.tick)
        results: dict[int, tuple[str | None, BaseException | None]] = {}
        threads = [threading.Thread(
            target=self._member, name=f"ssdlab-set-{m.name}",
            args=(set_id, i, joining, mux, tags[i], results))
            for i, m in enumerate(self.members)]
        for m in self.members:
            m.progress.in_set(m.name)
        interrupted = False
        try:
            for thread in threads:
                thread.start()
            mux.serve()
        except (KeyboardInterrupt, FioInterrupted):
            interrupted = True
            mux.interrupt()  # (serve has, unless Ctrl-C came before it began)
            self._line(f"set {set_id}: interrupted; each run records where it stopped")
        finally:
            _join(threads)
            line.close()
        return self._finish(set_id, results, sampler, interrupted, mux.fio_runs,
                            resumed=not joining)

    def _member(self, set_id: str, index: int, joining: bool, mux: SetExecutor, tag: str,
                results: dict[int, tuple[str | None, BaseException | None]]) -> None:
        """One target's run, in its thread: whatever it raises is its own outcome (a new
        run ``joining`` the set is recorded in it at its place)."""
        member = self.members[index]
        store: Store | None = None
        try:
            store = Store.open(self.store_path)
            store.run_labels = dict(self.labels)
            if joining:
                store.set_member = (set_id, index)
            results[index] = (member.go(store, mux.member(tag), member.progress), None)
        except BaseException as exc:
            results[index] = (None, exc)
        finally:
            mux.leave(tag)
            if store is not None:
                store.close()
            member.progress.close()

    def _finish(self, set_id: str, results: dict[int, tuple[str | None, BaseException | None]],
                sampler: HostSampler, interrupted: bool, fio_runs: int, *, resumed: bool
                ) -> SetOutcome:
        cpus = self.fio_cpus()
        verdict = set_host_bound(sampler.runs, len(cpus))
        numa = [(m.name, numa_check(m.info.numa_node, cpus, node_cpus(self.host)))
                for m in self.members if m.info is not None]
        warning = _warning(verdict, numa)
        with Store.open(self.store_path) as store:
            data = store.load_set(set_id)
            before = SetDetail.from_json(data.detail, f"set {set_id}") if resumed and isinstance(
                data.detail, dict) else SetDetail()
            # resuming, the members are the stopped runs, not every place of the set
            stored = dict(data.runs) if not resumed else {
                i: m.run_id for i, m in enumerate(self.members) if m.run_id is not None}
            outcomes = tuple(_outcome(m, i, results, stored)
                             for i, m in enumerate(self.members))
            detail = SetDetail(
                fio_runs + before.fio_runs, interrupted, verdict, dict(numa),
                {o.member.name: _one_line(o.error) for o in outcomes if o.error is not None},
                None if resumed else [m.name for m in self.members],
                (before.resumed or 0) + 1 if resumed else None)
            if resumed:  # the stopped set's keys stay, in their places, with the new values
                detail = SetDetail.from_json({**before.to_json(), **detail.to_json()})
            for o in outcomes:
                if o.run_id is not None:
                    _host_events(store, o.run_id, set_id, verdict, numa, warning)
            store.finish_set(set_id, detail)
        if warning is not None:
            self._line(f"WARNING: {warning}")
        return SetOutcome(set_id, self.store_path, outcomes, interrupted, verdict, warning,
                          fio_runs)


def _join(threads: Sequence[threading.Thread]) -> None:
    """Wait for every target's run to end (each records how): another Ctrl-C does not
    leave them half-recorded."""
    for thread in threads:
        while thread.is_alive():
            try:
                thread.join(WAIT_S)
            except KeyboardInterrupt:
                continue


def _outcome(member: SetMember, index: int,
             results: dict[int, tuple[str | None, BaseException | None]],
             stored: dict[int, str]) -> MemberOutcome:
    run_id, error = results.get(index, (None, RuntimeError("the run's thread did not end")))
    return MemberOutcome(member, run_id or stored.get(index), error)


def _one_line(error: BaseException | None) -> str:
    if error is None:
        return ""
    text = error.message if isinstance(error, UserError) else f"{type(error).__name__}: {error}"
    return (text.splitlines() or [""])[0][:300]


def _warning(verdict: SetHostVerdict, numa: Sequence[tuple[str, NumaCheck]]) -> str | None:
    """The set's one host-bound warning (None: the host did not limit it)."""
    parts = [verdict.message] if verdict.host_bound else []
    parts += [f"NUMA: {name}: {check.message}" for name, check in numa if check.mismatch]
    return "; ".join(parts) if parts else None


@dataclass(frozen=True)
class SetHostEvent(Record):
    """A set's host check, as each of its runs keeps it (a ``set-host`` event, and the
    detail of its warning)."""

    set: str
    host: SetHostVerdict
    numa: dict[str, NumaCheck]


@dataclass(frozen=True)
class SetDetail(Record):
    """What a set recorded when it ended (``Store.finish_set``): its fio runs, whether it
    was interrupted, its host check, its runs' errors, and its targets' names (or, when
    resumed, how many times)."""

    OMIT_NONE = frozenset({"names", "resumed"})

    fio_runs: int = 0
    interrupted: bool = False
    host: SetHostVerdict | None = None
    numa: dict[str, NumaCheck] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    names: list[str] | None = None
    resumed: int | None = None


def _host_events(store: Store, run_id: str, set_id: str, verdict: SetHostVerdict,
                 numa: Sequence[tuple[str, NumaCheck]], warning: str | None) -> None:
    """Each run of the set keeps the set's host check, and its warning when there is one."""
    detail = SetHostEvent(set_id, verdict, dict(numa))
    store.add_event(run_id, None, SET_HOST_KIND, f"set {set_id}: {verdict.message}", detail)
    if warning is not None:
        store.add_event(run_id, None, "warning", f"set {set_id}: {warning}", detail)


def worst(outcome: SetOutcome) -> int:
    """The set's exit status: the worst of its runs'."""
    return max((o.exit_code for o in outcome.members), default=int(ExitCode.OK))
