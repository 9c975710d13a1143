"""A set of members is refused whole when one member is mounted, busy or carries data
that --destroy-data does not name (issue 15): a one-line error naming that member, exit
status 3, and no member's first or last 64 MiB changes; nothing is built."""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from ssdlab.units import format_bytes
from tests.conftest import LoopFactory
from tests.support.browser import require_tool
from tests.support.cli import HINTED

pytestmark = [pytest.mark.root]

MIB = 1024 * 1024
EDGE = 64 * MIB


def _edges(device: str) -> tuple[str, str]:
    """sha256 of the first and the last 64 MiB."""
    size = int(subprocess.run(["blockdev", "--getsize64", device], capture_output=True,
                              text=True, check=True).stdout)
    out = []
    with open(device, "rb") as fh:
        for offset in (0, size - EDGE):
            fh.seek(offset)
            out.append(hashlib.sha256(fh.read(EDGE)).hexdigest())
    return out[0], out[1]


def _ssdlab(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ssdlab", *args], capture_output=True,
                          text=True, env={**os.environ, **env}, timeout=120, check=False)


@contextmanager
def _held(device: str) -> Iterator[None]:
    fd = os.open(device, os.O_RDONLY | os.O_EXCL)
    try:
        yield
    finally:
        os.close(fd)


def test_one_refused_member_refuses_the_set(loop_device: LoopFactory, shm_dir: Path) -> None:
    require_tool("mkfs.ext4", "e2fsprogs")
    require_tool("mkfs.btrfs", "btrfs-progs")
    m = [loop_device(160 * MIB) for _ in range(4)]
    for device in m:  # random data at both ends: any write there would show
        with open(device, "r+b") as fh:
            fh.write(os.urandom(EDGE))
            fh.seek(160 * MIB - EDGE)
            fh.write(os.urandom(EDGE))
    for device in (m[1], m[3]):
        subprocess.run(["mkfs.ext4", "-q", "-F", device], check=True, capture_output=True)
    mount = shm_dir / "mnt"
    mount.mkdir()
    # read-only, so that the file system itself writes nothing to it while mounted
    subprocess.run(["mount", "-o", "ro", m[1], str(mount)], check=True, capture_output=True)
    env = {"SSDLAB_STATE_DIR": str(shm_dir / "state"), "SSDLAB_STORE": str(shm_dir / "r.db")}
    before = {d: _edges(d) for d in m}

    def refused(result: subprocess.CompletedProcess[str], member: str, why: str) -> None:
        """Refused in one line naming ``member``; no member's edges changed since
        ``before`` (taken again after the test's own mount and unmount)."""
        lines = result.stderr.strip().splitlines()
        assert result.returncode == 3, result.stdout + result.stderr
        assert len(lines) == 1 and member in lines[0] and why in lines[0], lines
        assert {d: _edges(d) for d in m} == before
        assert not list((shm_dir / "state").glob("*.json"))

    # mounted: the second member
    refused(_ssdlab("array", "create", "--backend", "btrfs", "--level", "5", *m,
                    "--destroy-data", env=env), m[1], "mounted")
    subprocess.run(["umount", str(mount)], check=True)
    # unconfirmed: the second and fourth carry ext4; the confirmation names only the second
    refused(_ssdlab("array", "create", "--backend", "btrfs", "--level", "10", *m,
                    f"--destroy-data={m[1]}", env=env), m[3], "carries")
    # busy: another program holds the third open exclusively (through the matrix)
    with _held(m[2]):
        refused(_ssdlab("run", "matrix", "--members", ",".join(m), "--backend", "btrfs",
                        "--levels", "0", f"--destroy-data={m[1]},{m[3]}", env=env),
                m[2], "in use")
    # a confirmation that names no member
    stray = _ssdlab("array", "create", "--backend", "btrfs", "--level", "0", m[0], m[2],
                    f"--destroy-data={m[1]}", env=env)
    assert stray.returncode != 0 and "not one of the members" in stray.stderr
    assert {d: _edges(d) for d in m} == before


def _planned_s(line: str) -> int:
    """The seconds a ``planned time: M:SS[-M:SS] ...`` line starts with (its low end)."""
    found = re.match(r"planned time: (\d+(?::\d\d){1,2})", line)
    assert found, line
    seconds = 0
    for part in found.group(1).split(":"):
        seconds = seconds * 60 + int(part)
    return seconds


def test_md_and_zfs_dry_runs_show_every_command(loop_device: LoopFactory,
                                                shm_dir: Path) -> None:
    # this kernel has neither md nor ZFS: their commands are shown, never run
    m = [loop_device(80 * MIB) for _ in range(4)]
    env = {"SSDLAB_STATE_DIR": str(shm_dir / "state"), "SSDLAB_STORE": str(shm_dir / "r.db")}
    before = {d: _edges(d) for d in m}
    md = _ssdlab("array", "create", "--backend", "md", "--level", "6", "--chunk", "64KiB",
                 "--name", "lab", *m, "--destroy-data", "--dry-run", env=env)
    assert md.returncode == 0, md.stderr
    assert (f"$ mdadm --create /dev/md/lab --run --metadata=1.2 --level=6 --raid-devices=4 "
            f"--chunk=64 {' '.join(m)}") in md.stdout
    assert "$ mdadm --wait /dev/md/lab" in md.stdout
    assert f"$ mdadm --zero-superblock {' '.join(m)}" in md.stdout
    zfs = _ssdlab("run", "matrix", "--members", ",".join(m), "--backend", "zfs", "--levels",
                  "1,10,5,6", "--suite", "cdm", "--suite-options", "--profile quick --modes read",
                  "--member-check-seconds", "1", "--destroy-data", "--dry-run", env=env)
    assert zfs.returncode == 0, zfs.stderr
    out = zfs.stdout
    assert f"$ zpool create -f -o ashift=12 -m none ssdlab-m-raid1 mirror {' '.join(m)}" in out
    assert (f"$ zpool create -f -o ashift=12 -m none ssdlab-m-raid10 mirror {m[0]} {m[1]} "
            f"mirror {m[2]} {m[3]}") in out
    assert f"ssdlab-m-raid5 raidz1 {' '.join(m)}" in out
    assert f"ssdlab-m-raid6 raidz2 {' '.join(m)}" in out
    # a sparse zvol (-s): sized from what the pool has available once it exists; the dry
    # run shows its estimate
    assert "$ zfs create -s -V" in out and "volblocksize=16384 ssdlab-m-raid6/ssdlab" in out
    assert "ssdlab-m-raid6/files" in out  # the dataset for the file presets
    assert out.count("$ zpool destroy -f ssdlab-m-") == 4
    assert "readonly" in out or "read only" in out  # the member check's job file
    assert out.count("filename=/dev/zvol/ssdlab-m-raid6/ssdlab") >= 1  # the suite's jobs
    # each level's suite is planned on its zvol as the block device it will be, sized as
    # its `zfs create -V` says, not on a test file of that name
    for level in ("raid1", "raid10", "raid5", "raid6"):
        volume = re.search(rf"zfs create -s -V (\d+) .* ssdlab-m-{level}/ssdlab\n", out)
        assert volume, level
        size = format_bytes(int(volume.group(1)))
        assert (f"target /dev/zvol/ssdlab-m-{level}/ssdlab (block, virtual, about {size})"
                in out), (level, size)
    assert out.count("(the device is built by the run before the suite") == 4
    assert "would create" not in out and "ssdlab.test" not in out
    # each level's dry run says its time, and the matrix's last line all of it: no less
    # than the levels' and the member check's (2 sections x 4 members x 1 s at least)
    planned = [_planned_s(line) for line in out.splitlines()
               if line.startswith("planned time: ")]
    assert len(planned) == 5 and out.rstrip("\n").splitlines()[-1].startswith("planned time")
    assert planned[-1] >= sum(planned[:-1]) + 8 and all(t > 0 for t in planned[:-1])
    assert "building and tearing down each array" in out.rstrip("\n").splitlines()[-1]
    assert {d: _edges(d) for d in m} == before
    assert not (shm_dir / "state").exists() or not list((shm_dir / "state").iterdir())
    if not Path("/proc/mdstat").exists():  # here: md is refused before anything runs
        real = _ssdlab("run", "matrix", "--members", ",".join(m), "--backend", "md",
                       "--levels", "5", "--destroy-data", env=env)
        assert real.returncode == 4 and "no md support" in real.stderr
        assert "matrix" not in _ssdlab("runs", env=env).stdout
        assert {d: _edges(d) for d in m} == before


def test_create_status_destroy_a_btrfs_array(loop_device: LoopFactory, shm_dir: Path) -> None:
    require_tool("mkfs.btrfs", "btrfs-progs")
    m = [loop_device(160 * MIB) for _ in range(2)]
    env = {"SSDLAB_STATE_DIR": str(shm_dir / "state"), "SSDLAB_STORE": str(shm_dir / "r.db")}
    made = _ssdlab("array", "create", "--backend", "btrfs", "--level", "1", "--name", "lab",
                   *m, "--destroy-data", env=env)
    assert made.returncode == 0, made.stderr
    target = shm_dir / "state" / "mnt" / "lab" / "ssdlab.test"
    assert f"target: {target}" in made.stdout
    status = _ssdlab("array", "status", env=env)
    assert status.returncode == 0
    assert "lab: btrfs raid1 of 2 members" in status.stdout
    assert f"kept until `{HINTED} array destroy`" in status.stdout and "mounted on" in status.stdout
    # a suite on it records the array it ran on
    run = _ssdlab("run", "cdm", "--target", str(target), "--profile", "quick", "--modes",
                  "write", "--label", "controller=none", env=env)
    assert run.returncode == 0, run.stderr
    shown = _ssdlab("show", "last", env=env)
    assert "array: btrfs raid1 of 2 members" in shown.stdout
    assert "labels: controller=none" in shown.stdout
    again = _ssdlab("array", "create", "--backend", "btrfs", "--level", "1", "--name", "lab",
                    *m, "--destroy-data", env=env)
    assert again.returncode == 3 and "mounted" in again.stderr  # its members are in use
    gone = _ssdlab("array", "destroy", "lab", env=env)
    assert gone.returncode == 0, gone.stderr
    assert "members wiped" in gone.stdout
    assert not list((shm_dir / "state").glob("*.json"))
    assert str(shm_dir / "state") not in Path("/proc/mounts").read_text(encoding="ascii")
    for member in m:
        probe = subprocess.run(["wipefs", "--no-act", member], capture_output=True,
                               text=True, check=True)
        assert probe.stdout.strip() == ""
    missing = _ssdlab("array", "destroy", "lab", env=env)
    assert missing.returncode == 2 and "no array named 'lab'" in missing.stderr
