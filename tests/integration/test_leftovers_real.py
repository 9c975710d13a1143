"""A killed emulator's dead FUSE mount: named in the error it causes, cleared for tests.

solo (make test runs it alone, after the rest): while the dead mount exists every
``mkfs.btrfs`` on the machine fails, which would break the btrfs tests running beside it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from ssdlab.run.array import ArrayCommandFailed, _check, run_command
from ssdlab.targets import emulator
from ssdlab.targets.identity import dead_fuse_mounts
from tests.conftest import LoopFactory
from tests.support.leftovers import clear_dead_test_emulators

pytestmark = [pytest.mark.root, pytest.mark.solo]

MiB = 1 << 20


def _loop_backing(device: str) -> str | None:
    path = Path("/sys/block", os.path.basename(device), "loop", "backing_file")
    try:
        return path.read_text().strip()
    except OSError:
        return None


def test_a_killed_emulator_is_named_by_mkfs_and_cleared(emu_run_dir: Path,
                                                        loop_device: LoopFactory) -> None:
    member = loop_device(256 * MiB)
    emu = emulator.start("killed", "enterprise-tlc", 256 * MiB, loop=True)
    assert emu.loop_device and _loop_backing(emu.loop_device) == emu.disk
    mount = emu_run_dir.parent / "mnt"
    mount.mkdir()
    try:
        # as a killed `run db` leaves it: a file system on the loop device over its disk
        for argv in (["mkfs.ext4", "-q", emu.loop_device], ["mount", emu.loop_device, str(mount)]):
            assert subprocess.run(argv, capture_output=True, check=False).returncode == 0
        assert emu.mountpoint not in dead_fuse_mounts()
        os.kill(emu.pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while emu.mountpoint not in dead_fuse_mounts() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert emu.mountpoint in dead_fuse_mounts()

        # mkfs.btrfs looks at every mounted loop device's file, so the dead mount makes it
        # refuse a device it has nothing to do with;
        # ssdlab's one-line error names the mount and the way out
        argv = ["mkfs.btrfs", "-q", "-f", member]
        done = run_command(argv)
        assert done.returncode != 0 and "Transport endpoint is not connected" in done.stderr
        with pytest.raises(ArrayCommandFailed) as failed:
            _check(argv, done)
        message = str(failed.value)
        assert emu.mountpoint in message and "umount -l" in message
        assert "\n" not in message

        # the session's sweep clears it: the loop device's mount, the loop device, the mount
        assert clear_dead_test_emulators() == [emu.mountpoint]
        assert not os.path.ismount(mount)
        assert _loop_backing(emu.loop_device) is None
        assert emu.mountpoint not in dead_fuse_mounts()
        assert run_command(argv).returncode == 0
    finally:
        if os.path.ismount(mount):
            subprocess.run(["umount", "-l", mount], capture_output=True, check=False)
        if emu.mountpoint in dead_fuse_mounts():
            subprocess.run(["losetup", "-d", emu.loop_device], capture_output=True, check=False)
            subprocess.run(["umount", "-l", emu.mountpoint], capture_output=True, check=False)
