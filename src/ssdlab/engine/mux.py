"""A set's targets share one fio run per round (docs/sets.md).

Each target's run calls :meth:`SetExecutor.member`'s ``run`` from a thread of its own, as
it would call fio. The thread that calls :meth:`SetExecutor.serve` (the main thread, where
Ctrl-C arrives) waits until every target still running is waiting for fio, merges their
job files into one (:mod:`ssdlab.engine.jobmerge`), runs fio once with the real executor
and hands each target its own part of the output. A target whose run has ended leaves
the set (:meth:`SetExecutor.leave`); one target alone runs its own job file unchanged.

Ctrl-C while fio runs (or while waiting) stops fio, and every target's fio call, waiting
or still to come, raises :class:`~ssdlab.engine.runner.FioInterrupted`: each run records
itself as interrupted. Any other failure of the shared run is every waiting target's.
"""

from __future__ import annotations

import dataclasses
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from ssdlab.engine.jobmerge import MergedJob, log_moves, merge_jobs, split_run
from ssdlab.engine.jobtext import JobFileError, job_file_of
from ssdlab.engine.runner import Executor, FioInterrupted, FioRun, TickFn

#: how often the serving thread looks up while it waits (Ctrl-C is seen at once anyway)
WAIT_S = 0.5


class RunObserver(Protocol):
    """What the set measures around each shared fio run (host CPU, in the serving
    thread)."""

    def before(self) -> None: ...

    def after(self, run: FioRun, merged: MergedJob | None) -> None: ...


@dataclass(eq=False)
class _Call:
    job_text: str
    timeout_s: float
    json_plus: bool
    on_tick: TickFn | None
    result: FioRun | None = None
    error: BaseException | None = None
    tick_error: Exception | None = None  # its on_tick failed: what it raised

    @property
    def done(self) -> bool:
        return self.result is not None or self.error is not None


class SetStopped(RuntimeError):
    """The set's fio runner stopped on an error of its own: no more fio runs."""


class SetExecutor:
    """Runs the fio calls of a set's targets, each in its own thread, as one fio run per
    round in the thread that calls :meth:`serve`. ``tags`` name the targets (``t1``...)."""

    def __init__(self, inner: Executor, tags: Sequence[str], *, name: str = "",
                 observer: RunObserver | None = None, ticker: TickFn | None = None) -> None:
        self.inner = inner
        self.tags = tuple(tags)
        self.name = name
        self.observer = observer
        self.ticker = ticker  # the set's own live line, called while fio runs
        self.fio_runs = 0  # fio processes started
        self._cond = threading.Condition()
        self._live = set(self.tags)
        self._pending: dict[str, _Call] = {}
        self._stopped: Callable[[], BaseException] | None = None

    def member(self, tag: str) -> Executor:
        """The executor of target ``tag``'s run (call it from that run's thread)."""
        if tag not in self.tags:
            raise KeyError(tag)
        return _MemberExecutor(self, tag)

    def leave(self, tag: str) -> None:
        """Target ``tag``'s run has ended: the others no longer wait for it."""
        with self._cond:
            self._live.discard(tag)
            self._cond.notify_all()

    def interrupt(self) -> None:
        """Ctrl-C outside :meth:`serve`: every fio call, waiting or to come, raises
        :class:`~ssdlab.engine.runner.FioInterrupted`."""
        self._stop(FioInterrupted)

    def serve(self) -> None:
        """Run the set's fio runs until every target has left. Ctrl-C (or any error here)
        stops every target's fio calls, then goes on to the caller."""
        try:
            while (batch := self._batch()) is not None:
                self._run(batch)
        except (KeyboardInterrupt, FioInterrupted):
            self._stop(FioInterrupted)
            raise
        except BaseException as exc:
            why = f"the set's fio runs stopped: {exc!r}"
            self._stop(lambda: SetStopped(why))
            raise

    # -- the targets' side -----------------------------------------------------------
    def _call(self, tag: str, call: _Call) -> FioRun:
        with self._cond:
            if self._stopped is not None:
                raise self._stopped()
            if tag not in self._live:
                raise SetStopped(f"target {tag} has left the set")
            self._pending[tag] = call
            self._cond.notify_all()
            while not call.done:
                self._cond.wait()
        if call.error is not None:
            raise call.error
        assert call.result is not None
        return call.result

    # -- the serving side ------------------------------------------------------------
    def _batch(self) -> dict[str, _Call] | None:
        """Every live target's call, once each has made one (None: none is left)."""
        with self._cond:
            while True:
                if not self._live:
                    return None
                if self._live <= self._pending.keys():
                    return {t: self._pending[t] for t in self.tags if t in self._live}
                self._cond.wait(WAIT_S)

    def _run(self, batch: dict[str, _Call]) -> None:
        bad = {t: c for t, c in batch.items() if not _parses(c.job_text)}
        for tag in bad:
            self._deliver(tag, error=JobFileError(f"target {tag}'s job file cannot be "
                                                  "merged: an option outside any section"))
        calls = {t: c for t, c in batch.items() if t not in bad}
        if not calls:
            return
        if self.observer is not None:
            self.observer.before()
        try:
            run, merged, parts = self._fio(calls)
        except (KeyboardInterrupt, FioInterrupted):
            raise
        except Exception as exc:  # fio could not be run at all: every waiting target's
            for tag in calls:
                self._deliver(tag, error=exc)
            return
        if self.observer is not None:
            self.observer.after(run, merged)
        for tag, call in calls.items():
            if call.tick_error is not None:
                self._deliver(tag, error=call.tick_error)
            else:
                self._deliver(tag, result=parts[tag])

    def _fio(self, calls: dict[str, _Call]) -> tuple[FioRun, MergedJob | None,
                                                     dict[str, FioRun]]:
        """One fio run of ``calls``: the run, the merged job (None: one target alone)
        and each target's part."""
        tick = self._ticker(list(calls.values()))
        timeout = max(c.timeout_s for c in calls.values())
        json_plus = any(c.json_plus for c in calls.values())
        self.fio_runs += 1
        if len(calls) == 1:
            (tag, call), = calls.items()
            run = self.inner.run(call.job_text, timeout, json_plus=json_plus, on_tick=tick)
            return run, None, {tag: run}
        title = (f"ssdlab set {self.name}: fio run {self.fio_runs}, shared by "
                 f"{len(calls)} targets")
        merged = merge_jobs([(t, c.job_text) for t, c in calls.items()], title)
        merged = dataclasses.replace(merged, note={"set": self.name,
                                                   "fio_run": self.fio_runs})
        run = self.inner.run(merged.text, timeout, json_plus=json_plus, on_tick=tick)
        move_logs(merged)
        return run, merged, split_run(run, merged)

    def _ticker(self, calls: list[_Call]) -> TickFn:
        """Each waiting target's ``on_tick`` (one that fails is not called again: its
        error goes to its target when fio has ended), then the set's own."""
        def tick(elapsed_s: float) -> None:
            for call in calls:
                if call.on_tick is None or call.tick_error is not None:
                    continue
                try:
                    call.on_tick(elapsed_s)
                except Exception as exc:
                    call.tick_error = exc
            if self.ticker is not None:
                self.ticker(elapsed_s)
        return tick

    def _deliver(self, tag: str, *, result: FioRun | None = None,
                 error: BaseException | None = None) -> None:
        with self._cond:
            call = self._pending.pop(tag)
            call.result, call.error = result, error
            self._cond.notify_all()

    def _stop(self, error: Callable[[], BaseException]) -> None:
        """No more fio runs: every waiting call and every later one raises ``error()``."""
        with self._cond:
            self._stopped = error
            for call in self._pending.values():
                call.error = error()
            self._pending.clear()
            self._cond.notify_all()


class _MemberExecutor:
    """One target's :class:`~ssdlab.engine.runner.Executor` in a set."""

    def __init__(self, mux: SetExecutor, tag: str) -> None:
        self.mux = mux
        self.tag = tag

    def run(self, job_text: str, timeout_s: float, *, json_plus: bool = False,
            on_tick: TickFn | None = None) -> FioRun:
        return self.mux._call(self.tag, _Call(job_text, timeout_s, json_plus, on_tick))


def _parses(text: str) -> bool:
    try:
        job_file_of(text)
    except JobFileError:
        return False
    return True


def move_logs(merged: MergedJob) -> None:
    """Move the log files fio wrote for the merged job to where each target's own run
    would have written them (:func:`ssdlab.engine.jobmerge.log_moves`)."""
    for member in merged.members:
        for log in member.logs:
            where = os.path.dirname(log.merged_prefix) or "."
            try:
                names = os.listdir(where)
            except OSError:
                continue
            for source, target in log_moves(log, names):
                try:
                    os.replace(source, target)
                except OSError:
                    continue
