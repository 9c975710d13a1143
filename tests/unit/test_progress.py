"""Progress: plain log lines, the live status line (fio's live rates, the cell, the times),
ETA ranges, tracking values and a closed standard output."""

from __future__ import annotations

import io
import itertools
import os
import re
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from ssdlab.engine.gate import GATE_ENV
from ssdlab.engine.status import FioStatus, Tick
from ssdlab.plan.rounds import RoundTest
from ssdlab.plan.specs import CellSpec, Mix, Pattern
from ssdlab.run import progress as progress_module
from ssdlab.run.progress import Progress, cell_index, round_estimate, tracking_text, write

STAMP = r"\d\d:\d\d:\d\d"
ETA = re.compile(r"ETA (\d+(?::\d\d){1,2})-(\d+(?::\d\d){1,2})(?: \(\+ preconditioning\))?")


@pytest.fixture(autouse=True)
def _no_fio_gap(monkeypatch: pytest.MonkeyPatch) -> None:
    """The ETA arithmetic below is checked without fio's pause between cells..."""
    monkeypatch.setattr(progress_module, "FIO_CELL_GAP_S", {True: 0.0, False: 0.0})


@pytest.mark.parametrize(("gate", "gap"), [("1", 0.05), ("0", 0.3)])
def test_round_estimate_adds_the_pause_per_cell(monkeypatch: pytest.MonkeyPatch, gate: str,
                                                gap: float) -> None:
    """...which this test checks on its own: fio's pause, or the gate's."""
    monkeypatch.setattr(progress_module, "FIO_CELL_GAP_S", {True: 0.05, False: 0.3})
    monkeypatch.setenv(GATE_ENV, gate)
    test = make_test("iops", 56, 0.5)
    assert round_estimate(test) == pytest.approx(56 * 0.5 + 56 * gap)


def make_test(name: str, cells: int, seconds: float) -> RoundTest:
    round_cells = tuple(
        CellSpec(
            f"{name}_{i}",
            Pattern.RANDOM,
            4096,
            Mix(100 if i % 2 else 0),
            1,
            1,
            0,
            2**30,
            runtime_s=seconds,
        )
        for i in range(cells)
    )
    return RoundTest(name, name.upper(), round_cells, (), "v2.0", None, True, ())


def seconds_of(text: str) -> int:
    total = 0
    for part in text.split(":"):
        total = total * 60 + int(part)
    return total


def eta_range(text: str) -> tuple[int, int]:
    matches = ETA.findall(text)
    assert matches, text
    low, high = matches[-1]
    return seconds_of(low), seconds_of(high)


class Clock:
    """A stand-in for the ``time`` module inside ssdlab.run.progress."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now

    def strftime(self, fmt: str) -> str:
        return time.strftime(fmt)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(
        progress_module, "time", SimpleNamespace(monotonic=fake.monotonic, strftime=fake.strftime)
    )
    return fake


# --------------------------------------------------------------------------- plain log


def test_plain_lines_are_timestamped() -> None:
    out = io.StringIO()
    progress = Progress(out, live=False)
    progress.line("hello")
    progress.line("world")
    lines = out.getvalue().splitlines()
    assert len(lines) == 2
    assert re.fullmatch(rf"{STAMP} hello", lines[0])
    assert re.fullmatch(rf"{STAMP} world", lines[1])
    assert "\r" not in out.getvalue() and "\x1b" not in out.getvalue()


def test_quick_lines_are_marked() -> None:
    out = io.StringIO()
    Progress(out, live=False, quick=True).line("hello")
    assert re.fullmatch(rf"{STAMP} \[QUICK\] hello\n", out.getvalue())


def test_a_stringio_is_not_live_by_default() -> None:
    progress = Progress(io.StringIO())
    assert progress.live is False


def test_plain_progress_writes_only_log_lines() -> None:
    out = io.StringIO()
    progress = Progress(out, live=False, window=5, max_rounds=25)
    test = make_test("iops", 4, 1.0)
    progress.start((test,))
    progress.test_started(test)
    progress.phase("round", 1, 4.0)
    progress.tick(2.0)
    progress.round_done(1, {"IOPS 4 KiB 0/100": 1234.4}, "not steady yet")
    progress.close()
    lines = out.getvalue().splitlines()
    assert [re.sub(rf"^{STAMP} ", "", line) for line in lines] == [
        "plan: iops; ETA 0:20-1:40 (+ preconditioning)",
        "iops: 4 cells per round (0:04), at most 25 rounds",
        "iops round 1: IOPS 4 KiB 0/100 = 1,234; not steady yet",
    ]
    assert all(re.match(rf"{STAMP} ", line) for line in lines)
    assert "\r" not in out.getvalue()


# --------------------------------------------------------------------------- live line


def test_live_progress_redraws_with_carriage_returns(clock: Clock) -> None:
    out = io.StringIO()
    progress = Progress(out, live=True, quick=True, window=5, max_rounds=25)
    test = make_test("latency", 3, 2.0)
    progress.start((test,))
    progress.test_started(test)
    before = len(out.getvalue())
    progress.phase("round", 2, 6.0)
    drawn = out.getvalue()[before:]
    assert drawn.startswith("\r\x1b[K")
    assert not drawn.endswith("\n")
    assert "QUICK · latency round 2/25" in drawn
    assert "cell 1/3" in drawn
    assert "ETA" in drawn

    clock.now += 3.0
    before = len(out.getvalue())
    progress.tick(3.0)  # elapsed 3 s of 2 s cells: the second cell
    drawn = out.getvalue()[before:]
    assert drawn.startswith("\r\x1b[K") and "cell 2/3" in drawn and "0:03" in drawn

    before = len(out.getvalue())
    progress.tick(3.1)  # within 0.5 s of the last draw: not redrawn
    assert out.getvalue()[before:] == ""

    before = len(out.getvalue())
    progress.line("a log line")
    assert re.fullmatch(rf"\r\x1b\[K{STAMP} \[QUICK\] a log line\n", out.getvalue()[before:])

    before = len(out.getvalue())
    progress.close()
    assert out.getvalue()[before:] == "\r\x1b[K"


def test_live_line_shows_other_phases_by_name() -> None:
    out = io.StringIO()
    progress = Progress(out, live=True)
    test = make_test("iops", 2, 1.0)
    progress.start((test,))
    progress.test_started(test)
    before = len(out.getvalue())
    progress.phase("preconditioning")
    drawn = out.getvalue()[before:]
    assert drawn.startswith("\r\x1b[K")
    assert "iops preconditioning" in drawn
    assert "QUICK" not in drawn and "cell " not in drawn


def test_live_line_shows_the_verdict_after_a_round() -> None:
    out = io.StringIO()
    progress = Progress(out, live=True)
    test = make_test("iops", 2, 1.0)
    progress.start((test,))
    progress.test_started(test)
    progress.phase("round", 1, 2.0)
    progress.round_done(1, {"IOPS 4 KiB 0/100": 10.0}, "window 1-1 not steady")
    before = len(out.getvalue())
    progress.phase("round", 2, 2.0)
    assert out.getvalue()[before:].endswith(" · window 1-1 not steady")


# --------------------------------------------------------------------------- ETA


def test_eta_range_shrinks_as_rounds_complete() -> None:
    window, max_rounds = 5, 25
    current, later = make_test("iops", 9, 1.0), make_test("latency", 2, 1.0)  # 9 s, 2 s rounds
    out = io.StringIO()
    progress = Progress(out, live=True, window=window, max_rounds=max_rounds)
    progress.start((current, later))
    assert eta_range(out.getvalue()) == (window * 11, max_rounds * 11)
    progress.test_started(current)
    ranges = []
    for round_no in range(1, max_rounds + 1):
        before = len(out.getvalue())
        progress.phase("round", round_no, 9.0)
        low, high = eta_range(out.getvalue()[before:])
        # independently: this round, the rounds still needed at least / at most, the rest
        assert low == 9 + max(0, window - round_no) * 9 + window * 2
        assert high == 9 + (max_rounds - round_no) * 9 + max_rounds * 2
        ranges.append((low, high))
    lows, highs = [r[0] for r in ranges], [r[1] for r in ranges]
    widths = [h - lo for lo, h in ranges]
    assert all(lo <= h for lo, h in ranges)
    assert lows == sorted(lows, reverse=True)
    assert all(a > b for a, b in itertools.pairwise(highs))
    assert widths == sorted(widths, reverse=True)
    assert widths[-1] < widths[0]
    assert ranges[-1] == (9 + 10, 9 + 50)


def test_eta_counts_down_within_a_round(clock: Clock) -> None:
    out = io.StringIO()
    progress = Progress(out, live=True, window=5, max_rounds=25)
    test = make_test("iops", 6, 10.0)  # 60 s rounds
    progress.start((test,))
    progress.test_started(test)
    progress.phase("round", 7, 60.0)
    assert eta_range(out.getvalue()) == (60, 60 + 18 * 60)
    clock.now += 45
    progress.tick(45.0)
    assert eta_range(out.getvalue()) == (15, 15 + 18 * 60)


def test_eta_over_an_hour_uses_hours() -> None:
    out = io.StringIO()
    progress = Progress(out, live=False, window=5, max_rounds=25)
    progress.start((make_test("iops", 56, 60.0),))
    assert "ETA 4:40:00-23:20:00 (+ preconditioning)" in out.getvalue()


# --------------------------------------------------------------------------- tracking_text


@pytest.mark.parametrize(
    ("name", "value", "text"),
    [
        ("IOPS 4 KiB 0/100", 123456.7, "123,457"),
        ("IOPS 1024 KiB 100/0", 999.4, "999"),
        ("write bandwidth 1024 KiB", 1.5 * 2**20, "1.5 MiB/s"),
        ("read bandwidth 128 KiB", 2**30, "1,024.0 MiB/s"),
        ("mean latency 4 KiB 0/100", 85.456, "85.46 us"),
        ("mean latency 8 KiB 65/35", 12345.0, "12,345.00 us"),
    ],
)
def test_tracking_text(name: str, value: float, text: str) -> None:
    assert tracking_text(name, value) == text


def test_round_line_shows_every_tracking_value_with_its_unit() -> None:
    out = io.StringIO()
    progress = Progress(out, live=False)
    test = make_test("throughput-1024k", 2, 1.0)
    progress.test_started(test)
    progress.round_done(
        3,
        {"write bandwidth 1024 KiB": 500 * 2**20, "read bandwidth 1024 KiB": 1000.25 * 2**20},
        "steady (window 1-3)",
    )
    last = out.getvalue().splitlines()[-1]
    assert re.fullmatch(
        rf"{STAMP} throughput-1024k round 3: write bandwidth 1024 KiB = 500.0 MiB/s, "
        r"read bandwidth 1024 KiB = 1,000.2 MiB/s; steady \(window 1-3\)",
        last,
    ), last


# --------------------------------------------------------------------------- fio's live rates


def _clock(monkeypatch: pytest.MonkeyPatch, now: list[float]) -> None:
    """The progress module's clock reads ``now[0]``."""
    monkeypatch.setattr(progress_module, "time", SimpleNamespace(
        monotonic=lambda: now[0], strftime=time.strftime))


def _cells(n: int, threads: int = 1, seconds: float = 1.0) -> tuple[CellSpec, ...]:
    return tuple(CellSpec(f"c{i}", Pattern.RANDOM, 4096 * (i + 1), Mix(100 - 35 * (i % 3)),
                          threads, 4, 0, 2**30, runtime_s=seconds) for i in range(n))


def test_the_cell_comes_from_the_gate_then_fio_then_the_clock() -> None:
    cells = _cells(4, threads=2)
    assert cell_index(cells, 2, None, 0.0) == 2  # the gate's open position
    assert cell_index(cells, -1, None, 9.0) == 0  # jobs still setting up
    status = FioStatus(10.0, 1.0, jobs_ended=5, jobs=8)  # 2 cells of 2 jobs ended, + 1
    assert cell_index(cells, None, status, 0.0) == 2
    assert cell_index(cells, None, None, 1.5) == 1  # before fio says: by the plan
    other = FioStatus(10.0, 1.0, jobs_ended=3, jobs=3)  # not these cells' jobs: the clock
    assert cell_index(cells, None, other, 3.5) == 3


def _test(cells: tuple[CellSpec, ...]) -> RoundTest:
    return RoundTest("iops", "IOPS", cells, (), "v2.0", None, True, ())


def test_the_live_line_says_cell_rates_and_times(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [1000.0]
    _clock(monkeypatch, now)
    out = io.StringIO()
    progress = Progress(out, live=True, quick=True, window=5, max_rounds=8)
    test = _test(_cells(3, seconds=10.0))
    progress.start((test,))
    progress.test_started(test)
    progress.phase("round", 2, test.round_seconds)
    progress.running(test.round_cells)
    now[0] += 12.0
    progress.tick(Tick(12.0, FioStatus(35210.4, 144.23e6, 1, 3), 1))
    text = progress.text()
    assert text.startswith("QUICK · iops round 2/8 · cell 2/3 8 KiB 65/35 · ")
    assert "35,210 IOPS 144.2 MB/s" in text
    assert re.search(r"· round 0:12, 0:18 left ·", text), text
    assert re.search(r"· run 0:12, ETA \d+:\d\d-\d+:\d\d", text), text
    drawn = out.getvalue().rsplit("\r\x1b[K", 1)[-1]
    assert drawn == text  # what was drawn last


def test_not_on_a_terminal_a_long_fio_run_gets_a_plain_line_a_minute(
        monkeypatch: pytest.MonkeyPatch) -> None:
    now = [1000.0]
    _clock(monkeypatch, now)
    out = io.StringIO()
    progress = Progress(out, live=False)
    progress.phase("preconditioning")
    for second in range(1, 181):  # three minutes of fio, ticked four times a second
        for quarter in range(4):
            now[0] = 1000.0 + second - 1 + quarter / 4
            progress.tick(Tick(second - 1 + quarter / 4, FioStatus(100.0, 1e6, 0, 1)))
    lines = out.getvalue().splitlines()
    assert "\r" not in out.getvalue()
    assert len(lines) == 2 and all("preconditioning" in line for line in lines), lines
    assert all("100 IOPS 1.0 MB/s" in line for line in lines)


class _ClosedPipe(io.StringIO):
    """A stream whose reader has gone, like ``| head -3`` after three lines."""

    def __init__(self, fd: int) -> None:
        super().__init__()
        self.fd = fd
        self.writes = 0

    def write(self, text: str) -> int:
        self.writes += 1
        raise BrokenPipeError(32, "Broken pipe")

    def fileno(self) -> int:
        return self.fd


def test_a_closed_stdout_is_not_an_error(tmp_path: Path) -> None:
    """The first write that finds the reader gone points the descriptor at /dev/null; no
    later write is tried, and nothing raises."""
    path = tmp_path / "stdout"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        stream = _ClosedPipe(fd)
        progress = Progress(stream, live=True)
        progress.line("one")
        progress.phase("round", 1, 5.0)
        progress.close()
        write(stream, "more")
        assert stream.writes == 1
        os.write(fd, b"after")  # the descriptor is /dev/null now
    finally:
        os.close(fd)
    assert path.read_bytes() == b""
