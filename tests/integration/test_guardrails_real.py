"""Dangerous targets, each refused through the real ``ssdlab`` command: one ``Error:`` line,
exit code 3, no results store created, and the device's bytes (sha256 of its backing file)
unchanged. Then the ways through: a blank device with the bare --destroy-data, a device
carrying a filesystem with the confirmation naming it, a read-only run, and resume.

Every device is a loop device over a /dev/shm file made by the ``loop_device`` fixture;
the machine's own disk is only ever passed to the detection code with --dry-run. The md
superblock is written byte by byte (mdadm --create needs the kernel's md driver, which
this machine does not have); everything else is made by the real tool.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import struct
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from ssdlab.store.db import Store
from ssdlab.targets.magic import MD_MAGIC
from tests.support.cli import one_line_error, sha256_of, ssdlab

pytestmark = pytest.mark.root

MiB = 1 << 20
LoopFactory = Callable[..., str]
#: the smallest real run: one 4 KiB random-write latency cell, 0.1 s, five rounds
TINY_RUN = ("--profile", "quick", "--tests", "latency", "--latency-block-sizes", "4",
            "--round-seconds", "0.1", "--max-rounds", "5", "--purge", "none",
            "--no-precondition")
LVM_QUIET = ("--config", "devices { obtain_device_list_from_udev=0 } "
             "activation { udev_sync=0 udev_rules=0 }")


def _run(*command: str, stdin: str | None = None) -> None:
    if shutil.which(command[0]) is None:
        pytest.skip(f"{command[0]} is not installed")
    done = subprocess.run(list(command), input=stdin, capture_output=True, text=True,
                          check=False, env={**os.environ, "LVM_SUPPRESS_FD_WARNINGS": "1"})
    assert done.returncode == 0, f"{command}: {done.stderr}"


def _backing(device: str) -> str:
    return Path(f"/sys/block/{Path(device).name}/loop/backing_file").read_text().strip()


def _wait_for(path: str) -> None:
    for _ in range(200):
        if os.path.exists(path):
            return
        time.sleep(0.02)
    raise AssertionError(f"{path} did not appear")


@dataclass
class Danger:
    """A target made dangerous, how the run is asked for, and what the refusal says."""

    target: str
    args: tuple[str, ...]
    needles: tuple[str, ...]
    watched: list[str] = field(default_factory=list)  # files whose bytes must not change
    #: only the first page is compared: a swap area in use is written by the kernel itself
    #: (a full-suite run saw it swap pages out to it), but never its header
    header_only: bool = False


@dataclass
class Lab:
    loop: LoopFactory
    shm: Path
    tmp: Path
    cleanup: contextlib.ExitStack

    def device(self, size: int = 64 * MiB, partscan: bool = False) -> str:
        return self.loop(size, partscan=partscan)

    def mount(self, device: str, name: str = "mnt") -> Path:
        """Mounted read-only without journal replay: mounting writes nothing itself."""
        point = self.shm / name
        point.mkdir()
        _run("mount", "-o", "ro,noload", device, str(point))
        self.cleanup.callback(subprocess.run, ["umount", str(point)], check=False)
        return point


def _ext4(lab: Lab) -> Danger:
    device = lab.device()
    _run("mkfs.ext4", "-q", "-F", "-L", "data", device)
    return Danger(device, ("--destroy-data",), (
        f"{device} carries an ext4 filesystem (UUID ", "label 'data'); nothing was written. "
        f"To destroy it, confirm with --destroy-data={device}"))


def _xfs(lab: Lab) -> Danger:
    device = lab.device(320 * MiB)  # mkfs.xfs wants 300 MiB
    _run("mkfs.xfs", "-q", "-f", device)
    return Danger(device, ("--destroy-data",), (f"{device} carries an xfs filesystem",))


def _gpt(lab: Lab) -> Danger:
    device = lab.device()
    _run("sfdisk", "-q", device, stdin="label: gpt\n,16MiB\n,16MiB\n")
    return Danger(device, ("--destroy-data",),
                  (f"{device} carries a GPT partition table with 2 partitions (UUID ",))


def _mbr(lab: Lab) -> Danger:
    device = lab.device()
    _run("sfdisk", "-q", device, stdin="label: dos\n,16MiB\n")
    return Danger(device, ("--destroy-data",),
                  (f"{device} carries an MBR (dos) partition table with 1 partition",))


def _swap_signature(lab: Lab) -> Danger:
    device = lab.device()
    _run("mkswap", "-q", "-L", "sw", device)
    return Danger(device, ("--destroy-data",), (f"{device} carries a Linux swap area (UUID ",))


def _btrfs_member(lab: Lab) -> Danger:
    first, second = lab.device(128 * MiB), lab.device(128 * MiB)
    _run("mkfs.btrfs", "-q", "-f", "-d", "raid1", "-m", "raid1", first, second)
    return Danger(second, ("--destroy-data",),
                  (f"{second} carries a btrfs member of a 2-device filesystem",),
                  [_backing(first)])


def _lvm2_pv(lab: Lab) -> Danger:
    device = lab.device()
    _run("pvcreate", "-qq", *LVM_QUIET, device)
    return Danger(device, ("--destroy-data",), (f"{device} carries an LVM2 physical volume",))


def _md_member(lab: Lab) -> Danger:
    """An md 1.2 superblock at 4 KiB (with its checksum), as mdadm --create writes it."""
    device = lab.device()
    sb = bytearray(260)
    struct.pack_into("<II", sb, 0, MD_MAGIC, 1)
    sb[16:32] = uuid.uuid4().bytes
    struct.pack_into("<iI", sb, 72, 1, 0)
    struct.pack_into("<Q", sb, 144, 8)  # super_offset: sector 8
    struct.pack_into("<I", sb, 220, 2)  # max_dev
    total = sum(struct.unpack_from("<65I", sb))
    struct.pack_into("<I", sb, 216, (total & 0xFFFFFFFF) + (total >> 32))
    fd = os.open(device, os.O_WRONLY)
    try:
        os.pwrite(fd, bytes(sb), 4096)
        os.fsync(fd)
    finally:
        os.close(fd)
    return Danger(device, ("--destroy-data",),
                  (f"{device} carries an md RAID member (metadata 1.2)",))


def _mounted(lab: Lab) -> Danger:
    device = lab.device()
    _run("mkfs.ext4", "-q", "-F", device)
    point = lab.mount(device)
    return Danger(device, (f"--destroy-data={device}",),
                  (f"refusing {device}: {device} is mounted on {point}; unmount it first",))


def _mounted_partition(lab: Lab) -> Danger:
    device = lab.device(partscan=True)
    _run("sfdisk", "-q", device, stdin="label: gpt\n,32MiB\n")
    _run("partx", "--add", device)  # this kernel's loop re-read creates no partition node
    part = f"{device}p1"
    _wait_for(part)
    _run("mkfs.ext4", "-q", "-F", part)
    point = lab.mount(part)
    return Danger(device, (f"--destroy-data={device}",),
                  (f"refusing {device}: {part} is mounted on {point}; unmount it first",))


def _swap_in_use(lab: Lab) -> Danger:
    device = lab.device(32 * MiB)
    _run("mkswap", "-q", device)
    _run("swapon", device)
    lab.cleanup.callback(subprocess.run, ["swapoff", device], check=False)
    return Danger(device, (f"--destroy-data={device}",), (
        f"refusing {device}: it holds the running system (swap on {device}); swapoff it first",),
        header_only=True)


def _held_exclusively(lab: Lab) -> Danger:
    device = lab.device()
    code = ("import os, sys, time; fd = os.open(sys.argv[1], os.O_RDONLY | os.O_EXCL); "
            "print('held', flush=True); time.sleep(120)")
    holder = subprocess.Popen([sys.executable, "-c", code, device], stdout=subprocess.PIPE,
                              text=True)
    assert holder.stdout is not None
    lab.cleanup.callback(holder.stdout.close)
    lab.cleanup.callback(holder.wait)
    lab.cleanup.callback(holder.kill)
    assert holder.stdout.readline().strip() == "held"
    return Danger(device, (f"--destroy-data={device}",), (
        f"refusing {device}: {device} is in use by another program (exclusive open failed)",))


def _foreign_file(lab: Lab) -> Danger:
    path = lab.shm / "precious.db"
    path.write_bytes(b"someone's data" * 10000)
    return Danger(str(path), ("--size", "64MiB"),
                  (f"refusing {path}: it exists and was not created by ssdlab",), [str(path)])


def _wrong_path(lab: Lab) -> Danger:
    device, other = lab.device(), lab.device()
    return Danger(device, (f"--destroy-data={other}",), (
        f"refusing {device}: the confirmation names {other}, another device than {device}",),
        [_backing(other)])


def _wrong_serial(lab: Lab) -> Danger:
    device = lab.device()
    return Danger(device, ("--destroy-data=S3R14L",), (
        f"refusing {device}: the confirmation names serial S3R14L, but {device} has no "
        "serial number",))


def _no_consent(lab: Lab) -> Danger:
    device = lab.device()
    return Danger(device, (), (f"refusing to write to {device} without --destroy-data",))


def _read_only_mounted(lab: Lab) -> Danger:
    danger = _mounted(lab)
    return Danger(danger.target, ("--read-only",), danger.needles)


DANGERS: dict[str, Callable[[Lab], Danger]] = {
    "ext4": _ext4,
    "xfs": _xfs,
    "gpt-table": _gpt,
    "mbr-table": _mbr,
    "swap-signature": _swap_signature,
    "btrfs-member-of-2": _btrfs_member,
    "lvm2-pv": _lvm2_pv,
    "md-member": _md_member,
    "mounted": _mounted,
    "mounted-partition": _mounted_partition,
    "swap-in-use": _swap_in_use,
    "held-exclusively": _held_exclusively,
    "foreign-file": _foreign_file,
    "wrong-path-confirmation": _wrong_path,
    "wrong-serial-confirmation": _wrong_serial,
    "blank-without-destroy-data": _no_consent,
    "read-only-on-mounted": _read_only_mounted,
}


@pytest.fixture
def lab(loop_device: LoopFactory, shm_dir: Path, tmp_path: Path) -> Iterator[Lab]:
    with contextlib.ExitStack() as cleanup:
        yield Lab(loop_device, shm_dir, tmp_path, cleanup)


def _watched(danger: Danger) -> dict[str, str]:
    files = list(danger.watched)
    if danger.target.startswith("/dev/loop"):
        files.append(_backing(danger.target))
    if danger.header_only:
        return {path: hashlib.sha256(Path(path).read_bytes()[:4096]).hexdigest()
                for path in files}
    return {path: sha256_of(path) for path in files}


def assert_refused(lab: Lab, danger: Danger, *command: str) -> str:
    """The command is refused with one line and exit 3; no store, not a byte changed."""
    before = _watched(danger)
    store = lab.tmp / "results.sqlite"
    command = command or ("run", "pts")
    result = ssdlab(*command, "--target", danger.target, *danger.args, "--store", str(store),
                    timeout=120)
    assert result.returncode == 3, (result.stdout, result.stderr)
    line = one_line_error(result)
    for needle in danger.needles:
        assert needle in line
    assert not store.exists()
    assert _watched(danger) == before
    return line


@pytest.mark.parametrize("name", list(DANGERS))
def test_dangerous_target_is_refused_and_left_unchanged(lab: Lab, name: str) -> None:
    assert_refused(lab, DANGERS[name](lab))


@pytest.mark.parametrize("suite", ["saturation", "latency-iops", "slc-probe", "op-sweep", "verify"])
def test_every_suite_refuses_a_device_carrying_a_filesystem(lab: Lab, suite: str) -> None:
    assert_refused(lab, _ext4(lab), "run", suite)


def _root_disk() -> str:
    source = subprocess.run(["findmnt", "-no", "SOURCE", "/"], capture_output=True, text=True,
                            check=True).stdout.strip()
    parent = subprocess.run(["lsblk", "-no", "PKNAME", source], capture_output=True,
                            text=True, check=False).stdout.strip()
    return f"/dev/{parent}" if parent else source


def test_root_disk_is_refused_whatever_the_confirmation_says(tmp_path: Path) -> None:
    """Detection only: --dry-run, and the root disk's bytes are never read by the test."""
    root = _root_disk()
    if not root.startswith("/dev/"):
        pytest.skip(f"/ is not on a block device ({root})")
    for args in (["--destroy-data", "--dry-run"], [f"--destroy-data={root}", "--dry-run"],
                 ["--read-only", "--dry-run"]):
        result = ssdlab("run", "pts", "--target", root, *args, "--store",
                        str(tmp_path / "s.sqlite"))
        assert result.returncode == 3
        assert f"refusing {root}: it holds the running system (/)" in one_line_error(result)
    assert not (tmp_path / "s.sqlite").exists()


# --------------------------------------------------------------------------- the ways through


def _dry_run(target: str, *args: str) -> subprocess.CompletedProcess[str]:
    return ssdlab("run", "pts", "--target", target, *args, "--dry-run", *TINY_RUN, timeout=120)


def test_confirmation_naming_the_device_is_accepted(lab: Lab) -> None:
    danger = _ext4(lab)
    device = danger.target
    before = _watched(danger)
    link = lab.shm / "by-id-link"
    link.symlink_to(device)
    for args in ([f"--destroy-data={device}"], ["--destroy-data", device],
                 [f"--destroy-data={link}"]):
        result = _dry_run(device, *args)
        assert result.returncode == 0, result.stderr
        assert result.stderr == "" and "DRY RUN" in result.stdout
    via_link = _dry_run(str(link), f"--destroy-data={device}")  # the target through a link
    assert via_link.returncode == 0, via_link.stderr
    assert _watched(danger) == before


def test_blank_device_runs_with_the_bare_flag_and_resume_checks_again(lab: Lab) -> None:
    device = lab.device(96 * MiB)
    store = lab.tmp / "results.sqlite"
    run = ssdlab("run", "pts", "--target", device, "--destroy-data", *TINY_RUN, "--store",
                 str(store), timeout=120)
    assert run.returncode == 0, run.stderr
    with Store.open(store) as db:
        [summary] = db.list_runs()
        run_id = summary.run_id
        db.finish_run(run_id, "interrupted", "test: as if Ctrl-C had stopped it")
    _run("mkfs.ext4", "-q", "-F", "-L", "new", device)  # meanwhile someone made a filesystem
    danger = Danger(device, ("--destroy-data",), (f"{device} carries an ext4 filesystem",))
    before = _watched(danger)
    refused = ssdlab("resume", run_id, "--destroy-data", "--store", str(store))
    assert refused.returncode == 3
    assert f"confirm with --destroy-data={device}" in one_line_error(refused)
    assert _watched(danger) == before
    resumed = ssdlab("resume", run_id, f"--destroy-data={device}", "--store", str(store))
    assert resumed.returncode == 0, resumed.stderr
    assert f"run {run_id} complete" in resumed.stdout


def test_read_only_run_on_a_device_carrying_a_filesystem(lab: Lab) -> None:
    device = lab.device(96 * MiB)
    _run("mkfs.ext4", "-q", "-F", "-L", "keep", device)
    before = sha256_of(_backing(device))
    store = lab.tmp / "results.sqlite"
    args = [arg for arg in TINY_RUN if arg not in ("--purge", "none", "--no-precondition")]
    result = ssdlab("run", "pts", "--target", device, "--read-only", *args, "--store",
                    str(store), timeout=120)
    assert result.returncode == 0, result.stderr
    assert sha256_of(_backing(device)) == before  # read, never written
    with Store.open(store) as db:
        [summary] = db.list_runs()
        run = db.load(summary.run_id)
    options = run.plan["options"]
    assert (options["read_only_target"], options["purge"], options["precondition"]) == (
        True, "none", False)
    assert not run.read_only  # that column is for imported reference runs
    [test] = run.tests
    assert [cell["read_pct"] for cell in test.params["cells"]] == [100]
    assert test.steps == []  # no purge, no preconditioning
    assert all("--readonly" in rnd.command for rnd in test.rounds)
    assert all("read-only: fio runs with --readonly" in (rnd.job_text or "")
               for rnd in test.rounds)
