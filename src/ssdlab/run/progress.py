"""Progress of a long run: a live status line on a terminal, plain log lines otherwise.

On a terminal, one line is rewritten in place (``\\r``, cleared) at least every
:data:`DRAW_S` while fio runs: the test and round, the cell, fio's live IOPS and MB/s
(its own status line, engine/status.py), the elapsed and remaining time of the round and
of the run. Not on a terminal (a CI log, a pipe), no line is rewritten: the log lines
only, and the same status as a plain line once every :data:`PLAIN_EVERY_S` of a long fio
run. A closed standard output (``ssdlab run ... | head -3``) is not an error: the run
goes on, writing nothing more (:func:`write`)."""

from __future__ import annotations

import contextlib
import errno
import os
import sys
import threading
import time
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TextIO

from ssdlab.engine.gate import gate_enabled
from ssdlab.engine.status import FioStatus, position_of, status_of
from ssdlab.plan.planned import PlannedTime, span_text, total
from ssdlab.plan.rounds import RoundTest
from ssdlab.plan.specs import CellSpec, cell_label
from ssdlab.units import format_duration


@dataclass
class _State:
    test: RoundTest | None = None
    round_no: int = 0
    phase: str = ""
    planned_s: float | None = None
    elapsed_s: float = 0.0
    steady: str = ""
    remaining_tests: list[RoundTest] = field(default_factory=list)
    #: rounds already stored of the tests a resumed run goes on with, by test name
    rounds_done: dict[str, int] = field(default_factory=dict)
    #: the cells of the fio run going on (RunSession.run_fio says them), and what fio's
    #: status line said last
    cells: tuple[CellSpec, ...] = ()
    status: FioStatus | None = None
    position: int | None = None  # the fio gate's position that runs (engine/gate.py)


def tracking_text(name: str, value: float) -> str:
    """A tracking value with its unit (names say what they track: IOPS, bandwidth, latency)."""
    if "bandwidth" in name:
        return f"{value / 2**20:,.1f} MiB/s"
    if "latency" in name:
        return f"{value:,.2f} us"
    return f"{value:,.0f}"


#: one writer at a time: the runs of a set print from threads of their own (run/set_run.py)
OUTPUT_LOCK = threading.RLock()

#: the pause between a round's cells, by whether the fio gate keeps them (engine/gate.py):
#: about 0.3 s with fio's own stonewalls, a few hundredths through the gate
#: (bench/results/fio_dead_time.md)
FIO_CELL_GAP_S = {True: 0.05, False: 0.3}
#: the live line is redrawn at most this often (fio's status line comes every 0.5 s)
DRAW_S = 0.45
#: not on a terminal: a plain status line once every so many seconds of one fio run
PLAIN_EVERY_S = 60.0
#: the width of the live line when the terminal does not say its own
DEFAULT_WIDTH = 160

#: streams found closed: nothing more is written to them
_CLOSED: weakref.WeakSet[TextIO] = weakref.WeakSet()


def write(stream: TextIO, text: str) -> None:
    """Write and flush ``text``; a reader that has gone (``ssdlab run ... | head -3``) is
    not an error: nothing more is written to ``stream``, and the descriptor behind it
    (standard output) is pointed at /dev/null, so that later writes and the flush at exit
    fail neither. The run goes on and is stored as it would be."""
    if stream in _CLOSED:
        return
    try:
        stream.write(text)
        stream.flush()
    except OSError as exc:
        if not isinstance(exc, BrokenPipeError) and exc.errno != errno.EPIPE:
            raise
        with contextlib.suppress(TypeError):  # a stream that takes no weak reference
            _CLOSED.add(stream)
        quiet(stream)


def quiet(stream: TextIO) -> None:
    """Point the descriptor behind ``stream`` at /dev/null (its reader has gone)."""
    try:
        fd = stream.fileno()
    except (OSError, ValueError):
        return
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, fd)
    finally:
        os.close(null)


def round_estimate(test: RoundTest) -> float:
    """Expected wall time of one round: the cells plus the pauses between them."""
    return test.round_seconds + FIO_CELL_GAP_S[gate_enabled()] * len(test.round_cells)


def rounds_planned(tests: Sequence[RoundTest], window: int, max_rounds: int, *, purge: bool,
                   decides: str = "", each: str = "test") -> PlannedTime:
    """How long tests of rounds take (``--dry-run``): each from its steady-state window
    (at most ``max_rounds``) to ``max_rounds`` rounds, plus its purge (``purge``: one is
    made where a test asks) and its preconditioning, which take the drive's own time."""
    parts = []
    for test in tests:
        round_s = round_estimate(test)
        parts.append(PlannedTime(min(window, max_rounds) * round_s, max_rounds * round_s,
                                 decides or "steady state"))
        if test.purge and purge:
            parts.append(PlannedTime.step(f"a purge before each {each}"))
        if test.wipc is not None:
            parts.append(PlannedTime.io(test.wipc.io_bytes or 0, "preconditioning"))
    return total(parts)


def cell_index(cells: Sequence[CellSpec], position: int | None, status: FioStatus | None,
               elapsed_s: float) -> int:
    """Which of ``cells`` (one fio run, run one after another) runs now: the fio gate's
    open position, else after the job processes fio says have ended (each cell has
    ``threads`` of them), else, before fio's first status line, as far as the planned
    times go."""
    if position is not None:
        return min(max(position, 0), len(cells) - 1)
    if status is not None and status.jobs == sum(c.threads for c in cells):
        ended = status.jobs_ended
        for index, cell in enumerate(cells):
            if ended < cell.threads:
                return index
            ended -= cell.threads
        return len(cells) - 1
    at = 0.0
    for index, cell in enumerate(cells):
        at += cell.planned_seconds or 0.0
        if elapsed_s < at:
            return index
    return len(cells) - 1


def rates_text(status: FioStatus) -> str:
    """fio's live rates: IOPS and MB/s (decimal megabytes, as the result tables)."""
    return f"{status.iops:,.0f} IOPS {status.bytes_per_s / 1e6:,.1f} MB/s"


def _width(stream: TextIO) -> int:
    try:
        return max(20, os.get_terminal_size(stream.fileno()).columns - 1)
    except (OSError, ValueError, AttributeError):
        return DEFAULT_WIDTH


class Progress:
    """Reports a run as it goes. ``live`` redraws one status line (for terminals)."""

    def __init__(
        self,
        stream: TextIO | None = None,
        *,
        live: bool | None = None,
        quick: bool = False,
        window: int = 5,
        max_rounds: int = 25,
    ) -> None:
        self.stream = stream or sys.stdout
        self.live = self.stream.isatty() if live is None else live
        self.quick = quick
        self.window = min(window, max_rounds)  # a test ends at its most rounds
        self.max_rounds = max_rounds
        self.state = _State()
        self._last_draw = 0.0
        self._last_plain = 0.0
        self.started = time.monotonic()
        #: the plan's time (``Runner.planned``), for the ETA of a run that has no rounds
        self.planned: PlannedTime | None = None
        #: a run in a set: its lines start with its target's short name, and the set draws
        #: the one live line of all its runs (:meth:`in_set`)
        self.prefix = ""
        self.draws = True

    def in_set(self, name: str) -> None:
        """This run is one of a set's: its lines say ``name``; it draws no live line."""
        self.prefix = f"{name}: "
        self.draws = False

    # -- what the runner calls -------------------------------------------------------
    def start(self, tests: tuple[RoundTest, ...], *, finished: Sequence[str] = (),
              rounds_done: Mapping[str, int] | None = None) -> None:
        """The run's tests; a resumed run names those ``finished`` and the rounds already
        stored of the others (``rounds_done``): the ETA is what is left of it."""
        self.started = time.monotonic()
        self.state.remaining_tests = [t for t in tests if t.name not in finished]
        self.state.rounds_done = dict(rounds_done or {})
        names = ", ".join(t.name for t in self.state.remaining_tests) or "nothing left"
        done = f" ({', '.join(finished)} done)" if finished else ""
        self.line(f"plan: {names}{done}; ETA {self._eta()}")

    def line(self, message: str) -> None:
        """A log line (kept on screen above the live status line)."""
        prefix = "[QUICK] " if self.quick else ""
        text = f"{time.strftime('%H:%M:%S')} {self.prefix}{prefix}{message}\n"
        with OUTPUT_LOCK:
            write(self.stream, ("\r\x1b[K" if self.live else "") + text)

    def test_started(self, test: RoundTest) -> None:
        self.state = _State(
            test=test, remaining_tests=[t for t in self.state.remaining_tests if t is not test],
            rounds_done=self.state.rounds_done,
        )
        self.line(
            f"{test.name}: {len(test.round_cells)} cells per round "
            f"({format_duration(test.round_seconds)}), at most {self.max_rounds} rounds"
        )

    def phase(self, phase: str, round_no: int = 0, planned_s: float | None = None) -> None:
        self.state.phase, self.state.round_no = phase, round_no
        self.state.planned_s, self.state.elapsed_s = planned_s, 0.0
        self.state.cells, self.state.status, self.state.position = (), None, None
        self._draw(force=True)

    def running(self, cells: tuple[CellSpec, ...]) -> None:
        """A fio run of ``cells`` starts (the live line names the one running)."""
        state = self.state
        state.cells, state.status, state.position, state.elapsed_s = cells, None, None, 0.0

    def tick(self, elapsed_s: float) -> None:
        """fio has run ``elapsed_s``; a :class:`~ssdlab.engine.status.Tick` also says what
        fio's status line said last."""
        state = self.state
        state.elapsed_s = elapsed_s
        state.status = status_of(elapsed_s) or state.status
        position = position_of(elapsed_s)
        state.position = position if position is not None else state.position
        self._draw()

    def round_done(self, round_no: int, tracking: dict[str, float], verdict: str) -> None:
        values = ", ".join(f"{k} = {tracking_text(k, v)}" for k, v in tracking.items())
        self.state.steady = verdict
        assert self.state.test is not None
        self.line(f"{self.state.test.name} round {round_no}: {values}; {verdict}")

    def close(self) -> None:
        if self.live and self.draws:
            with OUTPUT_LOCK:
                write(self.stream, "\r\x1b[K")

    # -- the live line ---------------------------------------------------------------
    def _cells(self) -> tuple[CellSpec, ...]:
        test = self.state.test
        if test is not None and self.state.phase == "round" and test.round_cells:
            return test.round_cells
        return self.state.cells

    def _cell_text(self) -> str:
        cells = self._cells()
        if not cells:
            return ""
        state = self.state
        index = cell_index(cells, state.position, state.status, state.elapsed_s)
        cell = cells[index]
        label = cell_label(cell.block_bytes, cell.mix.read_pct)
        return f"cell {index + 1}/{len(cells)} {label}" if len(cells) > 1 else label

    def _round_estimate(self) -> float | None:
        """The planned time of the fio run going on, with the pauses between its cells."""
        test, planned = self.state.test, self.state.planned_s
        if test is not None and self.state.phase == "round":
            return round_estimate(test)
        return planned

    def _time_text(self) -> str:
        """Elapsed and remaining of the round (or phase): ``0:14, 0:14 left``."""
        state = self.state
        word = "round" if state.phase == "round" else "for"
        planned = self._round_estimate()
        left = (f", {format_duration(max(0.0, planned - state.elapsed_s))} left"
                if planned else "")
        return f"{word} {format_duration(state.elapsed_s)}{left}"

    def _done(self, test: RoundTest) -> int:
        return self.state.rounds_done.get(test.name, 0)

    def _eta(self) -> str | None:
        """What is left of the run, as a range (steady state decides how many rounds a
        test takes: from its window to its maximum), or None when it is not known."""
        low = high = 0.0
        state = self.state
        if state.test is not None:
            round_s = round_estimate(state.test)
            if state.phase == "round":
                done = state.round_no - 1
                now = max(0.0, (self._round_estimate() or 0.0) - state.elapsed_s)
                low += now + max(0, self.window - state.round_no) * round_s
                high += now + max(0, self.max_rounds - done - 1) * round_s
            else:  # purge, preconditioning: every round still to run
                done = self._done(state.test)
                low += max(1, self.window - done) * round_s
                high += max(1, self.max_rounds - done) * round_s
        elif not state.remaining_tests:
            return self._planned_eta()
        for test in state.remaining_tests:
            done = self._done(test)
            low += max(1 if done else 0, self.window - done) * round_estimate(test)
            high += max(0, self.max_rounds - done) * round_estimate(test)
        before = state.test is not None and state.phase in ("purge", "preconditioning")
        to_come = before or any((t.purge or t.wipc is not None) and not self._done(t)
                                for t in state.remaining_tests)
        return span_text(low, high) + (" (+ preconditioning)" if to_come else "")

    def _planned_eta(self) -> str | None:
        """What is left of a run of no rounds, from its plan's time (:attr:`planned`)."""
        planned = self.planned
        if planned is None:
            return None
        spent = time.monotonic() - self.started
        left = span_text(max(0.0, planned.low_s - spent), max(0.0, planned.high_s - spent))
        return left + (" (+ I/O at the drive's speed)" if planned.io_bytes else "")

    def text(self) -> str:
        """The live line: where the run is, fio's live rates, the time of the round and of
        the run."""
        state = self.state
        name = state.test.name if state.test else ""
        where = (f"round {state.round_no}/{self.max_rounds}" if state.phase == "round"
                 else state.phase)
        parts = ["QUICK"] if self.quick else []
        parts.append(f"{name} {where}".strip() or "starting")
        parts += [t for t in (self._cell_text(),) if t]
        if state.status is not None:
            parts.append(rates_text(state.status))
        parts.append(self._time_text())
        eta = self._eta()
        run = format_duration(time.monotonic() - self.started)
        parts.append(f"run {run}" + (f", ETA {eta}" if eta else ""))
        if state.steady and state.phase == "round":
            parts.append(state.steady)
        return " · ".join(parts)

    def _draw(self, force: bool = False) -> None:
        if not self.draws:
            return
        now = time.monotonic()
        if not self.live:
            long_run = self.state.elapsed_s >= PLAIN_EVERY_S
            if long_run and now - self._last_plain >= PLAIN_EVERY_S:
                self._last_plain = now
                self.line(self.text())
            return
        if not force and now - self._last_draw < DRAW_S:
            return
        self._last_draw = now
        text = self.text()
        with OUTPUT_LOCK:
            write(self.stream, "\r\x1b[K" + text[:_width(self.stream)])

    def status(self) -> str:
        """Where the run is, in a few words (a set's live line shows each run's)."""
        state = self.state
        name = state.test.name if state.test else ""
        where = f"round {state.round_no}" if state.phase == "round" else state.phase
        return f"{name} {where}".strip() or "starting"


class PhaseProgress(Progress):
    """For a run of phases that are not fio's (the database suite's tools): the live line
    says the phase, its time and what is left of it."""

    def _draw(self, force: bool = False) -> None:
        now = time.monotonic()
        if not self.live or not self.draws or (not force and now - self._last_draw < 0.5):
            return
        self._last_draw = now
        s = self.state
        planned = f" of {format_duration(s.planned_s)}" if s.planned_s else ""
        text = (f"{'QUICK · ' if self.quick else ''}{s.phase} · "
                f"{format_duration(s.elapsed_s)}{planned}")
        with OUTPUT_LOCK:
            write(self.stream, "\r\x1b[K" + text[:160])

    def status(self) -> str:
        return self.state.phase or "starting"
