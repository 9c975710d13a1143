"""fio's own status line while it runs: live IOPS and bandwidth for the progress line.

fio prints a status line (its "ETA line") about once a second on standard output::

    Jobs: 1 (f=1): [_(2),w(1),P(1)][50.0%][w=78.5MiB/s][w=20.1k IOPS][eta 00m:03s]

Its rates are fio's own: the I/Os and bytes completed by every job since the line before,
over the time between the two (``calc_thread_status`` in fio's eta.c), so they cost
nothing to measure. The bracket before them has one letter per job process: ``_``, ``E``,
``X``, ``K`` for ended jobs, ``P`` for jobs not started yet, a letter per kind of I/O for
running ones, so the jobs that have ended say how far a round of stonewalled cells is.

fio 3.33 prints it only when its results go elsewhere than standard output
(``--output=FILE``) and it is asked to (``--eta=always``: standard output is a pipe);
``--eta-interval`` sets how often (250 ms at least). The runner does exactly that
(engine/runner.py): the results go to a pipe of their own. Rates come once fio has a
figure for the time left: at once for stonewalled jobs, from its third second on when
every job exists from the start (the fio gate's rounds, engine/gate.py). One thing is
lost: fio buffers a file given to ``--output``, and a job process ends without flushing
it, so the notes job processes print there (``Saving output of prerun in ...``) never
arrive; fio's own process's notes and every error (standard error) do. The status line
is for display only: nothing measured is taken from it.
"""

from __future__ import annotations

import codecs
import os
import re
import threading
from dataclasses import dataclass

#: how often fio prints its status line (fio's ``--eta-interval``; 250 ms at least)
ETA_INTERVAL_MS = 500
#: the options that make fio print it to standard output while results go to a file
ETA_OPTIONS = ("--eta=always", f"--eta-interval={ETA_INTERVAL_MS}ms")

_PREFIX = "Jobs: "
_RUN = re.compile(r"\[((?:[A-Za-z_/](?:\(\d+\))?,?)+)\]")
_STATE = re.compile(r"([A-Za-z_/])\((\d+)\)|([A-Za-z_/])")
_RATES = re.compile(r"\]\[((?:[rwt]=[^,\]]+,?)+)\]\[((?:[rwt]=[^,\]\s]+,?)+) IOPS\]")
_SI = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15,
       "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50}
_RATE = re.compile(r"^(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|Pi|k|K|M|G|T|P)?(B/s|bit/s)$")
_COUNT = re.compile(r"^(\d+(?:\.\d+)?)(k|K|M|G|T|P)?$")
#: the letters of job processes that have ended (fio's eta.c, ``check_str_update``)
_ENDED = frozenset("_EXK")


@dataclass(frozen=True)
class FioStatus:
    """What fio's last status line said."""

    iops: float  # read + write + trim I/Os per second over fio's last status interval
    bytes_per_s: float  # and bytes per second
    jobs_ended: int  # job processes that have ended
    jobs: int  # job processes in all


def _value(text: str, pattern: re.Pattern[str]) -> float | None:
    found = pattern.match(text.strip())
    if found is None:
        return None
    value = float(found.group(1)) * _SI[found.group(2) or ""]
    return value / 8 if found.lastindex == 3 and found.group(3) == "bit/s" else value


def _sum(pairs: str, pattern: re.Pattern[str]) -> float | None:
    total = 0.0
    for pair in pairs.split(","):
        value = _value(pair.partition("=")[2], pattern)
        if value is None:
            return None
        total += value
    return total


def parse_status(line: str) -> FioStatus | None:
    """One status line of fio, or None when ``line`` is not one with rates (fio prints
    ``Jobs: 0 (f=0)`` between jobs and before the first rates)."""
    line = line.strip()
    if not line.startswith(_PREFIX):
        return None
    run = _RUN.search(line)
    rates = _RATES.search(line)
    if run is None or rates is None:
        return None
    ended = jobs = 0
    for letter, count, single in _STATE.findall(run.group(1)):
        n = int(count) if count else 1
        jobs += n
        ended += n if (letter or single) in _ENDED else 0
    bw = _sum(rates.group(1), _RATE)
    iops = _sum(rates.group(2), _COUNT)
    if bw is None or iops is None:
        return None
    return FioStatus(iops=iops, bytes_per_s=bw, jobs_ended=ended, jobs=jobs)


def is_status(line: str) -> bool:
    """Whether a line of fio's standard output is a status line (with rates or not)."""
    return line.startswith(_PREFIX)


class Tick(float):
    """The seconds since fio started, as every tick function is given them, with what
    fio's status line said last (``status``; None before its first line with rates, which
    fio prints from its third second on, or when fio prints none: a fake executor, fio's
    client mode) and, in a round through the fio gate (engine/gate.py), the position of
    the job file that runs (``position``: 0 for the first cell, -1 while the jobs set
    themselves up; None without the gate)."""

    status: FioStatus | None
    position: int | None

    def __new__(cls, elapsed_s: float, status: FioStatus | None = None,
                position: int | None = None) -> Tick:
        tick = super().__new__(cls, elapsed_s)
        tick.status = status
        tick.position = position
        return tick


def status_of(elapsed_s: float) -> FioStatus | None:
    """The fio status a tick carries, if any."""
    return elapsed_s.status if isinstance(elapsed_s, Tick) else None


def position_of(elapsed_s: float) -> int | None:
    """The gate's position a tick carries, if any."""
    return elapsed_s.position if isinstance(elapsed_s, Tick) else None


class OutputReader(threading.Thread):
    """Reads one of fio's output pipes (``fd``) to its end: the text and, with
    ``statuses``, the last status line with rates (:attr:`status`), kept out of the text."""

    def __init__(self, fd: int, *, statuses: bool = False) -> None:
        super().__init__(name="fio-output", daemon=True)
        self.fd = fd
        self.statuses = statuses
        self.status: FioStatus | None = None
        self._kept: list[str] = []
        self._pending = ""

    def run(self) -> None:
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        while True:
            try:
                chunk = os.read(self.fd, 65536)
            except OSError:
                chunk = b""
            if not chunk:
                break
            self._take(decoder.decode(chunk))
        self._take(decoder.decode(b"", final=True))
        if self._pending:
            self._kept.append(self._pending)
            self._pending = ""

    def _take(self, text: str) -> None:
        if not self.statuses:
            self._kept.append(text)
            return
        self._pending += text
        *segments, self._pending = self._pending.split("\r")
        for segment in segments:  # a status line ends with "\r", after any other text
            before, newline, last = segment.rpartition("\n")
            if is_status(last):
                self._kept.append(before + newline)
                status = parse_status(last)
                if status is not None:
                    self.status = status
            else:
                self._kept.append(segment + "\r")

    def text(self) -> str:
        """What was read, without status lines (call after the thread has ended)."""
        return "".join(self._kept)
