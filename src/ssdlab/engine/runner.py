"""Run fio as a subprocess: the job file on stdin, a watchdog, clean Ctrl-C.

The :class:`Executor` protocol is the engine boundary: a job file goes in, a
:class:`FioRun` (verbatim output plus the parsed measurement) comes out. The real
:class:`FioExecutor` runs the fio binary; tests of orchestration use a fake one.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

from ssdlab.children import die_with_parent
from ssdlab.cpuidle import idle_policy
from ssdlab.cpuidle import policy as idle_policy_env
from ssdlab.engine.model import FioOutput, JobResult
from ssdlab.engine.parser import FioOutputError, parse_fio_output

#: called with the seconds elapsed while fio runs (for progress displays)
TickFn = Callable[[float], None]

WATCHDOG_FACTOR = 1.5
WATCHDOG_MARGIN_S = 30.0
#: testing knob: a smaller margin makes the watchdog bite sooner (documented in docs/faults.md)
WATCHDOG_MARGIN_ENV = "SSDLAB_WATCHDOG_MARGIN_S"
KILL_GRACE_S = 5.0
TICK_S = 0.5


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


def _stop(proc: subprocess.Popen[str]) -> tuple[str, str]:
    """Stop fio's whole process group: SIGTERM, then SIGKILL after a grace period."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            return proc.communicate(timeout=KILL_GRACE_S)
        except subprocess.TimeoutExpired:
            continue
    return proc.communicate()


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
        return (self.fio, f"--output-format={fmt}", "--eta=never", *guard, "-")

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
        from ssdlab.engine.gate import NAMESPACE, gated  # gate -> jobmerge -> this module
        cmd = self.command(json_plus)
        with gated(job_text) as (text, cwd):  # stonewalls without fio's dead time: gate.py
            return parsed(run_watched(cmd, job_text, timeout_s, on_tick, stdin=text,
                                      cwd=cwd, wrapper=NAMESPACE if cwd else ()))


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
                wrapper: tuple[str, ...] = ()) -> FioRun:
    """Run fio (``cmd``; ``stdin``, by default ``job_text``, on its standard input) in its
    own process group under the watchdog: what it printed, not parsed yet (:func:`parsed`).
    Ctrl-C stops it (FioInterrupted); ``stop_check`` may stop it early (FioStopped).
    ``wrapper`` (the gate's PID namespace) starts fio; it ignores the SIGTERM that stops
    fio, which fio handles, and is killed by the SIGKILL after it, or with ssdlab."""
    started = time.time()
    proc = subprocess.Popen(
        [*wrapper, *cmd],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        errors="replace",  # fio may print bytes that are not UTF-8 (file names, garbage)
        start_new_session=True,  # Ctrl-C reaches ssdlab, which stops fio itself
        preexec_fn=_wrapper_preexec if wrapper else die_with_parent,
        cwd=cwd,
    )
    text = job_text if stdin is None else stdin
    out, err, timed_out, stopped = _wait(proc, text, started, timeout_s, on_tick, stop_check)
    done = FioRun(job_text, cmd, out, err, proc.returncode, started, time.time(), timed_out,
                  None, None)
    if stopped is not None:
        raise FioStopped(stopped, done)
    return done


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


def _wait(
    proc: subprocess.Popen[str],
    job_text: str,
    started: float,
    timeout_s: float,
    on_tick: TickFn | None,
    stop_check: StopCheck | None,
) -> tuple[str, str, bool, str | None]:
    stdin: str | None = job_text
    try:
        while True:
            try:
                out, err = proc.communicate(stdin, timeout=TICK_S)
                return out, err, False, None
            except subprocess.TimeoutExpired:
                stdin = None
            elapsed = time.time() - started
            if elapsed > timeout_s:
                out, err = _stop(proc)
                return out, err, True, None
            reason = stop_check() if stop_check is not None else None
            if reason is not None:
                out, err = _stop(proc)
                return out, err, False, reason
            if on_tick is not None:
                on_tick(elapsed)
    except KeyboardInterrupt:
        _stop(proc)
        raise FioInterrupted() from None
