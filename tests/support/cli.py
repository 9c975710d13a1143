"""Run the real ``ssdlab`` command in a subprocess (black-box CLI tests)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import ssdlab as ssdlab_package
from ssdlab.cli.main import invoked_as

#: the command ssdlab's hints name when a test starts it as ``python -m ssdlab`` (the
#: script beside this python, unless ``ssdlab`` on PATH is that script: cli/main.py)
HINTED = invoked_as(os.path.join(os.path.dirname(ssdlab_package.__file__), "__main__.py"))


def ssdlab(
    *args: str, timeout: float = 900, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ssdlab", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env=None if env is None else {**os.environ, **env},
    )


def one_line_error(result: subprocess.CompletedProcess[str]) -> str:
    """The single ``Error: ...`` line a refused command must print, and nothing else."""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("Error: "), result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    return lines[0]


def sha256_of(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def ssdlab_in_process(*args: str) -> subprocess.CompletedProcess[str]:
    """``ssdlab ARGS`` through :func:`ssdlab.cli.main.main` in this process, its output
    captured: the same parsing, validation and exit codes as the command, without the
    0.3 s of a new interpreter. For the hundreds of bad-input cases; the black-box tests
    use :func:`ssdlab`. Main thread only (the command installs a SIGTERM handler, which
    is put back afterwards)."""
    import contextlib
    import io
    import signal

    from ssdlab.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    previous = signal.getsignal(signal.SIGTERM)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(list(args))
            except SystemExit as exc:  # argparse's own exits (--help)
                code = exc.code if isinstance(exc.code, int) else 1
    finally:
        signal.signal(signal.SIGTERM, previous)
    return subprocess.CompletedProcess(["ssdlab", *args], code, out.getvalue(), err.getvalue())


def processes_using(path: str | Path) -> list[str]:
    """``PID (command)`` of every process with ``path`` open (its /proc/PID/fd links), as
    ``fuser`` finds them: fio reads its job file from stdin, so its command line never
    names the target."""
    wanted = os.path.realpath(path)
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            links = [os.readlink(f"/proc/{entry}/fd/{fd}") for fd in os.listdir(
                f"/proc/{entry}/fd")]
            comm = Path(f"/proc/{entry}/comm").read_text().strip()
        except OSError:  # gone meanwhile, or a kernel thread
            continue
        if wanted in links:
            found.append(f"{entry} ({comm})")
    return found


def fio_processes(*, orphaned: bool = False) -> set[int]:
    """PIDs of the fio processes ssdlab runs (``fio --output-format=json... -``);
    ``orphaned``: only those whose parent is neither an ssdlab process nor another Python
    program (a benchmark driving ssdlab's engine): left behind by one that died, so that
    other ssdlab runs on the machine do not count."""
    pids = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
            if not (argv and os.path.basename(argv[0]) == b"fio"
                    and any(a.startswith(b"--output-format=json") for a in argv)):
                continue
            parent = _parent_cmdline(entry)
            if orphaned and (b"ssdlab" in parent or b"python" in parent):
                continue
        except OSError:
            continue
        pids.add(int(entry))
    return pids


def parent_pid(pid: int | str) -> int:
    """The parent of ``pid`` (-1 when it is gone)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return -1
    return int(next(line.split()[1] for line in status.splitlines()
                    if line.startswith("PPid:")))


def runner_pid(pid: int | str) -> int:
    """Who runs the fio process ``pid``: its first ancestor that is neither fio (a gated
    fio's job processes are fio's children) nor the gate's ``unshare`` (engine/gate.py)."""
    ppid = parent_pid(pid)
    while ppid > 1:
        argv0 = Path(f"/proc/{ppid}/cmdline").read_bytes().split(b"\0")[0]
        if os.path.basename(argv0) not in (b"fio", b"unshare"):
            break
        ppid = parent_pid(ppid)
    return ppid


def _parent_cmdline(pid: str) -> bytes:
    return Path(f"/proc/{runner_pid(pid)}/cmdline").read_bytes()


def wait_for(what: str, done: Callable[[], object], timeout: float = 240) -> None:
    """Poll ``done()`` every 0.2 s until it is true; AssertionError naming ``what`` after
    ``timeout`` seconds."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if done():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


@contextmanager
def killed_at_exit(proc: subprocess.Popen[str]) -> Iterator[subprocess.Popen[str]]:
    """``proc`` is killed and reaped when the block ends with it still running (a failed
    assertion, a timeout), so no test leaves a process behind."""
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
