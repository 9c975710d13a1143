"""What a killed test run leaves that breaks the next one, cleared before a session.

A ``make test`` killed mid-run (a CI timeout, a closed terminal, SIGKILL) cannot tear its
fixtures down. Most leftovers only cost memory, but a FUSE mount whose daemon has gone
breaks every later ``mkfs.btrfs`` on the machine ("cannot check mount status of
/dev/loopN: Transport endpoint is not connected"), so a run after a killed one would fail
for no fault of its own. This clears only what is certainly dead and certainly a test's:
ssdlab emulator mounts under the tests' ``/dev/shm/ssdlab-*`` directories whose daemon
has gone, with the loop devices over their files and the mounts of those loop devices.
A concurrent, live test run's mounts answer ``stat`` and are never touched.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from ssdlab.targets.identity import dead_fuse_mounts, read_mountinfo

TEST_DIRS = "/dev/shm/ssdlab-"
EMULATOR_FS = "fuse.ssdlab-emu"


def loops_over(directory: str) -> dict[str, str]:
    """Loop device name -> its major:minor, for the loop devices whose backing file lies
    under ``directory``."""
    found = {}
    for loop in Path("/sys/block").glob("loop*"):
        try:
            backing = (loop / "loop" / "backing_file").read_text().strip()
            devnum = (loop / "dev").read_text().strip()
        except OSError:
            continue
        if backing.startswith(directory.rstrip("/") + "/"):
            found[loop.name] = devnum
    return found


def clear_dead_test_emulators() -> list[str]:
    """Unmount the dead emulator mounts of killed test runs (lazily: nothing can answer on
    them) after their loop devices and those devices' mounts; the mount points cleared."""
    mounts = read_mountinfo()
    emulators = [m for m in mounts if m.fs_type == EMULATOR_FS
                 and m.mount_point.startswith(TEST_DIRS)]
    cleared = []
    for point in dead_fuse_mounts(emulators):
        loops = loops_over(point)
        for entry in sorted(read_mountinfo(), key=lambda m: len(m.mount_point), reverse=True):
            if f"{entry.major}:{entry.minor}" in loops.values():
                subprocess.run(["umount", "-l", entry.mount_point], capture_output=True,
                               check=False)
        for name in loops:
            subprocess.run(["losetup", "-d", f"/dev/{name}"], capture_output=True, check=False)
        subprocess.run(["umount", "-l", point], capture_output=True, check=False)
        cleared.append(point)
    return cleared
