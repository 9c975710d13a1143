"""Throwaway zram devices (RAM-backed block devices), for the tests and the benchmarks.

:func:`create_zram` hot-adds a fresh device through ``/sys/class/zram-control`` and sets
its size; :func:`remove_zram` resets and removes it. Only a device created here is ever
touched: the index comes from reading ``hot_add``, which creates the device. The test
fixture ``zram_device`` (tests/conftest.py) and ``bench/harness_overhead.py`` both use
this module.
"""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

ZRAM_CONTROL = Path("/sys/class/zram-control")
SYS_BLOCK = Path("/sys/block")
NODE_TIMEOUT_S = 10.0  # devtmpfs creates /dev/zramN asynchronously
RELEASE_TIMEOUT_S = 10.0  # a dying fio may hold the device open a little longer


@dataclass(frozen=True)
class Zram:
    """A zram device created by :func:`create_zram`."""

    index: int
    size_bytes: int

    @property
    def name(self) -> str:
        return f"zram{self.index}"

    @property
    def path(self) -> str:
        return f"/dev/{self.name}"

    @property
    def sysdir(self) -> Path:
        return SYS_BLOCK / self.name

    def attr(self, name: str) -> str | None:
        """A sysfs attribute of the device (``mm_stat``, ``comp_algorithm``), or None."""
        try:
            return (self.sysdir / name).read_text().strip()
        except OSError:
            return None


def zram_unavailable() -> str | None:
    """Why zram devices cannot be created here, or None when they can (loads the zram
    module, without devices of its own, when it is not loaded)."""
    if os.geteuid() != 0:
        return "needs root"
    if not ZRAM_CONTROL.exists():
        subprocess.run(["modprobe", "zram", "num_devices=0"], capture_output=True, check=False)
    if not ZRAM_CONTROL.exists():
        return f"zram is not available (no {ZRAM_CONTROL}; modprobe zram num_devices=0)"
    return None


def create_zram(size_bytes: int, algorithm: str | None = None) -> Zram:
    """A fresh zram device of ``size_bytes`` (compressed with ``algorithm``, else the
    kernel's default), its node in /dev present. Remove it with :func:`remove_zram`."""
    index = int((ZRAM_CONTROL / "hot_add").read_text().strip())  # creates the device
    dev = Zram(index, size_bytes)
    try:
        if dev.attr("disksize") not in ("0", None):
            raise RuntimeError(f"{dev.name} is not fresh (disksize {dev.attr('disksize')})")
        if algorithm:
            (dev.sysdir / "comp_algorithm").write_text(algorithm)
        (dev.sysdir / "disksize").write_text(str(size_bytes))
        deadline = time.monotonic() + NODE_TIMEOUT_S
        while not os.path.exists(dev.path):
            if time.monotonic() > deadline:
                raise RuntimeError(f"{dev.path} did not appear within {NODE_TIMEOUT_S:g} s")
            time.sleep(0.02)
    except BaseException:
        remove_zram(dev)
        raise
    return dev


def remove_zram(dev: Zram, timeout_s: float = RELEASE_TIMEOUT_S) -> str | None:
    """Reset and remove ``dev``, retrying while it is busy (EBUSY) for up to
    ``timeout_s``. None when done (or gone already), else what failed and how to finish
    by hand."""
    deadline = time.monotonic() + timeout_s
    steps = ((dev.sysdir / "reset", "1"), (ZRAM_CONTROL / "hot_remove", str(dev.index)))
    for path, value in steps:
        while True:
            if not dev.sysdir.exists():
                return None
            try:
                path.write_text(f"{value}\n")
                break
            except OSError as exc:
                if time.monotonic() > deadline:
                    return (f"could not remove {dev.name}: writing {path}: {exc}; run "
                            f"'echo 1 > {dev.sysdir / 'reset'}; echo {dev.index} > "
                            f"{ZRAM_CONTROL / 'hot_remove'}' by hand")
                time.sleep(0.1)
    return None
