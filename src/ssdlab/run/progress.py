"""Progress of a long run: a live status line on a terminal, plain log lines otherwise."""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass, field
from typing import TextIO

from ssdlab.engine.gate import gate_enabled
from ssdlab.plan.pts import PtsTest, cell_label
from ssdlab.plan.units import format_duration


@dataclass
class _State:
    test: PtsTest | None = None
    round_no: int = 0
    phase: str = ""
    planned_s: float | None = None
    elapsed_s: float = 0.0
    steady: str = ""
    remaining_tests: list[PtsTest] = field(default_factory=list)


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


def round_estimate(test: PtsTest) -> float:
    """Expected wall time of one round: the cells plus the pauses between them."""
    return test.round_seconds + FIO_CELL_GAP_S[gate_enabled()] * len(test.round_cells)


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
        self.window = window
        self.max_rounds = max_rounds
        self.state = _State()
        self._last_draw = 0.0
        #: a run in a set: its lines start with its target's short name, and the set draws
        #: the one live line of all its runs (:meth:`in_set`)
        self.prefix = ""
        self.draws = True

    def in_set(self, name: str) -> None:
        """This run is one of a set's: its lines say ``name``; it draws no live line."""
        self.prefix = f"{name}: "
        self.draws = False

    # -- what the runner calls -------------------------------------------------------
    def start(self, tests: tuple[PtsTest, ...]) -> None:
        self.state.remaining_tests = list(tests)
        self.line(f"plan: {', '.join(t.name for t in tests)}; ETA {self._eta()}")

    def line(self, message: str) -> None:
        """A log line (kept on screen above the live status line)."""
        prefix = "[QUICK] " if self.quick else ""
        with OUTPUT_LOCK:
            if self.live:
                self.stream.write("\r\x1b[K")
            self.stream.write(f"{time.strftime('%H:%M:%S')} {self.prefix}{prefix}{message}\n")
            self.stream.flush()

    def test_started(self, test: PtsTest) -> None:
        self.state = _State(
            test=test, remaining_tests=[t for t in self.state.remaining_tests if t is not test]
        )
        self.line(
            f"{test.name}: {len(test.round_cells)} cells per round "
            f"({format_duration(test.round_seconds)}), at most {self.max_rounds} rounds"
        )

    def phase(self, phase: str, round_no: int = 0, planned_s: float | None = None) -> None:
        self.state.phase, self.state.round_no = phase, round_no
        self.state.planned_s, self.state.elapsed_s = planned_s, 0.0
        self._draw(force=True)

    def tick(self, elapsed_s: float) -> None:
        self.state.elapsed_s = elapsed_s
        self._draw()

    def round_done(self, round_no: int, tracking: dict[str, float], verdict: str) -> None:
        values = ", ".join(f"{k} = {tracking_text(k, v)}" for k, v in tracking.items())
        self.state.steady = verdict
        assert self.state.test is not None
        self.line(f"{self.state.test.name} round {round_no}: {values}; {verdict}")

    def close(self) -> None:
        if self.live and self.draws:
            self.stream.write("\r\x1b[K")
            self.stream.flush()

    # -- the live line ---------------------------------------------------------------
    def _cell_text(self) -> str:
        test = self.state.test
        if test is None or self.state.phase != "round" or not test.round_cells:
            return ""
        per_cell = test.round_seconds / len(test.round_cells)
        index = min(int(self.state.elapsed_s // per_cell), len(test.round_cells) - 1)
        cell = test.round_cells[index]
        label = cell_label(cell.block_bytes, cell.mix.read_pct)
        return f" · cell {index + 1}/{len(test.round_cells)} {label}"

    def _eta(self) -> str:
        low = high = 0.0
        state = self.state
        if state.test is not None and state.phase == "round":
            done = state.round_no - 1
            left_now = max(0.0, (state.planned_s or 0.0) - state.elapsed_s)
            low += left_now + max(0, self.window - state.round_no) * round_estimate(state.test)
            high += left_now + max(0, self.max_rounds - done - 1) * round_estimate(state.test)
        for test in state.remaining_tests:
            low += self.window * round_estimate(test)
            high += self.max_rounds * round_estimate(test)
        return f"{format_duration(low)}-{format_duration(high)} (+ preconditioning)"

    def _draw(self, force: bool = False) -> None:
        now = time.monotonic()
        if not self.live or not self.draws or (not force and now - self._last_draw < 0.5):
            return
        self._last_draw = now
        state = self.state
        name = state.test.name if state.test else ""
        where = (
            f"round {state.round_no}/{self.max_rounds}" if state.phase == "round" else state.phase
        )
        steady = f" · {state.steady}" if state.steady and state.phase == "round" else ""
        quick = "QUICK · " if self.quick else ""
        text = (
            f"{quick}{name} {where}{self._cell_text()} · "
            f"{format_duration(state.elapsed_s)}{steady} · ETA {self._eta()}"
        )
        with OUTPUT_LOCK:
            self.stream.write("\r\x1b[K" + text[:160])
            self.stream.flush()

    def status(self) -> str:
        """Where the run is, in a few words (a set's live line shows each run's)."""
        state = self.state
        name = state.test.name if state.test else ""
        where = f"round {state.round_no}" if state.phase == "round" else state.phase
        return f"{name} {where}".strip() or "starting"
