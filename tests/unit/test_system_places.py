"""No test file or work directory in the trees of the kernel and the running system
(targets/filetarget.py ``system_place``): /dev (but /dev/shm), /proc, /sys, /run, or a
file system of theirs mounted elsewhere, judged where a path really leads. Through the
command line, for every suite: tests/integration/test_system_paths_real.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ssdlab.errors import ExitCode, TargetError
from ssdlab.run.prepare import resolve_target
from ssdlab.targets.filetarget import create_file_target, system_place
from ssdlab.targets.identity import MountEntry
from ssdlab.targets.workdir import describe_dir

PID = os.getpid()


@pytest.mark.parametrize(("path", "why"), [
    ("/dev/nvme9n9-ssdlab-typo", "it is under /dev"),
    ("/dev/disk/by-id/nvme-ssdlab-typo", "it is under /dev"),
    ("/proc/ssdlab-typo", "it is under /proc"),
    ("/sys/block/ssdlab-typo", "it is under /sys"),
    ("/run/ssdlab-typo.img", "it is under /run"),
    ("/dev", "it is under /dev"),
    ("/dev/shm/../nvme9n9-ssdlab-typo", "it is under /dev"),
])
def test_system_trees_are_no_place_for_a_test_file(path: str, why: str) -> None:
    assert system_place(path, []) == why


@pytest.mark.parametrize("path", ["/dev/shm/t.img", "/dev/shm", "/tmp/t.img", "/var/tmp/x",
                                  "/devices/t.img", "/running/t.img", "/srv/dev/t.img"])
def test_other_places_are(path: str) -> None:
    assert system_place(path, []) is None


def test_a_link_is_judged_where_it_leads(tmp_path: Path) -> None:
    into_dev, into_shm = tmp_path / "dev-link", tmp_path / "shm-link"
    into_dev.symlink_to(f"/dev/nvme9n9-{PID}")  # dangling: opening it would create that
    into_shm.symlink_to("/dev/shm")
    assert system_place(str(into_dev), []) == f"it leads to /dev/nvme9n9-{PID}, under /dev"
    assert system_place(str(into_shm / "t.img"), []) is None
    if os.path.realpath("/run/shm") == "/dev/shm":  # Debian's link
        assert system_place("/run/shm/t.img", []) is None


def test_a_system_file_system_mounted_elsewhere_is_refused(tmp_path: Path) -> None:
    mounts = [MountEntry(0, 1, "/", "ext4", "/dev/sda1"),
              MountEntry(0, 5, str(tmp_path / "devbind"), "devtmpfs", "udev")]
    assert system_place(str(tmp_path / "devbind" / "sdz"), mounts) == (
        f"it is on the system's devtmpfs file system at {tmp_path / 'devbind'}")
    assert system_place(str(tmp_path / "t.img"), mounts) is None


def test_resolving_a_mistyped_device_refuses_it_with_the_target_code() -> None:
    with pytest.raises(TargetError) as info:
        resolve_target(f"/dev/nvme9n9-{PID}", 64 << 20, False)
    assert info.value.exit_code == ExitCode.TARGET
    assert "is not a block device (no such device)" in info.value.message
    assert not os.path.lexists(f"/dev/nvme9n9-{PID}")


def test_making_a_test_file_refuses_a_system_place_last_of_all(tmp_path: Path) -> None:
    link = tmp_path / "t.img"
    link.symlink_to(f"/proc/ssdlab-{PID}")  # O_EXCL would refuse the link anyway
    with pytest.raises(TargetError, match="it leads to /proc/ssdlab-"):
        create_file_target(str(link), 1 << 20)
    assert not os.path.lexists(f"/proc/ssdlab-{PID}")


def test_a_work_directory_is_never_made_in_a_system_tree(tmp_path: Path) -> None:
    with pytest.raises(TargetError, match="--dir /dev: it is under /dev"):
        describe_dir("/dev")
    link = tmp_path / "run-link"
    link.symlink_to("/run")
    with pytest.raises(TargetError, match="it leads to /run, under /run"):
        describe_dir(str(link))
    assert describe_dir(str(tmp_path)).path == str(tmp_path)
