"""Run fio as a subprocess: the job file on stdin, a watchdog, clean Ctrl-C.

fio writes its results (JSON) to a pipe of their own (``--output=/dev/fd/3``) and its
status line to standard output: the live IOPS and bandwidth each tick carries
(engine/status.py).

The :class:`Executor` protocol is the engine boundary: a job file goes in, a
:class:`FioRun` (verbatim output plus the parsed measurement) comes out. The real
:class:`FioExecutor` runs the fio binary; tests of orchestration use a fake one.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

from ssdlab.children import die_with_parent
from ssdlab.cpuidle import idle_policy
from ssdlab.cpuidle import policy as idle_policy_env
from ssdlab.engine.gate import NAMESPACE, Gate, gated
from ssdlab.engine.model import FioOutput, JobResult
from ssdlab.engine.parser import FioOutputError, parse_fio_output
from ssdlab.engine.status import ETA_OPTIONS, OutputReader, Tick
from ssdlab.plan.round_start import RoundStart

#: called with the seconds elapsed while fio runs (for progress displays); the real
#: executor passes a :class:`~ssdlab.engine.status.Tick`, which also carries what fio's
#: status line said last
TickFn = Callable[[float], None]

WATCHDOG_FACTOR = 1.5
WATCHDOG_MARGIN_S = 30.0
#: testing knob: a smaller margin makes the watchdog bite sooner (documented in docs/faults.md)
WATCHDOG_MARGIN_ENV = "SSDLAB_WATCHDOG_MARGIN_S"
KILL_GRACE_S = 5.0
#: how often the tick function is called while fio runs (the live line is redrawn at
#: most every :data:`ssdlab.run.progress.DRAW_S`)
TICK_S = 0.25
#: the descriptor fio writes its results to (a pipe ssdlab reads; its standard output
#: carries the status line)
RESULTS_FD = 3


def watchdog_seconds(planned_s: float) -> float:
    """How long a time-based fio run may take before it is considered stuck."""
    margin = WATCHDOG_MARGIN_S
    with contextlib.suppress(KeyError, ValueError):
        margin = max(0.0, float(os.environ[WATCHDOG_MARGIN_ENV]))
    return planned_s * WATCHDOG_FACTOR + margin


class FioInterrupted(Exception):
    """The user pressed Ctrl-C while fio ran; fio was stopped and its output discarded."""


@dataclass(frozen=True)
class FioRun:
    """One fio invocation, verbatim, with the parsed output when it succeeded."""

    job_text: str
    command: tuple[str, ...]
    stdout: str
    stderr: str
    returncode: int
    started_at: float
    ended_at: float
    timed_out: bool
    output: FioOutput | None
    error: str | None  # one line: why this run did not produce a usable measurement
    #: a run on several fio servers (engine/client.py): each host's own job results
    #: (``output`` holds their aggregate)
    per_host: tuple[JobResult, ...] = ()
    #: on several fio servers: when each host's cells started (None: not measured)
    start: RoundStart | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and self.output is not None


class Executor(Protocol):
    def run(
        self,
        job_text: str,
        timeout_s: float,
        *,
        json_plus: bool = False,
        on_tick: TickFn | None = None,
    ) -> FioRun: ...


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """Stop fio's whole process group: SIGTERM, then SIGKILL after a grace period."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(timeout=KILL_GRACE_S)
            return
        except subprocess.TimeoutExpired:
            continue
    proc.wait()


def _strerror(code: int) -> str:
    """The errno's text. An engine can report a negated errno as an unsigned int, and -1
    (fio's nbd engine when the server went away) is no errno at all."""
    signed = code - (1 << 32) if code >= 1 << 31 else code
    if signed == -1:
        return "-1: the engine gave no errno"
    number = abs(signed)
    return os.strerror(number) if 0 < number < 1 << 16 else "not an errno"


def _error_of(
    returncode: int, stderr: str, output: FioOutput | None, timed_out: bool
) -> str | None:
    if timed_out:
        return "fio did not finish in time and was killed by the watchdog"
    if output is not None:
        failed = [job for job in output.jobs if job.error]
        if failed:
            job = failed[0]
            return f"fio job {job.name} failed: error {job.error} ({_strerror(job.error)})"
    if returncode != 0:
        first = stderr.strip().splitlines()[:1]
        return f"fio exited with status {returncode}" + (f": {first[0]}" if first else "")
    if output is None:
        return "fio printed no results"
    return None


class FioExecutor:
    """Runs the real fio binary with the job file on its standard input."""

    def __init__(self, fio: str = "fio", *, read_only: bool = False,
                 cpu_idle: str | None = None) -> None:
        self.fio = fio
        self.read_only = read_only  # fio --readonly: fio refuses any write or trim job
        #: idle CPUs while fio runs: "poll" holds the 0 us wake-up latency limit, "system"
        #: leaves the host's policy (default: $SSDLAB_CPU_IDLE, else poll; cpuidle.py)
        self.cpu_idle = cpu_idle or idle_policy_env()

    def command(self, json_plus: bool) -> tuple[str, ...]:
        fmt = "json+" if json_plus else "json"
        guard = ("--readonly",) if self.read_only else ()
        return (self.fio, f"--output-format={fmt}", f"--output=/dev/fd/{RESULTS_FD}",
                *ETA_OPTIONS, *guard, "-")

    def run(
        self,
        job_text: str,
        timeout_s: float,
        *,
        json_plus: bool = False,
        on_tick: TickFn | None = None,
    ) -> FioRun:
        with idle_policy(self.cpu_idle):
            return self._run(job_text, timeout_s, json_plus, on_tick)

    def _run(
        self, job_text: str, timeout_s: float, json_plus: bool, on_tick: TickFn | None
    ) -> FioRun:
        cmd = self.command(json_plus)
        gates: list[Gate] = []
        with gated(job_text, gates.append) as (text, cwd):  # stonewalls without fio's
            return parsed(run_watched(                       # dead time: gate.py
                cmd, job_text, timeout_s, on_tick, stdin=text, cwd=cwd,
                wrapper=NAMESPACE if cwd else (), results_fd=RESULTS_FD,
                position=(lambda: gates[0].opened - 1) if gates else None))


def _wrapper_preexec() -> None:
    """In a wrapper of fio, before exec: die with ssdlab, and leave SIGTERM to fio (fio
    sets its own handler; the wrapper ends when fio does)."""
    die_with_parent()
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


#: called on every tick while fio runs: a one-line reason to stop it now, or None
StopCheck = Callable[[], str | None]


class FioStopped(Exception):
    """A :data:`StopCheck` stopped fio (``reason``); its output was kept (``run``)."""

    def __init__(self, reason: str, run: FioRun) -> None:
        super().__init__(reason)
        self.reason = reason
        self.run = run


def run_watched(cmd: tuple[str, ...], job_text: str, timeout_s: float,
                on_tick: TickFn | None, stop_check: StopCheck | None = None,
                stdin: str | None = None, cwd: Path | None = None,
                wrapper: tuple[str, ...] = (), results_fd: int | None = None,
                position: Callable[[], int] | None = None) -> FioRun:
    """Run fio (``cmd``; ``stdin``, by default ``job_text``, on its standard input) in its
    own process group under the watchdog: what it printed, not parsed yet (:func:`parsed`).
    Ctrl-C stops it (FioInterrupted); ``stop_check`` may stop it early (FioStopped).
    ``wrapper`` (the gate's PID namespace) starts fio; it ignores the SIGTERM that stops
    fio, which fio handles, and is killed by the SIGKILL after it, or with ssdlab.
    ``results_fd``: ``cmd`` names ``/dev/fd/<results_fd>`` for fio's results; it is made
    a pipe of its own there, and the run's ``stdout`` is what came through it after what
    fio printed on standard output that is not its status line. ``position``: which
    position of the job file runs (the gate's; -1 before the first), for the ticks."""
    started = time.time()
    with _results_pipe(cmd, results_fd) as (cmd_run, results, passed):
        proc = subprocess.Popen(
            [*wrapper, *cmd_run],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            pass_fds=passed,
            start_new_session=True,  # Ctrl-C reaches ssdlab, which stops fio itself
            preexec_fn=_wrapper_preexec if wrapper else die_with_parent,
            cwd=cwd,
        )
        readers = _Readers(proc, results)
    text = job_text if stdin is None else stdin
    ticker = None if on_tick is None else _ticker(on_tick, readers.out, position)
    timed_out, stopped = _wait(proc, text, started, timeout_s, ticker, stop_check, readers)
    out, err = _texts(readers)
    done = FioRun(job_text, tuple(cmd_run), out, err, proc.returncode, started, time.time(),
                  timed_out, None, None)
    if stopped is not None:
        raise FioStopped(stopped, done)
    return done


@contextlib.contextmanager
def _results_pipe(cmd: tuple[str, ...], fd: int | None
                  ) -> Iterator[tuple[tuple[str, ...], int | None, tuple[int, ...]]]:
    """``cmd`` with its ``/dev/fd/<fd>`` naming the write end of a new pipe, the read end
    and the descriptors fio is given (the write end, closed here after fio started)."""
    if fd is None:
        yield cmd, None, ()
        return
    read_end, write_end = os.pipe()
    os.set_inheritable(read_end, False)
    name = f"/dev/fd/{fd}"
    try:
        yield tuple(f"--output=/dev/fd/{write_end}" if part == f"--output={name}" else part
                    for part in cmd), read_end, (write_end,)
    except BaseException:
        os.close(read_end)
        raise
    finally:
        os.close(write_end)


class _Readers:
    """The threads reading fio's standard output, its standard error and its results."""

    def __init__(self, proc: subprocess.Popen[bytes], results: int | None) -> None:
        assert proc.stdout is not None and proc.stderr is not None
        self.out = OutputReader(proc.stdout.fileno(), statuses=True)
        self.err = OutputReader(proc.stderr.fileno())
        self.results = OutputReader(results) if results is not None else None
        self.pipes = [proc.stdout, proc.stderr]
        self.results_fd = results
        for reader in self.all():
            reader.start()

    def all(self) -> list[OutputReader]:
        return [self.out, self.err, *([self.results] if self.results else [])]

    def join(self) -> None:
        for reader in self.all():
            reader.join()
        for pipe in self.pipes:
            pipe.close()
        if self.results_fd is not None:
            os.close(self.results_fd)
            self.results_fd = None


def _ticker(on_tick: TickFn, out: OutputReader, position: Callable[[], int] | None
            ) -> TickFn:
    """``on_tick`` given a :class:`Tick`: what fio's status line and the gate say now."""
    def tick(elapsed_s: float) -> None:
        on_tick(Tick(elapsed_s, out.status, position() if position is not None else None))
    return tick


def _texts(readers: _Readers) -> tuple[str, str]:
    """(fio's results after what else it printed on standard output, its standard error)."""
    readers.join()
    results = readers.results.text() if readers.results is not None else ""
    return readers.out.text() + results, readers.err.text()


def parsed(done: FioRun) -> FioRun:
    """A finished fio run with its output parsed, and why it is not usable."""
    output: FioOutput | None = None
    parse_error: str | None = None
    if not done.timed_out:
        try:
            output = parse_fio_output(done.stdout)
        except FioOutputError as exc:
            parse_error = exc.message
    error = _error_of(done.returncode, done.stderr, output, done.timed_out)
    if error is None and parse_error is not None:
        error = parse_error
    return replace(done, output=output, error=error)


def _feed(proc: subprocess.Popen[bytes], text: str) -> None:
    """The job file on fio's standard input, then closed (fio reads it all first)."""
    assert proc.stdin is not None
    try:
        proc.stdin.write(text.encode())
        proc.stdin.close()
    except (BrokenPipeError, ValueError, OSError):
        pass  # fio ended before reading it: its exit status says why


def _wait(
    proc: subprocess.Popen[bytes],
    job_text: str,
    started: float,
    timeout_s: float,
    on_tick: TickFn | None,
    stop_check: StopCheck | None,
    readers: _Readers,
) -> tuple[bool, str | None]:
    """Wait for fio: (timed out, why a stop check stopped it)."""
    feeder = threading.Thread(target=_feed, args=(proc, job_text), name="fio-stdin",
                              daemon=True)
    try:
        feeder.start()
        while True:
            try:
                proc.wait(timeout=TICK_S)
                return False, None
            except subprocess.TimeoutExpired:
                pass
            elapsed = time.time() - started
            if elapsed > timeout_s:
                _stop(proc)
                return True, None
            reason = stop_check() if stop_check is not None else None
            if reason is not None:
                _stop(proc)
                return False, reason
            if on_tick is not None:
                on_tick(elapsed)
    except KeyboardInterrupt:
        _stop(proc)
        readers.join()
        raise FioInterrupted() from None
