"""Rounds that start together on several hosts: every job waits for a common instant.

fio 3.33's server acts on the client's "run" only when its own 1 s timer runs out (its
connection's child sleeps in ``fio_sem_down_timeout(.., 1000)`` and incoming data does
not wake it), so hosts driven by one ``fio --client`` start 0.1-1 s apart. Instead, each
job of a round starts with ``exec_prerun`` (fio runs it after the job has set itself up
and right before its clock starts): a POSIX shell :func:`waiter` that sleeps until the
job's position's start instant in its own host's clock (the coordinator's instant plus
that host's clock offset), then appends one line to a file of the agent's private
directory (:data:`MARKS_FILE`): the position, the instant it waited for, when it began and
when it woke (nanoseconds since the epoch, the host's clock). The agent hands the lines
over (``starts`` request); :func:`host_marks` reads them.

A round's first position starts at the coordinator's chosen instant; each later one at
the previous one's start plus its duration (``ramp_time`` + ``runtime`` of time-based
jobs) plus a gap for fio's own pause between stonewalled jobs. A position after one of
unknown duration (a job of a size, not a time) only says when it began: its jobs do not
wait. The waiter never shortens anything: a job that gets there after its instant runs
at once (that host is late), and ``stonewall`` still orders the positions.

Pure: job text in, job text out; marks in, numbers out.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ssdlab.engine.jobtext import SECTION, Job, job_file_of, positions
from ssdlab.jsonrecord import Record

#: the file the waiters write their lines to (in the agent's private directory)
MARKS_FILE = "ssdlab-starts"
#: a job file whose jobs order themselves runs as it is (no waiters)
_OWN_ORDERING = frozenset({"exec_prerun", "startdelay"})
_DURATION = re.compile(r"^(\d+)(ms|s)?$")
#: the waiting shell (and what it starts) as a real-time process, where it may be one
_REALTIME = "chrt -f -p 10 $$ > /dev/null 2>&1"


def waiter(position: int, at_ns: int | None, marks: str = MARKS_FILE) -> str:
    """The shell command of a job of ``position``: sleep until ``at_ns`` (nanoseconds
    since the epoch in its host's clock; None: do not wait), then say when it began and
    woke (a line appended to ``marks``: a plain path). One line without ``;``, ``#`` or
    ``${`` (fio cuts an option at a comment and puts its own environment in for
    ``${NAME}``); ``sh`` (dash), coreutils and util-linux only, so that it is cheap in a
    slow guest. The shell makes itself a real-time process first (where it may), so that
    on a busy host it wakes when its sleep ends, not when the scheduler next gets to it;
    what it runs after waking is ``date`` and shell builtins."""
    # fio runs it as `WAITER > JOB.prerun.txt 2>&1`, and that redirection takes the last
    # command: the closing `:`, after the line went to the marks file
    say = f"echo {position} {at_ns or 0} $b $(date +%s%N) >> {marks} && :"
    if at_ns is None:
        return f"b=$(date +%s%N) && {say}"
    # `a && test || sleep && say`: sh reads it left to right, so the sleep is skipped when
    # the instant has passed and the line is said either way; coreutils' sleep reads
    # "300000000e-9" (0.3 s)
    return (f"{_REALTIME} || : && b=$(date +%s%N) && r=$(({at_ns} - b)) && "
            f"test $r -le 0 || sleep $((r))e-9 && {say}")


def position_seconds(jobs: Sequence[Job]) -> float | None:
    """How long a position's jobs run: the longest ``ramp_time`` + ``runtime`` of its
    time-based jobs (None: a job that runs for a size, or a duration not in seconds or
    milliseconds)."""
    longest = 0.0
    for job in jobs:
        if job.value("time_based") not in ("1", "true"):
            return None
        runtime, ramp = _seconds(job.value("runtime")), _seconds(job.value("ramp_time") or "0")
        if runtime is None or ramp is None:
            return None
        longest = max(longest, runtime + ramp)
    return longest


def _seconds(value: str | None) -> float | None:
    match = _DURATION.match(value or "")
    if match is None:
        return None
    return int(match[1]) / (1000 if match[2] == "ms" else 1)


def schedule(job_text: str, gap_s: float) -> list[float | None] | None:
    """Each position's start in seconds after the round's instant (None: it does not
    wait), or None when the job file orders its jobs itself (it runs as it is)."""
    try:
        jobs = job_file_of(job_text).jobs
    except ValueError:
        return None
    if not jobs or any(k in _OWN_ORDERING for job in jobs for k, _ in job.options):
        return None
    out: list[float | None] = []
    offset: float | None = 0.0
    for cut in positions(jobs):
        out.append(offset)
        length = position_seconds(cut)
        offset = None if offset is None or length is None else offset + length + gap_s
    return out


def with_waiters(job_text: str, starts_ns: Sequence[int | None], marks: str = MARKS_FILE
                 ) -> str:
    """The job file with each job's :func:`waiter` (its position's instant from
    ``starts_ns``, its lines to ``marks``) as its first option, and its jobs run as
    processes: ``thread`` is dropped (a job's ``exec_prerun`` is a ``system()``, which in a
    process whose other threads have I/O in flight lost a completion: engine/gate.py)."""
    jobs = job_file_of(job_text).jobs
    position_of = [p for p, cut in enumerate(positions(jobs)) for _ in cut]
    out: list[str] = []
    index = 0
    for line in job_text.splitlines():
        if line.strip().partition("=")[0].strip() == "thread":
            continue
        out.append(line)
        head = SECTION.match(line.strip())
        if head is not None and head["name"].strip() != "global":
            position = position_of[index]
            out.append(f"exec_prerun={waiter(position, starts_ns[position], marks)}")
            index += 1
    return "\n".join(out) + "\n"


@dataclass(frozen=True)
class Mark(Record):
    """One job's line: its position, the instant it waited for (0: none), when it began
    and when it woke (nanoseconds, its host's clock)."""

    position: int
    at_ns: int
    began_ns: int
    woke_ns: int


def host_marks(text: str) -> list[Mark]:
    """The waiters' lines (a line that is not one is skipped: a job cut short)."""
    out = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) == 4 and all(f.isdigit() for f in fields):
            out.append(Mark(*map(int, fields)))
    return out
