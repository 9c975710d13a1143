"""Shared fixtures: throwaway loop devices over /dev/shm files and zram devices.

Both factories always clean up (unmount leftovers, detach, remove) even when a test fails,
and only ever touch devices they created themselves. Tests marked ``root`` are skipped
when not running as root, tests marked ``fio`` when fio is not installed.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from tests.support.leftovers import clear_dead_test_emulators
from tests.support.postgres import PgServer, pg_server
from tests.support.vmlab import clear_dead_labs
from tests.support.zram import Zram, create_zram, remove_zram, zram_unavailable

SHM = Path("/dev/shm")

#: property tests judge results, never time: on a shared, loaded 2-core machine one
#: example can take longer than hypothesis's default 200 ms deadline, and a test that
#: fails for that is a flake
settings.register_profile("ssdlab", deadline=None)
settings.load_profile("ssdlab")


def pytest_configure(config: pytest.Config) -> None:
    """A killed run's dead emulator mounts (tests/support/leftovers.py) and VM lab guests
    (tests/support/vmlab.py) are cleared, and
    Ctrl-C reaches the programs the tests start, however ``make test`` was started.

    A shell without job control starts a background command (``make test &``, ``nohup``,
    a CI runner's script) with SIGINT ignored, and an ignored signal stays ignored through
    exec: the tests that interrupt ssdlab, fio or Chromium with SIGINT (exit 130, rounds
    kept, nothing left) would then see them run on to the end. A handled signal is reset
    to its default at exec, so handling SIGINT here (as Python does when it is not
    ignored) gives every child the default."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if os.geteuid() == 0 and not hasattr(config, "workerinput"):
        for lab_dir in clear_dead_labs():
            print(f"cleared a killed test run's VM lab: {lab_dir}", file=sys.stderr)
        for point in clear_dead_test_emulators():
            print(f"cleared a killed test run's dead emulator mount: {point}", file=sys.stderr)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked ``root`` skip when not root; tests marked ``fio`` skip when fio is not
    installed (so ``make unit`` runs on a machine without the apt packages)."""
    missing = []
    if os.geteuid() != 0:
        missing.append(("root", pytest.mark.skip(reason="needs root")))
    if shutil.which("fio") is None:
        no_fio = pytest.mark.skip(reason="fio is not installed (apt-get install fio)")
        missing.append(("fio", no_fio))
    for item in items:
        for keyword, skip in missing:
            if keyword in item.keywords:
                item.add_marker(skip)
                break


def _require_root_tool(tool: str) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root")
    if shutil.which(tool) is None:
        pytest.skip(f"{tool} is not installed")


def _mount_points_of(devnums: set[str]) -> list[str]:
    """Mount points (deepest first) of the filesystems on the given major:minor numbers."""
    points = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        if len(fields) > 4 and fields[2] in devnums:
            points.append(fields[4].replace("\\040", " "))
    return sorted(points, key=len, reverse=True)


def _devnums_of(name: str) -> set[str]:
    """major:minor of a block device and of its partitions."""
    base = Path("/sys/class/block") / name
    numbers = set()
    for dev_file in [base / "dev", *base.resolve().glob(f"{name}*/dev")]:
        with contextlib.suppress(OSError):
            numbers.add(dev_file.read_text().strip())
    return numbers


def _release(name: str) -> None:
    """Unmount whatever a test left mounted from this device (or its partitions)."""
    for point in _mount_points_of(_devnums_of(name)):
        subprocess.run(["umount", point], capture_output=True, check=False)


def _detach_loop(device: str, backing_file: str) -> None:
    name = os.path.basename(device)
    attached = Path("/sys/block") / name / "loop" / "backing_file"
    with contextlib.suppress(OSError):
        if attached.read_text().strip().removesuffix(" (deleted)") != backing_file:
            return  # detached already, and possibly reused by someone else: not ours
        _release(name)
        for _ in range(20):
            result = subprocess.run(["losetup", "-d", device], capture_output=True, check=False)
            if result.returncode == 0 or not attached.exists():
                return
            time.sleep(0.1)


LoopFactory = Callable[..., str]


@pytest.fixture
def loop_device() -> Iterator[LoopFactory]:
    """Factory: ``loop_device(size_bytes, sector_size=None, partscan=False,
    direct_io=False) -> "/dev/loopN"``.

    The device is backed by a sparse file in /dev/shm; both are removed after the test.
    Without ``direct_io`` it goes through the page cache, as ``losetup -f --show FILE``.
    """
    _require_root_tool("losetup")
    created: list[tuple[str, str]] = []

    def make(size_bytes: int, sector_size: int | None = None, partscan: bool = False,
             direct_io: bool = False) -> str:
        fd, backing = tempfile.mkstemp(prefix="ssdlab-test-", suffix=".img", dir=SHM)
        try:
            os.ftruncate(fd, size_bytes)
        finally:
            os.close(fd)
        command = ["losetup", "--find", "--show"]
        command += ["--sector-size", str(sector_size)] if sector_size else []
        command += ["--partscan"] if partscan else []
        command += ["--direct-io=on"] if direct_io else []
        result = subprocess.run([*command, backing], capture_output=True, text=True, check=False)
        if result.returncode != 0:
            os.unlink(backing)
            pytest.fail(f"losetup failed: {result.stderr.strip()}")
        device = result.stdout.strip()
        created.append((device, backing))
        return device

    try:
        yield make
    finally:
        for device, backing in reversed(created):
            _detach_loop(device, backing)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(backing)


ZramFactory = Callable[..., str]


@pytest.fixture
def zram_device() -> Iterator[ZramFactory]:
    """Factory: ``zram_device(size_bytes, algorithm=None) -> "/dev/zramN"`` (hot-added;
    tests/support/zram.py, which the benchmarks use too)."""
    why = zram_unavailable()
    if why:
        pytest.skip(why)
    created: list[Zram] = []

    def make(size_bytes: int, algorithm: str | None = None) -> str:
        dev = create_zram(size_bytes, algorithm)
        created.append(dev)
        return dev.path

    try:
        yield make
    finally:
        for dev in reversed(created):
            _release(dev.name)
            remove_zram(dev)


@pytest.fixture
def shm_dir() -> Iterator[Path]:
    """A private directory in /dev/shm (RAM), removed after the test."""
    if not SHM.is_dir():
        pytest.skip("/dev/shm is not available")
    path = Path(tempfile.mkdtemp(prefix="ssdlab-test-", dir=SHM))
    try:
        yield path
    finally:
        for point in _mount_points_under(path):
            if subprocess.run(["umount", point], capture_output=True, check=False).returncode:
                subprocess.run(["umount", "--lazy", point], capture_output=True, check=False)
        shutil.rmtree(path, ignore_errors=True)


def _mount_points_under(path: Path) -> list[str]:
    points = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        point = fields[4].replace("\\040", " ") if len(fields) > 4 else ""
        if point == str(path) or point.startswith(f"{path}/"):
            points.append(point)
    return sorted(points, key=len, reverse=True)


@pytest.fixture(scope="session")
def pg() -> Iterator[PgServer]:
    """A private PostgreSQL server for the session (tests/support/postgres.py); skips
    where it cannot run (not root, PostgreSQL or psycopg missing: make setup installs
    both)."""
    with pg_server() as server:
        yield server
