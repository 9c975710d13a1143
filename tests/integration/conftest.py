"""One real quick PTS run on the emulated SSD, shared by the tests that need one.

A full quick PTS takes minutes (56 IOPS cells a round, four preconditionings), so it
runs once per session: the core acceptance test checks what it stored, the report test
renders it. It uses 0.2 s cells, QD 8 and at most 5 rounds to save time (fio spends about
0.35 s between stonewalled cells, so the 56-cell IOPS rounds dominate). The emulator
(enterprise-tlc, 256 MiB, a loop device with direct I/O over its disk file) lives in a
private /dev/shm directory and is stopped at the end.
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
from ssdlab.targets import emulator
from ssdlab.targets.emulator import binary
from tests.support.cli import ssdlab

MIB = 1 << 20
QUICK_PTS_SIZE = 256 * MIB


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
        started = ssdlab("emulator", "start", "--name", "pts", "--size", str(QUICK_PTS_SIZE),
                         "--loop", env=env)
        assert started.returncode == 0, started.stderr
        device = next(line.split()[-1] for line in started.stdout.splitlines()
                      if "target:" in line)
        store = workdir / "results.sqlite"
        # the quick profile with 0.2 s cells, QD 8 and at most 5 rounds (the SNIA window):
        # every test and cell of the PTS, in about a third of the quick defaults' time
        result = ssdlab("run", "pts", "--target", device, "--profile", "quick",
                        "--round-seconds", "0.2", "--max-rounds", "5", "--qd", "8",
                        "--destroy-data", "--store", str(store), env=env, timeout=1500)
        run_id = next(
            (word for line in result.stdout.splitlines() if " run " in line
             for word in line.split() if word.count("-") == 2 and word[:8].isdigit()), ""
        )
        yield QuickPts(store, run_id, device, QUICK_PTS_SIZE, result, env, workdir)
    finally:
        ssdlab("emulator", "stop", "--all", env=env)
        shutil.rmtree(workdir, ignore_errors=True)
