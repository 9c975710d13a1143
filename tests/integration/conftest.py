"""One real quick PTS run on the emulated SSD, shared by the tests that need one.

A full quick PTS takes minutes (56 IOPS cells a round, four preconditionings), so it
runs once per session: the core acceptance test checks what it stored, the report test
renders it. It uses 0.1 s cells, QD 8 and at most 5 rounds to save time (the 56-cell
IOPS rounds dominate; the fio gate keeps their stonewalls without fio's own pause of
about 0.25 s a cell, engine/gate.py). The emulator
(enterprise-tlc, 256 MiB, a loop device with direct I/O over its disk file) lives in a
private /dev/shm directory and is stopped at the end. The run must exit 0 (else every
test that needs it fails with the run's stderr and the tail of its stdout); its id is the
only run in its fresh store.

The tests that use it allow ``QUICK_PTS_TIMEOUT_S`` (pytest-timeout): the first of them
also pays for the run.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from ssdlab.errors import EnvironmentProblem
from ssdlab.store.db import Store
from ssdlab.targets import emulator
from ssdlab.targets.emulator import binary
from tests.support.cli import ssdlab

MIB = 1 << 20
QUICK_PTS_SIZE = 256 * MIB
#: the quick PTS run itself may take this long (about 220 s on 2 idle cores) ...
QUICK_PTS_RUN_TIMEOUT_S = 1500
#: ... and a test that uses it this long, the run included (pytest.mark.timeout)
QUICK_PTS_TIMEOUT_S = QUICK_PTS_RUN_TIMEOUT_S + 300


@dataclass(frozen=True)
class QuickPts:
    store: Path
    run_id: str
    device: str
    size_bytes: int
    result: subprocess.CompletedProcess[str]
    env: dict[str, str]  # SSDLAB_EMU_RUN_DIR for further emulators of the same session
    workdir: Path


def emulator_available() -> str | None:
    """Why the emulator cannot run here, or None when it can."""
    if os.geteuid() != 0:
        return "needs root"
    if not os.path.exists("/dev/fuse"):
        return "no /dev/fuse"
    try:
        binary()
    except EnvironmentProblem:
        return "the emulator is not built"
    return None


@pytest.fixture
def emu_run_dir(shm_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A private directory for emulators (``emulator.RUN_DIR`` points at it; give the CLI
    ``SSDLAB_EMU_RUN_DIR``); every emulator left in it is stopped afterwards. Skips the
    test where the emulator cannot run."""
    why = emulator_available()
    if why:
        pytest.skip(why)
    run_dir = shm_dir / "emus"
    monkeypatch.setattr(emulator, "RUN_DIR", run_dir)
    try:
        yield run_dir
    finally:
        for item in emulator.status():
            emulator.stop(item.name)


@pytest.fixture(scope="session")
def quick_pts() -> Iterator[QuickPts]:
    why = emulator_available()
    if why:
        pytest.skip(why)
    workdir = Path(tempfile.mkdtemp(prefix="ssdlab-session-", dir="/dev/shm"))
    env = {"SSDLAB_EMU_RUN_DIR": str(workdir / "emus")}
    try:
        started = _succeeded("starting the emulator", "emulator", "start", "--name", "pts",
                             "--size", str(QUICK_PTS_SIZE), "--loop", env=env)
        device = next(line.split()[-1] for line in started.stdout.splitlines()
                      if "target:" in line)
        store = workdir / "results.sqlite"
        # the quick profile with 0.1 s cells, QD 8 and at most 5 rounds (the SNIA window):
        # every test and cell of the PTS
        result = _succeeded("the session's quick PTS run", "run", "pts", "--target", device,
                            "--profile", "quick", "--round-seconds", "0.1", "--max-rounds",
                            "5", "--qd", "8", "--destroy-data", "--store", str(store),
                            env=env, timeout=QUICK_PTS_RUN_TIMEOUT_S)
        yield QuickPts(store, only_run_id(store), device, QUICK_PTS_SIZE, result, env, workdir)
    finally:
        ssdlab("emulator", "stop", "--all", env=env)
        shutil.rmtree(workdir, ignore_errors=True)


def _succeeded(what: str, *args: str, env: dict[str, str],
               timeout: float = 900) -> subprocess.CompletedProcess[str]:
    """``ssdlab ARGS``, which must exit 0 in time; else the test fails with its stderr and
    the tail of its stdout."""
    try:
        result = ssdlab(*args, env=env, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"{what} did not end within {timeout:g} s: ssdlab {' '.join(args)}\n"
                    f"{_outputs(exc.stderr, exc.stdout)}", pytrace=False)
    if result.returncode != 0:
        pytest.fail(f"{what} failed with exit status {result.returncode}: "
                    f"ssdlab {' '.join(args)}\n{_outputs(result.stderr, result.stdout)}",
                    pytrace=False)
    return result


def _outputs(stderr: str | bytes | None, stdout: str | bytes | None, lines: int = 40) -> str:
    def text(output: str | bytes | None) -> str:
        return (output.decode(errors="replace") if isinstance(output, bytes)
                else output or "").rstrip()

    tail = "\n".join(text(stdout).splitlines()[-lines:])
    return f"--- stderr:\n{text(stderr)}\n--- stdout, last {lines} lines:\n{tail}"


def only_run_id(store: Path) -> str:
    """The id of the one run in a fresh store (fails when it holds none or several)."""
    with Store.open(store) as opened:
        runs = opened.list_runs()
    if len(runs) != 1:
        pytest.fail(f"{store} should hold exactly one run, holds "
                    f"{[(r.run_id, r.status) for r in runs]}", pytrace=False)
    return runs[0].run_id
