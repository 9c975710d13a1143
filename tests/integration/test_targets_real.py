"""ssdlab.targets against real devices: loop devices over /dev/shm files and zram.

Nothing here opens the machine's own disk: the root disk is found at runtime and only ever
passed to detection code (sysfs reads).
"""

from __future__ import annotations

import errno
import json
import os
import platform
import re
import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from ssdlab.errors import EnvironmentProblem, TargetError
from ssdlab.targets.filetarget import (
    MARK_XATTR,
    create_file_target,
    is_ssdlab_file,
    recreate_file_target,
    remove_file_target,
    supports_direct_io,
)
from ssdlab.targets.identity import (
    check_fio_version,
    fio_version,
    host_info,
    identify_block,
    identify_file,
    parse_selected,
)
from ssdlab.targets.purge import purge_block
from ssdlab.targets.safety import (
    ExclusiveHold,
    check_block_target,
    mounted_block_devices,
    root_disks,
    whole_disk_of,
)

MiB = 1 << 20
Factory = Callable[..., str]
PATTERN = b"\xa5"


def _run(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(command), capture_output=True, text=True, check=False)


def _sysfs(device: str, attribute: str) -> str:
    return Path(f"/sys/class/block/{os.path.basename(device)}/{attribute}").read_text().strip()


def _fill(device: str, size: int) -> None:
    fd = os.open(device, os.O_WRONLY)
    try:
        os.write(fd, PATTERN * size)
        os.fsync(fd)
    finally:
        os.close(fd)


def _read(device: str, size: int) -> bytes:
    with open(device, "rb") as handle:
        return handle.read(size)


@contextmanager
def mounted_ext4(device: str, mount_point: Path) -> Iterator[Path]:
    """mkfs.ext4 + mount; always unmounted afterwards."""
    if shutil.which("mkfs.ext4") is None:
        pytest.skip("mkfs.ext4 is not installed")
    made = _run("mkfs.ext4", "-q", "-F", device)
    assert made.returncode == 0, made.stderr
    mount_point.mkdir()
    done = _run("mount", device, str(mount_point))
    assert done.returncode == 0, done.stderr
    try:
        yield mount_point
    finally:
        _run("umount", str(mount_point))


def _wait_for(path: str) -> None:
    for _ in range(100):
        if os.path.exists(path):
            return
        time.sleep(0.02)
    raise AssertionError(f"{path} did not appear")


# --------------------------------------------------------------------------- identify


@pytest.mark.root
def test_identify_loop_device(loop_device: Factory, shm_dir: Path) -> None:
    device = loop_device(64 * MiB)
    target = identify_block(device)
    assert (target.path, target.kind, target.name) == (device, "block", os.path.basename(device))
    assert target.device_class == "virtual"
    assert target.capacity_bytes == 64 * MiB
    assert (target.logical_sector_bytes, target.physical_sector_bytes) == (512, 512)
    assert target.scheduler == parse_selected(_sysfs(device, "queue/scheduler"))
    assert target.discard_max_bytes == int(_sysfs(device, "queue/discard_max_bytes"))
    backing = target.details["backing_file"]
    assert isinstance(backing, str) and backing.startswith("/dev/shm/ssdlab-test-")
    assert target.details["dio"] is False
    assert json.loads(json.dumps(target.to_dict()))["name"] == target.name
    link = shm_dir / "by-id-link"
    link.symlink_to(device)
    via_link = identify_block(str(link))
    assert (via_link.path, via_link.name) == (str(link), target.name)


@pytest.mark.root
def test_identify_4k_sector_loop_device(loop_device: Factory) -> None:
    device = loop_device(64 * MiB, sector_size=4096)
    target = identify_block(device)
    assert target.logical_sector_bytes == 4096
    assert target.physical_sector_bytes == 4096


@pytest.mark.root
def test_identify_refuses_missing_and_non_block_paths(shm_dir: Path) -> None:
    missing = shm_dir / "nothing-here"
    with pytest.raises(TargetError) as caught:
        identify_block(str(missing))
    assert caught.value.message == f"target {missing} does not exist"
    regular = shm_dir / "regular"
    regular.write_bytes(b"x")
    with pytest.raises(TargetError, match="is not a block device"):
        identify_block(str(regular))


@pytest.mark.root
def test_identify_zram_device(zram_device: Factory) -> None:
    device = zram_device(64 * MiB)
    target = identify_block(device)
    assert target.device_class == "virtual"
    assert target.capacity_bytes == 64 * MiB
    assert target.details["disksize"] == 64 * MiB
    assert target.details["comp_algorithm"] == parse_selected(_sysfs(device, "comp_algorithm"))


@pytest.mark.root
def test_identify_partition(loop_device: Factory, shm_dir: Path) -> None:
    if shutil.which("addpart") is None:
        pytest.skip("addpart is not installed")
    device = loop_device(64 * MiB, partscan=True)
    added = _run("addpart", device, "1", "2048", str(64 * 2048 - 2048))
    assert added.returncode == 0, added.stderr
    part = f"{device}p1"
    _wait_for(part)
    target = identify_block(part)
    disk = os.path.basename(device)
    assert target.name == f"{disk}p1"
    assert target.details["partition_of"] == disk
    assert target.details["partition_start_bytes"] == 2048 * 512
    assert target.capacity_bytes == 64 * MiB - MiB
    assert whole_disk_of(target.name) == disk
    with mounted_ext4(part, shm_dir / "mnt") as mount_point:
        with pytest.raises(TargetError) as caught:
            check_block_target(identify_block(device), destroy_data=True, writes=True)
        assert caught.value.message == (
            f"refusing {device}: {part} is mounted on {mount_point}; unmount it first"
        )
        assert target.name in mounted_block_devices()


# --------------------------------------------------------------------------- purge


@pytest.mark.root
def test_blkdiscard_purge_zeroes_the_range(loop_device: Factory) -> None:
    size = 16 * MiB
    device = loop_device(size)
    target = identify_block(device)
    _fill(device, size)
    assert _read(device, size) == PATTERN * size
    with ExclusiveHold(device):  # blkdiscard must work while ssdlab holds the device
        outcome = purge_block(target, "auto", 2 * MiB, 4 * MiB)
    assert (outcome.method, outcome.ok) == ("blkdiscard", True), outcome.detail
    data = _read(device, size)
    assert data[: 2 * MiB] == PATTERN * (2 * MiB)
    assert data[2 * MiB : 6 * MiB] == bytes(4 * MiB)
    assert data[6 * MiB :] == PATTERN * (10 * MiB)
    whole = purge_block(target, "blkdiscard", 0, size)
    assert whole.ok and _read(device, size) == bytes(size)


@pytest.mark.root
def test_blkdiscard_purge_on_zram(zram_device: Factory) -> None:
    size = 8 * MiB
    device = zram_device(size)
    _fill(device, size)
    outcome = purge_block(identify_block(device), "auto", 0, size)
    assert outcome.ok, outcome.detail
    assert _read(device, size) == bytes(size)


@pytest.mark.root
def test_failing_blkdiscard_is_reported_not_raised(loop_device: Factory) -> None:
    device = loop_device(8 * MiB)
    outcome = purge_block(identify_block(device), "blkdiscard", 1, 4096)
    assert not outcome.ok
    assert "not aligned" in outcome.detail
    assert outcome.command is not None and outcome.command[0] == "blkdiscard"


# --------------------------------------------------------------------------- safety


def _independent_root_disks() -> set[str]:
    """The disks under / according to findmnt + lsblk (not ssdlab's code)."""
    if shutil.which("findmnt") is None or shutil.which("lsblk") is None:
        pytest.skip("findmnt/lsblk are not installed")
    source = _run("findmnt", "-no", "SOURCE", "/").stdout.strip().split("[")[0]
    if not source.startswith("/dev/"):
        pytest.skip(f"/ is not on a block device ({source or 'unknown'})")
    listing = _run("lsblk", "-nrso", "NAME,TYPE", source).stdout.split("\n")
    rows = [line.split() for line in listing if line.strip()]
    return {name for name, kind in rows if kind in ("disk", "loop")}


@pytest.mark.root
def test_root_disk_is_found_and_refused_by_detection_only() -> None:
    expected = _independent_root_disks()
    assert expected, "lsblk found no disk under /"
    found = root_disks()
    assert expected <= found
    majmin = _run("findmnt", "-no", "MAJ:MIN", "/").stdout.strip()
    root_device = Path(f"/sys/dev/block/{majmin}").resolve().name
    assert root_device in mounted_block_devices()
    for disk in sorted(expected):
        target = identify_block(f"/dev/{disk}")  # sysfs reads only
        with pytest.raises(TargetError) as caught:
            check_block_target(target, destroy_data=True, writes=False)
        assert caught.value.message == f"refusing /dev/{disk}: it holds the running system (/)"


@pytest.mark.root
def test_clean_loop_device_passes_and_needs_destroy_data(loop_device: Factory) -> None:
    device = loop_device(8 * MiB)
    target = identify_block(device)
    assert target.name not in root_disks()
    check_block_target(target, destroy_data=True, writes=True)
    check_block_target(target, destroy_data=False, writes=False)
    with pytest.raises(TargetError) as caught:
        check_block_target(target, destroy_data=False, writes=True)
    assert caught.value.message == (
        f"refusing to write to {device} without --destroy-data: "
        "every byte on it will be overwritten"
    )


@pytest.mark.root
def test_mounted_loop_device_is_refused(loop_device: Factory, shm_dir: Path) -> None:
    device = loop_device(64 * MiB)
    with mounted_ext4(device, shm_dir / "mnt") as mount_point:
        target = identify_block(device)
        assert target.name in mounted_block_devices()
        with pytest.raises(TargetError) as caught:
            check_block_target(target, destroy_data=True, writes=True)
        assert caught.value.message == (
            f"refusing {device}: {device} is mounted on {mount_point}; unmount it first"
        )
        with pytest.raises(TargetError, match="in use by another program"):
            ExclusiveHold(device).__enter__()
        with pytest.raises(TargetError, match="is mounted on"):  # no confirmation overrides it
            check_block_target(target, destroy_data=device, writes=True)
    unmounted = identify_block(device)
    with pytest.raises(TargetError) as caught:  # unmounted, it still carries its ext4
        check_block_target(unmounted, destroy_data=True, writes=True)
    assert caught.value.message.startswith(f"{device} carries an ext4 filesystem (UUID ")
    assert caught.value.message.endswith(f"confirm with --destroy-data={device}")
    check_block_target(unmounted, destroy_data=device, writes=True)
    check_block_target(unmounted, destroy_data=False, writes=False)


@pytest.mark.root
def test_exclusive_hold(loop_device: Factory, shm_dir: Path) -> None:
    device = loop_device(64 * MiB)
    other = os.open(device, os.O_RDONLY | os.O_EXCL)
    try:
        with pytest.raises(TargetError) as caught, ExclusiveHold(device):
            pass
        assert caught.value.message == (
            f"{device} is in use by another program (exclusive open failed)"
        )
    finally:
        os.close(other)
    assert _run("mkfs.ext4", "-q", "-F", device).returncode == 0
    mount_point = shm_dir / "mnt"
    mount_point.mkdir()
    with ExclusiveHold(device) as hold:
        assert hold.fd is not None
        with pytest.raises(TargetError, match="in use by another program"), ExclusiveHold(device):
            pass
        try:
            assert _run("mount", device, str(mount_point)).returncode != 0
        finally:
            _run("umount", str(mount_point))
    assert hold.fd is None
    os.close(os.open(device, os.O_RDONLY | os.O_EXCL))  # released


@pytest.mark.root
def test_exclusive_hold_refuses_files_and_missing_paths(shm_dir: Path) -> None:
    regular = shm_dir / "file"
    regular.write_bytes(b"x")
    with pytest.raises(TargetError, match="is not a block device"), ExclusiveHold(str(regular)):
        pass
    with pytest.raises(TargetError, match="does not exist"), ExclusiveHold(str(shm_dir / "no")):
        pass


# --------------------------------------------------------------------------- file targets


def test_file_target_create_reuse_resize_remove(shm_dir: Path) -> None:
    path = shm_dir / "target.img"
    target = create_file_target(str(path), 8 * MiB)
    st = path.stat()
    assert (target.kind, target.device_class, target.name) == ("file", "file", "target.img")
    assert target.capacity_bytes == st.st_size == 8 * MiB
    assert st.st_blocks * 512 >= 8 * MiB  # fully allocated, not sparse
    assert target.details["fs_type"] == "tmpfs"
    assert target.details["mount_point"] == "/dev/shm"
    assert target.logical_sector_bytes == 512
    mark = json.loads(os.getxattr(path, MARK_XATTR))
    assert mark["created_by"] == "ssdlab" and mark["size"] == 8 * MiB and mark["created_at"]
    assert is_ssdlab_file(str(path))

    assert create_file_target(str(path), 8 * MiB) == target
    assert path.stat().st_ino == st.st_ino  # reused, not recreated
    bigger = create_file_target(str(path), 12 * MiB)
    assert bigger.capacity_bytes == path.stat().st_size == 12 * MiB
    assert json.loads(os.getxattr(path, MARK_XATTR))["size"] == 12 * MiB

    remove_file_target(str(path))
    assert not path.exists() and not is_ssdlab_file(str(path))
    remove_file_target(str(path))  # already gone: nothing to do


def test_file_target_refuses_foreign_files(shm_dir: Path) -> None:
    foreign = shm_dir / "precious.db"
    foreign.write_bytes(b"important")
    for action in (
        lambda: create_file_target(str(foreign), MiB),
        lambda: recreate_file_target(str(foreign), MiB),
    ):
        with pytest.raises(TargetError) as caught:
            action()
        expected = f"refusing {foreign}: it exists and was not created by ssdlab"
        assert caught.value.message == expected
    with pytest.raises(TargetError, match="it was not created by ssdlab"):
        remove_file_target(str(foreign))
    assert foreign.read_bytes() == b"important"
    assert not is_ssdlab_file(str(foreign))


def test_file_target_needs_directory_and_space(shm_dir: Path) -> None:
    with pytest.raises(TargetError, match="does not exist"):
        create_file_target(str(shm_dir / "no" / "such" / "t.img"), MiB)
    with pytest.raises(TargetError) as caught:
        create_file_target(str(shm_dir / "huge.img"), 1 << 50)
    assert caught.value.message.startswith("not enough free space on /dev/shm: need 1024.0 TiB, ")
    assert not (shm_dir / "huge.img").exists()


def test_recreate_file_target_is_the_file_purge(shm_dir: Path) -> None:
    path = shm_dir / "t.img"
    create_file_target(str(path), 4 * MiB)
    path.write_bytes(PATTERN * MiB)  # truncates and dirties: recreate must restore it
    outcome = recreate_file_target(str(path), 4 * MiB)
    assert (outcome.method, outcome.ok, outcome.command) == ("file-recreate", True, None)
    assert path.stat().st_size == 4 * MiB and path.read_bytes() == bytes(4 * MiB)
    assert is_ssdlab_file(str(path))


def test_file_target_sidecar_when_xattrs_are_unsupported(
    shm_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_xattr(*args: object, **kwargs: object) -> None:
        raise OSError(errno.ENOTSUP, "Operation not supported")

    monkeypatch.setattr(os, "setxattr", no_xattr)
    path = shm_dir / "t.img"
    create_file_target(str(path), MiB)
    sidecar = Path(f"{path}.ssdlab")
    mark = json.loads(sidecar.read_text())
    assert mark["created_by"] == "ssdlab" and mark["st_ino"] == path.stat().st_ino
    assert is_ssdlab_file(str(path))
    sidecar.write_text(json.dumps({**mark, "st_ino": mark["st_ino"] + 1}))  # another file now
    assert not is_ssdlab_file(str(path))
    sidecar.write_text(json.dumps(mark))
    remove_file_target(str(path))
    assert not path.exists() and not sidecar.exists()


@pytest.mark.root
def test_file_target_on_ext4_on_a_4k_loop(loop_device: Factory, shm_dir: Path) -> None:
    device = loop_device(64 * MiB, sector_size=4096)
    with mounted_ext4(device, shm_dir / "mnt") as mount_point:
        path = mount_point / "t.img"
        target = create_file_target(str(path), 4 * MiB)
        try:
            assert target.details["fs_type"] == "ext4"
            assert target.details["fs_device"] == os.path.basename(device)
            assert target.details["mount_point"] == str(mount_point)
            assert target.logical_sector_bytes == 4096
            assert os.getxattr(path, MARK_XATTR)
            assert supports_direct_io(str(path))
            assert identify_file(str(path)) == target
        finally:
            remove_file_target(str(path))
    assert not supports_direct_io(str(shm_dir / "missing"))


# --------------------------------------------------------------------------- fio and host


def test_fio_version_of_the_installed_fio() -> None:
    if shutil.which("fio") is None:
        pytest.skip("fio is not installed")
    version = fio_version()
    assert re.fullmatch(r"\d+\.\d+(\.\d+)?", version)
    assert f"fio-{version}" in _run("fio", "--version").stdout
    check_fio_version(version)


def test_fio_version_problems_with_real_executables(shm_dir: Path) -> None:
    with pytest.raises(EnvironmentProblem, match="fio not found at"):
        fio_version(str(shm_dir / "no-fio"))
    fake = shm_dir / "fake-fio"
    fake.write_text("#!/bin/sh\necho 'flexible io tester, version unknown'\n")
    fake.chmod(0o755)
    with pytest.raises(EnvironmentProblem):
        fio_version(str(fake))


def test_host_info_is_plausible() -> None:
    host = host_info()
    assert host["cpu_count"] == os.cpu_count()
    assert isinstance(host["cpu_model"], str) and host["cpu_model"]
    memory = host["memory_bytes"]
    physical = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    assert isinstance(memory, int) and abs(memory - physical) <= physical // 100
    assert host["kernel"] == platform.release()
    assert host["hostname"] == socket.gethostname()
    assert host["python"] == platform.python_version()
    assert isinstance(host["os"], str) and host["os"]
    sockets = host["cpu_sockets"]
    assert sockets is None or (isinstance(sockets, int) and 1 <= sockets <= (os.cpu_count() or 1))
    nodes = host["numa_nodes"]
    assert isinstance(nodes, list)
    if Path("/sys/devices/system/node/node0").exists():
        assert nodes[0]["node"] == 0 and nodes[0]["cpulist"]
