"""Stonewalled jobs back to back: fio's barrier without its dead time.

A round runs its cells one after another in one fio process, each cell a section that
starts with ``stonewall``. fio 3.33's main loop starts a job only after the previous
ones are reaped, and looks again only every 100 ms: it creates the job, sleeps 100 ms
before it checks that the job has set itself up, starts it, and notices that a job has
ended at its next 100 ms tick (backend.c, ``run_threads``). That is about 0.25-0.3 s of
dead time per cell, measured here: ten stonewalled 0.1 s jobs take 4.1 s (``--thread``:
4.05 s); the quick PTS IOPS round is 60 s for 28 s of cells.

The gate keeps what is measured and drops the waiting. The job file fio runs has every
job of the round (``positions``: the jobs between two barriers run together) created at
once, and each barrier is kept by the jobs themselves:

* every job starts with ``exec_prerun``: say ``r<p>`` (ready, position *p*) on the FIFO
  ``ev``, wait for a shared lock on ``L<p>``, then check that ``go<p>`` exists. ssdlab
  holds every ``L<p>`` exclusively from the start;
* every job ends with ``exec_postrun``: write *p* to ``ev``. Both writes are
  non-blocking: if ssdlab is gone, they fail at once instead of waiting;
* ssdlab's :class:`Gate` reads ``ev``. When every job (every ``numjobs`` clone) is ready,
  it makes ``go0`` and releases ``L0``: no cell's I/O overlaps the setting up of the
  others (forks, buffers, ``io_setup``). When every ready job of position *p* has ended,
  it opens position *p+1* the same way, within milliseconds.

fio runs ``exec_prerun`` after the job has set itself up and before its clock starts, and
``exec_postrun`` after its last I/O has completed, so each job's I/O and its reported
runtime are exactly those of a stonewalled job, and no two positions' I/O overlap. A
``stonewall`` becomes ``new_group``, so reporting groups stay as they were.

If ssdlab dies, its locks go with it, but no ``go`` file is made: the waiting jobs fail
before any I/O. A job that fails to set itself up is never ready: once no job has become
ready for :data:`READY_GRACE_S`, the gate opens position 0 with the jobs that are, and a
position is over when its ready jobs have ended (a job set up later than that would run
when its position is open, or at once if it is over).

The jobs run as processes (fio's default), never as threads: ``thread=1`` is dropped.
With threads, a job's ``exec_*`` is a ``system()`` in a process whose other threads
have asynchronous direct I/O in flight, and on a loop device over a FUSE file (the
emulated SSD, purged and preconditioned) one completion of such a job was lost every
time (3 of 3 quick PTS rounds, Linux 6.18): the device and the emulator had nothing in
flight while fio's thread waited in ``io_getevents`` for 31 I/Os, until the watchdog.
As processes the same rounds always complete, and measure the same I/O.

Because every job of the round exists from the start, their I/O buffers do too: a job
file whose buffers (``numjobs`` x ``iodepth`` x its largest block size, added up) would
take more than a quarter of the memory available runs as it is.

Processes outlive their fio: a job process forked by a fio that the kernel kills with
ssdlab (``SIGKILL``: fio dies with its parent) is orphaned, and one that had set itself
up but was not started yet waits for that fio forever (the crash test saw them). So a
gated fio runs in a PID namespace of its own, as its init (:data:`NAMESPACE`, util-linux
``unshare``): when it dies, the kernel kills every job with it, as it kills threads with
their process. That needs root; without it, or without ``unshare``, rounds keep fio's
stonewalls.

The gate is used only where it can be: a local fio run with at least two positions, every
path in the job file absolute (fio runs in the gate's own directory, where its
``exec_*`` commands write their output files), no option that also orders jobs
(``startdelay``, ``wait_for``, ``exec_prerun``/``exec_postrun`` of its own), and job names
that are plain file names. ``SSDLAB_FIO_GATE=0`` turns it off (docs/faults.md).

Whoever wants to know where each position's I/O starts (the cache-bound check reads the
devices below the target there: docs/consistency.md) runs fio inside :func:`watching`:
the gate calls its function with the position's number right before it releases the
position's jobs, so what is read then separates one cell's I/O from the next one's.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import os
import re
import select
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path

from ssdlab.engine import scratch
from ssdlab.engine.jobtext import Job, job_file_of, positions
from ssdlab.units import parse_size

#: options whose value is a path (fio reads or writes it relative to its working
#: directory): the gate moves that directory, so each must be absolute
_PATH_OPTIONS = frozenset({
    "filename", "directory", "read_iolog", "write_iolog", "write_iops_log", "write_bw_log",
    "write_lat_log", "write_hist_log", "ioscheduler_file", "replay_redirect", "opendir",
    "trigger_file", "verify_state_save_dir",
})
#: options that order jobs in time themselves: such a job file runs as it is
_ORDERING = frozenset({"startdelay", "wait_for", "exec_prerun", "exec_postrun"})
_PLAIN_NAME = re.compile(r"^[A-Za-z0-9_.,+-]+$")
#: a directory the gate's shell commands can name as it is
_PLAIN_DIR = re.compile(r"^/[A-Za-z0-9_./+-]*$")
#: options dropped from every job the gate runs: its own barriers replace stonewalls, and
#: jobs run as processes (the module's documentation says why)
_DROPPED = frozenset({"stonewall", "wait_for_previous", "thread"})
#: options that name block sizes (their largest sizes a job's I/O buffers)
_BLOCK_SIZES = ("bs", "blocksize", "bsrange", "blocksize_range", "bssplit")
_SIZE_TOKEN = re.compile(r"\d+(?:\.\d+)?[a-zA-Z]*")
_DEFAULT_BS = 4096
#: the share of the memory available that the round's I/O buffers may take at once
MEMORY_SHARE = 0.25
_READ_CHUNK = 4096
#: ``SSDLAB_FIO_GATE=0`` runs every job file as it is (fio's own stonewalls)
GATE_ENV = "SSDLAB_FIO_GATE"
_POLL_S = 0.2
#: seconds without a job becoming ready after which the gate opens with those that are
READY_GRACE_S = 30.0


@dataclass(frozen=True)
class GatedJob:
    """The job file fio runs, and how many job processes each position has."""

    text: str
    threads: tuple[int, ...]  # per position


def _usable(jobs: Sequence[Job]) -> bool:
    """Every job names its files absolutely, has a plain name and no ordering of its own."""
    for job in jobs:
        if not _PLAIN_NAME.match(job.name):
            return False
        if job.value("filename") is None and job.value("directory") is None:
            return False  # fio would make a file named after the job in its directory
        in_directory = (job.value("directory") or "").startswith("/")
        for key, value in job.options:
            if key in _ORDERING:
                return False
            if key == "filename" and in_directory:
                continue  # fio takes it in that directory
            if key in _PATH_OPTIONS and value:
                paths = value.split(":") if key == "filename" else [value]
                if not all(p.startswith("/") for p in paths):
                    return False
    return True


def _largest_block(job: Job) -> int:
    sizes = [_DEFAULT_BS]
    for key in _BLOCK_SIZES:
        for token in _SIZE_TOKEN.findall(job.value(key) or ""):
            with contextlib.suppress(ValueError):
                sizes.append(parse_size(token))
    return max(sizes)


def buffer_bytes(jobs: Sequence[Job]) -> int:
    """The I/O buffers of every job at once: ``numjobs`` x ``iodepth`` x its largest
    block size, added up (fio allocates them when a job sets itself up)."""
    total = 0
    for job in jobs:
        try:
            depth = max(1, int(job.value("iodepth") or 1))
        except ValueError:
            depth = 1
        total += job.threads * depth * _largest_block(job)
    return total


def memory_available() -> int | None:
    """``MemAvailable`` from /proc/meminfo in bytes, or None when it cannot be read."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _say(word: str, gate_dir: Path) -> str:
    """A shell command writing ``word`` to the gate's FIFO without ever waiting."""
    return f"echo {word} | dd of={gate_dir}/ev oflag=nonblock status=none"


def gate_job(job_text: str, gate_dir: Path, memory: int | None = None) -> GatedJob | None:
    """The job file with its barriers kept by the gate in ``gate_dir`` (see the module's
    documentation), or None when the gate cannot or need not be used (``memory``: the
    bytes available; the buffers may take :data:`MEMORY_SHARE` of it)."""
    try:
        parsed = job_file_of(job_text)
    except ValueError:
        return None
    cut = positions(parsed.jobs)
    if len(cut) < 2 or not _usable(parsed.jobs) or not _PLAIN_DIR.match(str(gate_dir)):
        return None
    if memory is not None and buffer_bytes(parsed.jobs) > memory * MEMORY_SHARE:
        return None
    lines = [f"; {line}" for line in parsed.comments]
    for number, jobs in enumerate(cut):
        for index, job in enumerate(jobs):
            options = [o for o in job.options if o[0] not in _DROPPED]
            if index == 0 and number > 0:
                options.insert(0, ("new_group", None))
            # one line without ';' or '#': fio cuts an option's value at a comment
            options.append(("exec_prerun", f"{_say(f'r{number}', gate_dir)} && "
                            f"flock -s {gate_dir}/L{number} true && "
                            f"test -e {gate_dir}/go{number}"))
            options.append(("exec_postrun", _say(str(number), gate_dir)))
            lines += ["", f"[{job.name}]"]
            lines += [k if v is None else f"{k}={v}" for k, v in options]
    return GatedJob("\n".join(lines) + "\n", tuple(sum(j.threads for j in p) for p in cut))


class Gate:
    """The positions' locks and the reader of the jobs' words, for one fio run (a context
    manager: everything it made is gone when it exits)."""

    def __init__(self, threads: Sequence[int], directory: Path,
                 grace_s: float = READY_GRACE_S,
                 on_open: Callable[[int], None] | None = None) -> None:
        self.threads = tuple(threads)
        self.dir = directory
        self.grace_s = grace_s
        self.on_open = on_open
        self._locks: dict[int, int] = {}
        self._ready = [0] * len(self.threads)
        self._done = [0] * len(self.threads)
        self._fifo = -1
        self._stop = threading.Event()
        self._reader: threading.Thread | None = None
        self._last_ready = time.monotonic()
        #: positions opened so far
        self.opened = 0

    def __enter__(self) -> Gate:
        try:
            for number in range(len(self.threads)):
                fd = os.open(self.dir / f"L{number}", os.O_CREAT | os.O_RDWR | os.O_CLOEXEC,
                             0o600)
                self._locks[number] = fd
                fcntl.flock(fd, fcntl.LOCK_EX)
            os.mkfifo(self.dir / "ev", 0o600)
            self._fifo = os.open(self.dir / "ev", os.O_RDWR | os.O_NONBLOCK | os.O_CLOEXEC)
        except BaseException:
            self._close()
            raise
        self._last_ready = time.monotonic()
        self._reader = threading.Thread(target=self._read, name="fio-gate", daemon=True)
        self._reader.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._reader is not None:
            self._reader.join()
        self._close()

    def _close(self) -> None:
        for fd in self._locks.values():
            with contextlib.suppress(OSError):
                os.close(fd)  # releases the lock: a job still waiting finds no go file
        self._locks.clear()
        if self._fifo >= 0:
            os.close(self._fifo)
            self._fifo = -1

    def _read(self) -> None:
        pending = b""
        while not self._stop.is_set():
            ready, _, _ = select.select([self._fifo], [], [], _POLL_S)
            if ready:
                with contextlib.suppress(BlockingIOError):
                    pending += os.read(self._fifo, _READ_CHUNK)
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    self.said(line.strip().decode("ascii", "replace"))
            if not self.opened and time.monotonic() - self._last_ready >= self.grace_s:
                self._advance(force=True)  # some jobs never set themselves up

    def said(self, word: str) -> None:
        """A job's word: ``r<p>`` (a job of position p is ready) or ``<p>`` (it ended)."""
        number = word[1:] if word.startswith("r") else word
        if not number.isdigit() or int(number) >= len(self.threads):
            return
        if word.startswith("r"):
            self._ready[int(number)] += 1
            self._last_ready = time.monotonic()
        else:
            self._done[int(number)] += 1
        self._advance()

    def _advance(self, force: bool = False) -> None:
        if not self.opened:
            if not force and sum(self._ready) < sum(self.threads):
                return
            self._open(0)
        while self.opened < len(self.threads):
            current = self.opened - 1
            if self._done[current] < self._ready[current]:
                return
            self._open(self.opened)

    def _open(self, number: int) -> None:
        if self.on_open is not None:  # before the release: nothing of the position ran
            with contextlib.suppress(Exception):  # a watcher never stops the round
                self.on_open(number)
        # counted before its jobs are released: whoever sees them run sees it counted
        self.opened = number + 1
        fd = self._locks.pop(number)
        (self.dir / f"go{number}").touch()
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


#: how a gated fio is started: init of a PID namespace of its own, killed (with every job
#: in the namespace) when ``unshare`` dies, which dies with ssdlab
NAMESPACE = ("unshare", "--pid", "--fork", "--kill-child", "--")


@functools.cache
def namespace_works() -> bool:
    """Whether fio can run as :data:`NAMESPACE` says here (root, util-linux, a kernel that
    allows it)."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return False
    try:
        return subprocess.run([*NAMESPACE, "true"], capture_output=True, timeout=30,
                              check=False).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


#: the function :func:`watching` gives the gates of the fio runs made inside it
_WATCHER: ContextVar[Callable[[int], None] | None] = ContextVar("gate_watcher", default=None)


@contextlib.contextmanager
def watching(on_open: Callable[[int], None]) -> Iterator[None]:
    """While the block runs (in this thread), the gate of every fio run calls ``on_open``
    with each position's number right before it releases that position's jobs (from the
    gate's own thread: it must be quick and must not raise). A fio run without the gate
    never calls it."""
    token = _WATCHER.set(on_open)
    try:
        yield
    finally:
        _WATCHER.reset(token)


def gate_enabled() -> bool:
    """Whether rounds go through the gate (``SSDLAB_FIO_GATE=0`` turns it off)."""
    return os.environ.get(GATE_ENV, "1").strip().lower() not in ("0", "off", "no")


@contextlib.contextmanager
def gated(job_text: str, on_gate: Callable[[Gate], None] | None = None
          ) -> Iterator[tuple[str, Path | None]]:
    """The job text fio should run and the directory it should run in (None: as it is,
    in the caller's directory), with the gate open while the block runs (``on_gate`` is
    given it: its :attr:`Gate.opened` says which position runs)."""
    if not gate_enabled():
        yield job_text, None
        return
    with scratch.scratch_dir("gate") as directory:
        job = gate_job(job_text, directory, memory_available())
        if (job is None or shutil.which("flock") is None or shutil.which("dd") is None
                or not namespace_works()):
            yield job_text, None
            return
        with Gate(job.threads, directory, on_open=_WATCHER.get()) as gate:
            if on_gate is not None:
                on_gate(gate)
            yield job.text, directory
