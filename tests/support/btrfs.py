"""A btrfs file system of several devices for the real tests of members and arrays."""

from __future__ import annotations

import subprocess
from pathlib import Path


def make_btrfs(devices: list[str], level: str, mount: Path) -> None:
    """``level`` data and metadata over ``devices``, mounted on ``mount`` (made here) with
    copy-on-write off, as ssdlab mounts its own arrays."""
    made = subprocess.run(["mkfs.btrfs", "-q", "-f", "-d", level, "-m", level, *devices],
                          capture_output=True, text=True, check=False)
    assert made.returncode == 0, made.stderr
    subprocess.run(["btrfs", "device", "scan", *devices], check=True, capture_output=True)
    mount.mkdir()
    subprocess.run(["mount", "-t", "btrfs", "-o", "nodatacow", devices[0], str(mount)],
                   check=True, capture_output=True)
